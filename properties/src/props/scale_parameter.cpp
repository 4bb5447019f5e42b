// scale_parameter: the kernel computes with the scale it is given (attncheck_params.scale), not with its own 1/√D.
// Every other property passes the default 1/√D, so a kernel that hard-codes it would pass them all; here the same
// accuracy ladder runs at a scale picked from the case among values a caller really passes (1, 1/D, a temperature
// on 1/√D), all different from 1/√D for D > 1.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <array>
#include <cmath>

namespace attncheck::props {

namespace {
/// Multiples of the default 1/√D that callers use besides 1: a sharpening and a softening temperature.
constexpr double kSharpen = 2, kSoften = 0.25;

/// A scale other than 1/√D (for D > 1), chosen deterministically from the case.
double pick_scale(const Case &c) {
  const auto D = static_cast<double>(c.spec.shape.D);
  const std::array<double, 4> scales{1.0, 1.0 / D, kSharpen / std::sqrt(D), kSoften / std::sqrt(D)};
  const auto h = static_cast<std::size_t>(c.spec.shape.Lq * 7 + c.spec.shape.Lk * 3 + c.spec.shape.D);
  return scales[h % scales.size()];
}

void require(CaseOptions &o) { o.draw_v = true; }

Outcome run(const Env &env, const Case &c) {
  Problem p = c.problem();
  p.params.scale = pick_scale(c);
  Outcome o = forward_accuracy(env, p);
  // forward_accuracy judged the case at p.params.scale: a failure records that problem (Ladder::judging's fields).
  if (o.verdict == Verdict::fail) {
    o.failing_case = c;
    o.failing_scale = p.params.scale;
    o.failing_what = "params.scale = " + hex_and_decimal(p.params.scale) + " instead of 1/√D";
  }
  return o;
}
}  // namespace

const PropertyDef &scale_parameter_property() {
  static const PropertyDef def{
      .id = "scale_parameter",
      .formula = "with params.scale = c ∈ {1, 1/D, 2/√D, 1/(4√D)}: |Ô − O_c| ≤ β_O and |L̂SE − LSE_c| ≤ β_LSE",
      .summary = "the kernel ignores the scale it is passed (hard-coded 1/√D, or the scale applied twice)",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
