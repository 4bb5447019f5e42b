// The error model of spec/SPEC.md §4: a first-order-free, running-error bound on every output element of a
// correct kernel. Every quantity is computed in double from the exact inputs and the reference's O and LSE;
// double's own rounding (~1e-16 relative) is far below the float32 budgets it bounds and is absorbed by
// kDoubleSlack.
#include "attncheck/error_model.h"

#include "attncheck/products.h"
#include "column_sums.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace attncheck {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Relative slack for quantities this module itself evaluates in double (reductions of ≤ 10⁶ terms).
constexpr double kDoubleSlack = 1e-12;
/// A magnitude within this factor of the accumulation dtype's largest value may overflow once rounding errors add
/// up: the model then cannot bound the result (a float16-accumulating kernel may legitimately return Inf/NaN).
constexpr double kOverflowMargin = 2;
/// Extra rounding steps of a normalization path beyond the sum itself: split-KV combination (weights and their
/// sum), the final division and the log-space rescale multiplies of the two accumulators.
constexpr double kExtraSumSteps = 8;

/// A NaN bound comes from 0·∞: an unbounded term (a log-space error past exp's range) times a zero magnitude.
/// Unbounded is the sound reading.
double unbounded_if_nan(double b) { return std::isnan(b) ? kInf : b; }

/// The fraction of each overflow threshold that applies: 1 from exact values; from approximate ones, each threshold
/// fires kApproximateMargin (relative) earlier, so that a bound finite there is finite from the exact values too.
double limit_fraction(BoundsFrom from) { return from == BoundsFrom::exact ? 1.0 : 1 - kApproximateMargin; }

/// Smallest positive normal of the accumulation dtype: below it a kernel may flush to zero.
double min_normal(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return std::ldexp(1.0, -126);
    case Dtype::f16: return std::ldexp(1.0, -14);
    case Dtype::bf16: return std::ldexp(1.0, -126);
  }
  return 0;
}

/// Rounding one operand of a matrix product to the contract's fp32-precision format (SPEC.md §4.1): |x̃ − x| ≤
/// u·|x| + η, with u one ulp relative (a conversion may chop: tensor cores read a float32 register's top bits) and η
/// the format's smallest subnormal; magnitudes past `max` may become ±Inf. All 0: the operand is already in a format
/// the chosen one holds.
struct OperandRounding {
  double u = 0, eta = 0, max = kInf;
  bool active() const { return u > 0; }
  /// |x̃ − x| for |x| ≤ x_abs.
  double error(double x_abs) const { return u * x_abs + eta; }
};

/// The rounding of an operand held in `from` to the format `to` (nothing when `to` holds every value of `from`).
OperandRounding operand_rounding(Dtype from, Fp32Precision to) {
  const auto holds = [&] {
    switch (to) {
      case Fp32Precision::ieee: return true;
      case Fp32Precision::tf32: return from != Dtype::f32;  // float16, bfloat16: fewer bits, the same or less range
      case Fp32Precision::bf16: return from == Dtype::bf16;
      case Fp32Precision::f16: return from == Dtype::f16;
    }
    return true;
  };
  if (holds()) return {};
  switch (to) {
    case Fp32Precision::ieee: break;
    case Fp32Precision::tf32:  // float32's exponent, 11 significant bits
      return {.u = std::ldexp(1.0, -10), .eta = std::ldexp(1.0, -136),
              .max = std::ldexp(2 - std::ldexp(1.0, -10), 127)};
    case Fp32Precision::bf16:
      return {.u = 2 * unit_roundoff(Dtype::bf16), .eta = min_subnormal(Dtype::bf16), .max = max_finite(Dtype::bf16)};
    case Fp32Precision::f16:
      return {.u = 2 * unit_roundoff(Dtype::f16), .eta = min_subnormal(Dtype::f16), .max = max_finite(Dtype::f16)};
  }
  return {};
}

/// Σ_d |x_d| and max_d |x_d| of each row of a dense row-major [rows, n] tensor (for operands rounded to a format
/// with subnormals and a largest value of its own).
void row_norms(const std::vector<double> &x, std::int64_t n, std::vector<double> &l1, std::vector<double> &amax) {
  const std::size_t rows = n > 0 ? x.size() / static_cast<std::size_t>(n) : 0;
  l1.assign(rows, 0.0);
  amax.assign(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::int64_t d = 0; d < n; ++d) {
      const double a = std::fabs(x[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(d)]);
      l1[r] += a;
      amax[r] = std::max(amax[r], a);
    }
}

/// The per-row quantities shared by the forward and backward bounds.
struct RowModel {
  std::vector<std::int64_t> keys;  ///< visible keys j
  std::vector<double> s;           ///< s_ij = scale·q_i·k_j
  std::vector<double> P;           ///< exact probabilities exp(s_ij − LSE_i)
  std::vector<double> theta;       ///< θ_ij: bound on the log-space error of the kernel's p_ij
  std::vector<double> rho;         ///< ρ_ij: bound on |P̂_ij / P_ij − 1| from the θ's alone
  std::vector<double> abs_dot;     ///< scale·Σ_d |q_id k_jd|
  std::vector<double> t;           ///< softcap: tanh(x_ij / c), the capped logit over c (0 without softcap)
  std::vector<double> z;           ///< dropout factor z_ij ∈ {0, 1/(1 − p)} (1 without dropout)
  std::vector<double> e_x;         ///< the kernel's error on x_ij = scale·q_i·k_j (before softcap)
  std::vector<double> extra;       ///< the logit's error from softcap and the biases (ALiBi, an additive mask)
  std::vector<double> e_t;         ///< softcap: a declared tanh approximation's error on t (0 for tanh=accurate)
  double theta_bar = 0;            ///< Σ_j P_ij θ_ij
  bool overflow = false;           ///< a logit's magnitude may overflow the logits' (or the softmax's) dtype
  double max_abs_s = 0;            ///< M_i = max_j |s_ij|
  double log_A = 0;                ///< ln Σ_j P_ij e^{θ_ij}
};

/// Rows per tile of the logits' products (Tile): enough for the GEMMs' speed, O(rows × Lk) memory.
constexpr std::int64_t kTileRows = 64;

/// The products of query rows [i0, i0 + rows) of head (b, h) with the keys j0 … j0 + keys − 1 of its kv head that
/// any of them may see (rows_key_range: a causal or windowed tile skips the rest), row-major [rows, keys], as double
/// GEMMs in any summation order (products.h): dot = Q·Kᵀ, adot = |Q|·|K|ᵀ and, for a backward, dp = dO·Vᵀ,
/// dpa = |dO|·|V|ᵀ. Ctx::cover fills it; Ctx::row reads it.
struct Tile {
  std::int64_t b = -1, h = -1, i0 = 0, rows = 0, j0 = 0, keys = 0;
  std::vector<double> dot, adot, dp, dpa;
  bool holds(std::int64_t b_, std::int64_t h_, std::int64_t i) const {
    return b_ == b && h_ == h && i >= i0 && i < i0 + rows;
  }
  /// Row i's entry for key j (i in the tile, j0 ≤ j < j0 + keys) in dot, adot, dp and dpa.
  std::size_t at(std::int64_t i, std::int64_t j) const { return static_cast<std::size_t>((i - i0) * keys + j - j0); }
};

/// RowModel::keys entry standing for a row's filler keys (FillerKeys).
constexpr std::int64_t kFillerKey = -1;
/// RowModel::keys entry standing for a row's attention sink: a logit in the denominator with no value.
constexpr std::int64_t kSinkKey = -2;

/// A forward row's per-column sums over its keys (forward_bounds): Σ P̂ρ|v − O|, max |v − O|, Σ P̂(1 + ρ)|v|,
/// max |v|, and the weights' storage rounding against |v| and against |v − O|.
struct ColumnSums {
  std::vector<double> arg, hull, abs, vmax, round, centered;

  void reset(std::size_t cols) {
    for (std::vector<double> *acc : {&arg, &hull, &abs, &vmax, &round, &centered}) acc->assign(cols, 0.0);
  }
  /// A key waiting for add_keys: v's row, its factor (z·descale_v, 0 for a sink), w_arg, w_abs and a (add()).
  void push(const double *row, double factor, double w_arg, double w_abs, double a) {
    rows_.push_back(row), factor_.push_back(factor), w_arg_.push_back(w_arg), w_abs_.push_back(w_abs),
        a_.push_back(a);
  }
  /// Adds the waiting keys, in order (Highway's best target, the same bits on every one: column_sums.h), and
  /// clears them.
  void add_keys(const double *O, std::size_t cols, bool round_p, bool centered_p) {
    detail::add_column_sums(rows_.size(), rows_.data(), factor_.data(), w_arg_.data(), w_abs_.data(), a_.data(),
                            round_p, centered_p, O, cols,
                            {arg.data(), hull.data(), abs.data(), vmax.data(), round.data(), centered.data()});
    rows_.clear(), factor_.clear(), w_arg_.clear(), w_abs_.clear(), a_.clear();
  }
  /// Adds one key: value(col, O_col) gives its (v, |v − O|) in column col; w_arg = P̂ρ, w_abs = P̂(1 + ρ), a the
  /// rounding of its weight (round: the weights are rounded to storage; centered: so is the row sum). Each column's
  /// sums run in key order as before, column by column in SIMD lanes: the same bits as one column at a time.
  template <class Value>
  void add(const double *O, std::size_t cols, Value value, double w_arg, double w_abs, double a, bool round_p,
           bool centered_p) {
    if (round_p)
      centered_p ? add<true, true>(O, cols, value, w_arg, w_abs, a) : add<true, false>(O, cols, value, w_arg, w_abs, a);
    else
      centered_p ? add<false, true>(O, cols, value, w_arg, w_abs, a)
                 : add<false, false>(O, cols, value, w_arg, w_abs, a);
  }

 private:
  std::vector<const double *> rows_;
  std::vector<double> factor_, w_arg_, w_abs_, a_;

  template <bool kRound, bool kCentered, class Value>
  void add(const double *__restrict O, std::size_t cols, Value value, double w_arg, double w_abs, double a) {
    double *__restrict s_arg = arg.data(), *__restrict s_hull = hull.data(), *__restrict s_abs = abs.data(),
                       *__restrict s_vmax = vmax.data(), *__restrict s_round = round.data(),
                       *__restrict s_centered = centered.data();
    for (std::size_t col = 0; col < cols; ++col) {
      const auto [v, dv] = value(col, O[col]);
      s_arg[col] += w_arg * dv;
      s_hull[col] = std::max(s_hull[col], dv);
      s_abs[col] += w_abs * std::fabs(v);
      s_vmax[col] = std::max(s_vmax[col], std::fabs(v));
      if constexpr (kRound) s_round[col] += a * std::fabs(v);
      if constexpr (kCentered) s_centered[col] += a * dv;
    }
  }
};

struct Ctx {
  const Problem &p;
  const Shape &sh;
  const PrecisionProfile &prof;
  double ua, us, eta_s, tiny_a;  // u_acc, u_storage, η_storage, flush-to-zero threshold of accumulation
  double uqk;                    // u of the logits' arithmetic (accumulate_qk)
  double gamma_dot;              // γ_{D+2}(u_qk)
  double acc_max;                // magnitudes at or above it may overflow the accumulation dtype
  double qk_max;                 // the same for the logits' dtype
  double exp_err;                // log-space error of one exp: kExpUlps·u_a/(1 − kExpUlps·u_a)
  bool rowsum_p;                 // the row sum may be Σ of the P rounded to storage (SPEC.md §4.2)
  bool per_head;                 // GQA dK, dV may be summed from per-head parts rounded to storage (SPEC.md §4.4)
  double dqk, dv;                // FP8: q·k stands for descale_q·descale_k·q·k, v for descale_v·v (1 otherwise)
  Approximation tanh_approx;     // softcap's tanh beyond kTanhUlps (the contract's tanh=…)
  Approximation exp_approx;      // each exp beyond kExpUlps (the contract's exp=…)
  double exp_extra;              // log-space error the exp approximation adds: −ln(1 − rel)
  double exp_arg_u;              // unit roundoff of the exp's argument dtype (0: the accumulation arithmetic)
  double exp_tiny;               // exp results below it may be flushed: τ_a, or the approximation's own threshold
  double tanh_arg_u;             // unit roundoff of tanh's argument dtype (0: the accumulation arithmetic)
  double limit;                  // overflow thresholds as a fraction of the dtype's largest value (BoundsFrom)
  OperandRounding op_in;         // fp32-precision: q, k, v, dO as the products read them
  OperandRounding op_w;          // fp32-precision: P and dS as the products read them (after round_p's storage)
  SimdPath path;                 // the products' SIMD path: the baseline's bits for exact values (what reports print)
  double gamma_qk_ref;           // γ_D(2⁻⁵³): the logits' own products in double, any order (Tile)
  // q, k, v as dense row-major [B, H, L, X] doubles, read once: the rows below read each element many times; and
  // their magnitudes, the operands of Tile's |Q|·|K|ᵀ and |dO|·|V|ᵀ.
  std::vector<double> q, k, v, q_abs, k_abs, v_abs;
  // With op_in: Σ_d |x| and max |x| of each row of q, k, v (by q_index, k_index, v_index of element 0 over D or Dv).
  std::vector<double> q_l1, q_max, k_l1, k_max, v_l1, v_max;

  Ctx(const Problem &p_, const PrecisionProfile &prof_, BoundsFrom from = BoundsFrom::exact)
      : p(p_), sh(p_.shape), prof(prof_), ua(unit_roundoff(prof_.accumulate)), us(unit_roundoff(prof_.storage)),
        eta_s(min_subnormal(prof_.storage)), tiny_a(min_normal(prof_.accumulate)),
        uqk(unit_roundoff(prof_.accumulate_qk)), gamma_dot(gamma_n(static_cast<double>(p_.shape.D) + 2, uqk)),
        acc_max(max_finite(prof_.accumulate) / kOverflowMargin * limit_fraction(from)),
        qk_max(max_finite(prof_.accumulate_qk) / kOverflowMargin * limit_fraction(from)), exp_err(gamma_n(Budgets::kExpUlps, ua)),
        rowsum_p(prof_.round_p && prof_.rowsum_rounded_p), per_head(prof_.grad_per_head && p_.shape.group() > 1),
        dqk(descaled_q(p_.features) * descaled_k(p_.features)), dv(descaled_v(p_.features)),
        tanh_approx(approximation(prof_.tanh)), exp_approx(approximation(prof_.exp)),
        exp_extra(-std::log1p(-exp_approx.rel)),
        exp_arg_u(exp_approx.argument ? unit_roundoff(*exp_approx.argument) : 0.0),
        exp_tiny(std::max(tiny_a, exp_approx.flush)),
        tanh_arg_u(tanh_approx.argument ? unit_roundoff(*tanh_approx.argument) : 0.0), limit(limit_fraction(from)),
        // FP8 operands (e4m3, e5m2) are held by every format; P and dS are in storage with round_p.
        op_in(p_.features.fp8 ? OperandRounding{} : operand_rounding(prof_.storage, prof_.fp32_precision)),
        op_w(operand_rounding(prof_.round_p ? prof_.storage : prof_.accumulate, prof_.fp32_precision)),
        path(from == BoundsFrom::exact ? SimdPath::baseline : fast_simd_path()),
        gamma_qk_ref(gamma_n(static_cast<double>(p_.shape.D), 0x1p-53)), q(p_.q.to_vector()), k(p_.k.to_vector()),
        v(p_.v.to_vector()), q_abs(magnitudes(q)), k_abs(magnitudes(k)), v_abs(magnitudes(v)) {
    if (op_in.active()) {
      row_norms(q, sh.D, q_l1, q_max);
      row_norms(k, sh.D, k_l1, k_max);
      row_norms(v, sh.Dv, v_l1, v_max);
    }
  }

  /// Row r of a [.., X] tensor from the offset of its element 0.
  static std::size_t row_of(std::size_t offset, std::int64_t X) {
    return X > 0 ? offset / static_cast<std::size_t>(X) : 0;
  }

  /// The error of a dot product of n terms accumulated with γ = g, |Σ| ≤ abs (Σ|x_d y_d| times any factor), whose
  /// operands x, y have Σ|x| + Σ|y| = l1 and are rounded by op (op_in): each product off by
  /// u(2 + u)|x_d y_d| + (1 + u)η(|x_d| + |y_d|) + η², and the sum's own γ on the rounded products' magnitudes.
  /// `factor` scales the operands' part as abs is scaled (the logits' |scale|).
  double product_error(double g, double abs, double l1, double n, double factor) const {
    if (!op_in.active()) return g * abs;
    const double u = op_in.u, eta = op_in.eta;
    const double small = factor * ((1 + u) * eta * l1 + n * eta * eta);
    return g * ((1 + u) * (1 + u) * abs + small) + u * (2 + u) * abs + small;
  }
  /// An operand of this magnitude may round to ±Inf: past the format's largest value (no rounding error adds up in
  /// one conversion, so no margin).
  bool operand_overflows(double magnitude) const { return !(magnitude <= op_in.max); }

  /// Row-major offsets of q [B, Hq, Lq, D], k [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] (and of their gradients).
  std::size_t q_index(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t d) const {
    return static_cast<std::size_t>(((b * sh.Hq + h) * sh.Lq + i) * sh.D + d);
  }
  std::size_t k_index(std::int64_t b, std::int64_t hk, std::int64_t j, std::int64_t d) const {
    return static_cast<std::size_t>(((b * sh.Hkv + hk) * sh.Lk + j) * sh.D + d);
  }
  std::size_t v_index(std::int64_t b, std::int64_t hk, std::int64_t j, std::int64_t col) const {
    return static_cast<std::size_t>(((b * sh.Hkv + hk) * sh.Lk + j) * sh.Dv + col);
  }

  bool overflows(double magnitude) const { return !(magnitude < acc_max); }
  bool overflows_qk(double magnitude) const { return !(magnitude < qk_max); }
  /// Rounding a value of this magnitude to the storage dtype may give ±Inf.
  bool overflows_storage(double magnitude) const {
    return !(magnitude < max_finite(prof.storage) / kOverflowMargin * limit);
  }
  /// Rounding a value of this magnitude to the LSE's dtype may give ±Inf.
  bool overflows_lse(double magnitude) const { return !(magnitude < max_finite(prof.lse) * limit); }
  /// exp of an argument this large may overflow the accumulation dtype.
  bool exp_overflows(double arg) const { return !(arg < std::log(acc_max)); }

  /// The error a declared tanh approximation adds to t = tanh(a), a = x/c: its relative and absolute error, and the
  /// argument's rounding to the instruction's dtype, |tanh(a(1 + δ)) − tanh(a)| ≤ u·|a|·sech²(ξ) with |ξ| at least
  /// |a|(1 − 2(u_a + u)) (sech² falls with |ξ|: saturated logits barely move).
  double tanh_error(double a, double t) const {
    double e = tanh_approx.rel * std::fabs(t) + tanh_approx.abs;
    if (tanh_arg_u > 0) {
      const double lo = std::tanh(std::fabs(a) * (1 - 2 * (ua + tanh_arg_u)));
      e += tanh_arg_u * std::fabs(a) * (1 - lo * lo);
    }
    return e;
  }

  /// Rounding x (with error bound e) to the storage dtype adds at most u_s·(|x| + e) + η_s/2.
  double store(double x_abs, double e) const { return e + us * (x_abs + e) + eta_s / 2; }
  /// A weight (P, or dS) x with error e as the products read it: rounded to storage with round_p, then by op_w.
  double weight(double x_abs, double e) const {
    if (prof.round_p) e = store(x_abs, e);
    return op_w.active() ? e + op_w.error(x_abs + e) : e;
  }
  /// The relative and absolute parts of weight()'s rounding alone, for Σ_j P̂_j-relative sums: |p̃ − p̂| ≤
  /// rel·p̂ + abs.
  double weight_rel() const {
    const double r = prof.round_p ? us : 0;
    return op_w.active() ? r + op_w.u * (1 + r) : r;
  }
  double weight_abs() const {
    const double a = prof.round_p ? eta_s / 2 : 0;
    return op_w.active() ? a * (1 + op_w.u) + op_w.eta : a;
  }
  /// Whether the products read P (and dS) other than as computed.
  bool weights_rounded() const { return prof.round_p || op_w.active(); }

  /// Makes `t` hold row i of head (b, h): the next kTileRows rows' products from i on, unless it holds it already.
  /// With `dout` (dense [B, Hq, Lq, Dv]) and its magnitudes, also dO·Vᵀ and |dO|·|V|ᵀ.
  void cover(Tile &t, std::int64_t b, std::int64_t h, std::int64_t i, const std::vector<double> *dout = nullptr,
             const std::vector<double> *dout_abs = nullptr) const {
    if (t.holds(b, h, i)) return;
    const std::int64_t hk = sh.kv_head(h), rows = std::min(kTileRows, sh.Lq - i);
    const KeyRange kr = rows_key_range(p.features, p.params.mask, b, i, i + rows, sh.Lq, sh.Lk);
    const std::int64_t n_keys = kr.empty() ? 0 : kr.hi - kr.lo + 1;
    t.b = b, t.h = h, t.i0 = i, t.rows = rows, t.j0 = kr.empty() ? 0 : kr.lo, t.keys = n_keys;
    const auto n = static_cast<std::size_t>(rows * n_keys);
    t.dot.resize(n);
    t.adot.resize(n);
    const std::size_t qo = q_index(b, h, i, 0), ko = k_index(b, hk, t.j0, 0);
    gemm(path, rows, n_keys, sh.D, {q.data() + qo, sh.D, false}, {k.data() + ko, sh.D, true}, t.dot.data(), n_keys);
    gemm(path, rows, n_keys, sh.D, {q_abs.data() + qo, sh.D, false}, {k_abs.data() + ko, sh.D, true},
         t.adot.data(), n_keys);
    if (!dout) return;
    t.dp.resize(n);
    t.dpa.resize(n);
    const std::size_t oo = static_cast<std::size_t>(out_offset(sh, b, h, i, 0)), vo = v_index(b, hk, t.j0, 0);
    gemm(path, rows, n_keys, sh.Dv, {dout->data() + oo, sh.Dv, false}, {v.data() + vo, sh.Dv, true}, t.dp.data(),
         n_keys);
    gemm(path, rows, n_keys, sh.Dv, {dout_abs->data() + oo, sh.Dv, false}, {v_abs.data() + vo, sh.Dv, true},
         t.dpa.data(), n_keys);
  }

  /// The row's visible keys; with `filler`, one more entry (key −1) standing for the filler class: weight
  /// P = count·exp(max_logit − LSE) (δ), θ of its largest |logit| and Σ|q k|, and M raised to its largest |logit|.
  void row(const Tile &tile, std::int64_t b, std::int64_t h, std::int64_t i, double lse, RowModel &r,
           const FillerKeys *filler = nullptr) const {
    const std::int64_t hk = sh.kv_head(h);
    const double scale = p.params.scale;
    const Features &f = p.features;
    const RowFrame fr = row_frame(f, p.params.mask, b, i, sh.Lq, sh.Lk);
    const double cap = f.softcap;
    r.keys.clear();
    r.s.clear();
    r.P.clear();
    r.theta.clear();
    r.rho.clear();
    r.abs_dot.clear();
    r.t.clear();
    r.z.clear();
    r.e_x.clear();
    r.extra.clear();
    r.e_t.clear();
    double M = 0;
    r.overflow = false;
    // The row's key range (within the tile's keys); only a mask tensor asks key by key.
    const KeyRange kr = key_range(f, p.params.mask, fr);
    for (std::int64_t j = std::max<std::int64_t>(kr.lo, 0); j <= std::min(kr.hi, sh.Lk - 1); ++j)
      if (f.mask_kind == MaskKind::none || sees(f, p.params.mask, fr, sh.Lq, sh.Lk, b, h, i, j)) r.keys.push_back(j);
    const std::size_t visible = r.keys.size();
    const double sq = std::fabs(scale * dqk);
    const std::size_t q_at = row_of(q_index(b, h, i, 0), sh.D);  // the row's entry in the operand tables
    for (std::size_t key = 0; key < visible; ++key) {
      const std::int64_t j = r.keys[key];
      const std::size_t k_at = row_of(k_index(b, hk, j, 0), sh.D);
      // The products' own rounding (Tile): Σ|q k| ≤ adot̂/(1 − γ), and the logit x̂ within e_ref of scale·dqk·q·k
      // (its product with scale·dqk adds u|x̂|). P̂ = exp(ŝ − LSE) is then within e_ref in log space, and so are
      // θ̄ and ln A: 2·e_ref joins the logit's error (SPEC.md §4.2).
      const double adot = tile.adot[tile.at(i, j)] / (1 - gamma_qk_ref);
      const double x = scale * dqk * tile.dot[tile.at(i, j)];
      const double abs_dot = sq * adot;
      const double e_ref = 2 * (gamma_qk_ref * abs_dot + 0x1p-52 * std::fabs(x));
      // Softcap c·tanh(x/c) is a contraction (derivative 1 − t² ≤ 1): the logit's error passes at most unchanged,
      // and the cap adds the division, tanh and the multiply (SPEC.md §4.2).
      const double t = cap > 0 ? std::tanh(x / cap) : 0;
      const double e_t = cap > 0 ? tanh_error(x / cap, t) : 0;  // a declared approximation's, on t
      double sv = cap > 0 ? cap * t : x;
      double extra = cap > 0 ? ua * (std::fabs(x) + (Budgets::kTanhUlps + 2) * std::fabs(sv)) + cap * e_t : 0;
      if (dqk != 1) extra += Budgets::kDescaleUlps * ua * abs_dot;  // the descales, folded or on each element
      const double alibi = alibi_bias(f, fr, h, j);
      const double bias = logit_bias(f, fr, sh.Lq, sh.Lk, b, h, i, j);
      sv += bias;
      // ALiBi's product slope·|i' − j| and the additions of the biases, one rounding each.
      if (bias != 0 || alibi != 0) extra += ua * (std::fabs(alibi) + Budgets::kBiasUlps * std::fabs(sv));
      r.s.push_back(sv);
      r.abs_dot.push_back(abs_dot);
      r.t.push_back(t);
      r.e_t.push_back(e_t);
      r.z.push_back(dropout_factor(f, sh.Hq, sh.Lq, sh.Lk, b, h, i, j));
      r.e_x.push_back(e_ref + (op_in.active() ? product_error(gamma_dot, abs_dot, q_l1[q_at] + k_l1[k_at],
                                                              static_cast<double>(sh.D), std::fabs(scale))
                                             : gamma_dot * abs_dot));
      r.extra.push_back(extra);
      if (op_in.active())  // q, k or v may round to ±Inf as operands
        r.overflow |= operand_overflows(
            std::max({q_max[q_at], k_max[k_at], v_max[row_of(v_index(b, hk, j, 0), sh.Dv)]}));
      // Partial sums of q·k reach Σ|q k| before (or after) the scale is applied; the logit then enters the softmax
      // arithmetic.
      r.overflow |= overflows_qk(std::max(adot, std::fabs(scale) * adot)) ||
                    overflows(abs_dot) || overflows(std::fabs(sv));
      M = std::max(M, std::fabs(sv));
    }
    auto add_class = [&](std::int64_t key, double logit, double abs_dot, double abs_logit) {
      r.keys.push_back(key);
      r.s.push_back(logit);
      r.abs_dot.push_back(abs_dot);
      r.t.push_back(0);
      r.e_t.push_back(0);
      r.z.push_back(1);
      // A sink has no product; the filler's operands are the row's q and keys of at most max_k_l1.
      const bool operands = key == kFillerKey && op_in.active();
      const double l1 = operands ? q_l1[q_at] + filler->max_k_l1 : 0.0;
      r.e_x.push_back(operands ? product_error(gamma_dot, abs_dot, l1, static_cast<double>(sh.D), std::fabs(scale))
                               : gamma_dot * abs_dot);
      r.extra.push_back(0);
      M = std::max(M, abs_logit);
    };
    if (!f.sinks.empty()) {
      const double sink = f.sinks[static_cast<std::size_t>(h)];
      add_class(kSinkKey, sink, 0, std::fabs(sink));
      r.overflow |= overflows(std::fabs(sink));
    }
    if (filler && filler->count > 0) {
      add_class(kFillerKey, filler->max_logit + std::log(filler->count), filler->max_abs_dot,  // exp(s − LSE) = δ
                filler->max_abs_logit);
      r.overflow |= overflows_qk(filler->max_abs_dot * std::max(1.0, 1 / std::fabs(scale))) ||
                    overflows(filler->max_abs_dot) ||
                    (op_in.active() && operand_overflows(std::max(filler->max_abs_v, filler->max_k_l1)));
    }
    double tb = 0, log_A_max = -kInf;
    for (std::size_t n = 0; n < r.keys.size(); ++n) {
      const double P = std::exp(r.s[n] - lse);
      const double abs_s = r.keys[n] == kFillerKey ? filler->max_abs_logit : std::fabs(r.s[n]);
      // The exp's own error; a declared approximation adds its own, and rounds the arguments of p and of the
      // rescales (Σ|Δm| ≤ |s| + M) to its dtype.
      const double th = r.e_x[n] + r.extra[n] + Budgets::kShiftUlps * ua * (abs_s + M) + exp_err + exp_extra +
                        2 * exp_arg_u * (abs_s + M);
      r.P.push_back(P);
      r.theta.push_back(th);
      tb += P * th;
      log_A_max = std::max(log_A_max, r.s[n] - lse + th);
    }
    // ln A = ln Σ_j exp(ln P_ij + θ_ij), evaluated with its max factored out: θ may exceed exp's range.
    double A_scaled = 0;
    for (std::size_t n = 0; n < r.keys.size(); ++n) A_scaled += std::exp(r.s[n] - lse + r.theta[n] - log_A_max);
    r.theta_bar = tb;
    r.max_abs_s = M;
    r.log_A = log_A_max + std::log(A_scaled);
    for (std::size_t n = 0; n < r.keys.size(); ++n) {
      const double up = std::expm1(r.theta[n] + tb);
      const double down = -std::expm1(-r.theta[n] - r.log_A);
      r.rho.push_back(std::max(up, down));
    }
  }

  /// γ for a softmax row sum of n visible keys, with rescales and split-KV combination (SPEC.md §4.2).
  double gamma_sum(std::size_t n) const {
    const double nn = static_cast<double>(n);
    return gamma_n(2 * nn + Budgets::kLogUlps * std::log(std::max(nn, 1.0)) + Budgets::kExpUlps + kExtraSumSteps,
                   ua);
  }
  /// Relative error of split-KV's combination weights exp(lse_s − lse): a common factor on the partial outputs.
  double combine_error(std::size_t n, double lse, double M) const {
    const double nn = static_cast<double>(n);
    return gamma_n(nn, ua) + ua * (Budgets::kShiftUlps * (std::fabs(lse) + M) +
                                   Budgets::kLogUlps * std::log(std::max(nn, 1.0)) + Budgets::kExpUlps) +
           exp_extra + 2 * exp_arg_u * (std::fabs(lse) + M);
  }
  /// γ for the LSE's row sum: each of up to n rescales also carries an exp error.
  /// A declared exp approximation's rescale factors multiply the row sum by up to e^{±n·exp_extra} more.
  double gamma_lse(std::size_t n) const {
    const double nn = static_cast<double>(n);
    const double g =
        gamma_n((2 + Budgets::kExpUlps) * nn + Budgets::kLogUlps * std::log(std::max(nn, 1.0)) + kExtraSumSteps, ua);
    if (exp_extra == 0) return g;
    const double rescales = std::expm1(nn * exp_extra);
    return g + rescales + g * rescales;
  }
};

/// The coefficients of a tile's gradient terms (backward_bounds), row-major [rows, Lk], 0 where a row does not see
/// a key: dQ's and dK's error, magnitude and value (se, sa, sd; times |k|, |k|, k for dQ, |q|, |q|, q for dK), dV's
/// (ve, va, vv; times |dO|, |dO|, dO); and the absolute allowances per row of dQ and per key of dK and dV.
struct GradientTerms {
  std::vector<double> se, sa, sd, ve, va, vv, flush_q, flush_k, flush_v;
  std::int64_t Lk = 0;
  void reset(std::int64_t rows, std::int64_t keys) {
    Lk = keys;
    for (std::vector<double> *x : {&se, &sa, &sd, &ve, &va, &vv}) x->assign(static_cast<std::size_t>(rows * keys), 0.0);
    flush_q.assign(static_cast<std::size_t>(rows), 0.0);
    flush_k.assign(static_cast<std::size_t>(keys), 0.0);
    flush_v.assign(static_cast<std::size_t>(keys), 0.0);
  }
  void set(std::int64_t row, std::int64_t j, double e, double a, double d, double v_e, double v_a, double v_v) {
    const auto at = static_cast<std::size_t>(row * Lk + j);
    se[at] = e, sa[at] = a, sd[at] = d, ve[at] = v_e, va[at] = v_a, vv[at] = v_v;
  }
};

/// x[r·cols + c] += add[r] for r < rows, c < cols: a row's absolute allowance on each of its elements.
void add_per_row(double *x, std::int64_t rows, std::int64_t cols, const std::vector<double> &add) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) x[r * cols + c] += add[static_cast<std::size_t>(r)];
}

/// Bounds of shape sh's O and LSE, all 0 until forward_row_bounds fills their rows (a row that sees no key keeps 0).
ForwardBounds zero_forward_bounds(const Shape &sh) {
  ForwardBounds out;
  out.out.assign(static_cast<std::size_t>(sh.B * sh.Hq * sh.Lq * sh.Dv), 0.0);
  out.lse.assign(static_cast<std::size_t>(sh.B * sh.Hq * sh.Lq), 0.0);
  return out;
}

/// Row i of head (b, h)'s bounds on O and LSE into `out`, from its row model `r` (c.row with the same lse and
/// filler f); fb is scratch. forward_bounds runs it on every row, backward_bounds on each row it models, so that
/// the row model is built once there.
void forward_row_bounds(const Ctx &c, const ExactForward &exact, std::int64_t b, std::int64_t h, std::int64_t i,
                        double lse, RowModel &r, const FillerKeys *f, ColumnSums &fb, ForwardBounds &out) {
  const Shape &sh = c.sh;
  const Problem &p = c.p;
  const PrecisionProfile &prof = c.prof;
  const double u32 = unit_roundoff(Dtype::f32);
  // n: the keys the kernel sums (the filler's count, not its one entry); δ: the filler's weight.
  const double n_keys = static_cast<double>(r.keys.size()) + (f ? f->count - 1 : 0);
  const std::size_t n = static_cast<std::size_t>(n_keys);
  const double delta = f ? std::exp(r.s.back() - lse) : 0;
  if (delta >= 0.5) r.overflow = true;
  if (r.overflow) {
    for (std::int64_t col = 0; col < sh.Dv; ++col)
      out.out[static_cast<std::size_t>(out_offset(sh, b, h, i, col))] = kInf;
    out.lse[static_cast<std::size_t>(lse_offset(sh, b, h, i))] = kInf;
    return;
  }
  const double gs = c.gamma_sum(n);
  const double comb = c.combine_error(n, lse, r.max_abs_s);
  // Flushed-to-zero or underflowed terms: each p̂ ≤ tiny is lost, against a row sum l ≥ 1.
  const double underflow = static_cast<double>(n) * c.exp_tiny;
  // Row sum from the rounded P: Σ_j p̃_j = (1 + E)·Σ_j p̂_j with |E| ≤ u_s + n·η_s/2 (l ≥ 1).
  // The filler's weights round with an error at most their value (round to nearest): δ(1 + ρ) in all.
  const double filler_round = f ? delta * (1 + r.rho.back()) : 0;
  const double n_own = static_cast<double>(r.keys.size() - (f ? 1 : 0));
  const double w_rel = c.weight_rel(), w_abs_err = c.weight_abs();
  const double e_rowsum = c.rowsum_p ? w_rel + n_own * w_abs_err + filler_round : 0.0;
  const std::int64_t hk = sh.kv_head(h);
  const bool dropout = p.features.dropout_p > 0;
  // The sums over the row's keys, for every column at once: key by key, v's row read in storage order (each
  // column's sum in the same key order as one column at a time, so the same bits).
  const std::size_t cols = static_cast<std::size_t>(sh.Dv);
  const double *Orow = exact.out.data() + out_offset(sh, b, h, i, 0);
  fb.reset(cols);
  for (std::size_t t = 0; t < r.keys.size(); ++t) {
    const bool fill = r.keys[t] == kFillerKey, sink = r.keys[t] == kSinkKey;
    const double w_arg = r.P[t] * r.rho[t], w_abs = r.P[t] * (1 + r.rho[t]);
    // |p̃_j − p̂_j| / l̂ ≤ u_s·P̂_j + η_s/2: the storage rounding of one weight (and the operand's, fp32-precision).
    const double a = fill ? filler_round : w_rel * w_abs + w_abs_err;
    if (fill) {  // the filler's values are at most max_abs_v in magnitude (the last key: after the others' sums)
      fb.add_keys(Orow, cols, c.weights_rounded(), c.rowsum_p);
      const double fv = f->max_abs_v;
      fb.add(Orow, cols, [fv](std::size_t, double O) { return std::pair{fv, fv + std::fabs(O)}; }, w_arg,
             w_abs, a, c.weights_rounded(), c.rowsum_p);
    } else {  // a dropped key's value counts as 0, a kept one's as z·v (SPEC.md §2.7); a sink has no value (0·v)
      const double *vrow = c.v.data() + c.v_index(b, hk, sink ? 0 : r.keys[t], 0);
      fb.push(vrow, sink ? 0.0 : r.z[t] * c.dv, w_arg, w_abs, a);
    }
  }
  fb.add_keys(Orow, cols, c.weights_rounded(), c.rowsum_p);
  for (std::size_t col = 0; col < cols; ++col) {
    const double O = Orow[col], arg = fb.arg[col], hull = fb.hull[col], vmax = fb.vmax[col],
                 p_centered = fb.centered[col];
    double abs_sum = fb.abs[col], p_round = fb.round[col];
    // Σ_j P̂_ij = 1, so Σ_j P̂_ij|v_jc| ≤ max_j |v_jc|: caps the terms when some θ is out of exp's range
    // (0·∞ there is NaN, and the cap is the right bound).
    const double b_arg = std::isnan(arg) ? hull : std::min(arg, hull);
    const double abs_raw = abs_sum;
    abs_sum = std::isnan(abs_sum) ? vmax : std::min(abs_sum, vmax);
    // The weights' rounding, |p̃_j − p̂_j| ≤ rel·P̂_j + abs with Σ_j P̂_ij = 1: at most (rel + n·abs)·max_j |v_jc|.
    const double p_round_cap = (w_rel + static_cast<double>(n) * w_abs_err) * vmax;
    p_round = std::isnan(p_round) ? p_round_cap : std::min(p_round, p_round_cap);
    // fp32-precision: v rounded as an operand, Σ_j P̃_j|ṽ_jc − v_jc| with Σ_j P̃_j ≤ 1 + E (the weights' rounding);
    // the products then sum magnitudes up to Σ_j |p̃_j ṽ_jc|.
    const double v_round = c.op_in.active() ? c.op_in.u * (abs_sum + p_round) +
                                                  c.op_in.eta * (1 + w_rel + static_cast<double>(n) * w_abs_err)
                                            : 0.0;
    if (c.op_in.active() || c.op_w.active()) abs_sum += p_round + v_round;
    const double b_sum = gs / (1 - std::min(gs, 0.5)) * (abs_sum + std::fabs(O) + b_arg);
    // Split-KV: O = Σ_s exp(lse_s − lse) O_s is not renormalized, so the roundings of lse_s and lse (at their
    // magnitude), the log, the exp and the sum over splits scale the partial outputs (SPEC.md §4.2).
    const double b_comb = comb * abs_sum;
    double e = b_arg + b_sum + b_comb + p_round + v_round + underflow * vmax;
    if (dropout) e += Budgets::kDropoutUlps * c.ua * abs_sum;  // the factor 1/(1 − p), rounded, and its product
    if (c.dv != 1) e += Budgets::kDescaleUlps * c.ua * abs_sum;  // descale_v, on the values or on O
    if (c.rowsum_p) {
      // Numerator and row sum from the same rounded weights p̃_j = p̂_j(1 + ε_j): O stays a convex combination,
      // P̃_j − P̂_j = P̂_j(ε_j − E)/(1 + E), so the rounding is centered at O (SPEC.md §4.2); |Õ − O| ≤ hull.
      const double b_c = (p_centered + e_rowsum * b_arg) / (1 - e_rowsum);
      const double b_argc = std::isnan(b_c) ? hull : std::min(b_arg + b_c, hull);
      double abs_r = (abs_raw + p_round) / (1 - e_rowsum);  // Σ_j P̃_ij |v_jc|
      abs_r = std::isnan(abs_r) ? vmax : std::min(abs_r, vmax);
      const double b_sum_r = gs / (1 - std::min(gs, 0.5)) * (abs_r + std::fabs(O) + b_argc);
      const double v_round_r = c.op_in.active() ? c.op_in.u * abs_r + c.op_in.eta * (1 + e_rowsum) : 0.0;
      e = std::max(e, b_argc + b_sum_r + comb * abs_r + v_round_r + underflow * vmax);
    }
    if (c.overflows(static_cast<double>(n) * vmax)) e = kInf;  // Σ_j p_j|v_jc| with p_j ≤ 1
    e += Budgets::kDivUlps * c.ua * (std::fabs(O) + e);
    // Near the storage dtype's largest value a correct result may round to ±Inf.
    e = c.overflows_storage(std::fabs(O) + e) ? kInf : c.store(std::fabs(O), e);
    // The exact answer given is the row's without the filler: O_long − O = w(Ō_filler − O)/(1 + w), w ≤ δ.
    if (f) e += delta * (f->max_abs_v + std::fabs(O)) / (1 - delta);
    out.out[static_cast<std::size_t>(out_offset(sh, b, h, i, static_cast<std::int64_t>(col)))] =
        unbounded_if_nan(e * (1 + kDoubleSlack));
  }
  // LSE = m + ln l: log-space errors of the terms, the row sum, the log and the final conversions.
  const double gl = c.gamma_lse(n);
  double e = std::max(r.log_A, r.theta_bar) - std::log1p(-std::min(gl, 0.5)) + underflow;
  if (c.rowsum_p) e -= std::log1p(-std::min(e_rowsum, 0.5));  // ln(1 + E)
  e += Budgets::kLogUlps * c.ua * std::log(static_cast<double>(std::max<std::size_t>(n, 1)));
  e += (Budgets::kShiftUlps * c.ua + u32) * (std::fabs(lse) + e);
  if (f) e += delta;  // LSE_long − LSE = ln(1 + w) ∈ [0, δ]
  if (prof.lse != Dtype::f32) {
    // Returned in the storage dtype: one more rounding, to ±Inf past its largest value.
    e = !c.overflows_lse(std::fabs(lse) + e)
            ? e + unit_roundoff(prof.lse) * (std::fabs(lse) + e) + min_subnormal(prof.lse) / 2
            : kInf;
  }
  out.lse[static_cast<std::size_t>(lse_offset(sh, b, h, i))] = unbounded_if_nan(e * (1 + kDoubleSlack));
}

}  // namespace

Approximation approximation(Tanh t) {
  switch (t) {
    case Tanh::accurate: return {};
    case Tanh::approx: return {.rel = Budgets::kTanhApproxRel, .abs = 0, .argument = {}, .flush = 0};
    case Tanh::approx_f16: return {.rel = 0, .abs = Budgets::kTanhApproxF16Abs, .argument = Dtype::f16, .flush = 0};
    case Tanh::approx_bf16: return {.rel = 0, .abs = Budgets::kTanhApproxBf16Abs, .argument = Dtype::bf16, .flush = 0};
  }
  return {};
}

Approximation approximation(Exp e) {
  switch (e) {
    case Exp::accurate:
    case Exp::approx: return {};  // ex2.approx.f32: 2 ulps, within kExpUlps
    // A float16 result: below the smallest normal its relative accuracy is gone (subnormals, or flushed).
    case Exp::approx_f16:
      return {.rel = Budgets::kExpApproxF16Rel, .abs = 0, .argument = Dtype::f16, .flush = min_normal(Dtype::f16)};
    case Exp::approx_bf16:  // .ftz: results below bfloat16's smallest normal (float32's) are flushed
      return {.rel = Budgets::kExpApproxBf16Rel, .abs = 0, .argument = Dtype::bf16, .flush = min_normal(Dtype::bf16)};
  }
  return {};
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu >= 1 ? kInf : nu / (1 - nu);
}

double error_ratio(double got, double exact, double bound) {
  if (got == exact || bound == kInf) return 0;
  if (std::isnan(got) || std::isinf(exact) || std::isinf(got)) return kInf;
  if (!(bound > 0)) return kInf;
  return std::fabs(got - exact) / bound;
}

std::function<void(std::int64_t rows)> &bounded_rows_hook() {
  thread_local std::function<void(std::int64_t)> hook;
  return hook;
}

ForwardBounds forward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &prof,
                             BoundsFrom from) {
  return forward_bounds(p, exact, prof, {}, from);
}

ForwardBounds forward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &prof,
                             const std::vector<FillerKeys> &filler, BoundsFrom from) {
  const Shape &sh = p.shape;
  const Ctx c(p, prof, from);
  ForwardBounds out = zero_forward_bounds(sh);
  const std::function<void(std::int64_t)> &bounded = bounded_rows_hook();
  // One head at a time on each of OpenMP's threads (a head's rows are its own: the bits do not depend on the count).
#pragma omp parallel for schedule(dynamic, 1) if (sh.work() >= kThreadedWork)
  for (std::int64_t task = 0; task < sh.B * sh.Hq; ++task) {
    const std::int64_t b = task / sh.Hq, h = task % sh.Hq;
    RowModel r;
    ColumnSums fb;
    Tile tile;
    for (std::int64_t i = 0; i < sh.Lq; ++i) {
      const std::size_t row = static_cast<std::size_t>(lse_offset(sh, b, h, i));
      const double lse = exact.lse[row];
      if (std::isinf(lse)) continue;  // sees no key: O = 0 and LSE = −∞ exactly
      const FillerKeys *f = row < filler.size() && filler[row].count > 0 ? &filler[row] : nullptr;
      c.cover(tile, b, h, i);
      c.row(tile, b, h, i, lse, r, f);
      forward_row_bounds(c, exact, b, h, i, lse, r, f, fb, out);
    }
    if (bounded) {
#pragma omp critical(attncheck_bounded_rows)
      bounded(sh.Lq);
    }
  }
  return out;
}

BackwardBounds backward_bounds(const Problem &p, const ExactForward &exact, const PrecisionProfile &prof,
                               BoundsFrom from) {
  if (!p.dout) throw std::invalid_argument("backward_bounds: the problem has no dout");
  const Shape &sh = p.shape;
  const std::vector<double> dout = p.dout->to_vector(), dout_abs = magnitudes(dout);  // dO, dense [B, Hq, Lq, Dv]
  const Ctx c(p, prof, from);
  std::vector<double> do_l1, do_max;  // with fp32-precision: dO's rows as operands of dP = dO·v and dV = Pᵀ·dO
  if (c.op_in.active()) row_norms(dout, sh.Dv, do_l1, do_max);
  // The forward's bounds on O and LSE, row by row below from the same row model (forward_row_bounds).
  ForwardBounds fb = zero_forward_bounds(sh);
  const double scale = std::fabs(p.params.scale);
  const double g_dv = gamma_n(static_cast<double>(sh.Dv), c.ua);
  const double g_dq = gamma_n(static_cast<double>(sh.Lk) + 2, c.ua);
  const double n_kv = static_cast<double>(sh.Lq * sh.group());
  const double g_dk = gamma_n(n_kv + 2, c.ua), g_dvsum = gamma_n(n_kv + 1, c.ua);
  // Per-head GQA parts: one head's sum over its Lq rows (and the scale for dK).
  const double n_head = static_cast<double>(sh.Lq);
  const double g_dk_head = gamma_n(n_head + 2, c.ua), g_dv_head = gamma_n(n_head + 1, c.ua);

  // Running sums per output element: Σ e·|x| (propagated error) and Σ |x| (magnitude for γ), plus the value in
  // double for the storage rounding term.
  const auto nq = static_cast<std::size_t>(sh.B * sh.Hq * sh.Lq * sh.D);
  const auto nk = static_cast<std::size_t>(sh.B * sh.Hkv * sh.Lk * sh.D);
  const auto nv = static_cast<std::size_t>(sh.B * sh.Hkv * sh.Lk * sh.Dv);
  std::vector<double> dq_err(nq), dq_mag(nq), dq_val(nq), dk_err(nk), dk_mag(nk), dk_val(nk), dv_err(nv),
      dv_mag(nv), dv_val(nv);

  const double cap = p.features.softcap;
  // Each product of a gradient sum (dS·k, dS·q, P·dO) may be flushed below the smallest normal, or rounded there
  // with an absolute error: τ_a per term (times the scale when it is applied after), not relative to anything.
  const double flush = c.tiny_a * std::max(1.0, scale);
  const std::function<void(std::int64_t)> &bounded = bounded_rows_hook();
  const std::int64_t G_int = sh.group();
  // A group's tiles (head h, rows i0 …) as units, dealt round-robin to its parts (products.h: backward_parts). Each
  // part writes its own rows of dQ, O's and LSE's bounds; part 0 sums dK and dV into the outputs, the others into
  // their own arrays (KeySums), added after in part order: the bits do not depend on the thread count.
  const std::int64_t tiles_per_head = (sh.Lq + kTileRows - 1) / kTileRows, units = G_int * tiles_per_head;
  const std::int64_t parts = backward_parts(sh.B * sh.Hkv, units);
  struct KeySums {
    std::vector<double> dk_err, dk_mag, dk_val, dv_err, dv_mag, dv_val;
  };
  std::vector<KeySums> key_sums(static_cast<std::size_t>(sh.B * sh.Hkv * parts));
#pragma omp parallel for schedule(dynamic, 1) if (sh.work() >= kThreadedWork)
  for (std::int64_t task = 0; task < sh.B * sh.Hkv * parts; ++task) {
    const std::int64_t b = task / (sh.Hkv * parts), hk = task / parts % sh.Hkv, part = task % parts;
    RowModel r;
    Tile tile;
    ColumnSums sums;
    GradientTerms co;
    std::vector<double> dP, e_dP, dS, e_dS, e_P, e_Pv;
    // Where this part sums dK and dV (the group's keys, from key 0).
    KeySums &mine = key_sums[static_cast<std::size_t>(task)];
    const std::size_t k_at = c.k_index(b, hk, 0, 0), v_at = c.v_index(b, hk, 0, 0);
    const auto n_k = static_cast<std::size_t>(sh.Lk * sh.D), n_v = static_cast<std::size_t>(sh.Lk * sh.Dv);
    if (part > 0)
      for (auto [x, n] : {std::pair{&mine.dk_err, n_k}, {&mine.dk_mag, n_k}, {&mine.dk_val, n_k},
                          {&mine.dv_err, n_v}, {&mine.dv_mag, n_v}, {&mine.dv_val, n_v}})
        x->assign(n, 0.0);
    double *const k_sums[] = {part > 0 ? mine.dk_err.data() : dk_err.data() + k_at,
                              part > 0 ? mine.dk_mag.data() : dk_mag.data() + k_at,
                              part > 0 ? mine.dk_val.data() : dk_val.data() + k_at};
    double *const v_sums[] = {part > 0 ? mine.dv_err.data() : dv_err.data() + v_at,
                              part > 0 ? mine.dv_mag.data() : dv_mag.data() + v_at,
                              part > 0 ? mine.dv_val.data() : dv_val.data() + v_at};
    for (std::int64_t unit = part; unit < units; unit += parts) {
      const std::int64_t h = hk * G_int + unit / tiles_per_head, i0 = unit % tiles_per_head * kTileRows;
      c.cover(tile, b, h, i0, &dout, &dout_abs);
      const std::int64_t j0 = tile.j0, n_keys = tile.keys;  // the tile's keys: j0 … j0 + n_keys − 1
      co.reset(tile.rows, n_keys);
      for (std::int64_t i = i0; i < i0 + tile.rows; ++i) {
        const double lse = exact.lse[static_cast<std::size_t>(lse_offset(sh, b, h, i))];
        if (std::isinf(lse)) continue;  // zero gradients, exactly
        c.row(tile, b, h, i, lse, r);
        forward_row_bounds(c, exact, b, h, i, lse, r, nullptr, sums, fb);
        const std::size_t n = r.keys.size();
        const double row_unbounded = r.overflow ? kInf : 0.0;
        const double e_lse = fb.lse[static_cast<std::size_t>(lse_offset(sh, b, h, i))];
        // D_i = Σ_c dO_ic O_ic from the kernel's own O (within its bound).
        double D = 0, eD_from_o = 0, D_mag = 0;
        for (std::int64_t col = 0; col < sh.Dv; ++col) {
          const auto o = static_cast<std::size_t>(out_offset(sh, b, h, i, col));
          const double g = std::fabs(dout[o]);
          D += dout[o] * exact.out[o];
          eD_from_o += g * fb.out[o];
          D_mag += g * (std::fabs(exact.out[o]) + fb.out[o]);
        }
        eD_from_o += g_dv * D_mag;
        dP.assign(n, 0);
        e_dP.assign(n, 0);
        e_P.assign(n, 0);
        e_Pv.assign(n, 0);
        dS.assign(n, 0);
        e_dS.assign(n, 0);
        // dO_i·v_j and Σ_c |dO_ic v_jc| of every key (Tile; a sink has no value: 0). Any summation order: the
        // products' γ_Dv in double is far below the kernel's g_dv, and the magnitude is taken from above.
        const std::size_t o_row = static_cast<std::size_t>(out_offset(sh, b, h, i, 0));
        // fp32-precision: dO read as an operand (dP = dO·v, dV = Pᵀ·dO); a row that may round to ±Inf is unbounded.
        const double do_row_l1 = c.op_in.active() ? do_l1[Ctx::row_of(o_row, sh.Dv)] : 0.0;
        const double do_unbounded =
            c.op_in.active() && c.operand_overflows(do_max[Ctx::row_of(o_row, sh.Dv)]) ? kInf : 0.0;
        double eD_from_p = 0, D_p_mag = 0;
        for (std::size_t t = 0; t < n; ++t) {
          const bool key = r.keys[t] >= 0;
          const double dp = key ? tile.dp[tile.at(i, r.keys[t])] : 0.0,
                       dp_mag = key ? tile.dpa[tile.at(i, r.keys[t])] * (1 + 0x1p-40) : 0.0;
          // Dropout scales dP by z (its rounding: kDropoutUlps).
          dP[t] = r.z[t] * dp;
          const double v_row_l1 =
              c.op_in.active() && r.keys[t] >= 0 ? c.v_l1[Ctx::row_of(c.v_index(b, hk, r.keys[t], 0), sh.Dv)] : 0.0;
          e_dP[t] = c.overflows(dp_mag)
                        ? kInf
                        : r.z[t] * c.product_error(g_dv, dp_mag, do_row_l1 + v_row_l1,
                                                   static_cast<double>(sh.Dv), 1) +
                              (r.z[t] != 1 ? Budgets::kDropoutUlps * c.ua * std::fabs(dP[t]) : 0) + row_unbounded +
                              do_unbounded;
          // P̂ = exp(ŝ − L̂SE): the logit's error, the kernel's LSE error and the subtraction's rounding (and the
          // argument's, to a declared exp approximation's dtype).
          const double phi = r.theta[t] + e_lse + (c.ua + c.exp_arg_u) * (std::fabs(r.s[t]) + std::fabs(lse));
          // A recomputed P̂ whose argument may pass exp's range can be +Inf: nothing downstream is bounded then.
          e_P[t] = c.exp_overflows(r.s[t] - lse + phi) ? kInf : r.P[t] * std::expm1(phi) + c.exp_tiny;
          e_Pv[t] = c.weight(r.P[t], e_P[t]);  // P as dV's product reads it
          eD_from_p += e_P[t] * std::fabs(dp) + (r.P[t] + e_P[t]) * e_dP[t];
          D_p_mag += (r.P[t] + e_P[t]) * (std::fabs(dp) + e_dP[t]);
        }
        eD_from_p += gamma_n(static_cast<double>(n), c.ua) * D_p_mag;
        const double e_D = std::max(eD_from_o, eD_from_p);
        for (std::size_t t = 0; t < n; ++t) {
          const double x = dP[t] - D;
          double e_x = e_dP[t] + e_D;
          e_x += c.ua * (std::fabs(x) + e_x);
          const double Pm = r.P[t] + e_P[t];
          dS[t] = r.P[t] * x;
          double e = e_P[t] * std::fabs(x) + Pm * e_x;
          e += c.ua * (Pm * (std::fabs(x) + e_x));
          // dS rounded to storage (round_p): |dS| + e may round to ±Inf near the largest value.
          auto stored = [&](double mag, double err) {
            return c.overflows_storage(mag + err) ? kInf : c.store(mag, err);
          };
          if (cap > 0) {
            // Softcap's chain rule: dS·(1 − t²), t = tanh(x/c) recomputed from an x off by e_x and a tanh off by
            // kTanhUlps (and a declared approximation's error); 1 − t² itself rounds (three operations).
            const double tt = r.t[t], fac = 1 - tt * tt;
            const double e_t = fac * (r.e_x[t] + c.ua * std::fabs(r.s[t])) / cap +
                               Budgets::kTanhUlps * c.ua * std::fabs(tt) + r.e_t[t];
            const double e_fac = 2 * std::fabs(tt) * e_t + e_t * e_t + 3 * c.ua;
            const double ads = std::fabs(dS[t]);
            auto chained = [&](double err) {
              return err * (fac + e_fac) + ads * e_fac + c.ua * (ads + err) * (fac + e_fac);
            };
            // With round_p a kernel may round dS before the chain factor, or after it (FlashAttention-2): the
            // storage's absolute η_s/2 is then not scaled by 1 − t². The bound is the larger path.
            e = prof.round_p ? std::max(chained(stored(ads, e)), stored(ads * fac, chained(e))) : chained(e);
            dS[t] *= fac;
          } else if (prof.round_p) {
            e = stored(std::fabs(dS[t]), e);
          }
          // fp32-precision: dS as dQ's and dK's products read it (to ±Inf past the format's range).
          if (c.op_w.active()) {
            const double mag = std::fabs(dS[t]) + e;
            e = mag <= c.op_w.max ? e + c.op_w.error(mag) : kInf;
          }
          e_dS[t] = e;
        }
        // dQ_i = scale Σ_j dS_ij k_j ; dK_j += scale dS_ij q_i ; dV_j += P_ij z_ij dO_i: each term's coefficients,
        // summed by the tile's products below.
        const std::int64_t row = i - i0;
        for (std::size_t t = 0; t < n; ++t) {
          const std::int64_t j = r.keys[t];
          if (j < 0) continue;  // the sink: no key, no gradient
          const double z = r.z[t];
          const double ads = std::fabs(dS[t]) + e_dS[t];
          // fp32-precision: k (for dQ) and q (for dK) read as operands, |ỹ − y| ≤ u|y| + η: the term's error
          // e_dS|ỹ| + |dS̃||ỹ − y| and its magnitude |dS̃||ỹ|.
          const double u_in = c.op_in.u;
          const double flush_in = c.op_in.active() ? flush + 2 * scale * ads * c.op_in.eta : flush;
          const double e_z = z != 1 ? Budgets::kDropoutUlps * c.ua * z : 0;
          const double w = (r.P[t] + e_Pv[t]) * (z + e_z);  // |P̃ z|
          // dV's term: (e_P̃(z + e_z) + P e_z)|g|(1 + u) [+ w(u|g| + η)] + τ, magnitude w|g|(1 + u), value P z g.
          co.set(row, j - j0, scale * (e_dS[t] * (1 + u_in) + ads * u_in), scale * ads * (1 + u_in), scale * dS[t],
                 (e_Pv[t] * (z + e_z) + r.P[t] * e_z) * (1 + u_in) + (c.op_in.active() ? w * u_in : 0.0),
                 w * (1 + u_in), r.P[t] * z);
          co.flush_q[static_cast<std::size_t>(row)] += flush_in;
          co.flush_k[static_cast<std::size_t>(j - j0)] += flush_in;
          co.flush_v[static_cast<std::size_t>(j - j0)] +=
              flush + (c.op_in.active() ? w * c.op_in.eta + do_unbounded : 0.0);
        }
      }
      // The tile's sums as products: dQ of its rows, and its share of dK and dV of its keys.
      const std::size_t qo = c.q_index(b, h, i0, 0), ko = c.k_index(b, hk, j0, 0);
      const std::size_t oo = static_cast<std::size_t>(out_offset(sh, b, h, i0, 0));
      const std::int64_t rows = tile.rows, D = sh.D, Dv = sh.Dv;
      for (auto [x, y, out] : {std::tuple{&co.se, &c.k_abs, &dq_err}, std::tuple{&co.sa, &c.k_abs, &dq_mag},
                               std::tuple{&co.sd, &c.k, &dq_val}})
        gemm(c.path, rows, D, n_keys, {x->data(), n_keys, false}, {y->data() + ko, D, false}, out->data() + qo, D);
      for (auto [x, y, out] : {std::tuple{&co.se, &c.q_abs, k_sums[0]}, std::tuple{&co.sa, &c.q_abs, k_sums[1]},
                               std::tuple{&co.sd, &c.q, k_sums[2]}})
        gemm(c.path, n_keys, D, rows, {x->data(), n_keys, true}, {y->data() + qo, D, false}, out + j0 * D, D, true);
      for (auto [x, y, out] : {std::tuple{&co.ve, &dout_abs, v_sums[0]}, std::tuple{&co.va, &dout_abs, v_sums[1]},
                               std::tuple{&co.vv, &dout, v_sums[2]}})
        gemm(c.path, n_keys, Dv, rows, {x->data(), n_keys, true}, {y->data() + oo, Dv, false}, out + j0 * Dv, Dv, true);
      add_per_row(dq_err.data() + qo, rows, D, co.flush_q);
      add_per_row(k_sums[0] + j0 * D, n_keys, D, co.flush_k);
      add_per_row(v_sums[0] + j0 * Dv, n_keys, Dv, co.flush_v);
      if (bounded) {
#pragma omp critical(attncheck_bounded_rows)
        bounded(tile.rows);
      }
    }
  }
  // The parts' sums of dK and dV added to part 0's, in part order.
#pragma omp parallel for schedule(dynamic, 1) if (parts > 1 && sh.work() >= kThreadedWork)
  for (std::int64_t group = 0; group < sh.B * sh.Hkv; ++group) {
    const std::int64_t b = group / sh.Hkv, hk = group % sh.Hkv;
    const std::size_t k_at = c.k_index(b, hk, 0, 0), v_at = c.v_index(b, hk, 0, 0);
    for (std::int64_t part = 1; part < parts; ++part) {
      const KeySums &ks = key_sums[static_cast<std::size_t>(group * parts + part)];
      for (auto [from, to, at] : {std::tuple{&ks.dk_err, &dk_err, k_at}, std::tuple{&ks.dk_mag, &dk_mag, k_at},
                                  std::tuple{&ks.dk_val, &dk_val, k_at}, std::tuple{&ks.dv_err, &dv_err, v_at},
                                  std::tuple{&ks.dv_mag, &dv_mag, v_at}, std::tuple{&ks.dv_val, &dv_val, v_at}})
        for (std::size_t x = 0; x < from->size(); ++x) (*to)[at + x] += (*from)[x];
    }
  }
  // The G per-head parts of a GQA dK or dV (SPEC.md §4.4): part h computed in accumulation precision
  // (|x̂_h − x_h| ≤ err_h + g_head·mag_h, |x̂_h| ≤ (1 + g_head)·mag_h), rounded to storage, then the G parts summed in
  // any order, either in accumulation precision and stored, or in storage precision (no further store).
  const double G = static_cast<double>(sh.group());
  auto per_head = [&](double err, double mag, double val, double g_head) {
    const double part = (1 + g_head) * mag;                // Σ_h |x̂_h|
    if (c.overflows_storage(part)) return kInf;             // a part, or a partial sum in storage, may round to ±Inf
    const double rounded = c.us * part + G * c.eta_s / 2;  // Σ_h |x̃_h − x̂_h|
    const double e1 = err + g_head * mag + rounded;        // Σ_h |x̃_h − x_h|
    const double m2 = part + rounded;                      // Σ_h |x̃_h|
    const double e_acc = e1 + gamma_n(G - 1, c.ua) * m2 + kDoubleSlack * mag;
    const double e_st = e1 + gamma_n(G - 1, c.us) * m2 + kDoubleSlack * mag;
    const double b_acc = c.overflows_storage(std::fabs(val) + e_acc) ? kInf : c.store(std::fabs(val), e_acc);
    return std::max(b_acc, e_st);
  };
  // err and mag are sums of `terms` non-negative products in double, in the GEMMs' order: within a factor
  // 1 ± γ_terms(2⁻⁵³) of their exact values (the flush allowances are far above that factor's share of them).
  auto finish = [&](const std::vector<double> &err_sum, const std::vector<double> &mag_sum,
                    const std::vector<double> &val, double g_kernel, double g_head, double terms) {
    const double g_ref = gamma_n(terms + 1, 0x1p-53), up = 1 + 2 * g_ref;
    const double g = g_kernel * up + g_ref;
    std::vector<double> err(err_sum.size()), mag(mag_sum.size());
    std::transform(err_sum.begin(), err_sum.end(), err.begin(), [up](double x) { return x * up; });
    std::transform(mag_sum.begin(), mag_sum.end(), mag.begin(), [up](double x) { return x * up; });
    std::vector<double> out(err.size());
    for (std::size_t x = 0; x < err.size(); ++x) {
      if (mag[x] == 0 && err[x] == 0) continue;  // no visible contribution: the gradient is exactly zero
      if (c.overflows(mag[x])) {
        out[x] = kInf;
        continue;
      }
      const double e = err[x] + g * mag[x] + kDoubleSlack * mag[x];
      double bound = c.overflows_storage(std::fabs(val[x]) + e) ? kInf : c.store(std::fabs(val[x]), e);
      if (c.per_head && g_head >= 0) bound = std::max(bound, per_head(err[x], mag[x], val[x], g_head));
      out[x] = unbounded_if_nan(bound * (1 + kDoubleSlack));
    }
    return out;
  };
  BackwardBounds bb;
  bb.dq = finish(dq_err, dq_mag, dq_val, g_dq, -1, static_cast<double>(sh.Lk));
  bb.dk = finish(dk_err, dk_mag, dk_val, g_dk, g_dk_head, n_kv);
  bb.dv = finish(dv_err, dv_mag, dv_val, g_dvsum, g_dv_head, n_kv);
  return bb;
}

}  // namespace attncheck
