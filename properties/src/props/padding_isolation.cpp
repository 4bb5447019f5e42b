// padding_isolation: a kernel reads only the elements of its inputs, never the storage around or between them
// (SPEC.md §3: "must not read outside q, k, v"). The case runs twice: in Layout::padded with NaN in every padding
// element (between rows, between heads, before the first and past the last element), and contiguous (bhld) with
// zero padding. The padded run must be finite wherever the exact result is (a NaN read from padding shows as NaN),
// and the two runs must agree within the sum of their error bounds (a different layout may change a kernel's
// tiling, hence bounds rather than bits).
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"

#include <memory>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
constexpr const char *kContiguousWhat = "the same values contiguous (bhld)";

void require(CaseOptions &o) {
  o.layout = Layout::padded;
  o.declared_features = true;  // a feature's path reads the padding too
}

Outcome run(const Env &env, const Case &c) {
  const Problem padded = c.problem();  // Layout::padded, every padding element NaN
  Case contiguous_case = c;
  contiguous_case.spec.layout = Layout::bhld;
  Problem contiguous = contiguous_case.problem();
  for (Tensor *t : {&contiguous.q, &contiguous.k, &contiguous.v}) t->fill_padding(0);

  ForwardRun fp = run_forward(env, padded), fc = run_forward(env, contiguous);
  Ladder L;
  // Checks of the contiguous run judge contiguous_case (its zero padding is not kept: a replay pads with NaN).
  const auto judge_contiguous = [&] { L.judging(contiguous_case, kContiguousWhat); };
  if (!L.call(fp.call, "forward (padded, NaN padding)")) return L.outcome();
  judge_contiguous();
  if (!L.call(fc.call, "forward (contiguous, zero padding)")) return L.outcome();
  L.judging_original();
  if (!L.intact(fp.out, "O (padded)") || !L.intact(fp.lse, "LSE (padded)")) return L.outcome();
  judge_contiguous();
  if (!L.intact(fc.out, "O (contiguous)") || !L.intact(fc.lse, "LSE (contiguous)")) return L.outcome();
  auto runs = std::make_shared<const std::pair<ForwardRun, ForwardRun>>(std::move(fp), std::move(fc));
  auto contiguous_copy = std::make_shared<const Case>(std::move(contiguous_case));
  return judged(env.precision, [padded, runs, contiguous_copy, contract = env.contract](ExactSource &src) {
    auto [fp, fc] = *runs;
    // Same values and shape: both runs have the same bounds β, so |Ô_padded − Ô_contiguous| ≤ 2β.
    src.values_not_compared();  // kernel against kernel
    const auto [exact, bound] = src.forward(padded);
    leave_unspecified_rows(contract, padded, exact, fp);
    leave_unspecified_rows(contract, padded, exact, fc);
    auto twice = [](std::vector<double> b) {
      for (double &x : b) x *= 2;
      return b;
    };
    Ladder L;
    // Each check is a no-op once one has failed: the outcome names the first failing step.
    L.finite("O (padded, NaN padding)", fp.out, exact.out, bound.out);
    if (fp.has_lse) L.finite("LSE (padded, NaN padding)", fp.lse, exact.lse, bound.lse);
    L.judging(*contiguous_copy, kContiguousWhat);
    L.finite("O (contiguous)", fc.out, exact.out, bound.out);
    if (fc.has_lse) L.finite("LSE (contiguous)", fc.lse, exact.lse, bound.lse);
    L.judging_original();  // the padded run is the one under test
    L.within(Step::values, "O (padded) vs O (contiguous)", fp.out.to_vector(), fc.out.to_vector(), twice(bound.out),
             fp.out.shape());
    if (fp.has_lse)
      L.within(Step::values, "LSE (padded) vs LSE (contiguous)", fp.lse.to_vector(), fc.lse.to_vector(),
               twice(bound.lse), fp.lse.shape());
    return L.outcome();
  });
}
}  // namespace

const PropertyDef &padding_isolation_property() {
  static const PropertyDef def{
      .id = "padding_isolation",
      .formula = "Ô(padded, NaN padding) finite where O is, and |Ô(padded, NaN) − Ô(contiguous, 0)| ≤ 2β (O and LSE)",
      .summary = "the kernel reads storage outside its input elements (padding between rows or heads, or past the end)",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
