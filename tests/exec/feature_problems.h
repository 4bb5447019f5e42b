// Helpers of the ABI 1.2 transport tests (tests/sandbox, tests/exec): random problems with features (SPEC.md §2.7) and
// a plain float64 evaluation of their math from features.h's logical helpers, to compare a kernel's results with.
#pragma once

#include "attncheck/features.h"
#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace featuret {

using namespace attncheck;

/// A problem of shape `s` in random layouts with N(0, 1) inputs and the features `bits` (ATTNCHECK_FEATURE_*; varlen
/// and paged exclude each other). Sequence lengths include an empty one and the full Lq, Lk; a paged cache has two
/// unused pages and its pages shuffled.
inline Problem feature_problem(std::mt19937_64 &rng, Dtype dt, const Shape &s, Mask mask, std::uint32_t bits) {
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), mask};
  std::normal_distribution<double> nd;
  auto tensor = [&](std::vector<std::int64_t> shape) {
    constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
    Tensor t = Tensor::with_layout(dt, std::move(shape), kLayouts[rng() % 4], 3);
    t.fill_storage(std::numeric_limits<double>::quiet_NaN());
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    for (double &x : v) x = nd(rng);
    t.assign(v);
    return t;
  };
  p.q = tensor({s.B, s.Hq, s.Lq, s.D});
  p.k = tensor({s.B, s.Hkv, s.Lk, s.D});
  p.v = tensor({s.B, s.Hkv, s.Lk, s.Dv});
  p.dout = tensor({s.B, s.Hq, s.Lq, s.Dv});
  auto f32 = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  auto upto = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n + 1)); };
  Features &f = p.features;
  if (bits & ATTNCHECK_FEATURE_WINDOW) {
    f.window_left = upto(s.Lk / 2);
    f.window_right = rng() % 2 ? -1 : upto(2);
  }
  if (bits & ATTNCHECK_FEATURE_SOFTCAP) f.softcap = 1.5;
  if (bits & ATTNCHECK_FEATURE_ALIBI)
    for (std::int64_t h = 0; h < s.Hq; ++h) f.alibi_slopes.push_back(std::ldexp(1.0, -static_cast<int>(h + 1)));
  if (bits & ATTNCHECK_FEATURE_SINKS)
    for (std::int64_t h = 0; h < s.Hq; ++h) f.sinks.push_back(f32(nd(rng)));
  if (bits & ATTNCHECK_FEATURE_MASK) {
    f.mask_kind = rng() % 2 ? MaskKind::boolean : MaskKind::additive;
    f.mask_B = rng() % 2 ? 1 : s.B;
    f.mask_H = rng() % 2 ? 1 : s.Hq;
    f.mask.resize(static_cast<std::size_t>(f.mask_B * f.mask_H * s.Lq * s.Lk));
    for (double &x : f.mask) {
      const bool hide = rng() % 5 == 0;
      x = f.mask_kind == MaskKind::boolean ? (hide ? 0 : 1) : hide ? -INFINITY : f32(nd(rng));
    }
  }
  auto lengths = [&](std::int64_t full) {
    std::vector<std::int64_t> len(static_cast<std::size_t>(s.B));
    for (auto &n : len) n = upto(full);
    len[0] = full;
    if (s.B > 2) len[1] = 0;
    std::shuffle(len.begin(), len.end(), rng);
    return len;
  };
  if (bits & ATTNCHECK_FEATURE_VARLEN) {
    f.storage = KvStorage::varlen;
    f.seqlens_q = lengths(s.Lq);
    f.seqlens_k = lengths(s.Lk);
  } else if (bits & ATTNCHECK_FEATURE_PAGED) {
    f.storage = KvStorage::paged;
    f.page_size = 2;
    f.pages_per_seq = (s.Lk + f.page_size - 1) / f.page_size;
    f.num_pages = s.B * f.pages_per_seq + 2;
    std::vector<std::int32_t> pages(static_cast<std::size_t>(f.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    f.block_table.assign(pages.begin(), pages.begin() + s.B * f.pages_per_seq);
    f.seqlens_k = lengths(s.Lk);
  }
  if (bits & ATTNCHECK_FEATURE_DROPOUT) {
    f.dropout_p = 0.25;
    f.dropout_seed = rng();
  }
  return p;
}

/// The problem's results in float64 (logical, as call_forward and call_backward return them): out, lse and, with
/// dout, dq, dk, dv. Rows a sequence does not have: out 0, lse −∞; gradients of absent rows and keys 0.
struct Exact {
  std::vector<double> out, lse, dq, dk, dv;  // row-major [B,Hq,Lq,Dv], [B,Hq,Lq], [B,Hq,Lq,D], [B,Hkv,Lk,D|Dv]
};
inline Exact exact(const Problem &p) {
  const Shape &s = p.shape;
  const Features &f = p.features;
  const double scale = p.params.scale, kInf = std::numeric_limits<double>::infinity();
  const auto z = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  Exact e;
  e.out.assign(z(s.B * s.Hq * s.Lq * s.Dv), 0);
  e.lse.assign(z(s.B * s.Hq * s.Lq), -kInf);
  e.dq.assign(z(s.B * s.Hq * s.Lq * s.D), 0);
  e.dk.assign(z(s.B * s.Hkv * s.Lk * s.D), 0);
  e.dv.assign(z(s.B * s.Hkv * s.Lk * s.Dv), 0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t hk = s.kv_head(h);
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const RowFrame fr = row_frame(f, p.params.mask, b, i, s.Lq, s.Lk);
        if (!fr.exists) continue;
        // Logits of the visible keys (softcapped, biased), the max with the sink.
        std::vector<double> logit(z(s.Lk), -kInf), dcap(z(s.Lk), 1);
        double m = f.sinks.empty() ? -kInf : f.sinks[z(h)];
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!sees(f, p.params.mask, fr, s.Lq, s.Lk, b, h, i, j)) continue;
          double x = 0;
          for (std::int64_t d = 0; d < s.D; ++d) x += p.q.get({b, h, i, d}) * p.k.get({b, hk, j, d});
          x *= scale;
          if (f.softcap > 0) {
            const double t = std::tanh(x / f.softcap);
            x = f.softcap * t;
            dcap[z(j)] = 1 - t * t;
          }
          x += logit_bias(f, fr, s.Lq, s.Lk, b, h, i, j);
          logit[z(j)] = x;
          m = std::max(m, x);
        }
        if (m == -kInf) continue;  // sees no key and has no sink
        double l = f.sinks.empty() ? 0 : std::exp(f.sinks[z(h)] - m);
        for (double x : logit) l += std::exp(x - m);
        const std::size_t row = z((b * s.Hq + h) * s.Lq + i);
        e.lse[row] = m + std::log(l);
        std::vector<double> P(z(s.Lk));
        for (std::int64_t j = 0; j < s.Lk; ++j) P[z(j)] = std::exp(logit[z(j)] - e.lse[row]);
        for (std::int64_t c = 0; c < s.Dv; ++c) {
          double o = 0;
          for (std::int64_t j = 0; j < s.Lk; ++j) o += P[z(j)] * p.v.get({b, hk, j, c});
          e.out[row * z(s.Dv) + z(c)] = o;
        }
        if (!p.dout) continue;
        double D = 0;
        for (std::int64_t c = 0; c < s.Dv; ++c)
          D += p.dout->get({b, h, i, c}) * e.out[row * z(s.Dv) + z(c)];
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          const double pj = P[z(j)];
          if (pj == 0) continue;
          double dp = 0;
          for (std::int64_t c = 0; c < s.Dv; ++c) dp += p.dout->get({b, h, i, c}) * p.v.get({b, hk, j, c});
          const double ds = pj * (dp - D) * dcap[z(j)] * scale;
          const std::size_t krow = z((b * s.Hkv + hk) * s.Lk + j);
          for (std::int64_t d = 0; d < s.D; ++d) {
            e.dq[row * z(s.D) + z(d)] += ds * p.k.get({b, hk, j, d});
            e.dk[krow * z(s.D) + z(d)] += ds * p.q.get({b, h, i, d});
          }
          for (std::int64_t c = 0; c < s.Dv; ++c)
            e.dv[krow * z(s.Dv) + z(c)] += pj * p.dout->get({b, h, i, c});
        }
      }
    }
  return e;
}

/// The largest |got − want| / (|want| + 1) over a tensor's elements (row-major); infinities must match exactly.
inline double max_rel_error(const Tensor &got, const std::vector<double> &want) {
  const std::vector<double> g = got.to_vector();
  double worst = g.size() == want.size() ? 0 : std::numeric_limits<double>::infinity();
  for (std::size_t n = 0; n < g.size() && n < want.size(); ++n) {
    if (std::isinf(want[n]) || std::isinf(g[n])) {
      if (g[n] != want[n]) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double r = std::fabs(g[n] - want[n]) / (std::fabs(want[n]) + 1);
    worst = std::isnan(r) ? std::numeric_limits<double>::infinity() : std::max(worst, r);
  }
  return worst;
}

}  // namespace featuret
