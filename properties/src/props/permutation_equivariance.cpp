// permutation_equivariance: attention without a mask treats keys as a set and queries independently. Reversing the
// keys together with their values (in every batch and kv head) leaves O unchanged; reversing the queries reverses
// the rows of O. Both are checked kernel against kernel: the kernel's O on the permuted problem against its own O
// on the original (rows permuted), within the sum of the two problems' error bounds (SPEC.md §4.2) — a correct
// kernel may sum the keys in another order. Reversal is fixed by the shape, so a failure replays exactly.
#include "case_copies.h"

#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
void require(CaseOptions &o) {
  o.mask = Mask::none;  // a causal mask ties visibility to positions: neither permutation keeps it
}

/// Row-major `x` of shape [outer, rows, width] with axis `rows` reversed.
std::vector<double> reversed_rows(const std::vector<double> &x, std::int64_t rows, std::int64_t width) {
  std::vector<double> out(x.size());
  const std::int64_t block = rows * width,
                     outer = static_cast<std::int64_t>(x.size()) / std::max<std::int64_t>(block, 1);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < width; ++c)
        out[static_cast<std::size_t>(o * block + (rows - 1 - r) * width + c)] =
            x[static_cast<std::size_t>(o * block + r * width + c)];
  return out;
}

/// |Ô_b − π(Ô_a)| ≤ π(β_a) + β_b element-wise (O_b = π(O_a) exactly), π reversing the query rows when
/// `rows_reversed` (else the identity); see within_each_other.
bool related(Ladder &L, std::string_view name, const ForwardSide &a, const ForwardSide &b, bool rows_reversed) {
  const Shape &s = a.p.shape;
  const auto permute = [&](const std::vector<double> &x) { return rows_reversed ? reversed_rows(x, s.Lq, s.Dv) : x; };
  return within_each_other(L, name, permute(a.fr.out.to_vector()), permute(a.exact.out), permute(a.bound.out), b);
}

/// The comparisons of the case (side 0) and its permuted copies (keys and values reversed: 1, queries reversed: 2),
/// whose forwards returned intact outputs; exact values and bounds from `src`.
Outcome compare(const CaseCopies &cc, ExactSource &src) {
  ForwardSide base = cc.sides[0], key_side = cc.sides[1], query_side = cc.sides[2];
  const Shape &s = base.p.shape;
  // Permuting inputs is exact, so the permuted problems' exact values are the base's, permuted: one reference.
  std::tie(base.exact, base.bound) = src.forward(base.p);
  std::tie(key_side.exact, key_side.bound) = src.forward_rearranged(key_side.p, {});
  std::tie(query_side.exact, query_side.bound) = src.forward_rearranged(
      query_side.p, {.out = [&s](const std::vector<double> &x) { return reversed_rows(x, s.Lq, s.Dv); },
                     .lse = [&s](const std::vector<double> &x) { return reversed_rows(x, s.Lq, 1); }});
  Ladder L;
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  cc.judge(L, 0);
  L.finite("O", base.fr.out, base.exact.out, base.bound.out);
  cc.judge(L, 1);
  L.finite("O(π k, π v)", key_side.fr.out, key_side.exact.out, key_side.bound.out);
  cc.judge(L, 2);
  L.finite("O(π q)", query_side.fr.out, query_side.exact.out, query_side.bound.out);
  cc.judge(L, 1);
  related(L, "O(π k, π v) vs O", base, key_side, /*rows_reversed=*/false);
  cc.judge(L, 2);
  related(L, "O(π q) vs π O", base, query_side, /*rows_reversed=*/true);
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  Case keys = c, queries = c;
  keys.k = reversed_rows(c.k, s.Lk, s.D);
  keys.v = reversed_rows(c.v, s.Lk, s.Dv);
  queries.q = reversed_rows(c.q, s.Lq, s.D);
  return run_copies(env, c, {std::move(keys), std::move(queries)},
                    {"keys and values reversed (π k, π v)", "queries reversed (π q)"}, {"O", "O(π k, π v)", "O(π q)"},
                    &compare);
}
}  // namespace

const PropertyDef &permutation_equivariance_property() {
  static const PropertyDef def{
      .id = "permutation_equivariance",
      .formula =
          "no mask: O(q, πk, πv) = O(q, k, v) and O(πq, k, v) = π O(q, k, v) (π = reversal), each within "
          "β_O of both problems",
      .summary =
          "the output depends on where a key sits or which row a query is in (a key dropped or weighted by "
          "its position, rows mixed up)",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
