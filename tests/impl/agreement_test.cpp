// The bundled kernels agree with the MPFR reference within the error model, element by element, on a
// deterministic sweep of random problems: lengths around the block size (Lq ≠ Lk both ways), head dims 1 to 256
// (Dv ≠ D), GQA/MQA, batches, every layout, causal and not; forward (out, lse) and backward (dq, dk, dv).
#include "impl_support.h"

#include <catch2/catch.hpp>

#include <hwy/targets.h>

#include <set>

using namespace implt;

namespace {
constexpr std::int64_t kLengths[] = {1, 2, 3, 17, 63, 64, 65, 127, 129};
constexpr std::int64_t kHeadDims[] = {1, 3, 8, 64, 80, 128, 256};
constexpr std::int64_t kHeadCounts[] = {1, 2, 4};
constexpr std::int64_t kMaxBatch = 2;
/// Problems per kernel and dtype.
constexpr int kProblems = 80;
/// Problems per dtype for each SIMD target flash can dispatch to.
constexpr int kProblemsPerTarget = 8;
/// Cap on B·Hq·Lq·Lk·(D + Dv), the reference's work per problem (MPFR is slow: keep the sweep near a few seconds).
constexpr std::int64_t kMaxWork = 400'000;

template <class T, std::size_t N>
T pick(std::mt19937_64 &rng, const T (&values)[N]) {
  return values[rng() % N];
}

/// A shape from the sweep whose reference work is within kMaxWork.
Shape random_shape(std::mt19937_64 &rng) {
  while (true) {
    Shape s;
    s.B = 1 + static_cast<std::int64_t>(rng() % kMaxBatch);
    s.Hkv = pick(rng, kHeadCounts);
    s.Hq = s.Hkv * pick(rng, kHeadCounts);
    s.Lq = pick(rng, kLengths);
    s.Lk = pick(rng, kLengths);
    s.D = pick(rng, kHeadDims);
    s.Dv = pick(rng, kHeadDims);
    if (s.work() <= kMaxWork) return s;
  }
}

/// Runs `kernel` on `count` problems of storage `dt` and requires every error ratio ≤ 1; with `coverage`, also that
/// the sweep reached every length, head dim, GQA, causal and Dv ≠ D.
void sweep(const char *name, Dtype dt, std::uint64_t seed, int count = kProblems, bool coverage = true) {
  const attncheck_kernel &k = kernel(name);
  std::mt19937_64 rng(seed);
  std::set<std::int64_t> lq, lk, d, dv;
  int gqa = 0, causal = 0, dv_differs = 0;
  for (int t = 0; t < count; ++t) {
    const Shape s = random_shape(rng);
    const Mask mask = rng() % 2 ? Mask::causal : Mask::none;
    const Problem p = make_problem(rng, dt, s, mask, default_scale(s.D));
    Outputs o(rng, p);
    INFO(name << " " << dtype_name(dt) << " problem " << t << ": " << s.describe() << " mask " << mask_name(mask)
              << "; q " << p.q.describe() << ", k " << p.k.describe() << ", v " << p.v.describe());
    const CallResult r = run(k, p, o);
    INFO("status " << r.status << ": " << r.message);
    REQUIRE(r.ok());
    const Ratios ratio = ratios(o, Expected(p));
    INFO("max error ratios: " << ratio.describe());
    REQUIRE(ratio.max() <= 1.0);
    lq.insert(s.Lq), lk.insert(s.Lk), d.insert(s.D), dv.insert(s.Dv);
    gqa += s.Hq != s.Hkv, causal += mask == Mask::causal, dv_differs += s.Dv != s.D;
  }
  if (!coverage) return;
  // The sweep reached every value it promises.
  CHECK(lq.size() == std::size(kLengths));
  CHECK(lk.size() == std::size(kLengths));
  CHECK(d.size() == std::size(kHeadDims));
  CHECK(dv.size() == std::size(kHeadDims));
  CHECK(gqa > 0);
  CHECK(causal > 0);
  CHECK(dv_differs > 0);
}
}  // namespace

TEST_CASE("naive agrees with the reference within the error model in float32", "[impl][naive]") {
  sweep("naive", Dtype::f32, 0x6e61697665);
}

TEST_CASE("flash agrees with the reference within the error model in float32", "[impl][flash]") {
  sweep("flash", Dtype::f32, 0xf1a5'0032);
}

TEST_CASE("flash agrees with the reference within the error model in float16", "[impl][flash]") {
  sweep("flash", Dtype::f16, 0xf1a5'0016);
}

TEST_CASE("flash agrees with the reference within the error model in bfloat16", "[impl][flash]") {
  sweep("flash", Dtype::bf16, 0xf1a5'b016);
}

TEST_CASE("flash agrees with the reference on every SIMD target this CPU runs", "[impl][flash]") {
  // Highway dispatches to the best target; restricting the supported set exercises the others (down to scalar).
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    INFO("SIMD target " << hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    sweep("flash", Dtype::f32, 0x7a49'0032 + static_cast<std::uint64_t>(target), kProblemsPerTarget, false);
    sweep("flash", Dtype::f16, 0x7a49'0016 + static_cast<std::uint64_t>(target), kProblemsPerTarget, false);
    sweep("flash", Dtype::bf16, 0x7a49'b016 + static_cast<std::uint64_t>(target), kProblemsPerTarget, false);
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}
