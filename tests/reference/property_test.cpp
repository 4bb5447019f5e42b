// Properties of the reference on random problems: precision independence, certified enclosures, softmax
// normalization, GQA, fully-masked rows, layouts and length sweeps.
#include "attncheck/reference.hpp"
#include "certified_check.h"
#include "random_problem.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>

using namespace attncheck;
using attncheck::test::random_problem;
using attncheck::test::require_certified;
using attncheck::test::RandomSpec;
using boost::multiprecision::mpfi_float;
using boost::multiprecision::mpfr_float;

namespace {

constexpr unsigned kHighBits = 256;       ///< the "truth" the 128-bit default is compared with
constexpr double kRowSumTolerance = 1e-30;  ///< |Σ_j P_ij − 1| at 128 bits (2^-128 ≈ 3e-39 per rounding)
constexpr double kOrdinarySpread = 1.0;     ///< inputs in [−1, 1]: logits of order 1
constexpr double kLargeSpread = 16.0;       ///< inputs in [−16, 16]: logits up to hundreds, peaked softmax
constexpr std::uint64_t kSeed = 0x5eed'a77e'0000'0001ULL;
/// forward_t<double> vs 128 bits: a few ulps of double per operation, over sums of up to 65 terms.
constexpr double kDoubleTemplateRel = 1e-12;

const Shape kSmall{2, 2, 1, 5, 9, 16, 8};  // B, Hq, Hkv, Lq, Lk, D, Dv

/// Index of the first element where a and b differ (bitwise, NaN never equal), or a.size().
std::size_t first_mismatch(const std::vector<double> &a, const std::vector<double> &b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t n = 0; n < a.size(); ++n)
    if (!(a[n] == b[n])) return n;
  return a.size();
}

#define REQUIRE_SAME(a, b)                                                                           \
  do {                                                                                               \
    const std::size_t at_ = first_mismatch((a), (b));                                                \
    INFO(#a " vs " #b ": first mismatch at " << at_ << " of " << (a).size() << ": "                 \
                     << std::hexfloat << (at_ < (a).size() ? (a)[at_] : 0.0) << " and "                              \
                     << (at_ < (b).size() ? (b)[at_] : 0.0));                                        \
    REQUIRE(at_ == (a).size());                                                                      \
    REQUIRE((a).size() == (b).size());                                                               \
  } while (0)

bool all_finite(const std::vector<double> &xs) {
  return std::all_of(xs.begin(), xs.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

TEST_CASE("128 and 256 bits give the same double, for every dtype and for large logits", "[reference][precision]") {
  std::uint64_t seed = kSeed;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (Mask mask : {Mask::none, Mask::causal})
      for (double spread : {kOrdinarySpread, kLargeSpread}) {
        const Problem p = random_problem(RandomSpec{kSmall, dt, mask, spread}, ++seed);
        INFO(dtype_name(dt) << " " << mask_name(mask) << " spread " << spread);
        const ExactForward lo = reference_forward(p), hi = reference_forward(p, kHighBits);
        REQUIRE_SAME(lo.out, hi.out);
        REQUIRE_SAME(lo.lse, hi.lse);
        const ExactBackward glo = reference_backward(p), ghi = reference_backward(p, kHighBits);
        REQUIRE_SAME(glo.dq, ghi.dq);
        REQUIRE_SAME(glo.dk, ghi.dk);
        REQUIRE_SAME(glo.dv, ghi.dv);
      }
}

TEST_CASE("the certified enclosure contains the 256-bit value and spans at most one ulp", "[reference][certified]") {
  std::uint64_t seed = kSeed + 100;
  for (Dtype dt : {Dtype::f32, Dtype::bf16})
    for (Mask mask : {Mask::none, Mask::causal}) {
      const Problem p = random_problem(RandomSpec{kSmall, dt, mask, kOrdinarySpread}, ++seed);
      INFO(dtype_name(dt) << " " << mask_name(mask));
      (void)require_certified(p, kHighBits);
    }
}

TEST_CASE("128-bit intervals contain the 256-bit values at full precision", "[reference][certified]") {
  const Problem p = random_problem(RandomSpec{kSmall, Dtype::f16, Mask::causal, kLargeSpread}, kSeed + 200);
  const ForwardT<mpfi_float> c = forward_t<mpfi_float>(p, kReferenceBits, KeepP::no);
  const ForwardT<mpfr_float> x = forward_t<mpfr_float>(p, kHighBits, KeepP::no);
  const BackwardT<mpfi_float> cg = backward_t<mpfi_float>(p, kReferenceBits);
  const BackwardT<mpfr_float> g = backward_t<mpfr_float>(p, kHighBits);
  auto inside = [](const mpfi_float &i, const mpfr_float &v) {
    return mpfr_lessequal_p(&i.backend().data()->left, v.backend().data()) &&
           mpfr_lessequal_p(v.backend().data(), &i.backend().data()->right);
  };
  for (std::size_t n = 0; n < x.out.size(); ++n) REQUIRE(inside(c.out[n], x.out[n]));
  for (std::size_t n = 0; n < x.lse.size(); ++n) REQUIRE(inside(c.lse[n], x.lse[n]));
  for (std::size_t n = 0; n < g.dq.size(); ++n) REQUIRE(inside(cg.dq[n], g.dq[n]));
  for (std::size_t n = 0; n < g.dk.size(); ++n) REQUIRE(inside(cg.dk[n], g.dk[n]));
  for (std::size_t n = 0; n < g.dv.size(); ++n) REQUIRE(inside(cg.dv[n], g.dv[n]));
}

TEST_CASE("each row of P sums to 1 within 1e-30 at 128 bits", "[reference][softmax]") {
  for (Mask mask : {Mask::none, Mask::causal}) {
    const Shape s{1, 2, 2, 7, 17, 8, 4};  // Lq ≤ Lk: every causal row sees a key
    const Problem p = random_problem(RandomSpec{s, Dtype::f32, mask, kLargeSpread}, kSeed + 300);
    const ForwardT<mpfr_float> f = forward_t<mpfr_float>(p, kReferenceBits);
    const ScopedDefaultPrecision<mpfr_float> prec(kHighBits);  // the sums below are exact to ~2^-256
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        mpfr_float sum = 0;
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          const mpfr_float &Pij = f.P[static_cast<std::size_t>(p_offset(s, 0, h, i, j))];
          if (!visible(mask, i, j, s.Lq, s.Lk)) REQUIRE(Pij == 0);
          REQUIRE(Pij >= 0);
          sum += Pij;
        }
        INFO("head " << h << " row " << i);
        REQUIRE(static_cast<double>(abs(sum - 1)) < kRowSumTolerance);
      }
  }
}

namespace {

/// The same problem with each kv head repeated for every query head that reads it (Hkv = Hq).
Problem repeat_kv(const Problem &p) {
  const Shape &s = p.shape;
  Problem r;
  r.shape = s;
  r.shape.Hkv = s.Hq;
  r.params = p.params;
  r.q = p.q;
  r.dout = p.dout;
  r.k = Tensor::contiguous(p.k.dtype(), {s.B, s.Hq, s.Lk, s.D});
  r.v = Tensor::contiguous(p.v.dtype(), {s.B, s.Hq, s.Lk, s.Dv});
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t j = 0; j < s.Lk; ++j) {
        for (std::int64_t d = 0; d < s.D; ++d) r.k.set({b, h, j, d}, p.k.get({b, s.kv_head(h), j, d}));
        for (std::int64_t c = 0; c < s.Dv; ++c) r.v.set({b, h, j, c}, p.v.get({b, s.kv_head(h), j, c}));
      }
  return r;
}

}  // namespace

TEST_CASE("GQA equals the problem with kv heads repeated, forward and backward", "[reference][gqa]") {
  for (std::int64_t Hkv : {2, 1}) {
    const Shape s{2, 4, Hkv, 6, 5, 8, 3};
    const Problem p = random_problem(RandomSpec{s, Dtype::bf16, Mask::causal, kOrdinarySpread}, kSeed + 400 + Hkv);
    const Problem r = repeat_kv(p);
    INFO("Hkv = " << Hkv);
    const ExactForward f = reference_forward(p), fr = reference_forward(r);
    REQUIRE_SAME(f.out, fr.out);
    REQUIRE_SAME(f.lse, fr.lse);

    const ExactBackward g = reference_backward(p);
    const BackwardT<mpfr_float> gr = backward_t<mpfr_float>(r, kReferenceBits);
    std::vector<double> dq_r(gr.dq.size());
    for (std::size_t n = 0; n < dq_r.size(); ++n) dq_r[n] = RealOps<mpfr_float>::nearest(gr.dq[n]);
    REQUIRE_SAME(g.dq, dq_r);
    // dK, dV of kv head g = Σ over its query heads of the repeated problem's per-head gradients.
    const ScopedDefaultPrecision<mpfr_float> prec(kHighBits);
    auto group_sum = [&](const std::vector<mpfr_float> &per_head, std::int64_t X) {
      std::vector<double> out(static_cast<std::size_t>(s.B * s.Hkv * s.Lk * X));
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t kv = 0; kv < s.Hkv; ++kv)
          for (std::int64_t e = 0; e < s.Lk * X; ++e) {
            mpfr_float sum = 0;
            for (std::int64_t h = kv * s.group(); h < (kv + 1) * s.group(); ++h)
              sum += per_head[static_cast<std::size_t>((b * s.Hq + h) * s.Lk * X + e)];
            out[static_cast<std::size_t>((b * s.Hkv + kv) * s.Lk * X + e)] = static_cast<double>(sum);
          }
      return out;
    };
    REQUIRE_SAME(g.dk, group_sum(gr.dk, s.D));
    REQUIRE_SAME(g.dv, group_sum(gr.dv, s.Dv));
  }
}

TEST_CASE("rows that see no key are exactly zero and minus infinity, with zero gradients", "[reference][mask]") {
  const Shape s{1, 2, 1, 6, 3, 4, 5};  // causal, Lq > Lk: rows 0..2 see nothing
  const Problem p = random_problem(RandomSpec{s, Dtype::f16, Mask::causal, kOrdinarySpread}, kSeed + 500);
  const ExactForward f = reference_forward(p);
  const ExactBackward g = reference_backward(p);
  const CertifiedForward c = certified_forward(p);
  const CertifiedBackward cg = certified_backward(p);
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      const bool empty = visible_count(Mask::causal, i, s.Lq, s.Lk) == 0;
      const auto l = static_cast<std::size_t>(lse_offset(s, 0, h, i));
      INFO("head " << h << " row " << i);
      if (empty) {
        REQUIRE(f.lse[l] == -std::numeric_limits<double>::infinity());
        REQUIRE(c.lse.lo[l] == -std::numeric_limits<double>::infinity());
        REQUIRE(c.lse.hi[l] == -std::numeric_limits<double>::infinity());
      } else {
        REQUIRE(std::isfinite(f.lse[l]));
      }
      for (std::int64_t e = 0; e < s.Dv; ++e) {
        const auto o = static_cast<std::size_t>(out_offset(s, 0, h, i, e));
        if (empty) {
          REQUIRE(f.out[o] == 0);
          REQUIRE((c.out.lo[o] == 0 && c.out.hi[o] == 0));
        }
      }
      for (std::int64_t d = 0; d < s.D; ++d) {
        const auto n = static_cast<std::size_t>(((0 * s.Hq + h) * s.Lq + i) * s.D + d);
        if (empty) {
          REQUIRE(g.dq[n] == 0);
          REQUIRE((cg.dq.lo[n] == 0 && cg.dq.hi[n] == 0));
        }
      }
    }
  REQUIRE(all_finite(f.out));
  REQUIRE(all_finite(g.dq));
  REQUIRE(all_finite(g.dk));
  REQUIRE(all_finite(g.dv));
  REQUIRE(c.out.max_width_ulps() <= 1);
  REQUIRE(cg.dk.max_width_ulps() <= 1);
  // Every causal row is empty when Lk is far shorter: all outputs 0 / −∞, all gradients 0.
  const Shape none{1, 1, 1, 5, 1, 2, 2};
  const Problem q = random_problem(RandomSpec{none, Dtype::f32, Mask::causal, kOrdinarySpread}, kSeed + 501);
  const ExactBackward gq = reference_backward(q);
  for (double x : gq.dq) REQUIRE(x == 0);
  // Lq = 5, Lk = 1: only the last row sees key 0, so dK, dV come from it alone and are finite.
  REQUIRE(all_finite(gq.dk));
  REQUIRE(all_finite(gq.dv));
}

TEST_CASE("the result is the same for every layout", "[reference][layout]") {
  constexpr std::int64_t kPad = 3;
  const Shape s{2, 2, 1, 7, 5, 6, 4};
  RandomSpec spec{s, Dtype::f16, Mask::causal, kOrdinarySpread};
  const Problem base = random_problem(spec, kSeed + 600);
  const ExactForward f = reference_forward(base);
  const ExactBackward g = reference_backward(base);
  for (Layout layout : {Layout::blhd, Layout::transposed, Layout::padded}) {
    spec.layout = layout;
    spec.pad = kPad;
    Problem p = random_problem(spec, kSeed + 600);
    p.q.fill_padding(std::nan(""));  // padding must never be read
    p.k.fill_padding(std::nan(""));
    p.v.fill_padding(std::nan(""));
    p.dout->fill_padding(std::nan(""));
    INFO(layout_name(layout));
    const ExactForward fl = reference_forward(p);
    const ExactBackward gl = reference_backward(p);
    REQUIRE_SAME(f.out, fl.out);
    REQUIRE_SAME(f.lse, fl.lse);
    REQUIRE_SAME(g.dq, gl.dq);
    REQUIRE_SAME(g.dk, gl.dk);
    REQUIRE_SAME(g.dv, gl.dv);
  }
}

TEST_CASE("over a sweep of lengths outputs are convex combinations and double agrees to 1e-12", "[reference][sweep]") {
  const std::int64_t lengths[] = {1, 3, 7, 16, 17, 64, 65};
  std::uint64_t seed = kSeed + 700;
  for (std::int64_t Lq : lengths)
    for (std::int64_t Lk : lengths)
      for (Mask mask : {Mask::none, Mask::causal}) {
        const Shape s{1, 1, 1, Lq, Lk, 4, 3};
        const Problem p = random_problem(RandomSpec{s, Dtype::bf16, mask, kOrdinarySpread}, ++seed);
        INFO("Lq=" << Lq << " Lk=" << Lk << " " << mask_name(mask));
        const ExactForward f = reference_forward(p);
        const ForwardT<double> fd = forward_t<double>(p, kReferenceBits);
        for (std::int64_t i = 0; i < Lq; ++i) {
          const std::int64_t n = visible_count(mask, i, Lq, Lk);
          const double lse = f.lse[static_cast<std::size_t>(i)];
          REQUIRE((n == 0 ? lse == -std::numeric_limits<double>::infinity() : std::isfinite(lse)));
          REQUIRE((lse == fd.lse[static_cast<std::size_t>(i)] ||
                   std::fabs(lse - fd.lse[static_cast<std::size_t>(i)]) <= kDoubleTemplateRel * (1 + std::fabs(lse))));
          for (std::int64_t c = 0; c < s.Dv; ++c) {
            double lo = 0, hi = 0;  // the hull of the visible values (0 for an empty row)
            for (std::int64_t j = 0; j < n; ++j) {
              const double x = p.v.get({0, 0, j, c});
              lo = j == 0 ? x : std::min(lo, x);
              hi = j == 0 ? x : std::max(hi, x);
            }
            const double o = f.out[static_cast<std::size_t>(out_offset(s, 0, 0, i, c))];
            REQUIRE(lo <= o);
            REQUIRE(o <= hi);
            REQUIRE(std::fabs(o - fd.out[static_cast<std::size_t>(out_offset(s, 0, 0, i, c))]) <= kDoubleTemplateRel);
          }
        }
        if (Lq <= 17 && Lk <= 17) {  // backward is cheap at these lengths; check it stays finite
          const ExactBackward g = reference_backward(p);
          REQUIRE(all_finite(g.dq));
          REQUIRE(all_finite(g.dk));
          REQUIRE(all_finite(g.dv));
        }
      }
}
