// attncheck_production_shape: judging a production shape (issue 55) — B = 1, Hq = 32, Hkv = 8, Lq = Lk = 8192,
// D = Dv = 128, causal, bfloat16, forward and backward, every output element: the bundled flash kernel's O, LSE, dQ,
// dK and dV held against the exact values under its declared contract (gate::judge: the fast reference, the error
// model's bounds, MPFR where they cannot decide).
//
// Attention over one kv head's group (its G query heads, its keys) is a problem of its own: O and dQ of its rows,
// dK and dV of its keys depend on nothing else. The benchmark judges the shape one group at a time, so that memory
// stays that of one group (about 1/Hkv of the whole); the verdict is the worst group's, the counts are summed.
//
//   attncheck_production_shape [--L 8192] [--heads 32 8] [--dim 128] [--batch 1] [--dtype bf16|f16|f32]
//                              [--no-backward] [--threads N] [--seed S]
//
// One line per group, then the summary, whose last fields are the judgment's seconds (attncheck's own: the kernel's
// calls are timed apart) and the process's peak resident memory:
//   production L=… Hq=… Hkv=… D=… dtype=… causal backward=… verdict=… elements=… exceeding=… undecided=…
//   kernel_seconds=… seconds=… peak_mib=…
#include "attncheck/judge.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/kernel_call.h"
#include "attncheck/outcome.h"
#include "bundled_flash.h"

#include <fmt/core.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using namespace attncheck;
using Clock = std::chrono::steady_clock;

struct Args {
  std::int64_t L = 8192, Hq = 32, Hkv = 8, D = 128, B = 1;
  Dtype dtype = Dtype::bf16;
  bool backward = true;
  int threads = 0;  // 0: OpenMP's default
  std::uint64_t seed = 55;
};

[[noreturn]] void usage(const std::string &what) {
  fmt::print(stderr, "attncheck_production_shape: {}\nusage: attncheck_production_shape [--L N] [--heads HQ HKV] "
                     "[--dim D] [--batch B] [--dtype bf16|f16|f32] [--no-backward] [--threads N] [--seed S]\n",
             what);
  std::exit(2);
}

std::int64_t positive(const char *text, std::string_view flag) {
  char *end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (*end != '\0' || v <= 0) usage(fmt::format("{} takes a positive integer, not '{}'", flag, text));
  return v;
}

Args parse(int argc, char **argv) {
  Args a;
  for (int n = 1; n < argc; ++n) {
    const std::string_view f = argv[n];
    auto next = [&]() -> const char * {
      if (n + 1 >= argc) usage(fmt::format("{} needs a value", f));
      return argv[++n];
    };
    if (f == "--L") a.L = positive(next(), f);
    else if (f == "--heads") a.Hq = positive(next(), f), a.Hkv = positive(next(), f);
    else if (f == "--dim") a.D = positive(next(), f);
    else if (f == "--batch") a.B = positive(next(), f);
    else if (f == "--threads") a.threads = static_cast<int>(positive(next(), f));
    else if (f == "--seed") a.seed = static_cast<std::uint64_t>(positive(next(), f));
    else if (f == "--no-backward") a.backward = false;
    else if (f == "--dtype") {
      const std::string_view d = next();
      if (d != "bf16" && d != "f16" && d != "f32") usage("--dtype is bf16, f16 or f32");
      a.dtype = parse_dtype(d);
    } else {
      usage(fmt::format("unknown argument '{}'", f));
    }
  }
  if (a.Hq % a.Hkv != 0) usage("--heads: Hq must be a multiple of Hkv");
  return a;
}

/// A [1, H, L, X] tensor of standard normal values (torch.randn's distribution) rounded to `dt`.
Tensor normal(Dtype dt, std::int64_t H, std::int64_t L, std::int64_t X, std::mt19937_64 &rng) {
  Tensor t = Tensor::contiguous(dt, {1, H, L, X});
  std::normal_distribution<double> n;
  for (std::int64_t e = 0; e < H * L * X; ++e) t.set_storage(e, n(rng));
  return t;
}

/// The shape's verdict from its groups': fail over undecided over warn over pass.
int severity(Verdict v) {
  switch (v) {
    case Verdict::fail: return 3;
    case Verdict::undecided: return 2;
    case Verdict::warn: return 1;
    default: return 0;
  }
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char **argv) {
  const Args a = parse(argc, argv);
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const attncheck_kernel &kernel = bench::bundled_flash();
  const std::string contract = bench::bundled_flash_contract();
  const std::int64_t G = a.Hq / a.Hkv;
  double kernel_s = 0, judge_s = 0;
  std::int64_t elements = 0, exceeding = 0, undecided = 0;
  Verdict worst = Verdict::pass;
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t kv = 0; kv < a.Hkv; ++kv) {
      // One kv head's group: a problem of its own (B = 1, Hq = G, Hkv = 1), drawn from its own seed.
      std::mt19937_64 rng(a.seed + static_cast<std::uint64_t>(b * a.Hkv + kv));
      Problem p;
      p.shape = Shape{1, G, 1, a.L, a.L, a.D, a.D};
      p.params.scale = default_scale(a.D);
      p.params.mask = Mask::causal;
      p.q = normal(a.dtype, G, a.L, a.D, rng);
      p.k = normal(a.dtype, 1, a.L, a.D, rng);
      p.v = normal(a.dtype, 1, a.L, a.D, rng);
      if (a.backward) p.dout = normal(a.dtype, G, a.L, a.D, rng);
      gate::JudgeRequest rq;
      rq.given.out = make_out(p.shape, a.dtype);
      rq.given.lse = make_lse(p.shape);
      Clock::time_point t = Clock::now();
      CallResult r = call_forward(kernel, p, *rq.given.out, &*rq.given.lse);
      if (r.ok() && a.backward) {
        rq.given.dq = Tensor::contiguous(a.dtype, {1, G, a.L, a.D});
        rq.given.dk = Tensor::contiguous(a.dtype, {1, 1, a.L, a.D});
        rq.given.dv = Tensor::contiguous(a.dtype, {1, 1, a.L, a.D});
        r = call_backward(kernel, p, *rq.given.out, &*rq.given.lse, *rq.given.dq, *rq.given.dk, *rq.given.dv);
      }
      kernel_s += seconds_since(t);
      if (!r.ok()) {
        fmt::print(stderr, "attncheck_production_shape: flash failed on group {}: {}\n", kv, r.message);
        return 2;
      }
      rq.q = std::move(p.q), rq.k = std::move(p.k), rq.v = std::move(p.v), rq.dout = std::move(p.dout);
      rq.causal = true;
      rq.contract = contract;
      t = Clock::now();
      const Judgment j = gate::judge(rq);
      const double s = seconds_since(t);
      judge_s += s;
      std::int64_t e = 0, x = 0, u = 0;
      for (const TensorJudgment &tj : j.tensors) e += tj.elements, x += tj.exceeding, u += tj.undecided;
      elements += e, exceeding += x, undecided += u;
      if (severity(j.verdict()) > severity(worst)) worst = j.verdict();
      fmt::print("group b={} kv={} verdict={} elements={} exceeding={} undecided={} seconds={:.2f}\n", b, kv,
                 verdict_name(j.verdict()), e, x, u, s);
      std::fflush(stdout);
    }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  fmt::print("production L={} Hq={} Hkv={} D={} dtype={} causal backward={} threads={} verdict={} elements={} "
             "exceeding={} undecided={} kernel_seconds={:.2f} seconds={:.2f} peak_mib={:.0f}\n",
             a.L, a.Hq, a.Hkv, a.D, dtype_name(a.dtype), a.backward ? 1 : 0, omp_get_max_threads(),
             verdict_name(worst), elements, exceeding, undecided, kernel_s, judge_s,
             static_cast<double>(ru.ru_maxrss) / 1024);
  return worst == Verdict::fail ? 1 : 0;
}
