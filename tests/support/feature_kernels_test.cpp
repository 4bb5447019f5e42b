#include "feature_kernels.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "attncheck/contract.h"
#include "attncheck/features.h"
#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

using namespace attncheck;
using namespace attncheck::support;

namespace {

constexpr std::uint32_t kSeed = 0xfea7;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// The correct kernel (float32 arithmetic, float32 storage) agrees with the double computation to this, relative to
/// the largest reference magnitude of each result (at least 1).
constexpr double kTol = 1e-5;
/// A bug is visible when some result moves by more than this (relative as above), or becomes NaN.
constexpr double kVisible = 1e-3;
constexpr int kRandomProblems = 3;  ///< random problems per feature setting
constexpr std::int64_t kPad = 3;    ///< padding of the strided layouts
constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};

const Shape kShape{2, 4, 2, 7, 11, 8, 6};  ///< B, Hq, Hkv, Lq, Lk, D, Dv: GQA, Lq < Lk

// ---- problems ----------------------------------------------------------------------------------------------------

/// A rank-4 tensor in a random layout, NaN storage, elements uniform in [−amplitude, amplitude] (rounded to dt).
Tensor random_tensor(std::mt19937 &gen, Dtype dt, std::vector<std::int64_t> shape, double amplitude) {
  Tensor t = Tensor::with_layout(dt, std::move(shape), kLayouts[gen() % std::size(kLayouts)], kPad);
  t.fill_storage(kNaN);
  std::uniform_real_distribution<double> u(-amplitude, amplitude);
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, u(gen)); });
  return t;
}

/// q, k uniform in [−1.5, 1.5], v and dout in [−1, 1], default scale, no features.
Problem make_problem(const Shape &s, Mask mask, std::uint32_t seed, Dtype dt = Dtype::f32) {
  constexpr double kQkAmplitude = 1.5;
  std::mt19937 gen(seed);
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), mask};
  p.q = random_tensor(gen, dt, {s.B, s.Hq, s.Lq, s.D}, kQkAmplitude);
  p.k = random_tensor(gen, dt, {s.B, s.Hkv, s.Lk, s.D}, kQkAmplitude);
  p.v = random_tensor(gen, dt, {s.B, s.Hkv, s.Lk, s.Dv}, 1);
  p.dout = random_tensor(gen, dt, {s.B, s.Hq, s.Lq, s.Dv}, 1);
  return p;
}

/// Slopes 2^-1, 2^-2, … (not palindromic: the reversed-slopes bug shows).
std::vector<double> slopes(std::int64_t Hq) {
  std::vector<double> out;
  for (std::int64_t h = 0; h < Hq; ++h) out.push_back(std::ldexp(1.0, -static_cast<int>(h) - 1));
  return out;
}

/// Sinks per head in [−1, 2] (float32 values).
std::vector<double> sinks(std::mt19937 &gen, std::int64_t Hq) {
  std::uniform_real_distribution<double> u(-1, 2);
  std::vector<double> out;
  for (std::int64_t h = 0; h < Hq; ++h) out.push_back(static_cast<float>(u(gen)));
  return out;
}

/// A mask tensor [mask_B, mask_H, Lq, Lk]: boolean (70 % visible) or additive (float32 N(0, 1), 20 % −∞).
void set_mask(Features &f, std::mt19937 &gen, const Shape &s, MaskKind kind, std::int64_t mask_B, std::int64_t mask_H) {
  f.mask_kind = kind;
  f.mask_B = mask_B;
  f.mask_H = mask_H;
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> nd(0, 1);
  f.mask.resize(static_cast<std::size_t>(mask_B * mask_H * s.Lq * s.Lk));
  for (double &m : f.mask) {
    if (kind == MaskKind::boolean)
      m = u(gen) < 0.7 ? 1 : 0;
    else
      m = u(gen) < 0.2 ? -kInf : static_cast<float>(nd(gen));
  }
}

/// Packed varlen storage with per-sequence lengths (each ≤ Lq, Lk).
void set_varlen(Features &f, std::mt19937 &gen, std::vector<std::int64_t> seqlens_q,
                std::vector<std::int64_t> seqlens_k) {
  f.storage = KvStorage::varlen;
  f.seqlens_q = std::move(seqlens_q);
  f.seqlens_k = std::move(seqlens_k);
  f.packed_layout = gen() % 2 ? Layout::blhd : Layout::bhld;
}

/// A paged cache: B entries of `used` keys, pages of `page_size`, the pages in a random order among `spare` unused.
void set_paged(Features &f, std::mt19937 &gen, const Shape &s, std::int64_t page_size, std::vector<std::int64_t> used,
               std::int64_t spare) {
  f.storage = KvStorage::paged;
  f.page_size = page_size;
  f.pages_per_seq = (s.Lk + page_size - 1) / page_size;
  f.num_pages = s.B * f.pages_per_seq + spare;
  std::vector<std::int32_t> pages(static_cast<std::size_t>(f.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), gen);
  f.block_table.assign(pages.begin(), pages.begin() + s.B * f.pages_per_seq);
  f.seqlens_k = std::move(used);
  f.packed_layout = gen() % 2 ? Layout::blhd : Layout::bhld;
}

/// Every feature but paged: window, softcap, ALiBi, sinks, an additive mask, varlen and dropout.
Features everything(std::mt19937 &gen, const Shape &s) {
  Features f;
  f.window_left = 5;
  f.window_right = 2;
  f.softcap = 1.25;
  f.alibi_slopes = slopes(s.Hq);
  f.sinks = sinks(gen, s.Hq);
  set_mask(f, gen, s, MaskKind::additive, 1, s.Hq);
  std::vector<std::int64_t> seqlens_q, seqlens_k;  // alternately full rows and keys less 2, rows less 3 and full keys
  for (std::int64_t b = 0; b < s.B; ++b) {
    seqlens_q.push_back(b % 2 ? s.Lq - 3 : s.Lq);
    seqlens_k.push_back(b % 2 ? s.Lk : s.Lk - 2);
  }
  set_varlen(f, gen, seqlens_q, seqlens_k);
  f.dropout_p = 0.25;
  f.dropout_seed = gen();
  return f;
}

// ---- the direct double computation -------------------------------------------------------------------------------

struct Results {
  std::vector<double> out, lse, dq, dk, dv;  // logical, contiguous, row-major
};

/// O, LSE and (with dout) dQ, dK, dV of the feature semantics in double, on the logical tensors: rows a sequence does
/// not have get O = 0, LSE = −∞; dropout uses p.features.dropout_keep (the mask forward returned).
Results reference(const Problem &p) {
  const Shape &s = p.shape;
  const Features &f = p.features;
  const double scale = p.params.scale, c = f.softcap;
  const double drop_scale = 1 / (1 - static_cast<double>(static_cast<float>(f.dropout_p)));
  Results r;
  r.out.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq), -kInf);
  r.dq.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.D), 0.0);
  r.dk.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.D), 0.0);
  r.dv.assign(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * s.Dv), 0.0);
  struct Key {
    std::int64_t j;
    double s, chain, z;
  };
  std::vector<Key> keys;
  for (std::int64_t b = 0; b < s.B; ++b) {
    const std::int64_t Lq_b = f.seqlens_q.empty() ? s.Lq : f.seqlens_q[static_cast<std::size_t>(b)];
    const std::int64_t Lk_b = f.seqlens_k.empty() ? s.Lk : f.seqlens_k[static_cast<std::size_t>(b)];
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t hk = s.kv_head(h);
      for (std::int64_t i = 0; i < Lq_b; ++i) {
        const std::int64_t ip = i + Lk_b - Lq_b;
        keys.clear();
        for (std::int64_t j = 0; j < Lk_b; ++j) {
          if (is_causal(p.params.mask) && j > ip) continue;
          if (f.window_left >= 0 && j < ip - f.window_left) continue;
          if (f.window_right >= 0 && j > ip + f.window_right) continue;
          double additive = 0;
          if (f.mask_kind != MaskKind::none) {
            const std::int64_t mb = f.mask_B == 1 ? 0 : b, mh = f.mask_H == 1 ? 0 : h;
            const double m = f.mask[static_cast<std::size_t>(((mb * f.mask_H + mh) * s.Lq + i) * s.Lk + j)];
            if (f.mask_kind == MaskKind::boolean && m == 0) continue;
            if (f.mask_kind == MaskKind::additive) {
              if (m == -kInf) continue;
              additive = m;
            }
          }
          double t = 0;
          for (std::int64_t x = 0; x < s.D; ++x) t += p.q.get({b, h, i, x}) * p.k.get({b, hk, j, x});
          t *= scale;
          double logit = t, chain = 1;
          if (c > 0) {
            logit = c * std::tanh(t / c);
            chain = 1 - (logit / c) * (logit / c);
          }
          if (!f.alibi_slopes.empty())
            logit -= f.alibi_slopes[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(ip - j));
          logit += additive;
          double z = 1;
          if (f.dropout_p > 0)
            z = f.dropout_keep.at(static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.Lk + j)) ? drop_scale : 0;
          keys.push_back({j, logit, chain, z});
        }
        const double sink = f.sinks.empty() ? -kInf : f.sinks[static_cast<std::size_t>(h)];
        const std::size_t row = static_cast<std::size_t>((b * s.Hq + h) * s.Lq + i);
        if (keys.empty()) {
          r.lse[row] = sink;
          continue;
        }
        double m = sink;
        for (const Key &k : keys) m = std::max(m, k.s);
        double l = std::exp(sink - m);
        for (const Key &k : keys) l += std::exp(k.s - m);
        const double lse = m + std::log(l);
        r.lse[row] = lse;
        double Di = 0;
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          double o = 0;
          for (const Key &k : keys) o += std::exp(k.s - lse) * k.z * p.v.get({b, hk, k.j, x});
          r.out[row * static_cast<std::size_t>(s.Dv) + static_cast<std::size_t>(x)] = o;
          if (p.dout) Di += p.dout->get({b, h, i, x}) * o;
        }
        if (!p.dout) continue;
        for (const Key &k : keys) {
          const double P = std::exp(k.s - lse);
          double dP = 0;
          for (std::int64_t x = 0; x < s.Dv; ++x) dP += p.dout->get({b, h, i, x}) * p.v.get({b, hk, k.j, x});
          const double dS = P * (k.z * dP - Di) * k.chain;
          const std::size_t key = static_cast<std::size_t>((b * s.Hkv + hk) * s.Lk + k.j);
          for (std::int64_t x = 0; x < s.D; ++x) {
            r.dq[row * static_cast<std::size_t>(s.D) + static_cast<std::size_t>(x)] +=
                scale * dS * p.k.get({b, hk, k.j, x});
            r.dk[key * static_cast<std::size_t>(s.D) + static_cast<std::size_t>(x)] +=
                scale * dS * p.q.get({b, h, i, x});
          }
          for (std::int64_t x = 0; x < s.Dv; ++x)
            r.dv[key * static_cast<std::size_t>(s.Dv) + static_cast<std::size_t>(x)] +=
                P * k.z * p.dout->get({b, h, i, x});
        }
      }
    }
  }
  return r;
}

// ---- running a kernel and comparing --------------------------------------------------------------------------------

struct Run {
  CallResult fwd, bwd;
  Results got;
  std::vector<std::uint8_t> keep;  ///< the dropout mask forward returned
};

/// Forward (into NaN-filled outputs) and, unless the cache is paged, backward with forward's out and lse. With
/// dropout, p.features.dropout_keep becomes the mask forward returned (what the reference and backward use).
Run run(const attncheck_kernel &kernel, Problem &p, bool with_lse = true) {
  const Shape &s = p.shape;
  const Dtype dt = p.dtype();
  Tensor out = make_out(s, dt), lse = make_lse(s);
  Tensor dq = Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.D}), dk = Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.D}),
         dv = Tensor::contiguous(dt, {s.B, s.Hkv, s.Lk, s.Dv});
  for (Tensor *t : {&out, &lse, &dq, &dk, &dv}) t->fill_storage(kNaN);
  Run r;
  r.fwd = call_forward(kernel, p, out, with_lse ? &lse : nullptr, &r.keep);
  if (p.features.dropout_p > 0) p.features.dropout_keep = r.keep;
  r.got.out = out.to_vector();
  if (with_lse) r.got.lse = lse.to_vector();
  if (r.fwd.ok() && p.features.storage != KvStorage::paged) {
    r.bwd = call_backward(kernel, p, out, with_lse ? &lse : nullptr, dq, dk, dv);
    r.got.dq = dq.to_vector();
    r.got.dk = dk.to_vector();
    r.got.dv = dv.to_vector();
  }
  return r;
}

/// max_e |x_e − ref_e| / max(1, max_e |ref_e|) over the finite references; +∞ when x is NaN, or infinite where the
/// reference is not (or the other way round).
double error(const std::vector<double> &x, const std::vector<double> &ref) {
  if (x.size() != ref.size()) return kInf;
  double scale = 1, worst = 0;
  for (double r : ref)
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
  for (std::size_t e = 0; e < x.size(); ++e) {
    if (std::isnan(x[e])) return kInf;
    if (!std::isfinite(ref[e]) || !std::isfinite(x[e])) {
      if (x[e] != ref[e]) return kInf;
      continue;
    }
    worst = std::max(worst, std::abs(x[e] - ref[e]) / scale);
  }
  return worst;
}

/// Runs the kernel and requires every result within `tol` of the double computation.
void require_agrees(const attncheck_kernel &kernel, Problem p, double tol = kTol) {
  INFO(p.shape.describe() << " mask=" << mask_name(p.params.mask) << " " << p.features.describe());
  const Run r = run(kernel, p);
  REQUIRE(r.fwd.message == "");
  REQUIRE(r.fwd.ok());
  const Results e = reference(p);
  CHECK(error(r.got.out, e.out) <= tol);
  CHECK(error(r.got.lse, e.lse) <= tol);
  if (p.features.storage == KvStorage::paged) return;  // no backward in the ABI (checked separately)
  REQUIRE(r.bwd.ok());
  CHECK(error(r.got.dq, e.dq) <= tol);
  CHECK(error(r.got.dk, e.dk) <= tol);
  CHECK(error(r.got.dv, e.dv) <= tol);
}

/// Largest difference (relative as error(), `b` the reference) between two runs' results; +∞ where only one is NaN
/// or they differ in infinities.
double difference(const Results &a, const Results &b) {
  auto diff = [&](const std::vector<double> &x, const std::vector<double> &y) {
    if (x.size() != y.size()) return kInf;
    std::vector<double> xs = x, ys = y;
    for (std::size_t e = 0; e < xs.size(); ++e) {
      if (std::isnan(ys[e]) && !std::isnan(xs[e])) return kInf;
      if (std::isnan(xs[e]) && std::isnan(ys[e])) xs[e] = ys[e] = 0;
    }
    return error(xs, ys);
  };
  return std::max({diff(a.out, b.out), diff(a.lse, b.lse), diff(a.dq, b.dq), diff(a.dk, b.dk), diff(a.dv, b.dv)});
}

/// The results bit for bit (NaN equal to NaN).
bool same(const Results &a, const Results &b) {
  auto eq = [](const std::vector<double> &x, const std::vector<double> &y) {
    if (x.size() != y.size()) return false;
    for (std::size_t e = 0; e < x.size(); ++e)
      if (!(x[e] == y[e] || (std::isnan(x[e]) && std::isnan(y[e])))) return false;
    return true;
  };
  return eq(a.out, b.out) && eq(a.lse, b.lse) && eq(a.dq, b.dq) && eq(a.dk, b.dk) && eq(a.dv, b.dv);
}

const attncheck_kernel &correct() { return feature_kernel(FeatureBug::none); }

}  // namespace

// ---- the correct kernel, one feature at a time ------------------------------------------------------------------

TEST_CASE("the correct feature kernel agrees with a double computation without features", "[features]") {
  for (int n = 0; n < kRandomProblems; ++n) {
    require_agrees(correct(), make_problem(kShape, Mask::none, kSeed + n));
    require_agrees(correct(), make_problem(kShape, Mask::causal, kSeed + n));
  }
}

TEST_CASE("the correct feature kernel agrees with a double computation under sliding windows", "[features]") {
  struct Window {
    std::int64_t left, right;
  };
  for (const Window w : {Window{3, 2}, Window{2, -1}, Window{-1, 1}, Window{0, 0}})
    for (const Mask m : {Mask::none, Mask::causal})
      for (int n = 0; n < kRandomProblems; ++n) {
        Problem p = make_problem(kShape, m, kSeed + n);
        p.features.window_left = w.left;
        p.features.window_right = w.right;
        require_agrees(correct(), p);
      }
}

TEST_CASE("the correct feature kernel agrees with a double computation with softcap", "[features]") {
  for (const double cap : {0.75, 2.0, 30.0})
    for (const Mask m : {Mask::none, Mask::causal})
      for (int n = 0; n < kRandomProblems; ++n) {
        Problem p = make_problem(kShape, m, kSeed + n);
        p.features.softcap = cap;
        require_agrees(correct(), p);
      }
}

TEST_CASE("the correct feature kernel agrees with a double computation with ALiBi", "[features]") {
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(kShape, m, kSeed + n);
      p.features.alibi_slopes = slopes(kShape.Hq);
      require_agrees(correct(), p);
    }
}

TEST_CASE("the correct feature kernel agrees with a double computation with attention sinks", "[features]") {
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(kShape, m, kSeed + n);
      std::mt19937 gen(kSeed + n);
      p.features.sinks = sinks(gen, kShape.Hq);
      require_agrees(correct(), p);
    }
}

TEST_CASE("a row that sees no key gets O = 0 and its sink as LSE", "[features]") {
  const Shape s{1, 2, 1, 9, 5, 4, 4};  // causal Lq > Lk: rows 0..3 see no key
  Problem p = make_problem(s, Mask::causal, kSeed);
  p.features.sinks = {0.5, -1.25};
  require_agrees(correct(), p);
  const Run r = run(correct(), p);
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < 4; ++i) {
      CHECK(r.got.lse[static_cast<std::size_t>(h * s.Lq + i)] == p.features.sinks[static_cast<std::size_t>(h)]);
      for (std::int64_t x = 0; x < s.Dv; ++x)
        CHECK(r.got.out[static_cast<std::size_t>((h * s.Lq + i) * s.Dv + x)] == 0);
      for (std::int64_t x = 0; x < s.D; ++x) CHECK(r.got.dq[static_cast<std::size_t>((h * s.Lq + i) * s.D + x)] == 0);
    }
  p.features.sinks.clear();
  const Run plain = run(correct(), p);
  CHECK(plain.got.lse[0] == -kInf);
}

TEST_CASE("the correct feature kernel agrees with a double computation with boolean and additive masks", "[features]") {
  struct Dims {
    MaskKind kind;
    std::int64_t B, H;
  };
  for (const Dims d : {Dims{MaskKind::boolean, 1, 1}, Dims{MaskKind::boolean, kShape.B, kShape.Hq},
                       Dims{MaskKind::additive, 1, kShape.Hq}, Dims{MaskKind::additive, kShape.B, 1}})
    for (const Mask m : {Mask::none, Mask::causal})
      for (int n = 0; n < kRandomProblems; ++n) {
        Problem p = make_problem(kShape, m, kSeed + n);
        std::mt19937 gen(kSeed + n);
        set_mask(p.features, gen, kShape, d.kind, d.B, d.H);
        require_agrees(correct(), p);
      }
}

TEST_CASE("the correct feature kernel agrees with a double computation on packed varlen batches", "[features]") {
  const Shape s{3, 4, 2, 7, 11, 8, 6};
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(s, m, kSeed + n);
      std::mt19937 gen(kSeed + n);
      set_varlen(p.features, gen, {5, 0, 7}, {11, 3, 6});  // an empty sequence; Lq_b > Lk_b under causal
      require_agrees(correct(), p);
      set_varlen(p.features, gen, {7, 2, 1}, {0, 11, 1});  // a sequence without keys
      require_agrees(correct(), p);
    }
}

TEST_CASE("the correct feature kernel agrees with a double computation on a paged cache and refuses its backward",
          "[features]") {
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(kShape, m, kSeed + n);
      std::mt19937 gen(kSeed + n);
      set_paged(p.features, gen, kShape, 4, {11, 6}, 3);  // pages in random order among unused (NaN) ones
      require_agrees(correct(), p);
      set_paged(p.features, gen, kShape, 3, {9, 11}, 0);
      require_agrees(correct(), p);
    }
  Problem p = make_problem(kShape, Mask::none, kSeed);
  std::mt19937 gen(kSeed);
  set_paged(p.features, gen, kShape, 4, {11, 6}, 3);
  Tensor out = make_out(kShape, Dtype::f32), lse = make_lse(kShape);
  REQUIRE(call_forward(correct(), p, out, &lse).ok());
  // The ABI gives a paged cache no gradient: the call layer refuses it, and so does the kernel when called directly.
  Tensor dq = Tensor::contiguous(Dtype::f32, {2, 4, 7, 8}), dk = Tensor::contiguous(Dtype::f32, {2, 2, 11, 8}),
         dv = Tensor::contiguous(Dtype::f32, {2, 2, 11, 6});
  CHECK(call_backward(correct(), p, out, &lse, dq, dk, dv).status == ATTNCHECK_UNSUPPORTED);
  attncheck_args args{};
  args.size = sizeof args;
  args.page_size = 4;
  attncheck_params params{1.0, ATTNCHECK_MASK_NONE, ATTNCHECK_FEATURE_PAGED, &args};
  const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl(), o = out.dl(), l = lse.dl(), go = p.dout->dl();
  DLTensor gq = dq.dl(), gk = dk.dl(), gv = dv.dl();
  CHECK(correct().backward(&params, &q, &k, &v, &o, &l, &go, &gq, &gk, &gv) == ATTNCHECK_UNSUPPORTED);
}

TEST_CASE("dropout keeps the elements its hash picks and backward reproduces the forward mask", "[features]") {
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(kShape, m, kSeed + n);
      p.features.dropout_p = 0.25;
      p.features.dropout_seed = 1000 + static_cast<std::uint64_t>(n);
      Problem q = p;
      const Run r = run(correct(), q);
      REQUIRE(r.fwd.ok());
      REQUIRE(r.keep.size() == static_cast<std::size_t>(kShape.B * kShape.Hq * kShape.Lq * kShape.Lk));
      std::size_t kept = 0, at = 0;
      for (std::int64_t b = 0; b < kShape.B; ++b)
        for (std::int64_t h = 0; h < kShape.Hq; ++h)
          for (std::int64_t i = 0; i < kShape.Lq; ++i)
            for (std::int64_t j = 0; j < kShape.Lk; ++j, ++at) {
              REQUIRE(r.keep[at] == (feature_dropout_keep(p.features.dropout_seed, 0.25f, b, h, i, j) ? 1 : 0));
              kept += r.keep[at];
            }
      const double fraction = static_cast<double>(kept) / static_cast<double>(at);
      CHECK(fraction > 0.65);
      CHECK(fraction < 0.85);
      require_agrees(correct(), p);  // forward and backward with the returned mask
      // The same seed gives the same mask; another seed another one.
      Problem again = p;
      CHECK(run(correct(), again).keep == r.keep);
      Problem other = p;
      other.features.dropout_seed += 1;
      CHECK(run(correct(), other).keep != r.keep);
    }
}

TEST_CASE("the correct feature kernel agrees with a double computation with every feature at once", "[features]") {
  const Shape s{2, 4, 2, 7, 11, 8, 6};
  for (const Mask m : {Mask::none, Mask::causal})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(s, m, kSeed + n);
      std::mt19937 gen(kSeed + n);
      p.features = everything(gen, s);
      require_agrees(correct(), p);
      // The same on a paged cache (no varlen) with a boolean mask.
      p.features.storage = KvStorage::dense;
      p.features.seqlens_q.clear();
      p.features.seqlens_k.clear();
      set_mask(p.features, gen, s, MaskKind::boolean, s.B, 1);
      set_paged(p.features, gen, s, 4, {9, 11}, 2);
      require_agrees(correct(), p);
    }
}

TEST_CASE("float16 and bfloat16 storage agree with a double computation to the storage precision", "[features]") {
  for (const Dtype dt : {Dtype::f16, Dtype::bf16})
    for (int n = 0; n < kRandomProblems; ++n) {
      Problem p = make_problem(kShape, Mask::causal, kSeed + n, dt);
      std::mt19937 gen(kSeed + n);
      p.features = everything(gen, kShape);
      require_agrees(correct(), p, 8 * unit_roundoff(dt));
    }
}

TEST_CASE("lse may be NULL in forward and in backward which then recomputes it", "[features]") {
  Problem p = make_problem(kShape, Mask::causal, kSeed);
  std::mt19937 gen(kSeed);
  p.features = everything(gen, kShape);
  Problem q = p;
  const Run with = run(correct(), p), without = run(correct(), q, false);
  REQUIRE(without.fwd.ok());
  REQUIRE(without.bwd.ok());
  CHECK(with.got.out == without.got.out);
  CHECK(with.got.dq == without.got.dq);
  CHECK(with.got.dk == without.got.dk);
  CHECK(with.got.dv == without.got.dv);
}

// ---- the planted bugs ----------------------------------------------------------------------------------------------

namespace {

/// A problem on which `bug` changes the result, and the same problem with the bug's feature off (other features
/// on where they do not expose it).
struct Exposure {
  Problem on, off;
};

/// The shape of the exposures.
constexpr Shape kExposedShape{3, 4, 2, 6, 10, 8, 6};

Exposure exposure(FeatureBug bug, std::uint32_t seed) {
  std::mt19937 gen(seed);
  const Shape s = kExposedShape;
  Exposure e{make_problem(s, Mask::none, seed), make_problem(s, Mask::none, seed)};
  Features &on = e.on.features, &off = e.off.features;
  switch (bug) {
    case FeatureBug::window_right_off_by_one:
      on.window_left = off.window_left = 2;
      on.window_right = 1;  // key i' + 2 becomes visible (no causal)
      off.window_right = -1;
      off.softcap = 1.5;
      off.sinks = sinks(gen, s.Hq);
      set_mask(off, gen, s, MaskKind::additive, 1, 1);
      e.off.params.mask = Mask::causal;
      break;
    case FeatureBug::softcap_after_mask:
      on.softcap = 1.5;
      e.on.params.mask = Mask::causal;  // hidden keys get logit −1.5
      off = everything(gen, s);
      off.softcap = 0;
      break;
    case FeatureBug::alibi_reversed_slopes:
      on.alibi_slopes = slopes(s.Hq);
      off = everything(gen, s);
      off.alibi_slopes.clear();
      break;
    case FeatureBug::varlen_reads_across_boundary:
      set_varlen(on, gen, {3, 6, 2}, {5, 7, 4});  // sequences 0 and 1 are followed by a key
      off = everything(gen, s);
      off.storage = KvStorage::dense;
      off.seqlens_q.clear();
      off.seqlens_k.clear();
      break;
    case FeatureBug::paged_logical_page:
      set_paged(on, gen, s, 4, {10, 7, 9}, 2);
      off = everything(gen, s);
      off.storage = KvStorage::dense;
      off.seqlens_q.clear();
      off.seqlens_k.clear();
      break;
    case FeatureBug::args_assumed_compact:  // slopes, sinks and a mask (cu_seqlens read as poison would be declined)
      on.alibi_slopes = slopes(s.Hq);
      on.sinks = sinks(gen, s.Hq);
      set_mask(on, gen, s, MaskKind::additive, 1, s.Hq);
      on.args_spread = 2;
      on.args_offset = 1;
      off = on;
      off.args_spread = 1;
      off.args_offset = 0;
      break;
    case FeatureBug::mask_byte_one:
      set_mask(on, gen, s, MaskKind::boolean, 1, s.Hq);
      for (double &m : on.mask) m *= 2 + static_cast<double>(gen() % 254);  // visible bytes 2…255
      off = everything(gen, s);  // its mask is additive
      break;
    case FeatureBug::dropout_mask_not_reproducible:
    case FeatureBug::dropout_shared_across_heads:
    case FeatureBug::dropout_shared_across_batch:
    case FeatureBug::dropout_shared_across_rows:
    case FeatureBug::dropout_shared_across_keys:
      on.dropout_p = 0.3;
      on.dropout_seed = seed;
      off = everything(gen, s);
      off.dropout_p = 0;
      break;
    case FeatureBug::fp8_without_descale:
      on.fp8 = Fp8::e4m3fn;  // the call layer sends the values' float8 bits (rounded here: not all are float8)
      on.descale_q = 0.5;
      on.descale_k = 3;
      on.descale_v = 0.25;
      off = everything(gen, s);
      break;
    case FeatureBug::window_batch_variant:  // B = 3: the keys summed backwards move bits only
      on.window_left = 5;
      on.window_right = 1;
      off = everything(gen, s);
      off.window_left = off.window_right = -1;
      break;
    case FeatureBug::mask_backward_tile_nan: {
      // Lk = 64 ≡ 64 (mod 128), causal with Lq > Lk: rows 0 … 5 see no key and have no sink (LSE −∞).
      const Shape t{3, 4, 2, 70, 64, 8, 6};
      e = Exposure{make_problem(t, Mask::causal, seed), make_problem(t, Mask::causal, seed)};
      set_mask(e.on.features, gen, t, MaskKind::boolean, 1, t.Hq);
      e.off.features.softcap = 1.5;
      e.off.features.alibi_slopes = slopes(t.Hq);
      break;
    }
    case FeatureBug::sink_twice_after_empty_split: {
      // Lk = 80, i' = 74 … 79, window left 12: rows with i' ≥ 76 see no key of the first split (keys 0 … 63).
      const Shape t{3, 4, 2, 6, 80, 8, 6};
      e = Exposure{make_problem(t, Mask::none, seed), make_problem(t, Mask::none, seed)};
      e.on.features.window_left = e.off.features.window_left = 12;
      e.on.features.sinks = sinks(gen, t.Hq);
      e.off.features.softcap = 1.5;
      e.off.features.alibi_slopes = slopes(t.Hq);
      set_mask(e.off.features, gen, t, MaskKind::additive, t.B, 1);
      break;
    }
    case FeatureBug::none: break;
  }
  return e;
}

}  // namespace

TEST_CASE("every planted bug differs from the correct kernel on a problem that exercises it", "[features][bugs]") {
  for (const FeatureBug bug : all_feature_bugs())
    for (int n = 0; n < kRandomProblems; ++n) {
      INFO(feature_bug_name(bug) << " problem " << n);
      Exposure e = exposure(bug, kSeed + static_cast<std::uint32_t>(n));
      Problem good = e.on;
      const Run want = run(correct(), good), got = run(feature_kernel(bug), e.on);
      REQUIRE(got.fwd.ok());
      Results fwd_only = got.got, want_fwd = want.got;
      fwd_only.dq = fwd_only.dk = fwd_only.dv = want_fwd.dq = want_fwd.dk = want_fwd.dv = {};
      if (bug == FeatureBug::window_batch_variant) {  // other bits, within rounding
        CHECK_FALSE(same(fwd_only, want_fwd));
        CHECK(difference(fwd_only, want_fwd) <= kTol);
      } else if (bug == FeatureBug::mask_backward_tile_nan) {  // backward only: a NaN dQ
        CHECK(same(fwd_only, want_fwd));
        CHECK(difference(got.got, want.got) > kVisible);
      } else {
        CHECK(difference(fwd_only, want_fwd) > kVisible);
      }
      // Against the double computation on the same problem (the dropout bugs: with the mask it returned). A mask
      // shared across heads is applied as returned: only its heads' decisions give it away.
      const Results ref = reference(e.on);
      const std::vector<std::uint8_t> &z = e.on.features.dropout_keep;
      const auto row = static_cast<std::size_t>(e.on.shape.Lk);
      const std::size_t head = row * static_cast<std::size_t>(e.on.shape.Lq),
                        entry = head * static_cast<std::size_t>(e.on.shape.Hq);
      if (bug == FeatureBug::dropout_shared_across_heads) {
        CHECK(std::equal(z.begin(), z.begin() + head, z.begin() + head));  // heads 0 and 1 of batch entry 0
      } else if (bug == FeatureBug::dropout_shared_across_batch) {
        CHECK(std::equal(z.begin(), z.begin() + entry, z.begin() + entry));  // batch entries 0 and 1
      } else if (bug == FeatureBug::dropout_shared_across_rows) {
        CHECK(std::equal(z.begin(), z.begin() + row, z.begin() + row));  // rows 0 and 1
      } else if (bug == FeatureBug::dropout_shared_across_keys) {
        CHECK(std::all_of(z.begin(), z.begin() + row, [&](std::uint8_t x) { return x == z[0]; }));  // row 0
      } else if (bug == FeatureBug::window_batch_variant) {
        CHECK(std::max(error(got.got.out, ref.out), error(got.got.lse, ref.lse)) <= kTol);
      } else if (bug == FeatureBug::mask_backward_tile_nan) {
        CHECK(error(got.got.dq, ref.dq) > kVisible);
      } else {
        CHECK(std::max(error(got.got.out, ref.out), error(got.got.lse, ref.lse)) > kVisible);
      }
    }
}

TEST_CASE("every planted bug agrees bitwise with the correct kernel when its feature is off", "[features][bugs]") {
  for (const FeatureBug bug : all_feature_bugs())
    for (int n = 0; n < kRandomProblems; ++n) {
      INFO(feature_bug_name(bug) << " problem " << n);
      Exposure e = exposure(bug, kSeed + static_cast<std::uint32_t>(n));
      Problem good = e.off;
      const Run want = run(correct(), good), got = run(feature_kernel(bug), e.off);
      REQUIRE(got.fwd.ok());
      REQUIRE(got.bwd.ok());
      CHECK(same(got.got, want.got));
      // And with no feature at all.
      Problem plain = make_problem(kShape, Mask::causal, kSeed + static_cast<std::uint32_t>(n)), plain2 = plain;
      CHECK(same(run(feature_kernel(bug), plain).got, run(correct(), plain2).got));
    }
}

TEST_CASE("softcap_after_mask gives hidden keys the logit minus softcap", "[features][bugs]") {
  // One row (i' = 1) and two keys, key 0 hidden by the window: it enters with logit −c, so
  // LSE = log(e^{s_1} + e^{−c}) instead of s_1.
  const Shape s{1, 1, 1, 1, 2, 1, 1};
  Problem p = make_problem(s, Mask::none, kSeed);
  p.features.softcap = 2;
  p.features.window_left = 0;  // row 0 (i' = 1) sees key 1 only
  const Run r = run(feature_kernel(FeatureBug::softcap_after_mask), p);
  REQUIRE(r.fwd.ok());
  const double s1 = 2 * std::tanh(p.params.scale * p.q.get({0, 0, 0, 0}) * p.k.get({0, 0, 1, 0}) / 2);
  CHECK(r.got.lse[0] == Approx(std::log(std::exp(s1) + std::exp(-2.0))).epsilon(1e-6));
}

TEST_CASE("the paged bug reads logical pages and the varlen bug reads one key of the next sequence",
          "[features][bugs]") {
  // Paged, one batch entry with the identity block table: the logical page is the physical one, so the bug is
  // invisible.
  const Shape s{2, 2, 1, 3, 8, 4, 4};
  Problem p = make_problem(Shape{1, 2, 1, 3, 8, 4, 4}, Mask::none, kSeed);
  p.features.storage = KvStorage::paged;
  p.features.page_size = 4;
  p.features.pages_per_seq = 2;
  p.features.num_pages = 3;
  p.features.block_table = {0, 1};
  Problem q = p;
  CHECK(same(run(feature_kernel(FeatureBug::paged_logical_page), p).got, run(correct(), q).got));
  // Varlen with a single sequence: no next sequence to read from.
  Problem v = make_problem(s, Mask::none, kSeed);
  std::mt19937 gen(kSeed);
  set_varlen(v.features, gen, {3, 2}, {8, 0});  // the second sequence has no key: nothing follows the first one
  Problem w = v;
  CHECK(same(run(feature_kernel(FeatureBug::varlen_reads_across_boundary), v).got, run(correct(), w).got));
}

namespace {

/// Batch entry b of a dense problem as a problem of its own (B = 1), with the same params and features (a mask
/// tensor of batch dim 1).
Problem entry_alone(const Problem &p, std::int64_t b) {
  Shape s = p.shape;
  s.B = 1;
  Problem one = make_problem(s, p.params.mask, kSeed);
  one.params = p.params;
  one.features = p.features;
  auto copy = [&](const Tensor &from, Tensor &to) {
    for_each_index(to.shape(), [&](std::span<const std::int64_t> idx) {
      std::vector<std::int64_t> at(idx.begin(), idx.end());
      at[0] = b;
      to.set(idx, from.get(at));
    });
  };
  copy(p.q, one.q);
  copy(p.k, one.k);
  copy(p.v, one.v);
  copy(*p.dout, *one.dout);
  return one;
}

/// The first n values of x.
std::vector<double> first(const std::vector<double> &x, std::size_t n) { return {x.begin(), x.begin() + n}; }

}  // namespace

TEST_CASE("window_batch_variant moves a row's bits with the batch only when a window is set", "[features][bugs]") {
  const attncheck_kernel &bug = feature_kernel(FeatureBug::window_batch_variant);
  const Shape s{2, 2, 1, 5, 9, 4, 4};  // i' = i + 4
  Problem batch = make_problem(s, Mask::none, kSeed);
  batch.features.window_left = 4;  // row i sees keys i … 8: 5 to 9 keys
  Problem alone = entry_alone(batch, 0);
  const auto n_out = static_cast<std::size_t>(s.Hq * s.Lq * s.Dv), n_lse = static_cast<std::size_t>(s.Hq * s.Lq);
  Problem b1 = batch, b2 = batch, a1 = alone, a2 = alone;
  const Run in_batch = run(bug, b1), want_batch = run(correct(), b2);
  const Run by_itself = run(bug, a1), want_alone = run(correct(), a2);
  REQUIRE(in_batch.fwd.ok());
  REQUIRE(by_itself.fwd.ok());
  // (a) In a batch of 2 with a window: entry 0's O has other bits than the same entry called alone, within rounding;
  // the correct kernel's has the same bits.
  CHECK(first(in_batch.got.out, n_out) != by_itself.got.out);
  CHECK(error(first(in_batch.got.out, n_out), by_itself.got.out) <= kTol);
  CHECK(error(first(in_batch.got.lse, n_lse), by_itself.got.lse) <= kTol);
  CHECK(first(want_batch.got.out, n_out) == want_alone.got.out);
  CHECK(first(want_batch.got.lse, n_lse) == want_alone.got.lse);
  CHECK_FALSE(same(in_batch.got, want_batch.got));
  // (b) Alone (B = 1) the correct kernel's bits, forward and backward.
  CHECK(same(by_itself.got, want_alone.got));
  // (b) In the batch without a window: the correct kernel's bits.
  batch.features.window_left = -1;
  Problem c1 = batch, c2 = batch;
  CHECK(same(run(bug, c1).got, run(correct(), c2).got));
  // Backward alone is unchanged: with the correct forward's out and lse, even with a window in a batch (lse NULL:
  // recomputed in the correct order).
  batch.features.window_left = 4;
  Tensor out = make_out(s, Dtype::f32), lse = make_lse(s);
  REQUIRE(call_forward(correct(), batch, out, &lse).ok());
  for (const bool with_lse : {true, false}) {
    Tensor gq1 = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D}),
           gq2 = Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq, s.D});
    Tensor gk1 = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D}),
           gk2 = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.D});
    Tensor gv1 = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv}),
           gv2 = Tensor::contiguous(Dtype::f32, {s.B, s.Hkv, s.Lk, s.Dv});
    REQUIRE(call_backward(bug, batch, out, with_lse ? &lse : nullptr, gq1, gk1, gv1).ok());
    REQUIRE(call_backward(correct(), batch, out, with_lse ? &lse : nullptr, gq2, gk2, gv2).ok());
    CHECK(gq1.to_vector() == gq2.to_vector());
    CHECK(gk1.to_vector() == gk2.to_vector());
    CHECK(gv1.to_vector() == gv2.to_vector());
  }
}

TEST_CASE("mask_backward_tile_nan gives a NaN dQ to rows of LSE minus infinity when Lk is 64 mod 128",
          "[features][bugs]") {
  const attncheck_kernel &bug = feature_kernel(FeatureBug::mask_backward_tile_nan);
  for (const std::int64_t Lk : {64, 192, 63, 128}) {
    const bool fires = Lk % 128 == 64;
    INFO("Lk=" << Lk);
    const Shape s{1, 2, 1, 4, Lk, 4, 4};
    Problem p = make_problem(s, Mask::none, kSeed);
    // An additive mask: row 0 sees no key (LSE −∞), row 1 sees every key at −2·10⁴ (LSE below −10⁴), rows 2, 3
    // every key at 0.
    Features &f = p.features;
    f.mask_kind = MaskKind::additive;
    f.mask_B = f.mask_H = 1;
    f.mask.assign(static_cast<std::size_t>(s.Lq * s.Lk), 0.0);
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      f.mask[static_cast<std::size_t>(j)] = -kInf;
      f.mask[static_cast<std::size_t>(s.Lk + j)] = -2e4;
    }
    for (const bool with_lse : {true, false}) {
      for (const bool with_sinks : {false, true}) {
        INFO("lse " << with_lse << " sinks " << with_sinks);
        f.sinks = with_sinks ? std::vector<double>{0.5, -1.0} : std::vector<double>{};
        Problem q = p, r = p;
        const Run got = run(bug, q, with_lse), want = run(correct(), r, with_lse);
        REQUIRE(got.bwd.ok());
        Results rest = got.got, want_rest = want.got;
        rest.dq = want_rest.dq = {};
        CHECK(same(rest, want_rest));  // O, LSE, dK, dV: the correct kernel's bits
        // dQ: rows 0 and 1 NaN when it fires and there is no sink (a sink makes every LSE ≥ its value); else the
        // correct kernel's bits.
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t i = 0; i < s.Lq; ++i)
            for (std::int64_t x = 0; x < s.D; ++x) {
              const auto e = static_cast<std::size_t>((h * s.Lq + i) * s.D + x);
              if (fires && !with_sinks && i < 2)
                CHECK(std::isnan(got.got.dq[e]));
              else
                CHECK(got.got.dq[e] == want.got.dq[e]);
            }
      }
    }
  }
}

TEST_CASE("sink_twice_after_empty_split counts the sink twice for a row whose first 64 keys are hidden",
          "[features][bugs]") {
  const attncheck_kernel &bug = feature_kernel(FeatureBug::sink_twice_after_empty_split);
  const Shape s{1, 2, 1, 2, 70, 4, 4};  // i' = 68, 69
  const std::vector<double> sink{0.75, -0.5};
  // The row r that changes and the row that keeps its bits: l gets e^(sink − m) once more, so
  // LSE = log(e^LSE + e^sink) and O = O·e^(LSE − LSE').
  auto check_rows = [&](Problem p, std::int64_t changed) {
    Problem q = p;
    const Run got = run(bug, p), want = run(correct(), q);
    REQUIRE(got.fwd.ok());
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const auto row = static_cast<std::size_t>(h * s.Lq + i);
        const double lse = got.got.lse[row], ok = want.got.lse[row];
        if (i == changed) {
          CHECK(lse == Approx(std::log(std::exp(ok) + std::exp(sink[static_cast<std::size_t>(h)]))).epsilon(1e-6));
          CHECK(lse - ok > kVisible);
        } else {
          CHECK(lse == ok);
        }
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          const std::size_t e = row * static_cast<std::size_t>(s.Dv) + static_cast<std::size_t>(x);
          if (i == changed)
            CHECK(got.got.out[e] == Approx(want.got.out[e] * std::exp(ok - lse)).epsilon(1e-5).margin(1e-6));
          else
            CHECK(got.got.out[e] == want.got.out[e]);
        }
      }
  };
  SECTION("a window's left edge hides the first split of row 1 only") {
    Problem p = make_problem(s, Mask::none, kSeed);
    p.features.sinks = sink;
    p.features.window_left = 5;  // row 0 sees keys 63 … 69 (63 in the first split), row 1 keys 64 … 69
    check_rows(p, 1);
  }
  SECTION("a boolean mask hides keys 0 … 63 of row 0; row 1 sees key 10") {
    Problem p = make_problem(s, Mask::none, kSeed);
    p.features.sinks = sink;
    Features &f = p.features;
    f.mask_kind = MaskKind::boolean;
    f.mask_B = f.mask_H = 1;
    f.mask.assign(static_cast<std::size_t>(s.Lq * s.Lk), 0.0);
    for (std::int64_t j = 64; j < s.Lk; ++j) f.mask[static_cast<std::size_t>(j)] = 1;  // row 0: keys 64 … 69
    f.mask[static_cast<std::size_t>(s.Lk + 10)] = 1;                                   // row 1: key 10
    check_rows(p, 0);
  }
  SECTION("every row has a visible key in the first split, or sees no key") {
    Problem p = make_problem(s, Mask::causal, kSeed);
    p.features.sinks = sink;
    p.features.window_left = 6;  // both rows see key 63
    Problem q = p;
    CHECK(same(run(bug, p).got, run(correct(), q).got));
    Problem e = make_problem(Shape{1, 2, 1, 2, 70, 4, 4}, Mask::none, kSeed);  // the mask hides every key of row 0
    e.features.sinks = sink;
    e.features.mask_kind = MaskKind::boolean;
    e.features.mask_B = e.features.mask_H = 1;
    e.features.mask.assign(static_cast<std::size_t>(s.Lq * s.Lk), 1.0);
    std::fill(e.features.mask.begin(), e.features.mask.begin() + s.Lk, 0.0);
    Problem e2 = e;
    CHECK(same(run(bug, e).got, run(correct(), e2).got));
  }
}

// ---- refusals, names and contracts -----------------------------------------------------------------------------

TEST_CASE("kernels refuse unknown features and calls without args", "[features]") {
  Problem p = make_problem(kShape, Mask::none, kSeed);
  Tensor out = make_out(kShape, Dtype::f32), lse = make_lse(kShape);
  attncheck_args args{};
  args.size = sizeof args;
  const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl();
  DLTensor o = out.dl(), l = lse.dl();
  for (const std::uint32_t bits : {1u << 12}) {
    attncheck_params params{0.5, ATTNCHECK_MASK_NONE, bits, &args};
    CHECK(correct().forward(&params, &q, &k, &v, &o, &l) == ATTNCHECK_UNSUPPORTED);
    CHECK(std::string(correct().last_error()).find("unsupported features") != std::string::npos);
  }
  attncheck_params no_args{0.5, ATTNCHECK_MASK_NONE, ATTNCHECK_FEATURE_WINDOW, nullptr};
  CHECK(correct().forward(&no_args, &q, &k, &v, &o, &l) == ATTNCHECK_ERROR);
  attncheck_params bad_mask{0.5, 7, 0, nullptr};
  CHECK(correct().forward(&bad_mask, &q, &k, &v, &o, &l) == ATTNCHECK_UNSUPPORTED);
}

TEST_CASE("feature kernels have unique names and declare every feature", "[features]") {
  std::set<std::string> names;
  CHECK(std::string(correct().name) == "features_correct");
  names.insert(correct().name);
  for (const FeatureBug bug : all_feature_bugs()) {
    const attncheck_kernel &k = feature_kernel(bug);
    CHECK(std::string(k.name) == "features_" + std::string(feature_bug_name(bug)));
    CHECK(k.abi_version == ATTNCHECK_ABI_VERSION);
    CHECK(k.backward != nullptr);
    names.insert(k.name);
    CHECK(&feature_kernel(bug) == &k);
  }
  CHECK(names.size() == all_feature_bugs().size() + 1);
  const std::string text = feature_contract(FeatureBug::none);
  CHECK(text == "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8");
  CHECK(parse_contract(text).features == kFeatureKernelFeatures);
  for (const FeatureBug bug : all_feature_bugs()) CHECK(feature_contract(bug) == text);
}
