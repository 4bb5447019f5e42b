// Regressions found by the property engine in flash (naive always passed): each case is the engine's minimal
// counterexample, plus a larger one that crosses flash's tile boundaries.
#include "flash_simd.h"
#include "impl_support.h"

#include <catch2/catch.hpp>

#include <hwy/targets.h>

#include <array>
#include <cstring>

using namespace implt;
namespace simd = attncheck::builtin::simd;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// What the causal property puts in hidden keys and values.
constexpr std::array<double, 3> kPoisons{kNaN, kInf, -kInf};
constexpr Dtype kFlashDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};

/// Rows i ≤ r of a [B, H, L, X] (or [B, H, L]) tensor, as values.
std::vector<double> leading_rows(const Tensor &t, std::int64_t r) {
  std::vector<double> v;
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
    if (idx[2] <= r) v.push_back(t.get(idx));
  });
  return v;
}

/// a == b element by element (+0 == −0: a masked key's 0·v may flip the sign of a zero sum), all finite.
bool same_finite(const std::vector<double> &a, const std::vector<double> &b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(a[i]) || !(a[i] == b[i])) return false;
  return true;
}

/// p with k and v of every key hidden from row r (j > r + Lk − Lq, every batch and kv head) set to `poison`.
Problem with_hidden_poison(const Problem &p, std::int64_t r, double poison) {
  Problem out = p;
  const std::int64_t first_hidden = r + p.shape.Lk - p.shape.Lq + 1;
  for (Tensor *t : {&out.k, &out.v})
    for_each_index(t->shape(), [&](std::span<const std::int64_t> idx) {
      if (idx[2] >= first_hidden) t->set(idx, poison);
    });
  return out;
}

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

TEST_CASE("flash rows do not depend on NaN or infinite keys and values that the causal mask hides from them",
          "[impl][flash]") {
  for (Dtype dt : kFlashDtypes) {
    // The engine's minimal case: all zeros, k[1] and v[1] poisoned, row 0 must stay O = 0, LSE = log 1.
    Problem tiny;
    tiny.shape = {1, 1, 1, 2, 2, 1, 1};
    tiny.params = Params{1.0, Mask::causal};
    tiny.q = Tensor::contiguous(dt, {1, 1, 2, 1});
    tiny.k = Tensor::contiguous(dt, {1, 1, 2, 1});
    tiny.v = Tensor::contiguous(dt, {1, 1, 2, 1});
    tiny.dout = Tensor::contiguous(dt, {1, 1, 2, 1});
    for (Tensor *t : {&tiny.q, &tiny.k, &tiny.v, &*tiny.dout}) t->fill_storage(0.0);
    std::mt19937_64 rng(31);
    // Diagonal tiles of several shapes: Lq = Lk across a 64-row block and a 128-key step, Lk > Lq, Lq > Lk, GQA.
    const Problem problems[] = {tiny,
                                make_problem(rng, dt, {1, 2, 1, 130, 130, 16, 8}, Mask::causal, 0.25),
                                make_problem(rng, dt, {1, 2, 2, 70, 200, 24, 40}, Mask::causal, 0.2),
                                make_problem(rng, dt, {2, 3, 1, 150, 90, 8, 3}, Mask::causal, 0.35)};
    for (const Problem &p : problems) {
      const Outputs clean = run_flash(p);
      const std::int64_t Lq = p.shape.Lq, Lk = p.shape.Lk;
      // Rows with a nonempty hidden set, including the first and last of a 64-row block.
      for (std::int64_t r : {std::int64_t{0}, Lq / 2, std::int64_t{63}, std::int64_t{64}, Lq - 2}) {
        if (r < 0 || r > Lq - 2 || r + Lk - Lq + 1 < 0) continue;
        for (double poison : kPoisons) {
          INFO(dtype_name(dt) << " " << p.shape.describe() << ", keys hidden from row " << r << " set to " << poison);
          const Outputs got = run_flash(with_hidden_poison(p, r, poison));
          CHECK(same_finite(leading_rows(got.out, r), leading_rows(clean.out, r)));
          CHECK(leading_rows(got.lse, r) == leading_rows(clean.lse, r));
          CHECK(same_finite(leading_rows(got.dq, r), leading_rows(clean.dq, r)));
        }
      }
    }
  }
}

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

TEST_CASE("flash matrix products never touch the terms outside their causal band on every SIMD target",
          "[impl][simd]") {
  // The causal fix: P·V and dS·K on a diagonal tile skip the keys each query column cannot see (A holds the
  // hidden key's ∞ or NaN there; B its zero P or dS). Small integers keep every sum exact on every target.
  // 5 rows: a 4-row block and a tail; 70 columns: panels of every width, the last one into the padding.
  constexpr std::int64_t kM = 5, kN = 70, kK = 40, kLd = 80;
  constexpr std::int64_t kPoisonedFrom = 23;  // A(i, p) = NaN for p ≥ kPoisonedFrom
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a(kM * kK), b(kK * kLd);
  for (std::int64_t i = 0; i < kM; ++i)
    for (std::int64_t p = 0; p < kK; ++p)
      a[static_cast<std::size_t>(i * kK + p)] = p >= kPoisonedFrom ? nan : static_cast<float>((i + p) % 5 - 2);
  for (std::int64_t p = 0; p < kK; ++p)
    for (std::int64_t j = 0; j < kLd; ++j)
      b[static_cast<std::size_t>(p * kLd + j)] = static_cast<float>((3 * p + j) % 7 - 3);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (std::int64_t band : {std::int64_t{-50}, std::int64_t{-3}, std::int64_t{0}, std::int64_t{17},
                              simd::kNoBand}) {
      INFO(simd::target_name() << ", band " << band);
      std::vector<float> c(kM * kLd, 1.0f);
      simd::gemm(a.data(), kK, 1, b.data(), kLd, c.data(), kLd, kM, kN, kK, true, nullptr, band);
      for (std::int64_t i = 0; i < kM; ++i)
        for (std::int64_t j = 0; j < kN; ++j) {
          float want = 1.0f;
          for (std::int64_t p = 0; p < kK && p <= j + band; ++p)
            want += a[static_cast<std::size_t>(i * kK + p)] * b[static_cast<std::size_t>(p * kLd + j)];
          const float got = c[static_cast<std::size_t>(i * kLd + j)];
          INFO("C[" << i << "][" << j << "] = " << got << ", want " << want);
          CHECK((std::isnan(want) ? std::isnan(got) : got == want));
        }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}
