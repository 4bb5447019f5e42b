// attncheck_bench: the bundled kernels (flash f32/f16/bf16 forward and backward, naive f32) called through the
// ABI, an Eigen baseline and this machine's FMA peak, on the same thread count, in one Google Benchmark run.
// Every row reports FLOPS (a rate) and peak_extra_MB (heap high-water mark during the calls above what was live
// before them, measured by heap_tracker.c). See bench/README.md.
#include "eigen_baseline.h"
#include "fma_peak.h"
#include "heap_tracker.h"

#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace attncheck::bench {
namespace {

// ---- shapes ----
constexpr std::int64_t kBatch = 1;
constexpr std::int64_t kHeads = 8;  // B·H = 8
constexpr std::array<std::int64_t, 3> kSeqLens{512, 2048, 8192};
constexpr std::array<std::int64_t, 2> kHeadDims{64, 128};
constexpr std::array<Mask, 2> kMasks{Mask::none, Mask::causal};
// Memory row: flash f32 forward at a length where materialized scores (B·H·L²·4 B = 8.6 GB) could not fit.
constexpr std::int64_t kMemSeqLen = 16384;

// ---- limits ----
// The naive kernel is a scalar O(L²·D) reference: at L = 8192 one call is up to 275 GFLOP, minutes per row.
constexpr std::int64_t kNaiveMaxSeqLen = 2048;
// Rows whose materialized scores would exceed this are skipped (the Eigen baseline).
constexpr std::int64_t kMaxScoreBytes = std::int64_t{2} << 30;

// ---- run length ----
constexpr double kMinTimeS = 0.2;          // per row; slow rows run one iteration
constexpr std::int64_t kFmaTrips = 1 << 22;  // ≈ 10 ms per thread per call at 4 GHz
// The peak is a best case: the FMA rows repeat and report the max, so one descheduled run does not lower it.
constexpr int kFmaRepetitions = 5;
// The kernel rows (flash, Eigen, naive at L ≤ 2048) get the same treatment, fewer times: on a shared machine a
// neighbour's burst lowers one repetition, not the row (every row is treated alike, so ratios stay fair).
constexpr int kRowRepetitions = 5;
constexpr double kBackwardFlopFactor = 2.5;  // 5 GEMMs of Lq·Lk·D against the forward's 2
constexpr double kBytesPerMB = 1e6;
constexpr std::uint64_t kSeed = 0x5eed;

// ---- threads ----
int thread_count() {
  static const int n = [] {
    if (const char *env = std::getenv("ATTNCHECK_THREADS")) {
      const int v = std::atoi(env);
      if (v > 0) return v;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

// ---- the bundled kernels, loaded like a third-party plugin ----
// dlopen rather than linking: the kernels are measured exactly as the CLI loads any plugin, and the thread setter
// is an optional symbol. ATTNCHECK_BUILTIN_PATH is the built libattncheck_builtin.so.
struct Builtin {
  const attncheck_kernel *naive = nullptr;
  const attncheck_kernel *flash = nullptr;
  std::string status;  // why a kernel is missing, or what was loaded
};

const Builtin &builtin() {
  static const Builtin b = [] {
    Builtin r;
    void *lib = dlopen(ATTNCHECK_BUILTIN_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      r.status = std::string("dlopen failed: ") + dlerror();
      return r;
    }
    auto kernels = reinterpret_cast<attncheck_kernels_fn>(dlsym(lib, ATTNCHECK_KERNELS_SYMBOL));
    if (!kernels) {
      r.status = "libattncheck_builtin exports no attncheck_kernels (not built yet?)";
      return r;
    }
    std::int32_t count = 0;
    const attncheck_kernel *list = kernels(&count);
    for (std::int32_t i = 0; list && i < count; ++i) {
      if (list[i].abi_version != ATTNCHECK_ABI_VERSION || !list[i].name) continue;
      if (std::strcmp(list[i].name, "naive") == 0) r.naive = &list[i];
      if (std::strcmp(list[i].name, "flash") == 0) r.flash = &list[i];
    }
    // attncheck_builtin_set_threads (attncheck/builtin.h), looked up so that a library without it still runs.
    using SetThreads = void (*)(int);
    auto set = reinterpret_cast<SetThreads>(dlsym(lib, "attncheck_builtin_set_threads"));
    if (set) set(thread_count());
    r.status = std::string("naive ") + (r.naive ? "yes" : "no") + ", flash " + (r.flash ? "yes" : "no") +
               ", set_threads " + (set ? "yes" : "no");
    return r;
  }();
  return b;
}

// ---- inputs ----
std::uint64_t splitmix64(std::uint64_t &s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform values in [-1, 1) written straight into the (contiguous) storage: Tensor::set goes through double
// per element, too slow for 16M-element inputs.
void fill_uniform(Tensor &t, std::uint64_t seed) {
  constexpr double kTwoPow53 = 9007199254740992.0;
  std::byte *dst = t.bytes().data();
  const std::int64_t n = t.storage_elems();
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(2.0 * static_cast<double>(splitmix64(seed) >> 11) / kTwoPow53 - 1.0);
    switch (t.dtype()) {
      case Dtype::f32: std::memcpy(dst + 4 * i, &x, 4); break;
      case Dtype::f16: {
        const std::uint16_t h = float_to_f16_bits(x);
        std::memcpy(dst + 2 * i, &h, 2);
        break;
      }
      case Dtype::bf16: {
        const std::uint16_t h = float_to_bf16_bits(x);
        std::memcpy(dst + 2 * i, &h, 2);
        break;
      }
    }
  }
}

Problem make_problem(Dtype dt, std::int64_t heads, std::int64_t L, std::int64_t D, Mask mask, bool backward) {
  Problem p;
  p.shape = Shape{kBatch, heads, heads, L, L, D, D};
  p.params = Params{default_scale(D), mask};
  const std::vector<std::int64_t> dims{kBatch, heads, L, D};
  p.q = Tensor::contiguous(dt, dims);
  p.k = Tensor::contiguous(dt, dims);
  p.v = Tensor::contiguous(dt, dims);
  fill_uniform(p.q, kSeed);
  fill_uniform(p.k, kSeed + 1);
  fill_uniform(p.v, kSeed + 2);
  if (backward) {
    p.dout = Tensor::contiguous(dt, dims);
    fill_uniform(*p.dout, kSeed + 3);
  }
  return p;
}

// ---- accounting ----
// 2 GEMMs of 2·Lq·Lk·D each per head; causal does half the work.
double forward_flops(std::int64_t heads, std::int64_t L, std::int64_t D, Mask mask) {
  const double full = 4.0 * static_cast<double>(kBatch * heads) * static_cast<double>(L) * static_cast<double>(L) *
                      static_cast<double>(D);
  return mask == Mask::causal ? full / 2 : full;
}

// Peak extra heap of the calls made while it lives: high-water mark above the bytes live at construction.
class HeapWatch {
 public:
  HeapWatch() : base_(attncheck_heap_live_bytes()) { attncheck_heap_reset_peak(); }
  double peak_extra_mb() const {
    return static_cast<double>(std::max<std::int64_t>(0, attncheck_heap_peak_bytes() - base_)) / kBytesPerMB;
  }

 private:
  std::int64_t base_;
};

void report(benchmark::State &st, double flops_per_call, const HeapWatch &heap, const std::string &label) {
  st.counters["FLOPS"] =
      benchmark::Counter(flops_per_call * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["peak_extra_MB"] = heap.peak_extra_mb();
  st.SetLabel(label);
}

std::string shape_label(std::int64_t heads) {
  return "B=" + std::to_string(kBatch) + " H=" + std::to_string(heads) + " threads=" + std::to_string(thread_count());
}

std::string failure(const char *what, const CallResult &r) {
  return std::string(what) + " returned " + std::to_string(r.status) + (r.message.empty() ? "" : ": " + r.message);
}

// ---- rows ----
enum class Which { naive, flash };

const attncheck_kernel *kernel_or_skip(benchmark::State &st, Which which) {
  const attncheck_kernel *k = which == Which::naive ? builtin().naive : builtin().flash;
  if (!k) st.SkipWithError(("kernel missing: " + builtin().status).c_str());
  return k;
}

void bm_forward(benchmark::State &st, Which which, Dtype dt, std::int64_t heads, std::int64_t L, std::int64_t D,
                Mask mask) {
  const attncheck_kernel *k = kernel_or_skip(st, which);
  if (!k) return;
  const Problem p = make_problem(dt, heads, L, D, mask, false);
  Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
  const HeapWatch heap;
  for (auto _ : st) {
    const CallResult r = call_forward(*k, p, out, &lse);
    if (!r.ok()) {
      st.SkipWithError(failure("forward", r).c_str());
      break;
    }
  }
  report(st, forward_flops(heads, L, D, mask), heap, shape_label(heads));
}

void bm_backward(benchmark::State &st, Which which, Dtype dt, std::int64_t L, std::int64_t D, Mask mask) {
  const attncheck_kernel *k = kernel_or_skip(st, which);
  if (!k) return;
  const Problem p = make_problem(dt, kHeads, L, D, mask, true);
  Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
  if (const CallResult r = call_forward(*k, p, out, &lse); !r.ok()) {  // backward consumes forward's out, lse
    st.SkipWithError(failure("forward (setup)", r).c_str());
    return;
  }
  Tensor dq = Tensor::contiguous(dt, p.q.shape()), dk = Tensor::contiguous(dt, p.k.shape()),
         dv = Tensor::contiguous(dt, p.v.shape());
  const HeapWatch heap;
  for (auto _ : st) {
    const CallResult r = call_backward(*k, p, out, &lse, dq, dk, dv);
    if (!r.ok()) {
      st.SkipWithError(failure("backward", r).c_str());
      break;
    }
  }
  report(st, kBackwardFlopFactor * forward_flops(kHeads, L, D, mask), heap, shape_label(kHeads));
}

void bm_eigen(benchmark::State &st, std::int64_t L, std::int64_t D, Mask mask) {
  const std::int64_t score_bytes = eigen_attention_score_bytes(kHeads, L, L, thread_count());
  if (score_bytes > kMaxScoreBytes) {
    st.SkipWithError(("skipped: scores need " + std::to_string(score_bytes >> 20) + " MiB").c_str());
    return;
  }
  const Problem p = make_problem(Dtype::f32, kHeads, L, D, mask, false);
  Tensor out = make_out(p.shape, Dtype::f32);
  const auto *q = reinterpret_cast<const float *>(p.q.bytes().data());
  const auto *k = reinterpret_cast<const float *>(p.k.bytes().data());
  const auto *v = reinterpret_cast<const float *>(p.v.bytes().data());
  auto *o = reinterpret_cast<float *>(out.bytes().data());
  const HeapWatch heap;
  for (auto _ : st) {
    eigen_attention(q, k, v, o, kBatch * kHeads, L, L, D, static_cast<float>(p.params.scale), mask == Mask::causal,
                    thread_count());
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  report(st, forward_flops(kHeads, L, D, mask), heap, shape_label(kHeads) + " scores materialized");
}

void bm_naive_skipped(benchmark::State &st, double flops) {
  st.SkipWithError(("skipped: naive is a scalar reference, " + std::to_string(std::lround(flops / 1e9)) +
                    " GFLOP per call would take minutes")
                       .c_str());
}

void bm_fma_peak(benchmark::State &st, const FmaIsa &isa) {
  if (!isa.supported()) {
    st.SkipWithError(("this CPU lacks " + std::string(isa.name)).c_str());
    return;
  }
  const int threads = thread_count();
  const HeapWatch heap;
  for (auto _ : st) {
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += isa.run(kFmaTrips);
    benchmark::DoNotOptimize(sink);
  }
  report(st, fma_flops(isa, kFmaTrips) * threads, heap,
         std::string(isa.name) + " " + std::to_string(isa.lanes) + "-wide x" + std::to_string(isa.accumulators) +
             " chains threads=" + std::to_string(threads));
}

// ---- registration ----
std::string mask_tag(Mask m) { return m == Mask::causal ? "causal" : "full"; }

std::string row_name(const std::string &row, std::int64_t L, std::int64_t D, Mask m) {
  return row + "/L:" + std::to_string(L) + "/D:" + std::to_string(D) + "/" + mask_tag(m);
}

template <class F>
benchmark::internal::Benchmark *add(const std::string &name, F &&f) {
  // Real time: the work runs on an OpenMP team, the main thread's CPU time would understate it.
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(f))
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

/// Repeats a row and reports only its aggregates, among them "max": the best repetition for FLOPS (and the worst
/// for time and peak_extra_MB — the table reads FLOPS and peak_extra_MB from it).
benchmark::internal::Benchmark *best_of(benchmark::internal::Benchmark *b, int repetitions) {
  return b->Repetitions(repetitions)
      ->ComputeStatistics("max", [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); })
      ->ReportAggregatesOnly(true);
}

void register_all() {
  for (const FmaIsa &isa : fma_isas())
    best_of(add("fma_peak/" + std::string(isa.name), [&isa](benchmark::State &st) { bm_fma_peak(st, isa); })
                ->MinTime(kMinTimeS),
            kFmaRepetitions);

  constexpr std::array<Dtype, 3> kDtypes{Dtype::f32, Dtype::f16, Dtype::bf16};
  for (std::int64_t L : kSeqLens)
    for (std::int64_t D : kHeadDims)
      for (Mask m : kMasks) {
        for (Dtype dt : kDtypes)
          best_of(add(row_name("flash_" + std::string(dtype_name(dt)) + "_fwd", L, D, m),
                      [=](benchmark::State &st) { bm_forward(st, Which::flash, dt, kHeads, L, D, m); })
                      ->MinTime(kMinTimeS),
                  kRowRepetitions);
        best_of(add(row_name("eigen_f32_fwd", L, D, m), [=](benchmark::State &st) { bm_eigen(st, L, D, m); })
                    ->MinTime(kMinTimeS),
                kRowRepetitions);
        if (L <= kNaiveMaxSeqLen)  // seconds per call: once
          add(row_name("naive_f32_fwd", L, D, m),
              [=](benchmark::State &st) { bm_forward(st, Which::naive, Dtype::f32, kHeads, L, D, m); })
              ->MinTime(kMinTimeS);
        else
          add(row_name("naive_f32_fwd", L, D, m),
              [=](benchmark::State &st) { bm_naive_skipped(st, forward_flops(kHeads, L, D, m)); });
        for (Dtype dt : kDtypes)
          best_of(add(row_name("flash_" + std::string(dtype_name(dt)) + "_bwd", L, D, m),
                      [=](benchmark::State &st) { bm_backward(st, Which::flash, dt, L, D, m); })
                      ->MinTime(kMinTimeS),
                  kRowRepetitions);
      }

  // One call is enough for a high-water mark (and takes seconds).
  for (std::int64_t D : kHeadDims)
    add(row_name("flash_f32_fwd_mem", kMemSeqLen, D, Mask::none),
        [=](benchmark::State &st) { bm_forward(st, Which::flash, Dtype::f32, kHeads, kMemSeqLen, D, Mask::none); })
        ->Iterations(1);
}

}  // namespace
}  // namespace attncheck::bench

int main(int argc, char **argv) {
  using namespace attncheck::bench;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  omp_set_num_threads(thread_count());  // the naive kernel and anything else on OpenMP's default team
  benchmark::AddCustomContext("attncheck_threads", std::to_string(thread_count()));
  benchmark::AddCustomContext("attncheck_heads", std::to_string(kBatch * kHeads));
  benchmark::AddCustomContext("attncheck_builtin", builtin().status);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
