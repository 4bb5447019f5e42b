// The ABI 1.2 features of the bundled kernels (kernel_abi.h, features.h). "flash" agrees with "naive" in float32 on
// random problems with each feature it implements and with combinations, forward and backward: sliding windows
// (edges at flash's tile boundaries, with and without causal), softcap, ALiBi, attention sinks, packed varlen batches
// (empty and length-one sequences), a paged KV cache (shuffled block table, unused pages, page sizes that do not
// divide the tiles). flash runs them in float16 and bfloat16 too, and stays bitwise deterministic across thread
// counts. naive's own features: the mask tensor (checked against the window and ALiBi it can encode) and dropout (a
// mask that depends on the seed and the position only, applied alike by forward and backward). Calls a kernel does
// not implement are ATTNCHECK_UNSUPPORTED; malformed arguments ATTNCHECK_ERROR, each with a message.
#include "flash_simd.h"
#include "impl_support.h"

#include <catch2/catch.hpp>

#include <hwy/targets.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

using namespace implt;
namespace simd = attncheck::builtin::simd;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// flash and naive in float32 sum in different orders (tiles, base-2 exponentials, fused products): their results
/// stay this close, relative to max(1, |value|).
constexpr double kTolerance = 2e-4;

template <class T, std::size_t N>
T pick(std::mt19937_64 &rng, const T (&values)[N]) {
  return values[rng() % N];
}
double as_float(double x) { return static_cast<double>(static_cast<float>(x)); }

/// Window sides around flash's tiles (16-float vectors, 64-row blocks, 64/128-key steps) and −1 (unbounded).
constexpr std::int64_t kWindowSides[] = {-1, 0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};

void add_window(std::mt19937_64 &rng, Features &f) {
  do {
    f.window_left = pick(rng, kWindowSides);
    f.window_right = pick(rng, kWindowSides);
  } while (!f.window());
}
void add_softcap(std::mt19937_64 &rng, Features &f) {
  constexpr double kCaps[] = {0.75, 2.5, 10.0};
  f.softcap = pick(rng, kCaps);
}
/// The usual geometric slopes 2^(−8(h+1)/Hq), scaled by a random factor (float32 values).
void add_alibi(std::mt19937_64 &rng, Features &f, std::int64_t Hq) {
  const double factor = std::uniform_real_distribution<double>(0.25, 2.0)(rng);
  f.alibi_slopes.clear();
  for (std::int64_t h = 0; h < Hq; ++h)
    f.alibi_slopes.push_back(as_float(factor * std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(Hq))));
}
/// Sinks of N(0, 2²), now and then one that outweighs every key.
void add_sinks(std::mt19937_64 &rng, Features &f, std::int64_t Hq) {
  std::normal_distribution<double> nd(0.0, 2.0);
  f.sinks.clear();
  for (std::int64_t h = 0; h < Hq; ++h) f.sinks.push_back(as_float(rng() % 5 == 0 ? 12.0 : nd(rng)));
}
/// A length in [0, L]: empty, one, L or anything between.
std::int64_t random_length(std::mt19937_64 &rng, std::int64_t L) {
  switch (rng() % 5) {
    case 0: return 0;
    case 1: return std::min<std::int64_t>(1, L);
    case 2: return L;
    default: return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(L + 1));
  }
}
/// Packed sequences of up to Lq rows and Lk keys each (B of them).
void add_varlen(std::mt19937_64 &rng, Problem &p) {
  Features &f = p.features;
  f.storage = KvStorage::varlen;
  f.seqlens_q.clear(), f.seqlens_k.clear();
  for (std::int64_t b = 0; b < p.shape.B; ++b) {
    f.seqlens_q.push_back(random_length(rng, p.shape.Lq));
    f.seqlens_k.push_back(random_length(rng, p.shape.Lk));
  }
}
/// A paged cache of `page_size` keys per page: up to Lk keys per batch entry, pages in random order, a few unused.
void add_paged(std::mt19937_64 &rng, Problem &p, std::int64_t page_size) {
  Features &f = p.features;
  f.storage = KvStorage::paged;
  f.page_size = page_size;
  f.seqlens_k.clear();
  for (std::int64_t b = 0; b < p.shape.B; ++b) f.seqlens_k.push_back(random_length(rng, p.shape.Lk));
  f.pages_per_seq = (p.shape.Lk + page_size - 1) / page_size;
  f.num_pages = p.shape.B * f.pages_per_seq + static_cast<std::int64_t>(rng() % 4);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(f.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  f.block_table.assign(pages.begin(), pages.begin() + p.shape.B * f.pages_per_seq);
}

/// One kernel's logical results on a problem; backward ones when asked.
struct Results {
  Outputs o;
  CallResult fwd, bwd;
  Results(std::mt19937_64 &&rng, const Problem &p) : o(rng, p) {}
};
Results run_kernel(const char *name, const Problem &p, bool backward) {
  Results r(std::mt19937_64(0x5eed), p);
  r.fwd = call_forward(kernel(name), p, r.o.out, &r.o.lse);
  if (backward && r.fwd.ok()) r.bwd = call_backward(kernel(name), p, r.o.out, &r.o.lse, r.o.dq, r.o.dk, r.o.dv);
  return r;
}

/// max over the elements of |a − b| / max(1, |b|); equal values (infinities included) count 0, NaN +∞.
double max_diff(const Tensor &a, const Tensor &b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return kInf;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i]) continue;
    const double d = std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i]));
    if (std::isnan(d)) return kInf;
    worst = std::max(worst, d);
  }
  return worst;
}

std::string describe(const Problem &p) {
  return std::string(dtype_name(p.dtype())) + " " + p.shape.describe() + " mask " +
         std::string(mask_name(p.params.mask)) + " " + p.features.describe();
}

/// flash agrees with naive on p within `tol`: forward, and backward unless the cache is paged.
void require_agreement(const Problem &p, double tol = kTolerance) {
  const bool backward = p.features.storage != KvStorage::paged;
  INFO(describe(p));
  const Results n = run_kernel("naive", p, backward), f = run_kernel("flash", p, backward);
  INFO("naive: " << n.fwd.message << n.bwd.message << "; flash: " << f.fwd.message << f.bwd.message);
  REQUIRE(n.fwd.ok());
  REQUIRE(f.fwd.ok());
  CHECK(max_diff(f.o.out, n.o.out) <= tol);
  CHECK(max_diff(f.o.lse, n.o.lse) <= tol);
  if (!backward) return;
  REQUIRE(n.bwd.ok());
  REQUIRE(f.bwd.ok());
  CHECK(max_diff(f.o.dq, n.o.dq) <= tol);
  CHECK(max_diff(f.o.dk, n.o.dk) <= tol);
  CHECK(max_diff(f.o.dv, n.o.dv) <= tol);
}

/// A random shape of modest size (naive materializes Lq × Lk per head).
Shape random_shape(std::mt19937_64 &rng, std::int64_t max_batch = 2) {
  constexpr std::int64_t kLengths[] = {1, 2, 17, 63, 64, 65, 130, 200};
  constexpr std::int64_t kDims[] = {1, 8, 16, 33, 64};
  Shape s;
  s.B = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_batch));
  s.Hkv = 1 + static_cast<std::int64_t>(rng() % 2);
  s.Hq = s.Hkv * (1 + static_cast<std::int64_t>(rng() % 2));
  s.Lq = pick(rng, kLengths);
  s.Lk = pick(rng, kLengths);
  s.D = pick(rng, kDims);
  s.Dv = pick(rng, kDims);
  return s;
}
Mask random_mask(std::mt19937_64 &rng) { return rng() % 2 ? Mask::causal : Mask::none; }

/// Values of t copied into a contiguous tensor of dtype dt.
Tensor converted(const Tensor &t, Dtype dt) {
  Tensor c = Tensor::contiguous(dt, t.shape());
  const std::vector<double> v = t.to_vector();
  c.assign(v);
  return c;
}

bool same_bytes(const Tensor &a, const Tensor &b) {
  return a.bytes().size() == b.bytes().size() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}
}  // namespace

TEST_CASE("flash agrees with naive on sliding windows with edges at its tile boundaries", "[impl][features]") {
  std::mt19937_64 rng(0x717d0);
  // Every window side around the tile boundaries against a square and two rectangles (i' shifts by Lk − Lq).
  const Shape shapes[] = {{1, 2, 1, 130, 130, 16, 8}, {1, 1, 1, 70, 200, 8, 16}, {1, 2, 2, 200, 70, 8, 8}};
  for (const Shape &s : shapes)
    for (std::int64_t left : kWindowSides)
      for (std::int64_t right : {std::int64_t{-1}, std::int64_t{0}, std::int64_t{16}, std::int64_t{63},
                                 std::int64_t{64}, std::int64_t{65}}) {
        if (left < 0 && right < 0) continue;
        Problem p = make_problem(rng, Dtype::f32, s, random_mask(rng));
        p.features.window_left = left;
        p.features.window_right = right;
        require_agreement(p);
      }
}

TEST_CASE("flash agrees with naive on random windows with and without causal", "[impl][features]") {
  std::mt19937_64 rng(0x717d1);
  for (int t = 0; t < 40; ++t) {
    Problem p = make_problem(rng, Dtype::f32, random_shape(rng), t % 2 ? Mask::causal : Mask::none);
    add_window(rng, p.features);
    require_agreement(p);
  }
}

TEST_CASE("flash agrees with naive with softcap", "[impl][features]") {
  std::mt19937_64 rng(0x50f7);
  for (int t = 0; t < 24; ++t) {
    Problem p = make_problem(rng, Dtype::f32, random_shape(rng), random_mask(rng), 0.5);
    add_softcap(rng, p.features);
    require_agreement(p);
  }
}

TEST_CASE("flash agrees with naive with ALiBi", "[impl][features]") {
  std::mt19937_64 rng(0xa11b1);
  for (int t = 0; t < 24; ++t) {
    Problem p = make_problem(rng, Dtype::f32, random_shape(rng), random_mask(rng));
    add_alibi(rng, p.features, p.shape.Hq);
    require_agreement(p);
  }
}

TEST_CASE("flash agrees with naive with attention sinks and rows without keys get the sink as lse",
          "[impl][features]") {
  std::mt19937_64 rng(0x5175);
  for (int t = 0; t < 24; ++t) {
    Shape s = random_shape(rng);
    if (t % 3 == 0) s.Lq = s.Lk + 70;  // causal leaves the first 70 rows without keys
    Problem p = make_problem(rng, Dtype::f32, s, t % 3 == 0 ? Mask::causal : random_mask(rng));
    add_sinks(rng, p.features, s.Hq);
    require_agreement(p);
    for (const char *name : {"naive", "flash"}) {
      const Results r = run_kernel(name, p, true);
      REQUIRE(r.fwd.ok());
      REQUIRE(r.bwd.ok());
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t i = 0; i < s.Lq; ++i) {
            if (visible_count(p.params.mask, i, s.Lq, s.Lk) > 0) continue;
            INFO(name << " " << describe(p) << " row " << b << "," << h << "," << i);
            CHECK(r.o.lse.get({b, h, i}) == p.features.sinks[static_cast<std::size_t>(h)]);
            for (std::int64_t x = 0; x < s.Dv; ++x) CHECK(r.o.out.get({b, h, i, x}) == 0.0);
            for (std::int64_t x = 0; x < s.D; ++x) CHECK(r.o.dq.get({b, h, i, x}) == 0.0);
          }
    }
  }
}

TEST_CASE("flash agrees with naive on packed varlen batches with empty and length-one sequences",
          "[impl][features]") {
  std::mt19937_64 rng(0x7a41e);
  for (int t = 0; t < 30; ++t) {
    Problem p = make_problem(rng, Dtype::f32, random_shape(rng, 4), random_mask(rng));
    add_varlen(rng, p);
    if (t % 3 == 1) add_window(rng, p.features);
    require_agreement(p);
  }
  // Every sequence empty but one of one row and one key; and every one empty.
  Problem p = make_problem(rng, Dtype::f32, {3, 2, 1, 5, 6, 8, 8}, Mask::causal);
  p.features.storage = KvStorage::varlen;
  p.features.seqlens_q = {0, 1, 0};
  p.features.seqlens_k = {0, 1, 0};
  require_agreement(p);
  p.features.seqlens_q = {0, 0, 0};
  p.features.seqlens_k = {4, 0, 6};
  require_agreement(p);
}

TEST_CASE("flash agrees with naive on a paged KV cache with shuffled and unused pages", "[impl][features]") {
  std::mt19937_64 rng(0x9a6e);
  for (std::int64_t page_size : {1, 3, 16, 17, 64, 100}) {
    for (int t = 0; t < 8; ++t) {
      Shape s = random_shape(rng, 3);
      if (t % 2) s.Lq = 1;  // decoding
      Problem p = make_problem(rng, Dtype::f32, s, random_mask(rng));
      add_paged(rng, p, page_size);
      if (t % 4 == 3) add_window(rng, p.features);
      INFO("page size " << page_size);
      require_agreement(p);
    }
  }
}

TEST_CASE("flash agrees with naive on combinations of features", "[impl][features]") {
  std::mt19937_64 rng(0xc0b1);
  for (int t = 0; t < 60; ++t) {
    Problem p = make_problem(rng, Dtype::f32, random_shape(rng, 3), random_mask(rng), rng() % 2 ? 0.5 : 0.125);
    std::uint32_t bits = 0;
    while (__builtin_popcount(bits) < 2) bits |= 1u << (rng() % 4);
    if (bits & 1) add_window(rng, p.features);
    if (bits & 2) add_softcap(rng, p.features);
    if (bits & 4) add_alibi(rng, p.features, p.shape.Hq);
    if (bits & 8) add_sinks(rng, p.features, p.shape.Hq);
    if (t % 3 == 1) add_varlen(rng, p);
    if (t % 3 == 2) add_paged(rng, p, 1 + static_cast<std::int64_t>(rng() % 20));
    require_agreement(p);
  }
}

TEST_CASE("flash runs every feature in float16 and bfloat16 with finite results close to float32",
          "[impl][features]") {
  std::mt19937_64 rng(0xf16);
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (int t = 0; t < 16; ++t) {
      Problem p = make_problem(rng, dt, random_shape(rng, 3), random_mask(rng));
      add_window(rng, p.features);
      add_softcap(rng, p.features);
      add_alibi(rng, p.features, p.shape.Hq);
      add_sinks(rng, p.features, p.shape.Hq);
      if (t % 3 == 1) add_varlen(rng, p);
      if (t % 3 == 2) add_paged(rng, p, 1 + static_cast<std::int64_t>(rng() % 20));
      const bool backward = p.features.storage != KvStorage::paged;
      INFO(describe(p));
      const Results r = run_kernel("flash", p, backward);
      INFO(r.fwd.message << r.bwd.message);
      REQUIRE(r.fwd.ok());
      if (backward) REQUIRE(r.bwd.ok());
      const auto finite = [](const Tensor &x) {
        for (double v : x.to_vector())
          if (!std::isfinite(v)) return false;
        return true;
      };
      CHECK(finite(r.o.out));
      for (double v : r.o.lse.to_vector()) CHECK(!std::isnan(v));
      if (backward) CHECK((finite(r.o.dq) && finite(r.o.dk) && finite(r.o.dv)));
      // naive on the same (exactly widened) values in float32: within the storage's rounding of the outputs.
      Problem p32 = p;
      p32.q = converted(p.q, Dtype::f32), p32.k = converted(p.k, Dtype::f32), p32.v = converted(p.v, Dtype::f32);
      p32.dout = converted(*p.dout, Dtype::f32);
      const Results n = run_kernel("naive", p32, backward);
      REQUIRE(n.fwd.ok());
      const double tol = dt == Dtype::f16 ? 5e-3 : 3e-2;
      CHECK(max_diff(r.o.out, n.o.out) <= tol);
      CHECK(max_diff(r.o.lse, n.o.lse) <= tol);
      if (backward) {
        REQUIRE(n.bwd.ok());
        CHECK(max_diff(r.o.dq, n.o.dq) <= 4 * tol);
        CHECK(max_diff(r.o.dk, n.o.dk) <= 4 * tol);
        CHECK(max_diff(r.o.dv, n.o.dv) <= 4 * tol);
      }
    }
}

TEST_CASE("flash with features is bitwise deterministic across thread counts", "[impl][features]") {
  std::mt19937_64 rng(0xde7);
  for (int t = 0; t < 6; ++t) {
    for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
      Problem p = make_problem(rng, dt, {3, 4, 2, 150, 190, 24, 16}, random_mask(rng));
      add_window(rng, p.features);
      add_softcap(rng, p.features);
      add_alibi(rng, p.features, p.shape.Hq);
      add_sinks(rng, p.features, p.shape.Hq);
      if (t % 3 == 1) add_varlen(rng, p);
      if (t % 3 == 2) add_paged(rng, p, 1 + static_cast<std::int64_t>(rng() % 40));
      const bool backward = p.features.storage != KvStorage::paged;
      INFO(describe(p));
      attncheck_builtin_set_threads(1);
      const Results one = run_kernel("flash", p, backward);
      REQUIRE(one.fwd.ok());
      for (int threads : {2, 5, 16}) {
        attncheck_builtin_set_threads(threads);
        const Results many = run_kernel("flash", p, backward);
        INFO(threads << " threads");
        REQUIRE(many.fwd.ok());
        CHECK(same_bytes(many.o.out, one.o.out));
        CHECK(same_bytes(many.o.lse, one.o.lse));
        if (backward) {
          CHECK(same_bytes(many.o.dq, one.o.dq));
          CHECK(same_bytes(many.o.dk, one.o.dk));
          CHECK(same_bytes(many.o.dv, one.o.dv));
        }
      }
    }
  }
  attncheck_builtin_set_threads(0);
}

TEST_CASE("rows do not depend on NaN keys and values a window leaves behind them", "[impl][features]") {
  // Keys j < r' − left are hidden from every row i ≥ r; they share flash's tiles with earlier rows that see them
  // (the products skip them by the window's lower band edge). Rows ≥ r of out and lse (and flash's dq) must come
  // back bit for bit as they were.
  std::mt19937_64 rng(0x1ef7);
  for (Dtype dt : {Dtype::f32, Dtype::bf16})
    for (std::int64_t left : {0, 5, 40})
      for (std::int64_t r : {70, 100}) {
        const Shape s{1, 2, 1, 150, 170, 16, 24};
        Problem p = make_problem(rng, dt, s, rng() % 2 ? Mask::causal : Mask::none);
        p.features.window_left = left;
        Problem poisoned = p;
        const std::int64_t first_seen = r + s.Lk - s.Lq - left;
        for (Tensor *t : {&poisoned.k, &poisoned.v})
          for_each_index(t->shape(), [&](std::span<const std::int64_t> idx) {
            if (idx[2] < first_seen) t->set(idx, std::numeric_limits<double>::quiet_NaN());
          });
        for (const char *name : {"naive", "flash"}) {
          if (dt != Dtype::f32 && std::string(name) == "naive") continue;
          const bool backward = std::string(name) == "flash";
          INFO(name << " " << describe(p) << ", rows from " << r);
          const Results a = run_kernel(name, p, backward), b = run_kernel(name, poisoned, backward);
          REQUIRE(a.fwd.ok());
          REQUIRE(b.fwd.ok());
          for_each_index(a.o.out.shape(), [&](std::span<const std::int64_t> idx) {
            if (idx[2] >= r) REQUIRE(a.o.out.get(idx) == b.o.out.get(idx));
          });
          for_each_index(a.o.lse.shape(), [&](std::span<const std::int64_t> idx) {
            if (idx[2] >= r) REQUIRE(a.o.lse.get(idx) == b.o.lse.get(idx));
          });
          if (!backward) continue;
          REQUIRE(b.bwd.ok());
          for_each_index(a.o.dq.shape(), [&](std::span<const std::int64_t> idx) {
            if (idx[2] >= r) REQUIRE(a.o.dq.get(idx) == b.o.dq.get(idx));
          });
        }
      }
}

TEST_CASE("naive with a boolean mask of a window or an additive mask of ALiBi equals those features",
          "[impl][features]") {
  std::mt19937_64 rng(0x3a5c);
  for (int t = 0; t < 12; ++t) {
    const Shape s = random_shape(rng);
    const Mask m = random_mask(rng);
    const Problem base = make_problem(rng, Dtype::f32, s, m);
    // The window, and a boolean mask [1, 1, Lq, Lk] or [B, Hq, Lq, Lk] (broadcast or not) that encodes it.
    Problem window = base, boolean = base;
    add_window(rng, window.features);
    Features &f = boolean.features;
    f.mask_kind = MaskKind::boolean;
    f.mask_B = t % 2 ? s.B : 1;
    f.mask_H = t % 3 ? s.Hq : 1;
    for (std::int64_t b = 0; b < f.mask_B; ++b)
      for (std::int64_t h = 0; h < f.mask_H; ++h)
        for (std::int64_t i = 0; i < s.Lq; ++i)
          for (std::int64_t j = 0; j < s.Lk; ++j) {
            const std::int64_t a = i + s.Lk - s.Lq;
            const bool in = (window.features.window_left < 0 || j >= a - window.features.window_left) &&
                            (window.features.window_right < 0 || j <= a + window.features.window_right);
            f.mask.push_back(in ? 1 : 0);
          }
    // ALiBi, and an additive mask of its float32 terms −(slope·|i' − j|).
    Problem alibi = base, additive = base;
    add_alibi(rng, alibi.features, s.Hq);
    Features &g = additive.features;
    g.mask_kind = MaskKind::additive;
    g.mask_H = s.Hq;
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i)
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          const float slope = static_cast<float>(alibi.features.alibi_slopes[static_cast<std::size_t>(h)]);
          g.mask.push_back(-static_cast<double>(slope * static_cast<float>(std::llabs(i + s.Lk - s.Lq - j))));
        }
    for (auto [a, b] : {std::pair{&window, &boolean}, std::pair{&alibi, &additive}}) {
      INFO(describe(*a) << " vs " << describe(*b));
      const Results x = run_kernel("naive", *a, true), y = run_kernel("naive", *b, true);
      REQUIRE(x.fwd.ok());
      REQUIRE(y.fwd.ok());
      REQUIRE(x.bwd.ok());
      REQUIRE(y.bwd.ok());
      CHECK(x.o.out.to_vector() == y.o.out.to_vector());
      CHECK(x.o.lse.to_vector() == y.o.lse.to_vector());
      CHECK(x.o.dq.to_vector() == y.o.dq.to_vector());
      CHECK(x.o.dk.to_vector() == y.o.dk.to_vector());
      CHECK(x.o.dv.to_vector() == y.o.dv.to_vector());
    }
  }
}

namespace {
/// naive's forward with dropout: its results and the mask it wrote.
struct DropoutRun {
  Results r;
  std::vector<std::uint8_t> keep;
  DropoutRun(const Problem &p, bool backward) : r(std::mt19937_64(3), p) {
    r.fwd = call_forward(kernel("naive"), p, r.o.out, &r.o.lse, &keep);
    if (backward && r.fwd.ok()) {
      Problem with_mask = p;
      with_mask.features.dropout_keep = keep;
      r.bwd = call_backward(kernel("naive"), with_mask, r.o.out, &r.o.lse, r.o.dq, r.o.dk, r.o.dv);
    }
  }
};

/// Dense attention with dropout in double on a problem without other features: O = Σ_j P_ij z_ij v_j, and the
/// gradients with dP = z·dO·v, dS = P(dP − D), D_i = dO_i·O_i, dV = Σ_i P z dO.
struct DropoutReference {
  std::vector<double> out, dq, dk, dv;
  DropoutReference(const Problem &p, const std::vector<std::uint8_t> &keep) {
    const Shape &s = p.shape;
    const double kept = 1 / (1 - p.features.dropout_p);
    out.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), 0.0);
    dq.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.D), 0.0);
    dk.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.D), 0.0);
    dv.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.Dv), 0.0);
    std::vector<double> P(static_cast<std::size_t>(s.Lk)), Z(P.size());
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          const std::int64_t hk = s.kv_head(h), n = visible_count(p.params.mask, i, s.Lq, s.Lk);
          if (n == 0) continue;
          double m = -kInf, l = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            double x = 0;
            for (std::int64_t d = 0; d < s.D; ++d) x += p.q.get({b, h, i, d}) * p.k.get({b, hk, j, d});
            P[static_cast<std::size_t>(j)] = x * p.params.scale;
            m = std::max(m, P[static_cast<std::size_t>(j)]);
            Z[static_cast<std::size_t>(j)] =
                keep[static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.Lk + j)] ? kept : 0.0;
          }
          for (std::int64_t j = 0; j < n; ++j) l += P[static_cast<std::size_t>(j)] = std::exp(P[static_cast<std::size_t>(j)] - m);
          for (std::int64_t j = 0; j < n; ++j) P[static_cast<std::size_t>(j)] /= l;
          double D_i = 0;
          for (std::int64_t c = 0; c < s.Dv; ++c) {
            double o = 0;
            for (std::int64_t j = 0; j < n; ++j)
              o += P[static_cast<std::size_t>(j)] * Z[static_cast<std::size_t>(j)] * p.v.get({b, hk, j, c});
            out[static_cast<std::size_t>(out_offset(s, b, h, i, c))] = o;
            D_i += o * p.dout->get({b, h, i, c});
          }
          for (std::int64_t j = 0; j < n; ++j) {
            const double pz = P[static_cast<std::size_t>(j)] * Z[static_cast<std::size_t>(j)];
            double dP = 0;
            for (std::int64_t c = 0; c < s.Dv; ++c) {
              dP += p.dout->get({b, h, i, c}) * p.v.get({b, hk, j, c});
              dv[static_cast<std::size_t>(((b * s.Hkv + hk) * s.Lk + j) * s.Dv + c)] += pz * p.dout->get({b, h, i, c});
            }
            const double dS = P[static_cast<std::size_t>(j)] * (Z[static_cast<std::size_t>(j)] * dP - D_i);
            for (std::int64_t d = 0; d < s.D; ++d) {
              dq[static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.D + d)] +=
                  p.params.scale * dS * p.k.get({b, hk, j, d});
              dk[static_cast<std::size_t>(((b * s.Hkv + hk) * s.Lk + j) * s.D + d)] +=
                  p.params.scale * dS * p.q.get({b, h, i, d});
            }
          }
        }
  }
};

double max_diff(const std::vector<double> &x, const std::vector<double> &y) {
  if (x.size() != y.size()) return kInf;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i]));
    if (std::isnan(d)) return kInf;
    worst = std::max(worst, d);
  }
  return worst;
}
}  // namespace

TEST_CASE("naive dropout masks depend on the seed and the position only with a keep rate near one minus p",
          "[impl][features]") {
  std::mt19937_64 rng(0xd50);
  const Shape s{2, 3, 1, 70, 90, 16, 8};
  for (double p_drop : {0.1, 0.3, 0.8}) {
    INFO("p = " << p_drop);
    Problem p = make_problem(rng, Dtype::f32, s, Mask::causal);
    p.features.dropout_p = p_drop;
    p.features.dropout_seed = 0x1234;
    const DropoutRun a(p, false), b(p, false);
    REQUIRE(a.r.fwd.ok());
    REQUIRE(b.r.fwd.ok());
    // Same seed: the same mask and results; every element is written (0 or 1).
    CHECK(a.keep == b.keep);
    CHECK(same_bytes(a.r.o.out, b.r.o.out));
    CHECK(std::all_of(a.keep.begin(), a.keep.end(), [](std::uint8_t x) { return x <= 1; }));
    const double rate = static_cast<double>(std::count(a.keep.begin(), a.keep.end(), 1)) / static_cast<double>(a.keep.size());
    CHECK(std::abs(rate - (1 - p_drop)) < 0.02);
    // LSE does not depend on dropout.
    Problem plain = p;
    plain.features.dropout_p = 0;
    const Results none = run_kernel("naive", plain, false);
    CHECK(same_bytes(none.o.lse, a.r.o.lse));
    // Another seed: another mask (about 2p(1 − p) of the bits differ).
    Problem other = p;
    other.features.dropout_seed = 0x1235;
    const DropoutRun c(other, false);
    std::size_t differ = 0;
    for (std::size_t n = 0; n < a.keep.size(); ++n) differ += a.keep[n] != c.keep[n];
    CHECK(static_cast<double>(differ) > 0.5 * 2 * p_drop * (1 - p_drop) * static_cast<double>(a.keep.size()));
    // The same positions in another layout (a packed varlen batch of full sequences) and without causal: same bits.
    Problem packed = p;
    packed.features.storage = KvStorage::varlen;
    packed.params.mask = Mask::none;
    const DropoutRun d(packed, false);
    REQUIRE(d.r.fwd.ok());
    CHECK(d.keep == a.keep);
  }
}

TEST_CASE("naive dropout forward and backward apply the mask the forward wrote", "[impl][features]") {
  std::mt19937_64 rng(0xd51);
  for (int t = 0; t < 8; ++t) {
    const Shape s = random_shape(rng);
    Problem p = make_problem(rng, Dtype::f32, s, random_mask(rng));
    p.features.dropout_p = t % 2 ? 0.25 : 0.6;
    p.features.dropout_seed = rng();
    INFO(describe(p));
    const DropoutRun run(p, true);
    REQUIRE(run.r.fwd.ok());
    REQUIRE(run.r.bwd.ok());
    const DropoutReference ref(p, run.keep);
    CHECK(max_diff(run.r.o.out.to_vector(), ref.out) < 1e-4);
    CHECK(max_diff(run.r.o.dq.to_vector(), ref.dq) < 1e-4);
    CHECK(max_diff(run.r.o.dk.to_vector(), ref.dk) < 1e-4);
    CHECK(max_diff(run.r.o.dv.to_vector(), ref.dv) < 1e-4);
  }
}

namespace {
/// A small argument tensor of the ABI (int32, float32, uint8, ...), compact.
struct Arg {
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> shape;
  DLTensor dl{};
  template <class T>
  Arg(const std::vector<T> &values, DLDataType type, std::vector<std::int64_t> dims) : shape(std::move(dims)) {
    bytes.resize(std::max<std::size_t>(values.size() * sizeof(T), 1));
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), values.size() * sizeof(T));
    dl.data = bytes.data();
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = static_cast<std::int32_t>(shape.size());
    dl.dtype = type;
    dl.shape = shape.data();
  }
  Arg(const Arg &) = delete;
  Arg &operator=(const Arg &) = delete;
};
constexpr DLDataType kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1}, kI32{kDLInt, 32, 1}, kU8{kDLUInt, 8, 1};

/// A hand-made float32 call of q [B, Hq, Lq, D] and k, v [Bk, Hkv, Lk, D|Dv] (Bk: pages under PAGED) with the
/// features and arguments a test sets, for the refusals.
struct RawCall {
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
  attncheck_args args{};
  std::uint32_t features = 0;
  bool null_args = false;
  std::vector<std::unique_ptr<Arg>> held;

  RawCall(std::int64_t B, std::int64_t Hq, std::int64_t Lq, std::int64_t Bk, std::int64_t Hkv, std::int64_t Lk,
          std::int64_t D, std::int64_t Dv) {
    std::mt19937_64 rng(1);
    q = Tensor::contiguous(Dtype::f32, {B, Hq, Lq, D});
    k = Tensor::contiguous(Dtype::f32, {Bk, Hkv, Lk, D});
    v = Tensor::contiguous(Dtype::f32, {Bk, Hkv, Lk, Dv});
    dout = Tensor::contiguous(Dtype::f32, {B, Hq, Lq, Dv});
    for (Tensor *t : {&q, &k, &v, &dout}) fill_normal(rng, *t);
    out = Tensor::contiguous(Dtype::f32, {B, Hq, Lq, Dv});
    lse = Tensor::contiguous(Dtype::f32, {B, Hq, Lq});
    dq = Tensor::contiguous(Dtype::f32, q.shape());
    dk = Tensor::contiguous(Dtype::f32, k.shape());
    dv = Tensor::contiguous(Dtype::f32, v.shape());
    args.size = sizeof(attncheck_args);
    args.window_left = args.window_right = -1;
    args.descale_q = args.descale_k = args.descale_v = 1;
  }
  template <class T>
  const DLTensor *arg(const std::vector<T> &values, DLDataType type, std::vector<std::int64_t> dims) {
    held.push_back(std::make_unique<Arg>(values, type, std::move(dims)));
    return &held.back()->dl;
  }
  attncheck_params params() const { return {0.5, ATTNCHECK_MASK_NONE, features, null_args ? nullptr : &args}; }
  int forward(const char *name) {
    const attncheck_params pa = params();
    const DLTensor tq = q.dl(), tk = k.dl(), tv = v.dl();
    DLTensor to = out.dl(), tl = lse.dl();
    return kernel(name).forward(&pa, &tq, &tk, &tv, &to, &tl);
  }
  int backward(const char *name) {
    const attncheck_params pa = params();
    const DLTensor tq = q.dl(), tk = k.dl(), tv = v.dl(), to = out.dl(), tl = lse.dl(), td = dout.dl();
    DLTensor gq = dq.dl(), gk = dk.dl(), gv = dv.dl();
    return kernel(name).backward(&pa, &tq, &tk, &tv, &to, &tl, &td, &gq, &gk, &gv);
  }
  std::string message(const char *name) const { return kernel(name).last_error(); }
};
}  // namespace

TEST_CASE("features a kernel does not implement are refused with ATTNCHECK_UNSUPPORTED and a message",
          "[impl][features]") {
  struct Case {
    const char *kernel;
    std::uint32_t features;
    bool backward;
    const char *says;
  };
  const Case cases[] = {
      {"flash", ATTNCHECK_FEATURE_MASK, false, "mask"},
      {"flash", ATTNCHECK_FEATURE_MASK, true, "mask"},
      {"flash", ATTNCHECK_FEATURE_DROPOUT, false, "dropout"},
      {"flash", ATTNCHECK_FEATURE_DROPOUT | ATTNCHECK_FEATURE_WINDOW, true, "dropout"},
      {"flash", ATTNCHECK_FEATURE_PAGED, true, "paged"},
      {"naive", ATTNCHECK_FEATURE_PAGED, true, "paged"},
      {"flash", ATTNCHECK_FEATURE_FP8, false, "fp8"},
      {"naive", ATTNCHECK_FEATURE_FP8, true, "FP8 inputs have no backward"},
      {"flash", ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED, false, "PAGED"},
      {"naive", ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED, false, "PAGED"},
      {"naive", 1u << 20, false, "unknown"},
  };
  for (const Case &c : cases) {
    RawCall call(1, 2, 5, 1, 1, 7, 4, 3);
    call.features = c.features;
    INFO(c.kernel << " features " << feature_list(c.features) << (c.backward ? " backward" : " forward"));
    CHECK((c.backward ? call.backward(c.kernel) : call.forward(c.kernel)) == ATTNCHECK_UNSUPPORTED);
    CHECK_THAT(call.message(c.kernel), Catch::Contains(c.says));
  }
  // Through the call layer: flash with a mask tensor or dropout.
  std::mt19937_64 rng(0x5e1);
  Problem p = make_problem(rng, Dtype::f32, {1, 2, 1, 9, 11, 8, 8}, Mask::none);
  p.features.dropout_p = 0.5;
  const Results r = run_kernel("flash", p, false);
  CHECK(r.fwd.status == ATTNCHECK_UNSUPPORTED);
  CHECK_THAT(r.fwd.message, Catch::Contains("dropout"));
}

TEST_CASE("malformed feature arguments are refused with ATTNCHECK_ERROR and a message", "[impl][features]") {
  struct Case {
    const char *what;
    const char *says;
    bool naive_only;
    void (*setup)(RawCall &);
  };
  // q [2, 2, 5, 4], k, v [2, 1, 7, 4|3]: Hq = 2.
  const Case cases[] = {
      {"NULL args", "NULL", false, [](RawCall &c) { c.features = ATTNCHECK_FEATURE_WINDOW, c.null_args = true; }},
      {"args of size 0", "size", false, [](RawCall &c) { c.features = ATTNCHECK_FEATURE_WINDOW, c.args.size = 0; }},
      {"a window side of -2", "window", false,
       [](RawCall &c) { c.features = ATTNCHECK_FEATURE_WINDOW, c.args.window_left = -2; }},
      {"a softcap of 0", "softcap", false, [](RawCall &c) { c.features = ATTNCHECK_FEATURE_SOFTCAP; }},
      {"a NaN softcap", "softcap", false,
       [](RawCall &c) { c.features = ATTNCHECK_FEATURE_SOFTCAP, c.args.softcap = std::nanf(""); }},
      {"no ALiBi slopes", "alibi_slopes", false, [](RawCall &c) { c.features = ATTNCHECK_FEATURE_ALIBI; }},
      {"int32 ALiBi slopes", "alibi_slopes", false,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_ALIBI;
         c.args.alibi_slopes = c.arg(std::vector<std::int32_t>{1, 2}, kI32, {2});
       }},
      {"three sinks for two heads", "sinks", false,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_SINKS;
         c.args.sinks = c.arg(std::vector<float>{1, 2, 3}, kF32, {3});
       }},
      {"a mask of the wrong length", "attn_mask", true,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_MASK;
         c.args.attn_mask = c.arg(std::vector<std::uint8_t>(5 * 6, 1), kU8, {1, 1, 5, 6});
       }},
      {"a float64 mask", "attn_mask", true,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_MASK;
         c.args.attn_mask = c.arg(std::vector<double>(5 * 7, 0.0), kF64, {1, 1, 5, 7});
       }},
      {"a mask of three heads", "attn_mask", true,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_MASK;
         c.args.attn_mask = c.arg(std::vector<std::uint8_t>(3 * 5 * 7, 1), kU8, {1, 3, 5, 7});
       }},
      {"a dropout probability of 1", "dropout_p", true,
       [](RawCall &c) { c.features = ATTNCHECK_FEATURE_DROPOUT, c.args.dropout_p = 1; }},
      {"a dropout mask of the wrong shape", "dropout_mask", true,
       [](RawCall &c) {
         c.features = ATTNCHECK_FEATURE_DROPOUT, c.args.dropout_p = 0.5f;
         static std::vector<std::uint8_t> storage(2 * 2 * 5 * 6);
         static std::int64_t shape[] = {2, 2, 5, 6};
         static DLTensor t{storage.data(), {kDLCPU, 0}, 4, kU8, shape, nullptr, 0};
         c.args.dropout_mask = &t;
       }},
  };
  for (const Case &k : cases)
    for (const char *name : {"naive", "flash"}) {
      if (k.naive_only && std::string(name) == "flash") continue;
      for (bool backward : {false, true}) {
        RawCall call(2, 2, 5, 2, 1, 7, 4, 3);
        k.setup(call);
        INFO(name << (backward ? " backward" : " forward") << ": " << k.what);
        CHECK((backward ? call.backward(name) : call.forward(name)) == ATTNCHECK_ERROR);
        CHECK_THAT(call.message(name), Catch::Contains(k.says));
      }
    }
}

TEST_CASE("malformed varlen and paged arguments are refused with ATTNCHECK_ERROR and a message",
          "[impl][features]") {
  // Packed: q [1, 2, 9, 4], k, v [1, 1, 12, 4|3]; two sequences.
  const auto varlen = [](std::vector<std::int32_t> cu_q, std::vector<std::int32_t> cu_k, std::int32_t max_q,
                         const char *says) {
    for (const char *name : {"naive", "flash"}) {
      RawCall call(1, 2, 9, 1, 1, 12, 4, 3);
      call.features = ATTNCHECK_FEATURE_VARLEN;
      const std::int64_t nq = static_cast<std::int64_t>(cu_q.size()), nk = static_cast<std::int64_t>(cu_k.size());
      call.args.cu_seqlens_q = call.arg(cu_q, kI32, {nq});
      call.args.cu_seqlens_k = call.arg(cu_k, kI32, {nk});
      call.args.max_seqlen_q = max_q;
      call.args.max_seqlen_k = 12;
      INFO(name << ": expecting " << says);
      CHECK(call.forward(name) == ATTNCHECK_ERROR);
      CHECK_THAT(call.message(name), Catch::Contains(says));
      CHECK(call.backward(name) == ATTNCHECK_ERROR);
    }
  };
  varlen({0, 4, 8}, {0, 5, 12}, 9, "cu_seqlens_q");     // ends before the packed rows do
  varlen({0, 6, 4, 9}, {0, 5, 6, 12}, 9, "cu_seqlens_q");  // decreases
  varlen({1, 4, 9}, {0, 5, 12}, 9, "cu_seqlens_q");     // does not start at 0
  varlen({0, 4, 9}, {0, 12}, 9, "cu_seqlens_k");        // another number of sequences
  varlen({0, 4, 9}, {0, 5, 12}, 4, "max_seqlen_q");     // shorter than a sequence
  // The valid call is accepted.
  for (const char *name : {"naive", "flash"}) {
    RawCall call(1, 2, 9, 1, 1, 12, 4, 3);
    call.features = ATTNCHECK_FEATURE_VARLEN;
    call.args.cu_seqlens_q = call.arg(std::vector<std::int32_t>{0, 4, 9}, kI32, {3});
    call.args.cu_seqlens_k = call.arg(std::vector<std::int32_t>{0, 5, 12}, kI32, {3});
    call.args.max_seqlen_q = 5;
    call.args.max_seqlen_k = 7;
    CHECK(call.forward(name) == ATTNCHECK_OK);
    CHECK(call.backward(name) == ATTNCHECK_OK);
  }
  // Paged: q [2, 2, 3, 4], pages k, v [5, 1, 4, 4|3], two pages per sequence.
  const auto paged = [](std::int32_t page_size, std::vector<std::int32_t> table, std::vector<std::int32_t> used,
                        const char *says) {
    for (const char *name : {"naive", "flash"}) {
      RawCall call(2, 2, 3, 5, 1, 4, 4, 3);
      call.features = ATTNCHECK_FEATURE_PAGED;
      call.args.page_size = page_size;
      call.args.block_table = call.arg(table, kI32, {2, static_cast<std::int64_t>(table.size()) / 2});
      call.args.seqused_k = call.arg(used, kI32, {static_cast<std::int64_t>(used.size())});
      INFO(name << ": expecting " << says);
      CHECK(call.forward(name) == (says ? ATTNCHECK_ERROR : ATTNCHECK_OK));
      if (says) CHECK_THAT(call.message(name), Catch::Contains(says));
    }
  };
  paged(4, {3, 0, 4, 1}, {7, 5}, nullptr);            // valid
  paged(4, {3, 0, 4, 9}, {7, 0}, nullptr);            // an unused entry may hold anything
  paged(4, {3, 0, 4, 9}, {7, 5}, "block_table");      // a used page past the cache
  paged(3, {3, 0, 4, 1}, {7, 5}, "page_size");        // not the pages' size
  paged(4, {3, 0, 4, 1}, {7, 9}, "seqused_k");        // more keys than two pages hold
  paged(4, {3, 0, 4, 1}, {7, 5, 1}, "seqused_k");     // not one per batch entry
}

TEST_CASE("flash matrix products never touch the terms below their lower band edge on every SIMD target",
          "[impl][simd]") {
  // A window's left edge: C[i][j] sums the terms j + lower ≤ p ≤ j + band; A holds NaN for every p < 20, which
  // the lowest band edges below exclude. Small integers keep every sum exact on every target.
  constexpr std::int64_t kM = 5, kN = 70, kK = 90, kLd = 80, kPoisonedBelow = 20;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a(kM * kK), b(kK * kLd);
  for (std::int64_t i = 0; i < kM; ++i)
    for (std::int64_t p = 0; p < kK; ++p)
      a[static_cast<std::size_t>(i * kK + p)] = p < kPoisonedBelow ? nan : static_cast<float>((i + p) % 5 - 2);
  for (std::int64_t p = 0; p < kK; ++p)
    for (std::int64_t j = 0; j < kLd; ++j)
      b[static_cast<std::size_t>(p * kLd + j)] = static_cast<float>((3 * p + j) % 7 - 3);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (std::int64_t lower : {std::int64_t{20}, std::int64_t{33}, std::int64_t{64}})
      for (std::int64_t band : {lower, lower + 1, lower + 17, simd::kNoBand}) {
        INFO(simd::target_name() << ", lower " << lower << ", band " << band);
        std::vector<float> c(kM * kLd, 1.0f);
        simd::gemm(a.data(), kK, 1, b.data(), kLd, c.data(), kLd, kM, kN, kK, true, nullptr, band, lower);
        for (std::int64_t i = 0; i < kM; ++i)
          for (std::int64_t j = 0; j < kN; ++j) {
            float want = 1.0f;
            for (std::int64_t p = std::max<std::int64_t>(0, j + lower); p < kK && p <= j + band; ++p)
              want += a[static_cast<std::size_t>(i * kK + p)] * b[static_cast<std::size_t>(p * kLd + j)];
            const float got = c[static_cast<std::size_t>(i * kLd + j)];
            INFO("C[" << i << "][" << j << "] = " << got << ", want " << want);
            CHECK(got == want);
          }
      }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("softcap and the ALiBi distance bias of flash match their scalar definitions on every SIMD target",
          "[impl][simd]") {
  constexpr std::int64_t kRows = 7, kN = 37, kLd = 48;
  std::mt19937_64 rng(0x7a4);
  std::normal_distribution<float> nd(0.0f, 8.0f);
  std::vector<float> x(kRows * kLd);
  for (float &e : x) e = nd(rng);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO(simd::target_name());
    std::vector<float> s = x, t(x.size()), g(x.size(), 2.0f), d = x;
    simd::softcap(s.data(), kLd, kRows, kN, 1.0f / 5.0f, 5.0f, t.data());
    simd::softcap_grad(g.data(), t.data(), kLd, kRows, kN);
    simd::distance_bias(d.data(), kLd, kRows, kN, -11, 0.375f);
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t c = 0; c < kN; ++c) {
        const std::size_t at = static_cast<std::size_t>(r * kLd + c);
        const double tanh = std::tanh(static_cast<double>(x[at]) / 5.0);
        CHECK(std::abs(t[at] - tanh) <= 1e-6);
        CHECK(std::abs(s[at] - 5.0 * tanh) <= 6e-6);
        CHECK(std::abs(g[at] - 2.0 * (1 - tanh * tanh)) <= 4e-6);
        CHECK(d[at] == static_cast<float>(static_cast<double>(x[at]) - 0.375 * std::abs(-11.0 + static_cast<double>(c - r))));
      }
  }
  hwy::SetSupportedTargetsForTest(0);
}
