// The √d_k study: measures, from simulation, the numeric claims made about why scaled dot-product attention
// divides the logits by √d_k, and renders the measurements as a report (study.md, study.html).
//
// Everything is computed when run_study() runs, deterministically for a seed (std::mt19937_64 and a
// Marsaglia polar normal generator, never std::normal_distribution). The result is plain data so that tests
// can check the figures; rendering is separate.
//
// Example:
//   attncheck::study::Options opt;
//   opt.quick = true;
//   auto result = attncheck::study::run_study(opt);
//   std::string md = attncheck::study::render_markdown(result);
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::study {

inline constexpr std::uint64_t kDefaultSeed = 20170612;  ///< arXiv date of "Attention Is All You Need"

struct Options {
  std::uint64_t seed = kDefaultSeed;
  bool quick = false;  ///< small sample sizes and grids (a few seconds) for CI
  /// Kernels for sections 4 and 5 (flash kernels are the ones measured; empty = the bundled kernels when the
  /// library was built with them, else those parts are reported as not run).
  std::vector<const attncheck_kernel *> kernels;
  bool use_bundled_kernels = true;  ///< fill `kernels` from the bundled library when it is empty
};

/// A point estimate with a two-sided confidence interval [lo, hi] at StudyResult::confidence, from n samples.
struct Estimate {
  double value = 0, lo = 0, hi = 0;
  std::int64_t n = 0;
  bool contains(double x) const { return lo <= x && x <= hi; }
};

/// How the logits q·k are scaled before the softmax.
enum class Scaling : std::uint8_t { none, inv_sqrt, inv_linear };
inline constexpr Scaling kScalings[] = {Scaling::none, Scaling::inv_sqrt, Scaling::inv_linear};
std::string_view scaling_name(Scaling s);  ///< "unscaled", "1/√d_k", "1/d_k"
double scale_factor(Scaling s, int dk);    ///< 1, 1/√d_k, 1/d_k

// ---- Section 1: Var(q·k) ----

/// One d_k: n samples of x = q·k with q, k i.i.d. N(0, I_{d_k}).
struct VarianceRow {
  int dk = 0;
  std::int64_t n = 0;
  Estimate var_unscaled;    ///< Var(x); claim d_k. CLT interval: s² ± z·√((m₄ − s⁴)/n), m₄ the sample 4th moment
  Estimate var_inv_sqrt;    ///< Var(x/√d_k); claim 1
  Estimate var_inv_linear;  ///< Var(x/d_k); claim 1/d_k
  Estimate var_inv_cbrt;    ///< Var(x/d_k^{1/3}); claim d_k^{1/3}
  Estimate fourth_moment;   ///< E[x⁴]; theory 3d_k² + 6d_k (interval from the sample 8th moment)
  double sd = 0;            ///< √Var(x)
  Estimate q_lo, q_hi;      ///< empirical 0.15% and 99.85% quantiles of x (order-statistic intervals)
  double max_abs = 0;       ///< largest |x| among the n samples
  double max_abs_inv_sqrt = 0;  ///< largest |x|/√d_k
  double frac_within_3sd = 0;   ///< fraction of samples with |x| ≤ 3√d_k
};
struct VarianceSection {
  double quantile_lo = 0, quantile_hi = 0;  ///< 0.0015 and 0.9985: the central 99.7%
  std::vector<VarianceRow> rows;
};

// ---- Section 2: softmax saturation ----

/// Rows of logits z_j = scale·q·k_j, j < L, with q, k_j i.i.d. N(0, I_{d_k}); P = softmax(z).
struct SaturationCell {
  int dk = 0, L = 0;
  Scaling scaling = Scaling::none;
  Estimate entropy;   ///< mean row entropy −Σ p_j ln p_j (nats); ln L is the uniform maximum
  Estimate max_prob;  ///< mean max_j p_j; 1/L is uniform, 1 is one-hot
  double frac_rows_beyond_claim = 0;  ///< fraction of rows with some |z_j| > kClaimedScaledRange
};
struct SaturationSection {
  std::vector<int> lengths;
  std::int64_t rows_per_cell = 0;
  double claimed_scaled_range = 0;  ///< the seed's "[−3, 3] after scaling"
  std::vector<SaturationCell> cells;
  const SaturationCell *find(int dk, int L, Scaling s) const;
};

// ---- Section 3: gradient vanishing ----

/// Problems of Lq = Lk = L, D = Dv = d_k with Q, K, V, dO i.i.d. N(0,1) (rounded to float32).
struct GradientCell {
  int dk = 0;
  Scaling scaling = Scaling::none;
  Estimate dq_ratio;      ///< ‖dQ‖_F / ‖dO‖_F, mean over problems
  Estimate jac_spectral;  ///< ‖diag(p) − ppᵀ‖₂ averaged over the rows of a problem, mean over problems
  Estimate jac_frobenius; ///< ‖diag(p) − ppᵀ‖_F, same averaging
  /// Median over all rows of ‖dQ_i‖ / ‖dO_i‖ (the typical row; order-statistic interval, rows treated as
  /// independent although the rows of one problem share K and V).
  Estimate dq_row_median;
  Estimate jac_row_median;        ///< median over all rows of ‖diag(p) − ppᵀ‖₂
  double frac_rows_saturated = 0; ///< share of rows with ‖diag(p) − ppᵀ‖₂ < GradientSection::saturated
};
struct GradientSection {
  int L = 0;
  std::int64_t problems_per_cell = 0;
  double saturated = 0;  ///< a row is saturated when its Jacobian's spectral norm is below this
  std::string method;  ///< how dQ was computed (double implementation, reference cross-check)
  int crosscheck_points = 0;          ///< problems recomputed with attncheck::reference_backward
  unsigned crosscheck_bits = 0;       ///< its MPFR precision
  double crosscheck_max_rel_diff = 0; ///< max ‖dQ_double − dQ_ref‖_F / ‖dQ_ref‖_F
  std::vector<GradientCell> cells;
  const GradientCell *find(int dk, Scaling s) const;
};

// ---- Section 4: overflow ----

enum class Outcome : std::uint8_t { correct, inaccurate, inf, nan, unsupported, failed };
std::string_view outcome_name(Outcome o);

struct OverflowThreshold {
  Dtype dtype = Dtype::f32;
  double max_finite = 0;        ///< largest finite value of the dtype
  double ln_max = 0;            ///< ln(max_finite): the largest logit whose exp is finite (in exact arithmetic)
  double largest_finite_arg = 0;///< measured: the largest float x with exp(x) (computed in float, rounded to the
                                ///< dtype) finite
  double ln_min_subnormal = 0;  ///< ln(η): below about this exp underflows to 0
};
/// One row shift: logits z_j = σ·M − j (j < kOverflowKeys), σ = ±1; the exact softmax does not depend on M.
struct OverflowResult {
  Outcome outcome = Outcome::failed;
  double value = 0;  ///< the output O (Dv = 1) as returned
  double ratio = 0;  ///< |O − exact| / tolerance (≤ 1 is correct)
};
struct OverflowRow {
  double shift = 0;  ///< σ·M
  Dtype dtype = Dtype::f32;
  bool representable = true;                  ///< M is exact in the dtype (otherwise the row is skipped)
  OverflowResult naive;                       ///< naive softmax (no max subtraction) emulated in the dtype
  std::vector<OverflowResult> kernels;        ///< per OverflowSection::kernel_names
};
struct OverflowSection {
  int keys = 0;
  double exact_out = 0;  ///< Σ_j softmax(−j)_j · v_j with v_j = j + 1
  std::vector<OverflowThreshold> thresholds;
  std::vector<std::string> kernel_names;
  std::vector<OverflowRow> rows;
};

// ---- Section 5: kernel accuracy ----

struct AccuracyCell {
  std::string kernel;
  Dtype dtype = Dtype::f32;
  int L = 0, D = 0;
  Outcome status = Outcome::failed;  ///< correct / inaccurate (some ratio > 1) / unsupported / failed
  double max_ratio = 0;    ///< max over outputs of |O − exact| / bound (error model)
  double max_abs_err = 0;  ///< max |O − exact|
  std::int64_t elements = 0;
};
struct AccuracySection {
  bool available = false;    ///< reference, error model and kernels present
  std::string note;          ///< why not, when not
  unsigned reference_bits = 0;
  std::vector<int> lengths, dims;
  std::vector<AccuracyCell> cells;
};

// ---- Claims of the seed ----

enum class Verdict : std::uint8_t { right, wrong, misleading, not_measurable };
std::string_view verdict_name(Verdict v);
struct ClaimCheck {
  std::string quote;     ///< the seed's words (Chinese)
  std::string claim;     ///< the claim in English
  Verdict verdict = Verdict::not_measurable;
  std::string measured;  ///< the measured numbers behind the verdict
};

struct StudyResult {
  std::uint64_t seed = 0;
  bool quick = false;
  double confidence = 0;  ///< level of every interval
  double z = 0;           ///< its standard normal quantile, computed
  std::vector<int> dks;
  VarianceSection variance;
  SaturationSection saturation;
  GradientSection gradient;
  OverflowSection overflow;
  AccuracySection accuracy;
  std::vector<ClaimCheck> claims;
};

/// Runs every section. Deterministic for options.seed (and the kernels' own determinism).
StudyResult run_study(const Options &options);

/// The report as GitHub markdown.
std::string render_markdown(const StudyResult &r);
/// The report as one self-contained HTML page with inline SVG plots.
std::string render_html(const StudyResult &r);

/// Creates `dir` if needed and writes dir/study.md and dir/study.html; throws std::runtime_error with a
/// one-line message when it cannot.
void write_report(const StudyResult &r, const std::filesystem::path &dir);

}  // namespace attncheck::study
