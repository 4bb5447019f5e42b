// Regressions found by the property engine in flash (naive always passed): each case is the engine's minimal
// counterexample, plus a larger one that crosses flash's tile boundaries.
#include "flash_simd.h"
#include "impl_support.h"

#include <catch2/catch.hpp>

#include <hwy/targets.h>

#include <cstring>

using namespace implt;
namespace simd = attncheck::builtin::simd;

namespace {
/// Forward then backward (on the forward's own out and lse) of flash.
Outputs run_flash(const Problem &p) {
  std::mt19937_64 rng(1);
  Outputs o(rng, p);
  REQUIRE(run(kernel("flash"), p, o).ok());
  return o;
}

bool same_bytes(const Tensor &a, const Tensor &b) {
  return a.bytes().size() == b.bytes().size() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}
}  // namespace

TEST_CASE("flash backward gives the same bits on every call with two threads, huge logits and GQA included",
          "[impl][flash]") {
  constexpr int kThreads = 2;
  constexpr int kCalls = 64;
  // The engine's minimal case: three query heads on one kv head, dout = 0; head 0 has q = k with one entry −65504
  // (a logit of 1.75e9, whose rounding makes exp(S − LSE) overflow: dQ = ∞·0 = NaN there), the others q = 0
  // (dQ = 0). With two threads, a head-0 task could leave its NaN in scratch that another head's task then read.
  Problem huge;
  huge.shape = {1, 3, 1, 1, 1, 6, 1};
  huge.params = Params{default_scale(6), Mask::none};
  huge.q = Tensor::contiguous(Dtype::f32, {1, 3, 1, 6});
  huge.k = Tensor::contiguous(Dtype::f32, {1, 1, 1, 6});
  huge.v = Tensor::contiguous(Dtype::f32, {1, 1, 1, 1});
  huge.dout = Tensor::contiguous(Dtype::f32, {1, 3, 1, 1});
  for (Tensor *t : {&huge.q, &huge.k, &huge.v, &*huge.dout}) t->fill_storage(0.0);
  huge.q.set({0, 0, 0, 2}, -65504.0);
  huge.k.set({0, 0, 0, 2}, -65504.0);
  // Eight heads, the even ones as head 0 above: more tasks, more ways to hand them to the two threads.
  Problem mixed = huge;
  mixed.shape.Hq = 8;
  mixed.q = Tensor::contiguous(Dtype::f32, {1, 8, 1, 6});
  mixed.dout = Tensor::contiguous(Dtype::f32, {1, 8, 1, 1});
  for (Tensor *t : {&mixed.q, &*mixed.dout}) t->fill_storage(0.0);
  for (std::int64_t h = 0; h < 8; h += 2) mixed.q.set({0, h, 0, 2}, -65504.0);
  std::mt19937_64 rng(37);
  const Problem problems[] = {huge, mixed, make_problem(rng, Dtype::f32, {2, 6, 2, 70, 90, 16, 8}, Mask::causal, 0.25),
                              make_problem(rng, Dtype::bf16, {1, 4, 1, 3, 5, 40, 24}, Mask::none, 0.15)};
  attncheck_builtin_set_threads(kThreads);
  for (const Problem &p : problems) {
    INFO(dtype_name(p.dtype()) << " " << p.shape.describe());
    const Outputs first = run_flash(p);
    for (int call = 0; call < kCalls; ++call) {
      INFO("call " << call);
      std::mt19937_64 layout_rng(1);  // run_flash's layouts: same bytes expected
      Outputs o(layout_rng, p);
      o.out = first.out;
      o.lse = first.lse;
      REQUIRE(call_backward(kernel("flash"), p, o.out, &o.lse, o.dq, o.dk, o.dv).ok());
      CHECK(same_bytes(o.dq, first.dq));
      CHECK(same_bytes(o.dk, first.dk));
      CHECK(same_bytes(o.dv, first.dv));
    }
  }
  attncheck_builtin_set_threads(0);
}

TEST_CASE("flash row dot products ignore infinite and NaN padding on every SIMD target", "[impl][simd]") {
  // D_i = dO_i·O_i of the backward reads rows padded to simd::kTilePadFloats whose padding is left over from other
  // tasks: a 0·∞ there made D (and dQ) NaN depending on which thread ran which task before.
  constexpr std::int64_t kLd = 2 * simd::kTilePadFloats;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO(simd::target_name());
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{5}, simd::kTilePadFloats + 3}) {
      for (float pad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()}) {
        INFO("n = " << n << ", padding " << pad);
        std::vector<float> a(kLd, pad), b(kLd, pad);
        for (std::int64_t j = 0; j < n; ++j) {
          a[static_cast<std::size_t>(j)] = 0.5f;
          b[static_cast<std::size_t>(j)] = 2.0f;
        }
        float out = -1;
        simd::row_dots(a.data(), kLd, b.data(), kLd, 1, n, &out);
        CHECK(out == static_cast<float>(n));
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}
