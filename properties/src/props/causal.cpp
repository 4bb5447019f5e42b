// causal: under the causal mask a query row depends only on the keys it sees (SPEC.md §2.2). For a row r, the keys
// hidden from it change to other finite values; rows 0..r of O and LSE must come back identical (hidden_keys.h).
// Every correct kernel promises this, whatever it does with masked keys; NaN/±Inf in hidden keys is
// masked_nonfinite's, and rows that see no key are empty_rows'.
#include "hidden_keys.h"
#include "../slack.h"

#include <cmath>
#include <limits>

namespace attncheck::props {

namespace {

/// The case with the keys hidden from row r (k and v) changed to other finite values.
Case with_hidden_changed(const Case &c, std::int64_t r) {
  const Case marked = with_hidden_poison(c, r, std::numeric_limits<double>::quiet_NaN());  // marks the hidden elements
  Case out = c;
  auto change = [](std::vector<double> &x, const std::vector<double> &mark) {
    for (std::size_t n = 0; n < x.size(); ++n)
      if (std::isnan(mark[n])) x[n] = changed_value(x[n]);
  };
  change(out.k, marked.k);
  change(out.v, marked.v);
  return out;
}

Outcome run(const Env &env, const Case &c) {
  using Change = Case (*)(const Case &, std::int64_t);
  return hidden::unchanged_rows<Change>(env, c, {{"changed to other finite values", &with_hidden_changed}});
}
}  // namespace

const PropertyDef &causal_property() {
  static const PropertyDef def{
      .id = "causal",
      .formula = "i ≤ r ⇒ (O_i, LSE_i) unchanged when the keys hidden from row r (k_j, v_j, j > last visible) "
                 "change to other finite values",
      .summary = "a query row reads a key the causal mask hides from it (off-by-one or misaligned mask)",
      .require = &hidden::require_causal,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
