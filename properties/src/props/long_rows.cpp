// long_rows: the forward's O and LSE on long problems — decode rows of up to 65,536 keys, square problems up to
// 8,192, GQA, causal or not — against exact answers (stretch.h): each long problem stretches a small core, so the
// MPFR reference runs on the core and the bound is the error model's with the row's full length in its γ terms
// (SPEC.md §7). Catches what only shows at scale: a wrapping block counter, a dropped tail block of a decode path,
// a split-KV combine that is right for two splits only, a wrong offset past some length.
#include "attncheck/property.h"
#include "attncheck/stretch.h"

namespace attncheck::props {

namespace {
void require(CaseOptions &o) {
  o.stretch = true;
  o.backward = false;
}

Outcome run(const Env &env, const Case &c) {
  return forward_accuracy(env, c.problem(), [&] {
    StretchedForward sf = stretched_forward(c, env.precision);
    return std::make_pair(std::move(sf.exact), std::move(sf.bounds));
  });
}
}  // namespace

const PropertyDef &long_rows_property() {
  static const PropertyDef def{
      .id = "long_rows",
      .formula = "stretched problems (Lk ≤ 65536, Lq = Lk ≤ 8192): |Ô − O| ≤ β_O, |L̂SE − LSE| ≤ β_LSE, O and LSE exact "
                 "from the core's live keys, β with the long row's n",
      .summary = "on a long row the forward's O or LSE is farther from the exact value than any correct kernel can "
                 "be: keys dropped, doubled or misplaced at scale",
      .require = &require,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
