// attncheck_reference_bench: what the reference costs against a plain double naive attention (issue 21), one thread:
//   fast_fwd, fast_bwd — fast_forward, fast_backward (double, Eigen GEMMs, with their per-element error bounds;
//                        SPEC.md §5.1),
//   bounds_fwd, bounds_bwd — the error model's bounds from the fast values, as the screen computes them
//                        (forward_bounds, backward_bounds, BoundsFrom::approximate, float32 storage),
//   mpfr_fwd, mpfr_bwd — reference_forward, reference_backward (128-bit MPFR; only up to kMpfrMaxLen, they take
//                        seconds beyond),
//   naive_fwd — plain double loops (logits, max, exp, sum, P·V, LSE), no bound;
//   naive_bwd — plain double loops (the forward's P recomputed, dP = dO·Vᵀ, Δ = Σ P dP, dS, dQ, dK, dV), no bound.
// B = Hq = Hkv = 1, Lq = Lk = L, D = Dv, no mask, float32 inputs and dO uniform in [−1, 1), scale 1/√D. The fast rows
// also report escalated_percent: the elements fast_filter sends to MPFR against float32 error-model bounds, for two
// kernel values per element (the exact value rounded to float32, and exact + t·β with t uniform in [−2, 2]), and
// judged, the number of such judgements. bench/reference_cost prints the ratios. See bench/README.md.
#include "attncheck/error_model.h"
#include "attncheck/fast_reference.h"
#include "attncheck/problem.h"
#include "attncheck/reference.h"

#include <benchmark/benchmark.h>
#include <omp.h>

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

/// B = 1, Hq, Hkv, Lq = Lk = L, D = Dv, float32 values and dO uniform in [−1, 1) (seeded by L and D), scale 1/√D,
/// causal (bottom-right) or not.
Problem make_problem(std::int64_t L, std::int64_t D, std::int64_t Hq, std::int64_t Hkv, bool causal) {
  Problem p;
  p.shape = Shape{1, Hq, Hkv, L, L, D, D};
  p.params.scale = default_scale(D);
  p.params.mask = causal ? Mask::causal : Mask::none;
  p.q = Tensor::contiguous(Dtype::f32, {1, Hq, L, D});
  p.k = Tensor::contiguous(Dtype::f32, {1, Hkv, L, D});
  p.v = Tensor::contiguous(Dtype::f32, {1, Hkv, L, D});
  p.dout = Tensor::contiguous(Dtype::f32, {1, Hq, L, D});
  std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(L * 1000 + D));
  std::uniform_real_distribution<double> u(-1, 1);
  for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) {
    std::vector<double> xs(static_cast<std::size_t>(t->numel()));
    for (double &x : xs) x = u(rng);
    t->assign(xs);
  }
  return p;
}

/// The problem of (L, D): one head, no mask, built once.
const Problem &problem(std::int64_t L, std::int64_t D) {
  static std::map<std::pair<std::int64_t, std::int64_t>, Problem> cache;
  auto it = cache.find({L, D});
  if (it != cache.end()) return it->second;
  return cache.emplace(std::pair{L, D}, make_problem(L, D, 1, 1, false)).first->second;
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

/// Plain double attention backward (no mask): dq, dk, dv [L, D] from row-major q, k, v, dout. Per row the forward's
/// weights are recomputed (logits, max, exp, sum), then dP_j = dO·v_j, Δ = Σ_j P_j dP_j, dS_j = P_j(dP_j − Δ):
/// dQ_i += scale·dS_j k_j, dK_j += scale·dS_j q_i, dV_j += P_j dO_i.
void naive_backward(const std::vector<double> &q, const std::vector<double> &k, const std::vector<double> &v,
                    const std::vector<double> &dout, std::int64_t L, std::int64_t D, double scale,
                    std::vector<double> &dq, std::vector<double> &dk, std::vector<double> &dv,
                    std::vector<double> &row, std::vector<double> &dp) {
  std::fill(dq.begin(), dq.end(), 0.0);
  std::fill(dk.begin(), dk.end(), 0.0);
  std::fill(dv.begin(), dv.end(), 0.0);
  for (std::int64_t i = 0; i < L; ++i) {
    const double *qi = q.data() + i * D, *doi = dout.data() + i * D;
    double m = -INFINITY;
    for (std::int64_t j = 0; j < L; ++j) {
      double t = 0;
      for (std::int64_t d = 0; d < D; ++d) t += qi[d] * k[static_cast<std::size_t>(j * D + d)];
      row[static_cast<std::size_t>(j)] = scale * t;
      m = std::max(m, row[static_cast<std::size_t>(j)]);
    }
    double l = 0;
    for (std::int64_t j = 0; j < L; ++j) {
      row[static_cast<std::size_t>(j)] = std::exp(row[static_cast<std::size_t>(j)] - m);
      l += row[static_cast<std::size_t>(j)];
    }
    double delta = 0;
    for (std::int64_t j = 0; j < L; ++j) {
      row[static_cast<std::size_t>(j)] /= l;
      double t = 0;
      for (std::int64_t c = 0; c < D; ++c) t += doi[c] * v[static_cast<std::size_t>(j * D + c)];
      dp[static_cast<std::size_t>(j)] = t;
      delta += row[static_cast<std::size_t>(j)] * t;
    }
    double *dqi = dq.data() + i * D;
    for (std::int64_t j = 0; j < L; ++j) {
      const double pj = row[static_cast<std::size_t>(j)], ds = scale * pj * (dp[static_cast<std::size_t>(j)] - delta);
      const double *kj = k.data() + j * D;
      double *dkj = dk.data() + j * D, *dvj = dv.data() + j * D;
      for (std::int64_t d = 0; d < D; ++d) {
        dqi[d] += ds * kj[d];
        dkj[d] += ds * qi[d];
        dvj[d] += pj * doi[d];
      }
    }
  }
}

void bm_naive_bwd(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  const std::vector<double> q = p.q.to_vector(), k = p.k.to_vector(), v = p.v.to_vector(), dout = p.dout->to_vector();
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size()), row(static_cast<std::size_t>(L)), dp(row.size());
  for (auto _ : st) {
    naive_backward(q, k, v, dout, L, D, p.params.scale, dq, dk, dv, row, dp);
    benchmark::DoNotOptimize(dq.data());
    benchmark::DoNotOptimize(dk.data());
    benchmark::DoNotOptimize(dv.data());
    benchmark::ClobberMemory();
  }
}

/// fast_filter's verdicts on two kernel values per element (the exact value rounded to float32, and exact + t·β),
/// and ε's largest size and tightness: the untimed counters of the fast rows.
struct Judge {
  std::mt19937_64 rng{kSeed};
  std::uniform_real_distribution<double> t{-2, 2};
  double judged = 0, escalated = 0, worst_eps_rel = 0, worst_err_over_eps = 0;
  /// `scale`: what ε is reported relative to (the tensor's largest |exact| value).
  void add(const std::vector<double> &r, const std::vector<double> &e, const std::vector<double> &exact,
           const std::vector<double> &beta, double scale) {
    for (std::size_t n = 0; n < exact.size(); ++n) {
      for (double k : {static_cast<double>(static_cast<float>(exact[n])), exact[n] + t(rng) * beta[n]}) {
        ++judged;
        if (fast_filter(k, beta[n], r[n], e[n]) == FilterVerdict::escalate) ++escalated;
      }
      worst_eps_rel = std::max(worst_eps_rel, e[n] / scale);
      if (e[n] > 0) worst_err_over_eps = std::max(worst_err_over_eps, std::fabs(r[n] - exact[n]) / e[n]);
    }
  }
  void report(benchmark::State &st) const {
    st.counters["escalated_percent"] = 100 * escalated / judged;
    st.counters["judged"] = judged;
    st.counters["eps_max"] = worst_eps_rel;
    st.counters["err_over_eps_max"] = worst_err_over_eps;
  }
};

double max_abs(const std::vector<double> &xs) {
  double m = 0;
  for (double x : xs) m = std::max(m, std::fabs(x));
  return m;
}

/// Times run() over the state's iterations; returns one more result (untimed) for the counters.
template <class Run>
auto timed(benchmark::State &st, Run run) {
  for (auto _ : st) {
    auto r = run();
    benchmark::DoNotOptimize(r);
  }
  return run();
}

void bm_fast_bwd(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  const auto g = timed(st, [&] { return fast_backward(p); });
  // Untimed: the filter against float32 bounds, and ε against the actual error.
  const ExactBackward exact = reference_backward(p);
  const BackwardBounds beta = backward_bounds(p, reference_forward(p), PrecisionProfile::for_storage(Dtype::f32));
  Judge judge;
  judge.add(g->dq, g->dq_err, exact.dq, beta.dq, max_abs(exact.dq));
  judge.add(g->dk, g->dk_err, exact.dk, beta.dk, max_abs(exact.dk));
  judge.add(g->dv, g->dv_err, exact.dv, beta.dv, max_abs(exact.dv));
  judge.report(st);
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

/// The MPFR reference, reference_forward or reference_backward, at its default 128 bits.
template <auto Reference>
void bm_mpfr(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  for (auto _ : st) {
    auto e = Reference(p, kReferenceBits);
    benchmark::DoNotOptimize(e);
  }
}

void bm_fast(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  const auto f = timed(st, [&] { return fast_forward(p); });
  // Untimed: the filter against float32 bounds, and ε against the actual error.
  const ExactForward exact = reference_forward(p);
  const ForwardBounds beta = forward_bounds(p, exact, PrecisionProfile::for_storage(Dtype::f32));
  Judge judge;
  judge.add(f->out, f->out_err, exact.out, beta.out, 1);  // |v| ≤ 1: relative to the row's scale
  judge.add(f->lse, f->lse_err, exact.lse, beta.lse, std::max(1.0, max_abs(exact.lse)));
  judge.report(st);
}

/// The error model's bounds as the screen computes them (screen.cpp): from the fast reference's values, with the
/// thresholds of BoundsFrom::approximate, for float32 storage; the backward's with kBackward.
template <bool kBackward>
void bm_bounds(benchmark::State &st, std::int64_t L, std::int64_t D) {
  const Problem &p = problem(L, D);
  const auto f = fast_forward(p);
  const ExactForward values{.out = f->out, .lse = f->lse};
  const PrecisionProfile profile = PrecisionProfile::for_storage(Dtype::f32);
  if constexpr (kBackward)
    timed(st, [&] { return backward_bounds(p, values, profile, BoundsFrom::approximate); });
  else
    timed(st, [&] { return forward_bounds(p, values, profile, BoundsFrom::approximate); });
}

/// What the screen spends judging one problem before any MPFR, on `threads` OpenMP threads (wall time): forward,
/// fast_forward and forward_bounds from its values; backward, fast_backward and backward_bounds (the forward's values
/// computed untimed). float32 profile, BoundsFrom::approximate, as screen.cpp.
template <bool kBackward>
void bm_judge(benchmark::State &st, std::int64_t L, std::int64_t D, bool causal, std::int64_t G, int threads) {
  const Problem p = make_problem(L, D, 2, 2 / G, causal);  // the judge grid: Hq = 2, Hkv = 2 / G
  const PrecisionProfile profile = PrecisionProfile::for_storage(Dtype::f32);
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  const auto f = fast_forward(p);
  const ExactForward values{.out = f->out, .lse = f->lse};
  for (auto _ : st) {
    if constexpr (kBackward) {
      auto g = fast_backward(p);
      benchmark::DoNotOptimize(g);
      auto b = backward_bounds(p, values, profile, BoundsFrom::approximate);
      benchmark::DoNotOptimize(b);
    } else {
      auto g = fast_forward(p);
      benchmark::DoNotOptimize(g);
      auto b = forward_bounds(p, ExactForward{.out = g->out, .lse = g->lse}, profile, BoundsFrom::approximate);
      benchmark::DoNotOptimize(b);
    }
  }
  // Untimed: the escalation rate against float32 bounds, kernel values around the fast values (the filter's margin
  // is what decides; the exact values would take MPFR minutes at L = 4096).
  Judge judge;
  if constexpr (kBackward) {
    const auto g = fast_backward(p);
    const BackwardBounds beta = backward_bounds(p, values, profile, BoundsFrom::approximate);
    judge.add(g->dq, g->dq_err, g->dq, beta.dq, 1);
    judge.add(g->dk, g->dk_err, g->dk, beta.dk, 1);
    judge.add(g->dv, g->dv_err, g->dv, beta.dv, 1);
  } else {
    const ForwardBounds beta = forward_bounds(p, values, profile, BoundsFrom::approximate);
    judge.add(f->out, f->out_err, f->out, beta.out, 1);
    judge.add(f->lse, f->lse_err, f->lse, beta.lse, 1);
  }
  st.counters["escalated_percent"] = 100 * judge.escalated / judge.judged;
  st.counters["judged"] = judge.judged;
  omp_set_num_threads(before);
}

std::string name(const char *row, std::int64_t L, std::int64_t D) {
  return std::string(row) + "/L:" + std::to_string(L) + "/D:" + std::to_string(D);
}

}  // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  using Row = void (*)(benchmark::State &, std::int64_t, std::int64_t);
  for (std::int64_t L : kLens)
    for (std::int64_t D : kDims) {
      std::vector<std::pair<const char *, Row>> rows = {
          {"naive_fwd", bm_naive},         {"fast_fwd", bm_fast},          {"naive_bwd", bm_naive_bwd},
          {"fast_bwd", bm_fast_bwd},       {"bounds_fwd", bm_bounds<false>}, {"bounds_bwd", bm_bounds<true>}};
      if (L <= kMpfrMaxLen) {
        rows.emplace_back("mpfr_fwd", bm_mpfr<reference_forward>);
        rows.emplace_back("mpfr_bwd", bm_mpfr<reference_backward>);
      }
      for (const auto &[row, run] : rows)
        benchmark::RegisterBenchmark(name(row, L, D).c_str(), [=](benchmark::State &st) { run(st, L, D); })
            ->MinTime(kMinTimeS)
            ->Unit(benchmark::kMillisecond);
    }
  // The judge grid: run by bench/reference_cost --torch with a filter (the whole grid takes about an hour).
  for (int threads : {1, 2})
    for (std::int64_t L : {256, 1024, 4096})
      for (std::int64_t D : {64, 128, 256})
        for (bool causal : {false, true})
          for (std::int64_t G : {1, 2})
            for (bool backward : {false, true}) {
              const std::string n = std::string(backward ? "judge_bwd" : "judge_fwd") + "/L:" + std::to_string(L) +
                                    "/D:" + std::to_string(D) + "/causal:" + std::to_string(causal) +
                                    "/G:" + std::to_string(G) + "/threads:" + std::to_string(threads);
              benchmark::RegisterBenchmark(n.c_str(),
                                           [=](benchmark::State &st) {
                                             backward ? bm_judge<true>(st, L, D, causal, G, threads)
                                                      : bm_judge<false>(st, L, D, causal, G, threads);
                                           })
                  ->MinTime(kMinTimeS)
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
            }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
