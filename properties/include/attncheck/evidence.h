// The evidence of a counterexample: the kernel's values, the exact values and the bounds of the tensor its failure is
// in, on the problem that failed — gathered by the engine when it confirms the counterexample (CheckOptions::evidence),
// rendered by the reports (heatmaps, worst elements, the comparison of a metamorphic failure's two problems), and the
// hints at its defect that the engine verified on it (Hint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// A hint at the defect behind a counterexample, computed from it (SPEC.md §3.1, "Hints from evidence"): a change to
/// the failing problem whose EXACT result reproduces what the kernel returned there — every element of O (and of the
/// LSE it returned) within its error bound, where the problem's own exact result is not — or, for non-finite results,
/// what the values themselves show. Never a guess: a change that does not reproduce the kernel's output gives no hint.
struct Hint {
  enum class Kind : std::uint8_t {
    scale,         ///< O is the exact attention at another scale (`scale`)
    mask_shift,    ///< O is the exact attention under the causal mask with its diagonal moved by `shift` keys
    dropped_keys,  ///< row `row` is the exact output without keys first_key…last_key (every wrong row likewise)
    lost_rescale,  ///< O is Σ over tiles of `tile` keys of each tile's partial output, never rescaled to the row max
    exp_overflow,  ///< O is non-finite only in rows (the first: `row`, its largest logit `logit`) whose sums without
                   ///< the row max subtracted overflow the accumulation dtype, their exact values finite
    nan_source,    ///< row `row` of O is non-finite through key `first_key` (= last_key): with its non-finite k, v
                   ///< values set to 0 the kernel's row is finite, while the row's exact values are
  };
  Kind kind = Kind::scale;
  std::string text;          ///< the sentence the reports print: "O is the exact attention at scale 1, not …"
  double scale = 0;          ///< scale: the effective scale
  std::int64_t shift = 0;    ///< mask_shift: +1 = each row sees one key past its diagonal
  std::int64_t tile = 0;     ///< lost_rescale: keys per tile
  std::int64_t row = -1;     ///< dropped_keys, exp_overflow, nan_source: the row of O named (as Evidence rows of O)
  std::int64_t first_key = -1, last_key = -1;  ///< dropped_keys: the keys left out of `row`; nan_source: the key
  double logit = 0;          ///< exp_overflow: the largest exact logit of `row`
  /// Worst error ÷ bound of the kernel's O (and LSE) against the changed problem's exact result (≤ 1: reproduced;
  /// 0 for exp_overflow and nan_source), and against the problem's own (> 1; +∞ for those two).
  double ratio = 0, baseline = 0;
  friend bool operator==(const Hint &, const Hint &) = default;
};
/// "scale", "mask_shift", "dropped_keys", "lost_rescale", "exp_overflow", "nan_source" (report.json's names).
std::string_view hint_kind_name(Hint::Kind k);
/// Inverse of hint_kind_name; nullopt for an unknown name.
std::optional<Hint::Kind> parse_hint_kind(std::string_view name);

/// What the kernel returned on a minimal counterexample, element by element, for the output tensor the failure
/// is in — and the exact attention probabilities of the case, for the heatmaps.
///
/// A row is one index of the tensor's leading dimensions: O[b,h,i,:], dK[b,h,j,:], and for LSE one element
/// LSE[b,h,i] (a query row's). Rows are numbered row-major over shape without its last dimension (all of it for LSE).
struct Evidence {
  std::string tensor;                ///< "O", "LSE", "dQ", "dK" or "dV"
  std::vector<std::int64_t> shape;   ///< its logical shape
  std::vector<double> got, exact, bound;  ///< row-major; bound +∞ where the model cannot decide
  std::vector<double> probabilities;      ///< exact P [B,Hq,Lq,Lk] of the case; empty when larger than kMaxProbabilities
  std::string call_error;                 ///< the kernel's error message when the call itself failed
  static constexpr std::size_t kMaxProbabilities = 1 << 16;
  /// Row-major index of the largest |got − exact| / bound, or −1.
  std::int64_t worst_index() const;
  /// error ÷ bound of element x as the checks read it: an LSE of +∞ where the exact LSE is −∞ (a row that sees no
  /// key) is exact (SPEC.md §2.3).
  double ratio(std::size_t x) const;

  /// The same tensor on the generated (minimal) case, when the failing check compared the kernel on it with a
  /// modified copy (Outcome::failing_case: the problem the fields above are of). A metamorphic failure is a
  /// difference between two problems, so neither alone shows it.
  struct Original {
    std::vector<std::int64_t> shape;        ///< the minimal case's (a copy may change it: Dv = Lk, Hkv = Hq …)
    std::vector<double> got, exact, bound;  ///< as above; got empty when the call failed
    std::string call_error;
    friend bool operator==(const Original &, const Original &) = default;
  };
  std::optional<Original> original;
  /// With original of the same shape: the rows whose change from the original to the modified problem is beyond
  /// what the property allows — some element changed where its exact value did not and the failing check was exact
  /// (error ÷ bound +∞ at step mask or values: bits, or a value the contract fixes; the element must come back
  /// identical), or changed unlike its exact value by more than the two
  /// bounds together (a correct kernel never does; where an exact value is ±∞, each result beyond its own bound).
  /// Elements whose exact value is NaN on either problem are not judged. Ascending.
  std::vector<std::int64_t> differing_rows;
  /// The row of the failing element of the outcome's finding (index [0,0,3,1] of O → row O[0,0,3]), or −1.
  std::int64_t marked_row = -1;
  /// Elements per row (shape's last dimension; 1 for LSE), the number of rows, and the name of row `row`:
  /// "O[0,0,3]", "LSE[0,0,3]".
  std::int64_t row_length() const;
  std::int64_t rows() const;
  std::string row_name(std::int64_t row) const;
  /// What the counterexample shows about its defect (evidence_hints): empty when nothing is verified, when a
  /// declaration explains the failure, or for a problem the hints do not model (features, a stretched problem).
  std::vector<Hint> hints;
};

}  // namespace attncheck
