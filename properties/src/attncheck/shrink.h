// Shrinkers: pure functions from a value to its simpler candidates, most aggressive first. No RapidCheck here —
// gen.h wraps these into shrinkables (rc::Shrinkable trees, via shrinkable::shrinkRecur) and generators.
//
// Every candidate is strictly simpler than its origin in a well-founded order (smaller dims; for values the order
// of `simpler`), so repeated shrinking always terminates. Value candidates are exactly representable in the
// storage dtype.
//
// Example:
//   for (double c : attncheck::shrink::value_shrinks(1234.5678, attncheck::Dtype::f32)) ...   // 0, 1235, 1234, …
#pragma once

#include "attncheck/case.h"

#include <cstdint>
#include <vector>

namespace attncheck::shrink {

/// Candidates for an integer dimension n ≥ lo, toward lo: lo, n − ⌊(n−lo)/2⌋, n − ⌊(n−lo)/4⌋, …, n − 1 (distinct,
/// all < n; empty when n == lo). Binary search: a failure that needs n ≥ m is reached in O(log n) accepted steps.
std::vector<std::int64_t> dim_toward(std::int64_t n, std::int64_t lo);

/// Simpler specs, most aggressive first: shorter Lq and Lk (jointly when equal, so causal squares stay square),
/// smaller D and Dv, fewer heads (one head; GQA kept on one kv head; MHA), fewer batches; then mask none, layout
/// bhld, the per-tensor layouts (layout_shrinks), value family small_ints (then normal). Fields `opts` fixes are
/// kept; Dv follows Lk with dv_equals_lk.
std::vector<CaseSpec> spec_shrinks(const CaseSpec &s, const CaseOptions &opts);

/// A shape reduction that keeps the surviving values (unlike spec_shrinks, whose smaller specs get fresh values):
/// along `axis`, keep the indices in [begin, end) except those in [hole_begin, hole_end).
struct Slice {
  enum class Axis : std::uint8_t {
    key,        ///< Lk: rows of k and v (and columns of v with dv_equals_lk)
    query,      ///< Lq: rows of q and dout
    diagonal,   ///< query and key together (Lq == Lk): causal squares stay square
    head_dim,   ///< D: columns of q and k
    value_dim,  ///< Dv: columns of v and dout
    kv_head,    ///< Hkv, with the query heads of each kept kv head
    group,      ///< members of every GQA group (Hq / Hkv)
    batch,      ///< B
  };
  Axis axis = Axis::key;
  std::int64_t begin = 0, end = 0, hole_begin = 0, hole_end = 0;
  bool value_dim_too = false;  ///< key/diagonal slices: Dv columns follow the kept keys (Dv = Lk)
  bool head_dim_too = false;   ///< key/diagonal slices: D columns follow the kept keys too (D = Dv = Lk)
  friend bool operator==(const Slice &, const Slice &) = default;
};
/// Slices of `c`, most aggressive first per axis: keep either half; keep one index (short axes); drop one index
/// (short axes). Lengths first, then head dims, heads and batches.
std::vector<Slice> slices(const Case &c, const CaseOptions &opts);
/// `c` reduced by `s`: its spec's shape shrinks, the kept values stay where they were.
Case apply(const Case &c, const Slice &s);
/// Simplifications that keep shape and values: mask none, layout bhld (when `opts` does not fix them), then the
/// per-tensor layouts of layout_shrinks.
std::vector<Case> relabel_shrinks(const Case &c, const CaseOptions &opts);
/// Per-tensor layouts back toward the case's (CaseSpec::layouts): all of them at once, then each tensor's broadcast,
/// then each tensor's own layout — so a failure keeps only the tensor whose layout it needs.
std::vector<TensorLayouts> layout_shrinks(const TensorLayouts &t);

/// The simplicity order of values: 0 < integers (by magnitude, positive first) < other finite values (by number
/// of significant bits, then magnitude, positive first) < non-finite values.
bool simpler(double a, double b);
/// Significant bits of x's significand (0 for 0 and non-finite x): 1 for powers of two, 53 at most.
int significant_bits(double x);
/// x rounded (to nearest even) to `bits` significant bits.
double round_to_bits(double x, int bits);

/// Candidates for one value of dtype `dt`, each strictly simpler and exactly representable in `dt`:
/// non-finite → 0, 1, ±max finite; integer → 0, ±1, toward 0 by halving steps, −x; other → 0, the nearest integer,
/// x with 1, bits/2, bits−1 significant bits, −x.
std::vector<double> value_shrinks(double x, Dtype dt);

/// Whole-vector simplifications, each element no less simple than before and at least one strictly simpler:
/// every element to the nearest integer away from 0 (so nonzero stays nonzero: the sign pattern survives), every
/// element to half its significant bits, every element to its sign (−1, 0, 1). Unchanged ones are left out.
std::vector<std::vector<double>> all_values_shrinks(const std::vector<double> &values, Dtype dt);

}  // namespace attncheck::shrink
