// Section 3: gradient vanishing. For P near one-hot, dS = P ∘ (dP − rowsum(P ∘ dP)) ≈ 0 and so dQ = scale·dS·K
// vanishes; the softmax Jacobian diag(p) − ppᵀ tends to 0 too.
#include "gradient.h"

#include "random.h"
#include "sections.h"
#include "stats.h"

#include "attncheck/reference.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace attncheck::study {
namespace {
constexpr int kSecularBisections = 200;
constexpr double kMedian = 0.5;
/// MPFR precision of the reference cross-check: far more than the double computation it checks.
constexpr unsigned kCrosscheckBits = 64;
/// A row's softmax is saturated when ‖diag(p) − ppᵀ‖₂ < 10⁻³ (its gradient is at most 10⁻³ of the input's).
constexpr double kSaturatedJacobian = 1e-3;
}

double softmax_jacobian_spectral(std::vector<double> p) {
  std::sort(p.begin(), p.end(), std::greater<>());
  if (p.size() < 2 || p[0] == p[1]) return p.empty() ? 0 : p[0];
  auto secular = [&](double lambda) {  // decreasing in λ on (p₂, p₁)
    double s = 0;
    for (double pi : p) s += pi * pi / (pi - lambda);
    return 1 - s;
  };
  double lo = p[1], hi = p[0];
  for (int i = 0; i < kSecularBisections; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (secular(mid) > 0 ? lo : hi) = mid;
  }
  return lo + (hi - lo) / 2;
}

double softmax_jacobian_frobenius(const std::vector<double> &p) {
  double s2 = 0, s3 = 0;
  for (double pi : p) {
    s2 += pi * pi;
    s3 += pi * pi * pi;
  }
  return std::sqrt(std::max(0.0, s2 - 2 * s3 + s2 * s2));
}

HeadGradient head_backward(const HeadProblem &pr) {
  const auto L = static_cast<std::size_t>(pr.L), d = static_cast<std::size_t>(pr.d);
  HeadGradient g;
  g.dq.assign(L * d, 0);
  std::vector<double> p(L), dp(L);
  for (std::size_t i = 0; i < L; ++i) {
    double m = -INFINITY;
    for (std::size_t j = 0; j < L; ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < d; ++c) dot += pr.q[i * d + c] * pr.k[j * d + c];
      p[j] = pr.scale * dot;
      m = std::max(m, p[j]);
    }
    double sum = 0;
    for (auto &pj : p) sum += (pj = std::exp(pj - m));
    for (auto &pj : p) pj /= sum;
    double rowdot = 0;
    for (std::size_t j = 0; j < L; ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < d; ++c) dot += pr.dout[i * d + c] * pr.v[j * d + c];
      dp[j] = dot;
      rowdot += p[j] * dot;
    }
    for (std::size_t j = 0; j < L; ++j) {
      const double ds = p[j] * (dp[j] - rowdot);
      for (std::size_t c = 0; c < d; ++c) g.dq[i * d + c] += pr.scale * ds * pr.k[j * d + c];
    }
    g.row_jac_spectral.push_back(softmax_jacobian_spectral(p));
    g.jac_spectral += g.row_jac_spectral.back() / static_cast<double>(L);
    g.jac_frobenius += softmax_jacobian_frobenius(p) / static_cast<double>(L);
  }
  return g;
}

const GradientCell *GradientSection::find(int dk, Scaling s) const {
  for (const auto &c : cells)
    if (c.dk == dk && c.scaling == s) return &c;
  return nullptr;
}

namespace {
double frobenius(const std::vector<double> &x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}
double row_norm(const std::vector<double> &x, std::size_t row, std::size_t width) {
  double s = 0;
  for (std::size_t c = 0; c < width; ++c) s += x[row * width + c] * x[row * width + c];
  return std::sqrt(s);
}
/// ‖dQ − dQ_ref‖_F / ‖dQ_ref‖_F with dQ_ref from attncheck::reference_backward on the same (float32) inputs.
double reference_rel_diff(const HeadProblem &pr, const std::vector<double> &dq) {
  Problem p;
  p.shape = Shape{1, 1, 1, pr.L, pr.L, pr.d, pr.d};
  p.params.scale = pr.scale;
  const std::vector<std::int64_t> dims{1, 1, pr.L, pr.d};
  p.q = Tensor::contiguous(Dtype::f32, dims);
  p.k = Tensor::contiguous(Dtype::f32, dims);
  p.v = Tensor::contiguous(Dtype::f32, dims);
  p.dout = Tensor::contiguous(Dtype::f32, dims);
  p.q.assign(pr.q);
  p.k.assign(pr.k);
  p.v.assign(pr.v);
  p.dout->assign(pr.dout);
  const ExactBackward ref = reference_backward(p, kCrosscheckBits);
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < dq.size(); ++i) {
    diff += (dq[i] - ref.dq[i]) * (dq[i] - ref.dq[i]);
    norm += ref.dq[i] * ref.dq[i];
  }
  return std::sqrt(diff / norm);
}
Estimate median(std::vector<double> x, double z) {
  std::sort(x.begin(), x.end());
  return quantile_estimate(x, kMedian, z);
}
}  // namespace

GradientSection run_gradient(const Plan &plan, std::uint64_t seed, double z) {
  GradientSection sec;
  sec.L = plan.gradient_L;
  sec.problems_per_cell = plan.gradient_problems;
  sec.saturated = kSaturatedJacobian;
  sec.method = "double-precision backward (max-subtracted softmax), cross-checked against the reference";
  sec.crosscheck_bits = kCrosscheckBits;
  const std::size_t cells = plan.dks.size() * std::size(kScalings);
  const std::size_t stride =
      plan.gradient_crosscheck_points > 0 ? std::max<std::size_t>(1, cells / static_cast<std::size_t>(plan.gradient_crosscheck_points)) : cells + 1;
  std::size_t cell_index = 0;
  for (int dk : plan.dks) {
    for (Scaling s : kScalings) {
      // The same inputs for the three scalings: the comparison isolates the scale.
      Rng rng(seed, stream_key({kStreamGradient, static_cast<std::uint64_t>(dk)}));
      std::vector<double> ratio, spectral, frob, row_ratio, row_jac;
      for (std::int64_t t = 0; t < plan.gradient_problems; ++t) {
        HeadProblem pr;
        pr.L = plan.gradient_L;
        pr.d = dk;
        pr.scale = scale_factor(s, dk);
        const auto count = static_cast<std::size_t>(pr.L) * static_cast<std::size_t>(dk);
        for (auto *t4 : {&pr.q, &pr.k, &pr.v, &pr.dout}) {
          t4->resize(count);
          // Rounded to float32 so that the same values can be given to the reference (float32 tensors).
          for (auto &x : *t4) x = static_cast<double>(static_cast<float>(rng.normal()));
        }
        const HeadGradient g = head_backward(pr);
        if (t == 0 && cell_index % stride == 0 && sec.crosscheck_points < plan.gradient_crosscheck_points) {
          sec.crosscheck_max_rel_diff = std::max(sec.crosscheck_max_rel_diff, reference_rel_diff(pr, g.dq));
          ++sec.crosscheck_points;
        }
        ratio.push_back(frobenius(g.dq) / frobenius(pr.dout));
        spectral.push_back(g.jac_spectral);
        frob.push_back(g.jac_frobenius);
        for (std::size_t i = 0; i < static_cast<std::size_t>(pr.L); ++i) {
          const auto d = static_cast<std::size_t>(dk);
          row_ratio.push_back(row_norm(g.dq, i, d) / row_norm(pr.dout, i, d));
          row_jac.push_back(g.row_jac_spectral[i]);
        }
      }
      GradientCell cell;
      cell.dk = dk;
      cell.scaling = s;
      cell.dq_ratio = mean_estimate(ratio, z);
      cell.jac_spectral = mean_estimate(spectral, z);
      cell.jac_frobenius = mean_estimate(frob, z);
      cell.dq_row_median = median(row_ratio, z);
      cell.jac_row_median = median(row_jac, z);
      cell.frac_rows_saturated =
          static_cast<double>(std::count_if(row_jac.begin(), row_jac.end(), [](double j) { return j < kSaturatedJacobian; })) /
          static_cast<double>(row_jac.size());
      sec.cells.push_back(cell);
      ++cell_index;
    }
  }
  return sec;
}

}  // namespace attncheck::study
