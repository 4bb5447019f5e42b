#include "attncheck/stretch.h"

#include "attncheck/compare.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace attncheck {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// A·C beyond this would leave the storage dtypes' exact range for the gate: the core's values are too large.
constexpr double kMaxGateProduct = 0x1p28;

std::size_t at(std::int64_t x) { return static_cast<std::size_t>(x); }

/// Core value of q [B,Hq,Lq,D], k [B,Hkv,Lk,D] or v [B,Hkv,Lk,Dv] (row-major).
double core(const std::vector<double> &t, std::int64_t b, std::int64_t h, std::int64_t H, std::int64_t r,
            std::int64_t R, std::int64_t d, std::int64_t W) {
  return t[at(((b * H + h) * R + r) * W + d)];
}

/// Row `row` of a problem's k and v ← live key `t` of kv head (b, h), and the gate 0.
void write_live_key(Tensor &k, Tensor &v, const Case &c, std::int64_t b, std::int64_t h, std::int64_t row,
                    std::int64_t t) {
  const Shape &s = c.spec.shape;
  for (std::int64_t d = 0; d < s.D; ++d) k.set({b, h, row, d}, core(c.k, b, h, s.Hkv, t, s.Lk, d, s.D));
  k.set({b, h, row, s.D}, 0.0);
  for (std::int64_t d = 0; d < s.Dv; ++d) v.set({b, h, row, d}, core(c.v, b, h, s.Hkv, t, s.Lk, d, s.Dv));
}

/// Live keys among the first `visible` positions of the row.
std::int64_t live_seen(const std::vector<std::int64_t> &pos, std::int64_t visible) {
  return std::lower_bound(pos.begin(), pos.end(), visible) - pos.begin();
}
}  // namespace

Shape stretched_shape(const CaseSpec &spec) {
  Shape s = spec.shape;
  s.Lq = spec.stretch.Lq;
  s.Lk = spec.stretch.Lk;
  s.D = spec.shape.D + 1;
  return s;
}

namespace {
/// filler_value(j, c) repeats in j with this period.
constexpr std::int64_t kFillerPeriod = 2 * kFillerValueMax + 1;

/// `count` rows of `width` values value(r, x), as bytes in `dt`: write() copies row r into row (b, h, j) of a tensor
/// — one memcpy where its rows are contiguous, element by element along the stride otherwise — so that a row
/// written many times is rounded to the dtype once (the stretched tensors repeat a few rows over long lengths).
class RowImages {
 public:
  template <class F>
  RowImages(Dtype dt, std::int64_t width, std::int64_t count, F value) : width_(width), size_(dtype_size(dt)) {
    for (std::int64_t r = 0; r < count; ++r) {
      Tensor row = Tensor::contiguous(dt, {width});
      for (std::int64_t x = 0; x < width; ++x) row.set({x}, value(r, x));
      rows_.push_back(std::move(row));
    }
  }
  void write(Tensor &t, std::int64_t b, std::int64_t h, std::int64_t j, std::int64_t r) const {
    const std::byte *src = rows_[at(r)].bytes().data();
    std::byte *dst = t.bytes().data() + t.index({b, h, j, 0}) * static_cast<std::int64_t>(size_);
    const std::int64_t stride = t.strides().back();
    if (stride == 1) {
      std::memcpy(dst, src, at(width_) * size_);
      return;
    }
    for (std::int64_t x = 0; x < width_; ++x)
      std::memcpy(dst + x * stride * static_cast<std::int64_t>(size_), src + at(x) * size_, size_);
  }

 private:
  std::int64_t width_;
  std::size_t size_;
  std::vector<Tensor> rows_;
};

/// The rows of a stretched q: core query qi of (b, h), then the gate A — image (b·Hq + h)·Lq + qi.
RowImages query_rows(const Case &c, std::int64_t width, double A) {
  const Shape &s = c.spec.shape;
  return RowImages(c.spec.dtype, width, s.B * s.Hq * s.Lq, [&](std::int64_t r, std::int64_t d) {
    return d == s.D ? A : c.q[at(r * s.D + d)];
  });
}
}  // namespace

std::vector<std::int64_t> live_positions(std::int64_t length, std::int64_t live) {
  if (live < 1 || live > length) throw std::invalid_argument("live_positions: need 1 ≤ live ≤ length");
  std::vector<std::int64_t> pos(at(live));
  pos[0] = 0;
  for (std::int64_t t = 1; t < live; ++t) {
    std::int64_t p = length - 1;
    if (t < live - 1) {
      const std::int64_t base = t * (length - 1) / (live - 1), edge = base / kLiveSnap * kLiveSnap;
      p = t % 2 ? edge - 1 : edge;  // the last key of a tile, then the first of one
    }
    // Ascending, and room left for the keys after it.
    pos[at(t)] = std::clamp(p, pos[at(t - 1)] + 1, length - (live - t));
  }
  return pos;
}

double filler_value(std::int64_t j, std::int64_t c) {
  return static_cast<double>((j * 5 + c * 3) % (2 * kFillerValueMax + 1) - kFillerValueMax);
}

Gate gate_of(const Case &c) {
  const Shape &s = c.spec.shape;
  const double scale = c.spec.scale();
  double worst = 0;  // max over rows of scale·Σ_d |q_d k_0d|: the logit of key 0 is at least its negative
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        double dot = 0;
        for (std::int64_t d = 0; d < s.D; ++d)
          dot += std::fabs(core(c.q, b, h, s.Hq, i, s.Lq, d, s.D)) *
                 std::fabs(core(c.k, b, s.kv_head(h), s.Hkv, 0, s.Lk, d, s.D));
        worst = std::max(worst, scale * dot);
      }
  // Rounded up twice over: the double arithmetic here, and to a power of two.
  const double need = (kFillerMargin + worst) / scale * (1 + 0x1p-40);
  if (!(need <= kMaxGateProduct))
    throw std::invalid_argument("stretched case: the core's logits are too large for a gate of A·C ≤ 2^28");
  const int e = std::max(0, static_cast<int>(std::ceil(std::log2(need))));
  Gate g;
  g.A = std::ldexp(1.0, (e + 1) / 2);
  g.C = std::ldexp(1.0, e - (e + 1) / 2);
  return g;
}

Problem stretched_problem(const Case &c) {
  if (!c.dout.empty()) throw std::invalid_argument("stretched cases are forward-only (no dout)");
  const Shape &s = c.spec.shape;
  const Shape ls = stretched_shape(c.spec);
  ls.validate();
  const Gate g = gate_of(c);
  const std::vector<std::int64_t> pos = live_positions(ls.Lk, s.Lk);
  Problem p;
  p.shape = ls;
  p.params.scale = default_scale(ls.D);
  p.params.mask = c.spec.mask;
  const auto tensor = [&](std::vector<std::int64_t> shape) {
    Tensor t = Tensor::with_layout(c.spec.dtype, std::move(shape), c.spec.layout, Case::kInputPad);
    t.fill_storage(std::numeric_limits<double>::quiet_NaN());  // padding stays NaN, as in Case::problem()
    return t;
  };
  p.q = tensor({ls.B, ls.Hq, ls.Lq, ls.D});
  const RowImages queries = query_rows(c, ls.D, g.A);
  for (std::int64_t b = 0; b < ls.B; ++b)
    for (std::int64_t h = 0; h < ls.Hq; ++h)
      for (std::int64_t i = 0; i < ls.Lq; ++i) queries.write(p.q, b, h, i, (b * s.Hq + h) * s.Lq + i % s.Lq);
  p.k = tensor({ls.B, ls.Hkv, ls.Lk, ls.D});
  p.v = tensor({ls.B, ls.Hkv, ls.Lk, ls.Dv});
  // Filler rows repeat (k: one row; v: filler_value's period in j): written as byte images where a row is contiguous
  // — billions of elements take seconds, not minutes.
  const RowImages k_filler(c.spec.dtype, ls.D, 1, [&](std::int64_t, std::int64_t d) { return d == s.D ? -g.C : 0.0; });
  const RowImages v_filler(c.spec.dtype, ls.Dv, kFillerPeriod, filler_value);
  for (std::int64_t b = 0; b < ls.B; ++b)
    for (std::int64_t h = 0; h < ls.Hkv; ++h) {
      std::size_t t = 0;  // the next live key
      for (std::int64_t j = 0; j < ls.Lk; ++j) {
        if (t < pos.size() && pos[t] == j) {
          write_live_key(p.k, p.v, c, b, h, j, static_cast<std::int64_t>(t++));
        } else {
          k_filler.write(p.k, b, h, j, 0);
          v_filler.write(p.v, b, h, j, j % kFillerPeriod);
        }
      }
    }
  return p;
}

std::string describe_stretch(const Case &c) {
  const Shape ls = stretched_shape(c.spec);
  const Gate g = gate_of(c);
  const std::vector<std::int64_t> pos = live_positions(ls.Lk, c.spec.shape.Lk);
  std::string out = "  stretched: ";
  out += ls.describe();
  out += ", the core's ";
  out += std::to_string(c.spec.shape.Lq);
  out += " queries repeated over the rows; gate column A = ";
  out += hex_and_decimal(g.A);
  out += " (queries), C = ";
  out += hex_and_decimal(g.C);
  const std::string vmax = std::to_string(kFillerValueMax);
  out += " (filler keys: k = −C·e_D, v in [−";
  out += vmax;
  out += ", ";
  out += vmax;
  out += "]); live keys at";
  for (std::int64_t p : pos) {
    out += ' ';
    out += std::to_string(p);
  }
  return out;
}

StretchedForward stretched_forward(const Case &c, const PrecisionProfile &profile) {
  const Shape &s = c.spec.shape;
  const Shape ls = stretched_shape(c.spec);
  const Gate g = gate_of(c);
  const std::vector<std::int64_t> pos = live_positions(ls.Lk, s.Lk);
  const double scale = default_scale(ls.D);
  // The filler of every long row is the same class: its logit −scale·A·C, its values within kFillerValueMax.
  FillerKeys filler_class;
  filler_class.max_logit = -scale * g.A * g.C;
  filler_class.max_abs_logit = filler_class.max_abs_dot = scale * g.A * g.C;
  filler_class.max_abs_v = kFillerValueMax;
  filler_class.max_k_l1 = g.C;  // k = −C·e_D

  StretchedForward sf;
  sf.exact.out.assign(at(ls.B * ls.Hq * ls.Lq * ls.Dv), 0.0);
  sf.exact.lse.assign(at(ls.B * ls.Hq * ls.Lq), -kInf);
  sf.bounds.out.assign(sf.exact.out.size(), 0.0);
  sf.bounds.lse.assign(sf.exact.lse.size(), 0.0);
  // One core problem per core query: n live-key rows, top-left causal, so that row r answers the prefix of r + 1
  // live keys; each long row is one of its rows.
  const RowImages queries = query_rows(c, ls.D, g.A);
  for (std::int64_t qi = 0; qi < s.Lq; ++qi) {
    Problem cp;
    cp.shape = Shape{.B = s.B, .Hq = s.Hq, .Hkv = s.Hkv, .Lq = s.Lk, .Lk = s.Lk, .D = ls.D, .Dv = s.Dv};
    cp.params.scale = scale;
    cp.params.mask = Mask::causal_top_left;
    cp.q = Tensor::contiguous(c.spec.dtype, {s.B, s.Hq, s.Lk, ls.D});
    cp.k = Tensor::contiguous(c.spec.dtype, {s.B, s.Hkv, s.Lk, ls.D});
    cp.v = Tensor::contiguous(c.spec.dtype, {s.B, s.Hkv, s.Lk, s.Dv});
    for (std::int64_t b = 0; b < s.B; ++b) {
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t r = 0; r < s.Lk; ++r) queries.write(cp.q, b, h, r, (b * s.Hq + h) * s.Lq + qi);
      for (std::int64_t h = 0; h < s.Hkv; ++h)
        for (std::int64_t j = 0; j < s.Lk; ++j) write_live_key(cp.k, cp.v, c, b, h, j, j);
    }
    // The filler each core row stands for: the most any long row it answers sees (the bound grows with n).
    std::vector<FillerKeys> filler(at(s.B * s.Hq * s.Lk));
    std::vector<std::int64_t> row_of(at(ls.Lq), -1);  // long row → core row (−1: not this query, or empty)
    for (std::int64_t i = qi; i < ls.Lq; i += s.Lq) {
      const std::int64_t visible = visible_count(c.spec.mask, i, ls.Lq, ls.Lk), live = live_seen(pos, visible);
      if (live == 0) continue;  // sees no key (key 0 is live): O = 0, LSE = −∞
      row_of[at(i)] = live - 1;
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h) {
          FillerKeys &f = filler[at(lse_offset(cp.shape, b, h, live - 1))];
          const double count = std::max(f.count, static_cast<double>(visible - live));
          f = filler_class;
          f.count = count;
        }
    }
    const ExactForward e = reference_forward(cp);
    const ForwardBounds fb = forward_bounds(cp, e, profile, filler);
    for (std::int64_t i = qi; i < ls.Lq; i += s.Lq) {
      const std::int64_t r = row_of[at(i)];
      if (r < 0) continue;
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h) {
          sf.exact.lse[at(lse_offset(ls, b, h, i))] = e.lse[at(lse_offset(cp.shape, b, h, r))];
          sf.bounds.lse[at(lse_offset(ls, b, h, i))] = fb.lse[at(lse_offset(cp.shape, b, h, r))];
          for (std::int64_t col = 0; col < s.Dv; ++col) {
            sf.exact.out[at(out_offset(ls, b, h, i, col))] = e.out[at(out_offset(cp.shape, b, h, r, col))];
            sf.bounds.out[at(out_offset(ls, b, h, i, col))] = fb.out[at(out_offset(cp.shape, b, h, r, col))];
          }
        }
    }
  }
  return sf;
}

}  // namespace attncheck
