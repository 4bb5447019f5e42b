// masked_nonfinite: NaN and ±Inf in keys the causal mask hides never reach the rows that cannot see them. For a row
// r, the hidden k and v are poisoned (with_hidden_poison); rows 0..r of O and LSE must come back identical
// (hidden_keys.h). Kernels that skip masked keys promise this (contract hidden-keys=any: required); a kernel whose
// P·V is a dense product multiplies the hidden v by P = 0 and gets 0·NaN = NaN, which finite inputs never show —
// a warning under the default contract (hidden-keys=finite): padded or uninitialized cache slots can hold NaN.
#include "hidden_keys.h"

#include <limits>

namespace attncheck::props {

namespace {
template <int kPoison>
Case poisoned(const Case &c, std::int64_t r) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kValues[] = {std::numeric_limits<double>::quiet_NaN(), kInf, -kInf};
  return with_hidden_poison(c, r, kValues[kPoison]);
}

Outcome run(const Env &env, const Case &c) {
  using Change = Case (*)(const Case &, std::int64_t);
  return hidden::unchanged_rows<Change>(
      env, c, {{"set to NaN", &poisoned<0>}, {"set to +Inf", &poisoned<1>}, {"set to -Inf", &poisoned<2>}});
}

Tier tier(const KernelContract &k) { return k.hidden_keys == HiddenKeys::any ? Tier::required : Tier::advisory; }
}  // namespace

const PropertyDef &masked_nonfinite_property() {
  static const PropertyDef def{
      .id = "masked_nonfinite",
      .formula = "i ≤ r ⇒ (O_i, LSE_i) unchanged when the keys hidden from row r become NaN or ±Inf",
      .summary = "NaN or Inf in keys the mask hides leaks into rows that cannot see them (a dense P·V multiplies "
                 "them by P = 0)",
      .require = &hidden::require_causal,
      .tier = &tier,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
