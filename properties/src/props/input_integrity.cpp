// input_integrity: a kernel never writes its inputs (SPEC.md §3: "must not write anything but out and lse"; the
// backward writes only dq, dk, dv). Every byte of q, k, v — elements and padding — is compared before and after the
// forward; with a backward, q, k, v, dout and the forward's out and lse it is given, before and after the backward.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <cstddef>
#include <string>
#include <vector>

namespace attncheck::props {

namespace {
void require(CaseOptions &o) { o.backward = true; }  // dout, for kernels that have a backward

/// An input tensor and a copy of its storage bytes from before a call.
struct Snapshot {
  std::string name;
  const Tensor *t;
  std::vector<std::byte> before;
};
Snapshot snap(std::string name, const Tensor &t) { return {std::move(name), &t, {t.bytes().begin(), t.bytes().end()}}; }

/// Fails (step shape) at the first storage element of an input whose bytes changed during `call`.
bool unchanged(Ladder &L, const std::vector<Snapshot> &inputs, std::string_view call) {
  for (const Snapshot &s : inputs) {
    const std::span<const std::byte> now = s.t->bytes();
    const auto elem_size = static_cast<std::size_t>(dtype_size(s.t->dtype()));
    for (std::size_t x = 0; x < now.size(); ++x) {
      if (now[x] == s.before[x]) continue;
      const auto e = static_cast<std::int64_t>(x / elem_size);
      const std::vector<bool> is_elem = s.t->element_mask();
      Tensor was = *s.t;  // the storage element as it was, decoded
      std::copy(s.before.begin(), s.before.end(), was.bytes().begin());
      Finding f;
      f.kind = Finding::Kind::wrote_input;
      f.tensor = f.name = s.name;
      f.index = {e};
      f.exact = was.get_storage(e);
      f.got = s.t->get_storage(e);
      f.what = std::string(call);
      return L.fail(Step::shape,
                    std::string(call) + " wrote its input " + s.name + ": " +
                        (is_elem[static_cast<std::size_t>(e)] ? "element" : "padding element") + " at storage offset " +
                        std::to_string(e) + " changed from " + hex_and_decimal(was.get_storage(e)) + " to " +
                        hex_and_decimal(s.t->get_storage(e)),
                    std::move(f));
    }
  }
  return true;
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  Ladder L;
  const std::vector<Snapshot> inputs{snap("q", p.q), snap("k", p.k), snap("v", p.v)};
  const ForwardRun fr = run_forward(env, p);
  if (!L.call(fr.call, "forward") || !unchanged(L, inputs, "forward")) return L.outcome();
  if (env.kernel.backward == nullptr || !p.dout) return L.outcome();

  std::vector<Snapshot> bw_inputs = inputs;
  bw_inputs.push_back(snap("dout", *p.dout));
  bw_inputs.push_back(snap("out", fr.out));
  bw_inputs.push_back(snap("lse", fr.lse));
  const BackwardRun br = run_backward(env, p, fr);
  if (br.call.status == ATTNCHECK_UNSUPPORTED) return L.outcome();  // the forward was still checked
  if (!L.call(br.call, "backward")) return L.outcome();
  unchanged(L, bw_inputs, "backward");
  return L.outcome();
}
}  // namespace

const PropertyDef &input_integrity_property() {
  static const PropertyDef def{
      .id = "input_integrity",
      .formula = "bytes(q, k, v) and, in backward, bytes(dout, out, lse) are the same after each call as before",
      .summary = "the kernel wrote into one of its inputs (an element or the padding around it)",
      .require = &require,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
