// attncheck_reference_bench: what the reference costs against a plain double naive attention (issue 21), one thread:
//   fast_fwd — fast_forward (double, Eigen GEMMs, with its per-element error bound; SPEC.md §5.1),
//   mpfr_fwd — reference_forward (128-bit MPFR; only up to kMpfrMaxLen, it takes seconds beyond),
//   naive_fwd — plain double loops (logits, max, exp, sum, P·V, LSE), no bound.
// B = Hq = Hkv = 1, Lq = Lk = L, D = Dv, no mask, float32 inputs uniform in [−1, 1), scale 1/√D. The fast_fwd row also
// reports escalated_percent: the elements fast_filter sends to MPFR against float32 error-model bounds, for two
// kernel values per element (the exact value rounded to float32, and exact + t·β with t uniform in [−2, 2]).
// bench/reference_cost prints the ratios. See bench/README.md.
#include "attncheck/error_model.h"
#include "attncheck/fast_reference.h"
#include "attncheck/problem.h"
#include "attncheck/reference.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace attncheck;

constexpr std::array<std::int64_t, 3> kLens{64, 256, 1024};
constexpr std::array<std::int64_t, 2> kDims{64, 128};
constexpr std::int64_t kMpfrMaxLen = 256;  // MPFR at L = 1024 takes ~10 s a call on one core
constexpr double kMinTimeS = 0.3;
constexpr std::uint64_t kSeed = 0x5eed'0021;

/// The problem of (L, D), built once.
const Problem &problem(std::int64_t L, std::int64_t D) {
  static std::map<std::pair<std::int64_t, std::int64_t>, Problem> cache;
  auto it = cache.find({L, D});
  if (it != cache.end()) return it->second;
  Problem p;
  p.shape = Shape{1, 1, 1, L, L, D, D};
  p.params.scale = default_scale(D);
  p.q = Tensor::contiguous(Dtype::f32, {1, 1, L, D});
  p.k = Tensor::contiguous(Dtype::f32, {1, 1, L, D});
  p.v = Tensor::contiguous(Dtype::f32, {1, 1, L, D});
  std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(L * 1000 + D));
  std::uniform_real_distribution<double> u(-1, 1);
  for (Tensor *t : {&p.q, &p.k, &p.v}) {
    std::vector<double> xs(static_cast<std::size_t>(t->numel()));
    for (double &x : xs) x = u(rng);
    t->assign(xs);
  }
  return cache.emplace(std::pair{L, D}, std::move(p)).first->second;
}

/// Plain double attention (no mask): out [L, Dv], lse [L], from row-major q, k, v.
void naive_forward(const std::vector<double> &q, const std::vector<double> &k, const std::vector<double> &v,
                   std::int64_t L, std::int64_t D, double scale, std::vector<double> &out, std::vector<double> &lse,
                   std::vector<double> &row) {
  for (std::int64_t i = 0; i < L; ++i) {
    double m = -INFINITY;
    for (std::int64_t j = 0; j < L; ++j) {
      double t = 0;
      for (std::int64_t d = 0; d < D; ++d) t += q[static_cast<std::size_t>(i * D + d)] * k[static_cast<std::size_t>(j * D + d)];
      row[static_cast<std::size_t>(j)] = scale * t;
      m = std::max(m, row[static_cast<std::size_t>(j)]);
    }
    double l = 0;
    double *o = out.data() + i * D;
    std::fill(o, o + D, 0.0);
    for (std::int64_t j = 0; j < L; ++j) {
      const double pj = std::exp(row[static_cast<std::size_t>(j)] - m);
      l += pj;
      const double *vj = v.data() + j * D;
      for (std::int64_t c = 0; c < D; ++c) o[c] += pj * vj[c];
    }
    for (std::int64_t c = 0; c < D; ++c) o[c] /= l;
    lse[static_cast<std::size_t>(i)] = m + std::log(l);
  }
}

void bm_naive(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  const std::vector<double> q = p.q.to_vector(), k = p.k.to_vector(), v = p.v.to_vector();
  std::vector<double> out(static_cast<std::size_t>(L * D)), lse(static_cast<std::size_t>(L)), row(lse.size());
  for (auto _ : st) {
    naive_forward(q, k, v, L, D, p.params.scale, out, lse, row);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void bm_mpfr(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  for (auto _ : st) {
    ExactForward e = reference_forward(p);
    benchmark::DoNotOptimize(e.out.data());
  }
}

void bm_fast(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  for (auto _ : st) {
    auto f = fast_forward(p);
    benchmark::DoNotOptimize(f->out.data());
  }
  // Untimed: the filter against float32 bounds, and ε against the actual error.
  const auto f = fast_forward(p);
  const ExactForward exact = reference_forward(p);
  const ForwardBounds beta = forward_bounds(p, exact, PrecisionProfile::for_storage(Dtype::f32));
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<double> t(-2, 2);
  double judged = 0, escalated = 0, worst_eps_rel = 0, worst_err_over_eps = 0;
  auto judge = [&](double k, double b, double r, double e) {
    ++judged;
    if (fast_filter(k, b, r, e) == FilterVerdict::escalate) ++escalated;
  };
  for (std::size_t n = 0; n < exact.out.size(); ++n) {
    judge(static_cast<float>(exact.out[n]), beta.out[n], f->out[n], f->out_err[n]);
    judge(exact.out[n] + t(rng) * beta.out[n], beta.out[n], f->out[n], f->out_err[n]);
    worst_eps_rel = std::max(worst_eps_rel, f->out_err[n]);  // |v| ≤ 1: relative to the row's scale
    worst_err_over_eps = std::max(worst_err_over_eps, std::fabs(f->out[n] - exact.out[n]) / f->out_err[n]);
  }
  for (std::size_t n = 0; n < exact.lse.size(); ++n) {
    judge(static_cast<float>(exact.lse[n]), beta.lse[n], f->lse[n], f->lse_err[n]);
    judge(exact.lse[n] + t(rng) * beta.lse[n], beta.lse[n], f->lse[n], f->lse_err[n]);
  }
  st.counters["escalated_percent"] = 100 * escalated / judged;
  st.counters["eps_max"] = worst_eps_rel;
  st.counters["err_over_eps_max"] = worst_err_over_eps;
}

std::string name(const char *row, std::int64_t L, std::int64_t D) {
  return std::string(row) + "/L:" + std::to_string(L) + "/D:" + std::to_string(D);
}

}  // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (std::int64_t L : kLens)
    for (std::int64_t D : kDims) {
      benchmark::RegisterBenchmark(name("naive_fwd", L, D).c_str(), [=](benchmark::State &st) { bm_naive(st, L, D); })
          ->MinTime(kMinTimeS)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(name("fast_fwd", L, D).c_str(), [=](benchmark::State &st) { bm_fast(st, L, D); })
          ->MinTime(kMinTimeS)
          ->Unit(benchmark::kMillisecond);
      if (L <= kMpfrMaxLen)
        benchmark::RegisterBenchmark(name("mpfr_fwd", L, D).c_str(), [=](benchmark::State &st) { bm_mpfr(st, L, D); })
            ->MinTime(kMinTimeS)
            ->Unit(benchmark::kMillisecond);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
