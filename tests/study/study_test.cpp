// The quick study's key figures satisfy the mathematics they measure.
#include "attncheck/study.h"

#include "gradient.h"
#include "random.h"
#include "stats.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

using namespace attncheck;
using namespace attncheck::study;

namespace {

const StudyResult &quick() {
  static const StudyResult r = [] {
    Options o;
    o.quick = true;
    return run_study(o);
  }();
  return r;
}

/// b − a is not significantly negative: b ≥ a − (half-width of a + half-width of b).
bool not_significantly_below(const Estimate &b, const Estimate &a) {
  return b.value >= a.value - ((a.hi - a.lo) / 2 + (b.hi - b.lo) / 2);
}

constexpr int kLargeDk = 512;
constexpr double kFarBelow = 0.1;

}  // namespace

TEST_CASE("Var(q·k)/d_k lies within its confidence interval of 1 for every d_k") {
  for (const auto &row : quick().variance.rows) {
    INFO("d_k = " << row.dk << ", Var = " << row.var_unscaled.value);
    const double d = row.dk;
    CHECK(row.var_unscaled.lo / d <= 1);
    CHECK(row.var_unscaled.hi / d >= 1);
  }
}

TEST_CASE("the 1/√d_k-scaled variance lies within its confidence interval of 1") {
  for (const auto &row : quick().variance.rows) {
    INFO("d_k = " << row.dk);
    CHECK(row.var_inv_sqrt.contains(1));
  }
}

TEST_CASE("the 1/d_k-scaled variance lies within its confidence interval of 1/d_k") {
  for (const auto &row : quick().variance.rows) {
    INFO("d_k = " << row.dk);
    CHECK(row.var_inv_linear.contains(1.0 / row.dk));
  }
}

TEST_CASE("the fourth moment of q·k lies within its confidence interval of 3d_k² + 6d_k") {
  for (const auto &row : quick().variance.rows) {
    const double d = row.dk;
    INFO("d_k = " << row.dk);
    CHECK(row.fourth_moment.contains(3 * d * d + 6 * d));
  }
}

TEST_CASE("99.7% of the logits at d_k = 128 lie near ±3√d_k, far inside the seed's [−128, 128]") {
  for (const auto &row : quick().variance.rows) {
    if (row.dk != 128) continue;
    const double three_sd = 3 * std::sqrt(128.0);
    CHECK(row.q_hi.value == Approx(three_sd).epsilon(0.15));
    CHECK(-row.q_lo.value == Approx(three_sd).epsilon(0.15));
    CHECK(row.max_abs < 128);
  }
}

TEST_CASE("unscaled softmax entropy decreases as d_k grows, for every sequence length") {
  const auto &s = quick().saturation;
  for (int L : s.lengths) {
    INFO("L = " << L);
    const auto &dks = quick().dks;
    for (std::size_t i = 0; i + 1 < dks.size(); ++i) {
      INFO("d_k = " << dks[i] << " → " << dks[i + 1]);
      const auto &a = s.find(dks[i], L, Scaling::none)->entropy, &b = s.find(dks[i + 1], L, Scaling::none)->entropy;
      CHECK(not_significantly_below(a, b));  // no significant increase
    }
    // … and the decrease over the grid is significant.
    CHECK(s.find(dks.back(), L, Scaling::none)->entropy.hi < s.find(dks.front(), L, Scaling::none)->entropy.lo);
  }
}

TEST_CASE("unscaled max-probability increases as d_k grows, for every sequence length") {
  const auto &s = quick().saturation;
  const auto &dks = quick().dks;
  for (int L : s.lengths) {
    INFO("L = " << L);
    for (std::size_t i = 0; i + 1 < dks.size(); ++i) {
      INFO("d_k = " << dks[i] << " → " << dks[i + 1]);
      CHECK(not_significantly_below(s.find(dks[i + 1], L, Scaling::none)->max_prob,
                                    s.find(dks[i], L, Scaling::none)->max_prob));
    }
    CHECK(s.find(dks.back(), L, Scaling::none)->max_prob.lo > s.find(dks.front(), L, Scaling::none)->max_prob.hi);
  }
}

TEST_CASE("1/d_k scaling drives the softmax towards uniform: entropy near ln L at large d_k") {
  const auto &s = quick().saturation;
  for (int L : s.lengths) {
    const auto *c = s.find(kLargeDk, L, Scaling::inv_linear);
    CHECK(c->entropy.value > 0.99 * std::log(static_cast<double>(L)));
    CHECK(c->entropy.value <= std::log(static_cast<double>(L)));
  }
}

TEST_CASE("at large d_k the typical unscaled row's gradient is far below the 1/√d_k one") {
  const auto &g = quick().gradient;
  const auto *un = g.find(kLargeDk, Scaling::none), *sc = g.find(kLargeDk, Scaling::inv_sqrt);
  REQUIRE(un);
  REQUIRE(sc);
  CHECK(un->dq_row_median.value < kFarBelow * sc->dq_row_median.value);
  CHECK(un->jac_row_median.hi < kFarBelow * sc->jac_row_median.lo);
  CHECK(un->frac_rows_saturated > sc->frac_rows_saturated);
}

TEST_CASE("the double-precision backward agrees with the arbitrary-precision reference") {
  const auto &g = quick().gradient;
  CHECK(g.crosscheck_points > 0);
  CHECK(g.crosscheck_max_rel_diff < 1e-12);
}

TEST_CASE("the softmax Jacobian's spectral norm matches its closed forms and power iteration") {
  CHECK(softmax_jacobian_spectral({0.25, 0.25, 0.25, 0.25}) == Approx(0.25));
  CHECK(softmax_jacobian_spectral({0.5, 0.5}) == Approx(0.5));  // diag − ppᵀ = [[¼,−¼],[−¼,¼]]: eigenvalue ½
  CHECK(softmax_jacobian_spectral({1.0, 0.0, 0.0}) == Approx(0.0).margin(1e-15));
  const std::vector<double> p{0.5, 0.3, 0.15, 0.05};
  std::vector<double> v{1, -1, 0.5, -0.25};
  double lambda = 0;
  for (int it = 0; it < 2000; ++it) {
    double pv = 0, norm = 0;
    for (std::size_t i = 0; i < p.size(); ++i) pv += p[i] * v[i];
    std::vector<double> w(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) w[i] = p[i] * v[i] - p[i] * pv;
    for (double x : w) norm += x * x;
    norm = std::sqrt(norm);
    double vnorm = 0;
    for (double x : v) vnorm += x * x;
    lambda = norm / std::sqrt(vnorm);
    for (std::size_t i = 0; i < p.size(); ++i) v[i] = w[i] / norm;
  }
  CHECK(softmax_jacobian_spectral(p) == Approx(lambda).epsilon(1e-9));
  // Frobenius: √(Σp² − 2Σp³ + (Σp²)²) against the entries.
  double f = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = 0; j < p.size(); ++j) {
      const double e = (i == j ? p[i] : 0) - p[i] * p[j];
      f += e * e;
    }
  CHECK(softmax_jacobian_frobenius(p) == Approx(std::sqrt(f)));
}

TEST_CASE("exp overflow thresholds are ln of each dtype's largest finite value") {
  for (const auto &t : quick().overflow.thresholds) {
    INFO(dtype_name(t.dtype));
    CHECK(t.ln_max == std::log(max_finite(t.dtype)));
    // Values up to max·(1 + u) still round to max: the threshold sits at most about u above ln(max).
    CHECK(t.largest_finite_arg >= t.ln_max - FLT_EPSILON * t.ln_max);
    CHECK(t.largest_finite_arg <= t.ln_max + unit_roundoff(t.dtype) + FLT_EPSILON * t.ln_max);
  }
  CHECK(quick().overflow.thresholds.front().ln_max == Approx(88.7228).epsilon(1e-5));
}

TEST_CASE("a float32 naive softmax overflows past ln(FLT_MAX) while the flash kernels stay finite") {
  const auto &o = quick().overflow;
  const double ln_max = std::log(static_cast<double>(FLT_MAX));
  REQUIRE_FALSE(o.kernel_names.empty());
  int past = 0;
  for (const auto &row : o.rows) {
    if (!row.representable) continue;
    INFO(dtype_name(row.dtype) << " shift " << row.shift);
    if (row.dtype == Dtype::f32 && row.shift > ln_max) {
      ++past;
      CHECK((row.naive.outcome == Outcome::nan || row.naive.outcome == Outcome::inf));
    }
    if (row.dtype == Dtype::f32 && row.shift >= 0 && row.shift < ln_max) CHECK(row.naive.outcome == Outcome::correct);
    for (const auto &k : row.kernels)
      if (k.outcome != Outcome::unsupported) CHECK(k.outcome == Outcome::correct);
  }
  CHECK(past > 0);
}

TEST_CASE("the same seed gives a byte-identical study.md and another seed a different one") {
  Options o;
  o.quick = true;
  CHECK(render_markdown(run_study(o)) == render_markdown(quick()));
  o.seed = kDefaultSeed + 1;
  CHECK(render_markdown(run_study(o)) != render_markdown(quick()));
}

TEST_CASE("the HTML report is self-contained and has its plots inline") {
  const std::string html = render_html(quick());
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=\"http") == std::string::npos);
}

TEST_CASE("the seed's [−128, 128] range is judged wrong and Var = d_k right") {
  const auto &claims = quick().claims;
  auto verdict = [&](const std::string &needle) {
    for (const auto &c : claims)
      if (c.quote.find(needle) != std::string::npos) return c.verdict;
    FAIL("no claim quoting " << needle);
    return Verdict::not_measurable;
  };
  CHECK(verdict("[-128, 128]") == Verdict::wrong);
  CHECK(verdict("点积的方差 = d_k") == Verdict::right);
  CHECK(verdict("e^24") == Verdict::right);
}

TEST_CASE("the normal generator has mean 0 and variance 1 and the 99% z is 2.5758") {
  Rng rng(1, 2);
  std::vector<double> x(100000);
  for (auto &v : x) v = rng.normal();
  const double z = normal_quantile_two_sided(kConfidence);
  CHECK(z == Approx(2.5758293035489).epsilon(1e-12));
  CHECK(mean_estimate(x, z).contains(0));
  CHECK(variance_estimate(x, z).contains(1));
}
