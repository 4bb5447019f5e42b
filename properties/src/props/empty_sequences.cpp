// empty_sequences: Lk = 0 (an empty KV cache) and Lq = 0 (no query) are valid calls (SPEC.md §2.3). The case's
// batch, heads, head dims, layouts and mask are called with no key — every row sees none: O = 0, LSE = −∞ (or +∞),
// dQ = 0 — and with no query — nothing to write forward, dK = dV = 0 backward. Under empty-rows=unspecified the rows
// of the Lk = 0 call may hold anything (only the calls themselves are checked there); Lq = 0 is fixed either way.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <array>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
void require(CaseOptions &o) { o.backward = true; }  // dout, for kernels that have a backward

/// `c` with no key (`keys`) or no query.
Case emptied(const Case &c, bool keys) {
  Case e = c;
  (keys ? e.spec.shape.Lk : e.spec.shape.Lq) = 0;
  if (keys) {
    e.k.clear();
    e.v.clear();
  } else {
    e.q.clear();
    e.dout.clear();
  }
  return e;
}

/// One empty call: the case, its calls and what they returned.
struct Empty {
  Case c;
  std::string what;
  ForwardRun fr;
  std::optional<BackwardRun> br;
};

/// Every element of `t` equals one of `allowed` (bitwise for ±0 aside: −0 counts as 0); else a mask-step failure.
bool all_equal(Ladder &L, const std::string &name, const Tensor &t, std::initializer_list<double> allowed,
               const std::string &wanted) {
  const std::vector<double> got = t.to_vector();
  for (std::size_t x = 0; x < got.size(); ++x) {
    bool ok = false;
    for (double a : allowed) ok = ok || got[x] == a;
    if (!ok)
      return L.fail(Step::mask,
                    element_name(name, t.shape(), static_cast<std::int64_t>(x)) + ": got " + hex_and_decimal(got[x]) +
                        ", " + wanted,
                    element_finding(Finding::Kind::value, name, t.shape(), static_cast<std::int64_t>(x), got[x],
                                    *allowed.begin()));
  }
  return true;
}

Outcome run(const Env &env, const Case &c) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Ladder L;
  std::vector<Empty> calls{{emptied(c, true), "Lk = 0 (an empty KV cache)", {}, {}},
                           {emptied(c, false), "Lq = 0 (no query)", {}, {}}};
  for (Empty &e : calls) {
    L.judging(e.c, e.what);
    Problem p = e.c.problem();
    if (e.c.spec.shape.Lq == 0 && !c.dout.empty())  // an empty dO: Case::problem sends none for no values
      p.dout = Tensor::contiguous(p.dtype(), {p.shape.B, p.shape.Hq, 0, p.shape.Dv});
    e.fr = run_forward(env, p);
    if (!L.call(e.fr.call, "forward with " + e.what) || !L.intact(e.fr.out, "O") || !L.intact(e.fr.lse, "LSE"))
      return L.outcome();
    if (env.kernel.backward == nullptr || !p.dout) continue;
    e.br = run_backward(env, p, e.fr);
    if (e.br->call.status == ATTNCHECK_UNSUPPORTED) {  // still checked on its forward
      e.br.reset();
      continue;
    }
    if (!L.call(e.br->call, "backward with " + e.what) || !L.intact(e.br->dq, "dQ") || !L.intact(e.br->dk, "dK") ||
        !L.intact(e.br->dv, "dV"))
      return L.outcome();
  }
  const Empty &no_keys = calls[0], &no_queries = calls[1];
  if (env.contract.empty_rows == EmptyRows::zero) {
    L.judging(no_keys.c, no_keys.what);
    const std::string rows = "a row that sees no key (" + no_keys.what + ")";
    all_equal(L, "O", no_keys.fr.out, {0.0}, "0 in " + rows);
    if (no_keys.fr.has_lse) all_equal(L, "LSE", no_keys.fr.lse, {-kInf, kInf}, "−∞ (or +∞) in " + rows);
    if (no_keys.br) all_equal(L, "dQ", no_keys.br->dq, {0.0}, "0 in " + rows);
  }
  if (no_queries.br) {
    L.judging(no_queries.c, no_queries.what);
    for (const auto &[name, t] : {std::pair{"dK", &no_queries.br->dk}, std::pair{"dV", &no_queries.br->dv}})
      all_equal(L, name, *t, {0.0}, "0 with " + no_queries.what + ": no query reads a key");
  }
  return L.outcome();
}
}  // namespace

const PropertyDef &empty_sequences_property() {
  static constexpr std::array<std::string_view, 2> kReaches{"lq0", "lk0"};
  static const PropertyDef def{
      .id = "empty_sequences",
      .formula = "Lk = 0 ⇒ O = 0, LSE = −∞ (or +∞), dQ = 0; Lq = 0 ⇒ dK = dV = 0 (and nothing else to write)",
      .summary = "an empty KV cache or an empty query sequence gives NaN, unwritten or nonzero outputs, or an error",
      .require = &require,
      .reaches = kReaches,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
