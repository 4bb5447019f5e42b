// The reference with the features of SPEC.md §2.7 (window, softcap, ALiBi, sinks, mask, per-sequence lengths,
// dropout): each feature against an equivalent problem built from others, against direct computation, against
// central finite differences, and in certified mode; and the refusal of features that do not fit the shape.
#include "attncheck/reference.hpp"
#include "finite_difference.h"
#include "certified_check.h"
#include "random_problem.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <string>
#include <vector>

using namespace attncheck;
using attncheck::test::check_against_fd;
using attncheck::test::kFdBits;
using attncheck::test::random_problem;
using attncheck::test::require_certified;
using attncheck::test::RandomSpec;
using boost::multiprecision::mpfi_float;
using boost::multiprecision::mpfr_float;

namespace {

constexpr unsigned kHighBits = 256;
constexpr std::uint64_t kSeed = 0xfea7'0000'0000'0001ULL;
constexpr double kInf = std::numeric_limits<double>::infinity();
const Dtype kDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};

/// Index of the first element where a and b differ (bitwise, NaN never equal), or a.size().
std::size_t first_mismatch(const std::vector<double> &a, const std::vector<double> &b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t n = 0; n < a.size(); ++n)
    if (!(a[n] == b[n])) return n;
  return a.size();
}

#define REQUIRE_SAME(a, b)                                                                             \
  do {                                                                                                 \
    const std::size_t at_ = first_mismatch((a), (b));                                                  \
    INFO(#a " vs " #b ": first mismatch at " << at_ << " of " << (a).size() << ": " << std::hexfloat   \
                     << (at_ < (a).size() ? (a)[at_] : 0.0) << " and "                                 \
                     << (at_ < (b).size() ? (b)[at_] : 0.0));                                          \
    REQUIRE(at_ == (a).size());                                                                        \
    REQUIRE((a).size() == (b).size());                                                                 \
  } while (0)

/// |a − b| ≤ rel·max(|a|, |b|) + abs, with −∞ equal only to −∞.
bool close(double a, double b, double rel, double abs = 0) {
  if (a == b) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)) + abs;
}

void require_close(const std::vector<double> &a, const std::vector<double> &b, double rel, const char *what,
                   double abs = 0) {
  REQUIRE(a.size() == b.size());
  for (std::size_t n = 0; n < a.size(); ++n) {
    INFO(what << "[" << n << "] " << std::setprecision(17) << a[n] << " vs " << b[n]);
    REQUIRE(close(a[n], b[n], rel, abs));
  }
}

void require_same_forward(const ExactForward &a, const ExactForward &b) {
  REQUIRE_SAME(a.out, b.out);
  REQUIRE_SAME(a.lse, b.lse);
}
void require_same_backward(const ExactBackward &a, const ExactBackward &b) {
  REQUIRE_SAME(a.dq, b.dq);
  REQUIRE_SAME(a.dk, b.dk);
  REQUIRE_SAME(a.dv, b.dv);
}

/// Row i's aligned key i' (features.h) for the problem's causal alignment, with the problem's lengths.
std::int64_t aligned(const Problem &p, std::int64_t b, std::int64_t i) {
  return row_frame(p.features, p.params.mask, b, i, p.shape.Lq, p.shape.Lk).aligned;
}

/// A random keep mask [B, Hq, Lq, Lk] with about `keep` of the entries kept.
std::vector<std::uint8_t> random_keep(const Shape &s, double keep, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution kept(keep);
  std::vector<std::uint8_t> m(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
  for (auto &x : m) x = kept(rng) ? 1 : 0;
  return m;
}

/// Rounds every entry of a Real vector to nearest double.
template <class Real>
std::vector<double> nearest(const std::vector<Real> &xs) {
  std::vector<double> out(xs.size());
  for (std::size_t n = 0; n < xs.size(); ++n) out[n] = RealOps<Real>::nearest(xs[n]);
  return out;
}

}  // namespace

TEST_CASE("a window equals the equivalent boolean mask", "[reference][features][window]") {
  const Shape s{2, 2, 1, 6, 9, 8, 4};
  std::uint64_t seed = kSeed;
  struct Window {
    std::int64_t left, right;
  };
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left})
      for (Window win : {Window{2, 1}, Window{0, -1}, Window{-1, 2}, Window{3, 0}}) {
        Problem w = random_problem(RandomSpec{s, dt, mask, 2.0}, ++seed);
        w.features.window_left = win.left;
        w.features.window_right = win.right;
        Problem m = w;
        m.features = Features{};
        m.features.mask_kind = MaskKind::boolean;
        m.features.mask.assign(static_cast<std::size_t>(s.Lq * s.Lk), 0.0);
        for (std::int64_t i = 0; i < s.Lq; ++i)
          for (std::int64_t j = 0; j < s.Lk; ++j) {
            const std::int64_t a = aligned(w, 0, i);
            const bool in = (win.left < 0 || j >= a - win.left) && (win.right < 0 || j <= a + win.right);
            m.features.mask[static_cast<std::size_t>(i * s.Lk + j)] = in ? 1.0 : 0.0;
          }
        INFO(dtype_name(dt) << " " << mask_name(mask) << " window " << win.left << "," << win.right);
        require_same_forward(reference_forward(w), reference_forward(m));
        require_same_backward(reference_backward(w), reference_backward(m));
      }
}

TEST_CASE("a boolean mask equals an additive mask of zeros and minus infinity", "[reference][features][mask]") {
  const Shape s{2, 2, 2, 5, 7, 8, 4};
  std::uint64_t seed = kSeed + 100;
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal}) {
      Problem bm = random_problem(RandomSpec{s, dt, mask, 2.0}, ++seed);
      bm.features.mask_kind = MaskKind::boolean;
      bm.features.mask_B = s.B;
      bm.features.mask_H = s.Hq;
      std::mt19937_64 rng(seed);
      std::bernoulli_distribution vis(0.6);
      bm.features.mask.resize(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
      for (double &x : bm.features.mask) x = vis(rng) ? 1.0 : 0.0;
      for (std::int64_t j = 0; j < s.Lk; ++j) bm.features.mask[static_cast<std::size_t>(2 * s.Lk + j)] = 0;  // a hidden row
      Problem am = bm;
      am.features.mask_kind = MaskKind::additive;
      for (double &x : am.features.mask) x = x != 0 ? 0.0 : -kInf;
      INFO(dtype_name(dt) << " " << mask_name(mask));
      const ExactForward fb = reference_forward(bm), fa = reference_forward(am);
      require_same_forward(fb, fa);
      REQUIRE(fb.lse[2] == -kInf);  // b = 0, h = 0, row 2 sees nothing
      for (std::int64_t c = 0; c < s.Dv; ++c) REQUIRE(fb.out[static_cast<std::size_t>(out_offset(s, 0, 0, 2, c))] == 0);
      require_same_backward(reference_backward(bm), reference_backward(am));
    }
}

TEST_CASE("softcap with a huge cap is within 1e-9 of no softcap and a small cap matches long double",
          "[reference][features][softcap]") {
  const Shape s{1, 2, 1, 4, 6, 8, 3};
  std::uint64_t seed = kSeed + 200;
  for (Dtype dt : kDtypes) {
    const Problem p = random_problem(RandomSpec{s, dt, Mask::causal, 3.0}, ++seed);
    INFO(dtype_name(dt));
    {
      // Logits of order 1 here: c·tanh(x/c) = x − x³/(3c²) + …, a change of ~1e-12 relative.
      const Problem q = random_problem(RandomSpec{s, dt, Mask::causal, 1.0}, seed + 1000);
      Problem big = q;
      big.features.softcap = 1e6;
      const ExactForward f = reference_forward(q), fb = reference_forward(big);
      require_close(f.out, fb.out, 1e-9, "out");
      require_close(f.lse, fb.lse, 1e-9, "lse");
      const ExactBackward g = reference_backward(q), gb = reference_backward(big);
      require_close(g.dq, gb.dq, 1e-9, "dq", 1e-15);
      require_close(g.dk, gb.dk, 1e-9, "dk", 1e-15);
      require_close(g.dv, gb.dv, 1e-9, "dv", 1e-15);
    }
    for (double cap : {0.5, 2.0, 5.0}) {
      Problem c = p;
      c.features.softcap = cap;
      INFO("softcap " << cap);
      const ExactForward f = reference_forward(c);
      // O and LSE directly in long double: s_ij = c·tanh(x_ij / c), then the softmax.
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          std::vector<long double> e;
          long double mx = -INFINITY;
          const std::int64_t last = i + s.Lk - s.Lq;  // bottom-right causal
          for (std::int64_t j = 0; j <= last; ++j) {
            long double x = 0;
            for (std::int64_t d = 0; d < s.D; ++d)
              x += static_cast<long double>(c.q.get({0, h, i, d})) * static_cast<long double>(c.k.get({0, 0, j, d}));
            x *= static_cast<long double>(c.params.scale);
            const long double sij = static_cast<long double>(cap) * std::tanh(x / static_cast<long double>(cap));
            e.push_back(sij);
            mx = std::max(mx, sij);
          }
          long double l = 0;
          for (long double &x : e) l += (x = std::exp(x - mx));
          const double lse = static_cast<double>(mx + std::log(l));
          REQUIRE(close(f.lse[static_cast<std::size_t>(lse_offset(s, 0, h, i))], lse, 1e-15, 1e-17));
          for (std::int64_t cc = 0; cc < s.Dv; ++cc) {
            long double o = 0;
            for (std::size_t j = 0; j < e.size(); ++j)
              o += e[j] / l * static_cast<long double>(c.v.get({0, 0, static_cast<std::int64_t>(j), cc}));
            INFO("h " << h << " i " << i << " c " << cc);
            REQUIRE(close(f.out[static_cast<std::size_t>(out_offset(s, 0, h, i, cc))], static_cast<double>(o), 1e-15,
                          1e-17));
          }
        }
    }
  }
}

TEST_CASE("ALiBi equals an additive mask of minus slope times the distance", "[reference][features][alibi]") {
  const Shape s{2, 4, 2, 5, 8, 8, 4};
  const std::vector<double> slopes{0.5, 0.25, 0.125, 0.0625 * 3};
  std::uint64_t seed = kSeed + 300;
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left}) {
      Problem a = random_problem(RandomSpec{s, dt, mask, 2.0}, ++seed);
      a.features.alibi_slopes = slopes;
      Problem m = a;
      m.features = Features{};
      m.features.mask_kind = MaskKind::additive;
      m.features.mask_H = s.Hq;
      m.features.mask.resize(static_cast<std::size_t>(s.Hq * s.Lq * s.Lk));
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i < s.Lq; ++i)
          for (std::int64_t j = 0; j < s.Lk; ++j)
            m.features.mask[static_cast<std::size_t>((h * s.Lq + i) * s.Lk + j)] =
                -slopes[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(aligned(a, 0, i) - j));
      INFO(dtype_name(dt) << " " << mask_name(mask));
      require_same_forward(reference_forward(a), reference_forward(m));
      require_same_backward(reference_backward(a), reference_backward(m));
    }
}

namespace {

/// The problem with one more key Lk (k = 0, v = 0) whose logit is sink_h through an additive mask (0 elsewhere,
/// or the problem's own additive mask). Non-causal problems only (an extra key would move the causal alignment).
Problem with_sink_key(const Problem &p) {
  const Shape &s = p.shape;
  Problem r = p;
  r.shape.Lk = s.Lk + 1;
  r.k = Tensor::contiguous(p.k.dtype(), {s.B, s.Hkv, s.Lk + 1, s.D});
  r.v = Tensor::contiguous(p.v.dtype(), {s.B, s.Hkv, s.Lk + 1, s.Dv});
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hkv; ++h)
      for (std::int64_t j = 0; j < s.Lk; ++j) {
        for (std::int64_t d = 0; d < s.D; ++d) r.k.set({b, h, j, d}, p.k.get({b, h, j, d}));
        for (std::int64_t c = 0; c < s.Dv; ++c) r.v.set({b, h, j, c}, p.v.get({b, h, j, c}));
      }
  r.features = Features{};
  r.features.mask_kind = MaskKind::additive;
  r.features.mask_H = s.Hq;
  r.features.mask.resize(static_cast<std::size_t>(s.Hq * s.Lq * (s.Lk + 1)));
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < s.Lq; ++i)
      for (std::int64_t j = 0; j <= s.Lk; ++j)
        r.features.mask[static_cast<std::size_t>((h * s.Lq + i) * (s.Lk + 1) + j)] =
            j == s.Lk ? p.features.sinks[static_cast<std::size_t>(h)]
                      : (p.features.mask_kind == MaskKind::additive
                             ? p.features.mask[static_cast<std::size_t>((h * s.Lq + i) * s.Lk + j)]
                             : 0.0);
  return r;
}

/// dk or dv [B,Hkv,Lk+1,X] without the extra key.
std::vector<double> drop_last_key(const std::vector<double> &g, const Shape &s, std::int64_t X) {
  std::vector<double> out;
  for (std::int64_t bh = 0; bh < s.B * s.Hkv; ++bh)
    for (std::int64_t j = 0; j < s.Lk; ++j)
      for (std::int64_t x = 0; x < X; ++x) out.push_back(g[static_cast<std::size_t>((bh * (s.Lk + 1) + j) * X + x)]);
  return out;
}

}  // namespace

TEST_CASE("a sink equals an extra key with logit sink and value zero", "[reference][features][sinks]") {
  const Shape s{2, 2, 1, 4, 6, 8, 4};
  const std::vector<double> sinks{0.75, -1.5};
  constexpr double kRel = 1e-14;  // both are 128-bit evaluations rounded once; only their order of sums differs
  std::uint64_t seed = kSeed + 400;
  for (Dtype dt : kDtypes)
    for (double spread : {1.0, 4.0}) {
      Problem p = random_problem(RandomSpec{s, dt, Mask::none, spread}, ++seed);
      p.features.sinks = sinks;
      // An additive mask that hides every key of row 1 of head 1 (its O is 0, its LSE the sink) and some others.
      p.features.mask_kind = MaskKind::additive;
      p.features.mask_H = s.Hq;
      p.features.mask.assign(static_cast<std::size_t>(s.Hq * s.Lq * s.Lk), 0.0);
      for (std::int64_t j = 0; j < s.Lk; ++j) p.features.mask[static_cast<std::size_t>((1 * s.Lq + 1) * s.Lk + j)] = -kInf;
      p.features.mask[static_cast<std::size_t>(0 * s.Lk + 2)] = -kInf;
      p.features.mask[static_cast<std::size_t>(3 * s.Lk + 4)] = -0.5;
      const Problem r = with_sink_key(p);
      INFO(dtype_name(dt) << " spread " << spread);
      const ExactForward f = reference_forward(p), fr = reference_forward(r);
      require_close(f.out, fr.out, kRel, "out", 1e-300);
      require_close(f.lse, fr.lse, kRel, "lse");
      for (std::int64_t b = 0; b < s.B; ++b) {
        REQUIRE(f.lse[static_cast<std::size_t>(lse_offset(s, b, 1, 1))] == sinks[1]);
        for (std::int64_t c = 0; c < s.Dv; ++c) REQUIRE(f.out[static_cast<std::size_t>(out_offset(s, b, 1, 1, c))] == 0);
      }
      const ExactBackward g = reference_backward(p), gr = reference_backward(r);
      require_close(g.dq, gr.dq, kRel, "dq", 1e-30);
      require_close(g.dk, drop_last_key(gr.dk, s, s.D), kRel, "dk", 1e-30);
      require_close(g.dv, drop_last_key(gr.dv, s, s.Dv), kRel, "dv", 1e-30);
    }
}

TEST_CASE("dropout keeping every entry scales O and the gradients by one over one minus p and leaves LSE alone",
          "[reference][features][dropout]") {
  const Shape s{2, 2, 1, 4, 6, 8, 4};
  std::uint64_t seed = kSeed + 500;
  for (Dtype dt : kDtypes)
    for (double p_drop : {0.25, 0.1}) {
      const Problem p = random_problem(RandomSpec{s, dt, Mask::causal, 2.0}, ++seed);
      Problem d = p;
      d.features.dropout_p = p_drop;
      d.features.dropout_keep.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk), 1);
      INFO(dtype_name(dt) << " p " << p_drop);
      const ScopedDefaultPrecision<mpfr_float> prec(kHighBits);
      const mpfr_float keep = 1 - mpfr_float(p_drop);
      // At 256 bits: O_drop·(1 − p) = O and dX_drop·(1 − p) = dX within 1e-70 relative; LSE identical.
      auto scaled_close = [&](const std::vector<mpfr_float> &with, const std::vector<mpfr_float> &without,
                              const char *what) {
        REQUIRE(with.size() == without.size());
        for (std::size_t n = 0; n < with.size(); ++n) {
          const mpfr_float diff = abs(with[n] * keep - without[n]);
          INFO(what << "[" << n << "] " << static_cast<double>(with[n]) << " vs " << static_cast<double>(without[n]));
          REQUIRE(static_cast<double>(diff) <= 1e-70 * (1 + static_cast<double>(abs(without[n]))));
        }
      };
      const ForwardT<mpfr_float> f = forward_t<mpfr_float>(p, kHighBits), fd = forward_t<mpfr_float>(d, kHighBits);
      scaled_close(fd.out, f.out, "out");
      REQUIRE_SAME(nearest(fd.lse), nearest(f.lse));
      REQUIRE_SAME(nearest(fd.P), nearest(f.P));  // P is the softmax before dropout
      const BackwardT<mpfr_float> g = backward_t<mpfr_float>(p, kHighBits), gd = backward_t<mpfr_float>(d, kHighBits);
      scaled_close(gd.dq, g.dq, "dq");
      scaled_close(gd.dk, g.dk, "dk");
      scaled_close(gd.dv, g.dv, "dv");
    }
}

TEST_CASE("dropout with a random mask matches a long double computation of O", "[reference][features][dropout]") {
  const Shape s{1, 2, 1, 5, 7, 8, 3};
  const double p_drop = 0.3;
  Problem p = random_problem(RandomSpec{s, Dtype::bf16, Mask::none, 2.0}, kSeed + 550);
  p.features.dropout_p = p_drop;
  p.features.dropout_keep = random_keep(s, 1 - p_drop, kSeed + 551);
  const ExactForward f = reference_forward(p);
  const ExactForward plain = [&] {
    Problem q = p;
    q.features = Features{};
    return reference_forward(q);
  }();
  REQUIRE_SAME(f.lse, plain.lse);
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      std::vector<long double> x(static_cast<std::size_t>(s.Lk));
      long double mx = -INFINITY, l = 0;
      for (std::int64_t j = 0; j < s.Lk; ++j) {
        long double dot = 0;
        for (std::int64_t d = 0; d < s.D; ++d)
          dot += static_cast<long double>(p.q.get({0, h, i, d})) * static_cast<long double>(p.k.get({0, 0, j, d}));
        x[static_cast<std::size_t>(j)] = dot * static_cast<long double>(p.params.scale);
        mx = std::max(mx, x[static_cast<std::size_t>(j)]);
      }
      for (long double &e : x) l += (e = std::exp(e - mx));
      for (std::int64_t c = 0; c < s.Dv; ++c) {
        long double o = 0;
        for (std::int64_t j = 0; j < s.Lk; ++j)
          if (p.features.dropout_keep[static_cast<std::size_t>((h * s.Lq + i) * s.Lk + j)])
            o += x[static_cast<std::size_t>(j)] / l / (1.0L - static_cast<long double>(p_drop)) *
                 static_cast<long double>(p.v.get({0, 0, j, c}));
        INFO("h " << h << " i " << i << " c " << c);
        REQUIRE(close(f.out[static_cast<std::size_t>(out_offset(s, 0, h, i, c))], static_cast<double>(o), 1e-15, 1e-17));
      }
    }
}

namespace {

/// The B = 1 problem of batch entry b cut to `Lq_b` rows and `Lk_b` keys, with `features` (no lengths).
Problem cut_sequence(const Problem &p, std::int64_t b, std::int64_t Lq_b, std::int64_t Lk_b, const Features &features) {
  const Shape &s = p.shape;
  Problem r;
  r.shape = s;
  r.shape.B = 1;
  r.shape.Lq = Lq_b;
  r.shape.Lk = Lk_b;
  r.params = p.params;
  r.features = features;
  const Dtype dt = p.dtype();
  r.q = Tensor::contiguous(dt, {1, s.Hq, Lq_b, s.D});
  r.k = Tensor::contiguous(dt, {1, s.Hkv, Lk_b, s.D});
  r.v = Tensor::contiguous(dt, {1, s.Hkv, Lk_b, s.Dv});
  r.dout = Tensor::contiguous(dt, {1, s.Hq, Lq_b, s.Dv});
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < Lq_b; ++i) {
      for (std::int64_t d = 0; d < s.D; ++d) r.q.set({0, h, i, d}, p.q.get({b, h, i, d}));
      for (std::int64_t c = 0; c < s.Dv; ++c) r.dout->set({0, h, i, c}, p.dout->get({b, h, i, c}));
    }
  for (std::int64_t h = 0; h < s.Hkv; ++h)
    for (std::int64_t j = 0; j < Lk_b; ++j) {
      for (std::int64_t d = 0; d < s.D; ++d) r.k.set({0, h, j, d}, p.k.get({b, h, j, d}));
      for (std::int64_t c = 0; c < s.Dv; ++c) r.v.set({0, h, j, c}, p.v.get({b, h, j, c}));
    }
  return r;
}

}  // namespace

TEST_CASE("per-sequence lengths equal running each sequence alone", "[reference][features][varlen]") {
  const Shape s{4, 2, 1, 5, 7, 8, 4};
  const std::vector<std::int64_t> seqlens_q{5, 4, 0, 3}, seqlens_k{7, 2, 4, 7};
  std::uint64_t seed = kSeed + 600;
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left}) {
      Problem p = random_problem(RandomSpec{s, dt, mask, 2.0}, ++seed);
      Features common;  // features that depend on the alignment within each sequence
      common.alibi_slopes = {0.5, 0.125};
      common.window_left = 3;
      p.features = common;
      p.features.storage = KvStorage::varlen;
      p.features.seqlens_q = seqlens_q;
      p.features.seqlens_k = seqlens_k;
      INFO(dtype_name(dt) << " " << mask_name(mask));
      const ExactForward f = reference_forward(p);
      const ExactBackward g = reference_backward(p);
      for (std::int64_t b = 0; b < s.B; ++b) {
        const std::int64_t Lq_b = seqlens_q[static_cast<std::size_t>(b)], Lk_b = seqlens_k[static_cast<std::size_t>(b)];
        INFO("sequence " << b << ": " << Lq_b << " rows " << Lk_b << " keys");
        ExactForward fb;
        ExactBackward gb;
        Shape sb = s;
        sb.B = 1;
        sb.Lq = Lq_b;
        sb.Lk = Lk_b;
        if (Lq_b > 0) {
          const Problem r = cut_sequence(p, b, Lq_b, Lk_b, common);
          fb = reference_forward(r);
          gb = reference_backward(r);
        }
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t i = 0; i < s.Lq; ++i) {
            const bool row = i < Lq_b;
            const double lse = f.lse[static_cast<std::size_t>(lse_offset(s, b, h, i))];
            REQUIRE(lse == (row ? fb.lse[static_cast<std::size_t>(lse_offset(sb, 0, h, i))] : -kInf));
            for (std::int64_t c = 0; c < s.Dv; ++c)
              REQUIRE(f.out[static_cast<std::size_t>(out_offset(s, b, h, i, c))] ==
                      (row ? fb.out[static_cast<std::size_t>(out_offset(sb, 0, h, i, c))] : 0.0));
            for (std::int64_t d = 0; d < s.D; ++d)
              REQUIRE(g.dq[static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.D + d)] ==
                      (row ? gb.dq[static_cast<std::size_t>((h * Lq_b + i) * s.D + d)] : 0.0));
          }
        for (std::int64_t h = 0; h < s.Hkv; ++h)
          for (std::int64_t j = 0; j < s.Lk; ++j) {
            const bool key = j < Lk_b && Lq_b > 0;
            for (std::int64_t d = 0; d < s.D; ++d)
              REQUIRE(g.dk[static_cast<std::size_t>(((b * s.Hkv + h) * s.Lk + j) * s.D + d)] ==
                      (key ? gb.dk[static_cast<std::size_t>((h * Lk_b + j) * s.D + d)] : 0.0));
            for (std::int64_t c = 0; c < s.Dv; ++c)
              REQUIRE(g.dv[static_cast<std::size_t>(((b * s.Hkv + h) * s.Lk + j) * s.Dv + c)] ==
                      (key ? gb.dv[static_cast<std::size_t>((h * Lk_b + j) * s.Dv + c)] : 0.0));
          }
      }
    }
}

namespace {

/// A problem with every feature the reference computes with: window, softcap, ALiBi, sinks, an additive mask
/// (one fully hidden row), per-sequence lengths (a row and a key that do not exist) and dropout.
Problem all_features(const Shape &s, Dtype dt, Mask mask, double spread, std::uint64_t seed) {
  Problem p = random_problem(RandomSpec{s, dt, mask, spread}, seed);
  Features &f = p.features;
  f.window_left = 3;
  f.window_right = 1;
  f.softcap = 1.5;
  for (std::int64_t h = 0; h < s.Hq; ++h) {
    f.alibi_slopes.push_back(std::ldexp(1.0, -static_cast<int>(h) - 1));
    f.sinks.push_back(h % 2 ? -0.75 : 1.25);
  }
  f.mask_kind = MaskKind::additive;
  f.mask_B = s.B;
  f.mask.assign(static_cast<std::size_t>(s.B * s.Lq * s.Lk), 0.0);
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int> pick(0, 3);
  for (double &x : f.mask) x = pick(rng) == 0 ? -kInf : (pick(rng) == 0 ? -0.25 : 0.0);
  for (std::int64_t j = 0; j < s.Lk; ++j) f.mask[static_cast<std::size_t>(1 * s.Lk + j)] = -kInf;  // b 0, row 1
  f.storage = KvStorage::varlen;
  f.seqlens_q.assign(static_cast<std::size_t>(s.B), s.Lq);
  f.seqlens_k.assign(static_cast<std::size_t>(s.B), s.Lk);
  f.seqlens_q.back() = s.Lq - 1;
  f.seqlens_k.back() = s.Lk - 1;
  f.dropout_p = 0.2;
  f.dropout_keep = random_keep(s, 0.8, seed + 2);
  return p;
}

}  // namespace

TEST_CASE("gradients with softcap and ALiBi and the other features agree with finite differences at 256 bits",
          "[reference][features][gradient]") {
  const ScopedDefaultPrecision<mpfr_float> prec(kFdBits);
  struct Case {
    const char *name;
    Shape shape;
    Mask mask;
    double spread;
    Features features;
  };
  Features softcap, alibi, sinks_dropout;
  softcap.softcap = 0.75;
  alibi.alibi_slopes = {0.5, 0.0625};
  alibi.window_left = 1;
  sinks_dropout.sinks = {0.5, -2};
  sinks_dropout.dropout_p = 0.5;
  const Shape s{1, 2, 1, 3, 4, 3, 2};
  sinks_dropout.dropout_keep = random_keep(s, 0.5, kSeed + 700);
  const Case cases[] = {
      {"softcap", s, Mask::causal, 2.0, softcap},
      {"softcap peaked", {1, 1, 1, 2, 5, 3, 2}, Mask::none, 6.0, [] {
         Features f;
         f.softcap = 4;
         return f;
       }()},
      {"alibi window", s, Mask::none, 1.0, alibi},
      {"alibi causal", s, Mask::causal, 1.0, alibi},
      {"sinks dropout", s, Mask::none, 2.0, sinks_dropout},
  };
  std::uint64_t seed = kSeed + 710;
  for (const Case &c : cases) {
    Problem p = random_problem(RandomSpec{c.shape, Dtype::f32, c.mask, c.spread}, ++seed);
    p.features = c.features;
    INFO(c.name);
    const InputsT<mpfr_float> in = load_inputs<mpfr_float>(p, kFdBits);
    const BackwardT<mpfr_float> g = backward_t(in);
    check_against_fd(in, &InputsT<mpfr_float>::q, g.dq, "dq");
    check_against_fd(in, &InputsT<mpfr_float>::k, g.dk, "dk");
    check_against_fd(in, &InputsT<mpfr_float>::v, g.dv, "dv");
  }
  {
    const Problem p = all_features({2, 2, 1, 3, 4, 3, 2}, Dtype::f32, Mask::causal, 2.0, kSeed + 720);
    INFO("every feature");
    const InputsT<mpfr_float> in = load_inputs<mpfr_float>(p, kFdBits);
    const BackwardT<mpfr_float> g = backward_t(in);
    check_against_fd(in, &InputsT<mpfr_float>::q, g.dq, "dq");
    check_against_fd(in, &InputsT<mpfr_float>::k, g.dk, "dk");
    check_against_fd(in, &InputsT<mpfr_float>::v, g.dv, "dv");
  }
}

TEST_CASE("certified enclosures contain the MPFR values with every feature on", "[reference][features][certified]") {
  const Shape s{2, 2, 1, 5, 9, 16, 8};
  std::uint64_t seed = kSeed + 800;
  for (Dtype dt : kDtypes)
    for (Mask mask : {Mask::none, Mask::causal})
      for (double spread : {1.0, 8.0}) {
        const Problem p = all_features(s, dt, mask, spread, ++seed);
        INFO(dtype_name(dt) << " " << mask_name(mask) << " spread " << spread);
        const auto [x, g] = require_certified(p, kHighBits);
        // 128 bits round to the same doubles as 256 with features too.
        const ExactForward lo = reference_forward(p);
        REQUIRE_SAME(lo.out, x.out);
        REQUIRE_SAME(lo.lse, x.lse);
        const ExactBackward glo = reference_backward(p);
        REQUIRE_SAME(glo.dq, g.dq);
        REQUIRE_SAME(glo.dk, g.dk);
        REQUIRE_SAME(glo.dv, g.dv);
        // The fully hidden row 1 of b = 0: O = 0 and LSE = the sink; the missing last row of b = 1: 0 and −∞.
        for (std::int64_t h = 0; h < s.Hq; ++h) {
          REQUIRE(x.lse[static_cast<std::size_t>(lse_offset(s, 0, h, 1))] == p.features.sinks[static_cast<std::size_t>(h)]);
          REQUIRE(x.lse[static_cast<std::size_t>(lse_offset(s, 1, h, s.Lq - 1))] == -kInf);
          for (std::int64_t e = 0; e < s.Dv; ++e) {
            REQUIRE(x.out[static_cast<std::size_t>(out_offset(s, 0, h, 1, e))] == 0);
            REQUIRE(x.out[static_cast<std::size_t>(out_offset(s, 1, h, s.Lq - 1, e))] == 0);
          }
        }
      }
}

TEST_CASE("features that do not fit the shape are refused with a message naming them", "[reference][features][errors]") {
  const Shape s{2, 2, 1, 3, 4, 8, 2};
  const Problem good = random_problem(RandomSpec{s, Dtype::f32, Mask::none, 1.0}, kSeed + 900);
  REQUIRE_NOTHROW(reference_forward(good));
  struct Bad {
    const char *expect;
    void (*edit)(Features &);
  };
  const Bad bad[] = {
      {"alibi_slopes", [](Features &f) { f.alibi_slopes = {0.5}; }},
      {"alibi_slopes", [](Features &f) { f.alibi_slopes = {0.5, std::nan("")}; }},
      {"sinks", [](Features &f) { f.sinks = {1, 2, 3}; }},
      {"mask has", [](Features &f) {
         f.mask_kind = MaskKind::boolean;
         f.mask.assign(11, 1.0);
       }},
      {"mask_B", [](Features &f) {
         f.mask_kind = MaskKind::boolean;
         f.mask_B = 3;
         f.mask.assign(3 * 12, 1.0);
       }},
      {"mask_H", [](Features &f) {
         f.mask_kind = MaskKind::additive;
         f.mask_H = 4;
         f.mask.assign(4 * 12, 0.0);
       }},
      {"+inf", [](Features &f) {
         f.mask_kind = MaskKind::additive;
         f.mask.assign(12, 0.0);
         f.mask[5] = INFINITY;
       }},
      {"seqlens_q", [](Features &f) { f.seqlens_q = {3}; }},
      {"seqlens_q", [](Features &f) { f.seqlens_q = {3, 4}; }},
      {"seqlens_k", [](Features &f) { f.seqlens_k = {5, 1}; }},
      {"seqlens_k", [](Features &f) { f.seqlens_k = {-1, 1}; }},
      {"dropout_keep", [](Features &f) { f.dropout_p = 0.1; }},
      {"dropout_keep", [](Features &f) {
         f.dropout_p = 0.1;
         f.dropout_keep.assign(23, 1);
       }},
      {"dropout_p", [](Features &f) {
         f.dropout_p = 1;
         f.dropout_keep.assign(24, 1);
       }},
      {"window", [](Features &f) { f.window_left = -2; }},
      {"softcap", [](Features &f) { f.softcap = INFINITY; }},
  };
  for (const Bad &b : bad) {
    Problem p = good;
    b.edit(p.features);
    INFO("expecting a message about " << b.expect);
    REQUIRE_THROWS_AS(reference_forward(p), std::invalid_argument);
    REQUIRE_THROWS_WITH(reference_forward(p), Catch::Contains(b.expect) && Catch::Contains("features"));
    REQUIRE_THROWS_WITH(certified_forward(p), Catch::Contains(b.expect));
    REQUIRE_THROWS_WITH(reference_backward(p), Catch::Contains(b.expect));
    REQUIRE_THROWS_WITH(load_inputs<mpfr_float>(p), Catch::Contains(b.expect));
    try {
      reference_forward(p);
    } catch (const std::invalid_argument &e) {
      REQUIRE(std::string(e.what()).find('\n') == std::string::npos);  // one line
    }
  }
  // The same sizes that fit are accepted.
  Problem ok = good;
  ok.features.alibi_slopes = {0.5, 0.25};
  ok.features.sinks = {0, 1};
  ok.features.mask_kind = MaskKind::boolean;
  ok.features.mask_B = 2;
  ok.features.mask_H = 2;
  ok.features.mask.assign(2 * 2 * 12, 1.0);
  ok.features.seqlens_q = {3, 0};
  ok.features.seqlens_k = {0, 4};
  ok.features.dropout_p = 0.5;
  ok.features.dropout_keep.assign(2 * 2 * 12, 1);
  REQUIRE_NOTHROW(reference_forward(ok));
  REQUIRE_NOTHROW(reference_backward(ok));
}
