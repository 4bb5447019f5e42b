// Mutations: a case → a neighbour, for the targeted phase of the engine (check.h), which climbs a property's error
// ÷ bound from the search's worst cases. Deterministic for a Random; no shrinking here.
#include "attncheck/gen.h"

#include "bits.h"

#include <algorithm>
#include <array>

namespace attncheck {

namespace {
using gen_detail::Bits;
using gen_detail::ulp_in;

/// magnify's factors: logits grow (the softmax sharpens, exp's argument widens) or shrink.
constexpr std::array<double, 5> kMagnify{0.5, 0.75, 1.5, 2, 4};
/// dominate's factors: the key is this multiple of the query it is made to meet.
constexpr std::array<double, 3> kDominate{1, 2, 4};
/// shift_keys' multiples of the query added to every key.
constexpr std::array<double, 3> kShift{1, 4, 16};
constexpr std::int64_t kMaxRedrawn = 3, kMaxNudgeUlps = 4;
/// Draws of a mutation before giving up on one that changes the case (some do not apply to every case).
constexpr int kMutationTries = 8;

enum class Mutation { magnify, redraw, nudge, dominate, shift_keys, move_key, resize };
/// The draw's weights: magnify three times as often as each other — a whole tensor's scale moves every element's
/// error at once, where the others move a few (the worst element's among many only by chance).
constexpr std::array<Mutation, 9> kMutations{Mutation::magnify,    Mutation::magnify,  Mutation::magnify,
                                             Mutation::redraw,     Mutation::nudge,    Mutation::dominate,
                                             Mutation::shift_keys, Mutation::move_key, Mutation::resize};

enum Tensor { kQ, kK, kV, kDout };

std::vector<double> &values(Case &c, Tensor t) {
  switch (t) {
    case kQ: return c.q;
    case kK: return c.k;
    case kV: return c.v;
    case kDout: return c.dout;
  }
  return c.q;
}
/// Entries of one row of tensor t (its last dimension).
std::int64_t row_length(const Shape &s, Tensor t) { return t == kQ || t == kK ? s.D : s.Dv; }
/// The family tensor t's entries are drawn from.
Family family_of(const CaseSpec &s, Tensor t) { return t == kQ || t == kK ? s.family : value_family_of_v(s.family); }

/// x as the case stores it: clamped to the dtype's largest finite value, rounded to the dtype (and the FP8 format).
double stored(const CaseSpec &s, double x) {
  const double m = max_finite(s.dtype);
  const double y = round_to(s.dtype, std::clamp(x, -m, m));
  return s.features.bits & ATTNCHECK_FEATURE_FP8 ? fp8_value(s.features.fp8, y) : y;
}

/// One of the tensors a mutation may change: q, k, v (when drawn) and dout (when present); `logits` only q, k.
Tensor pick_tensor(Bits &b, const Case &c, const CaseOptions &opts, bool logits) {
  std::vector<Tensor> ts{kQ, kK};
  if (!logits && opts.draw_v && !c.v.empty()) ts.push_back(kV);
  if (!logits && !c.dout.empty()) ts.push_back(kDout);
  return b.pick(ts);
}

void magnify(Bits &b, Case &c, const CaseOptions &opts) {
  const Tensor t = pick_tensor(b, c, opts, b.chance(0.75));
  std::vector<double> &x = values(c, t);
  const double f = b.pick(kMagnify);
  const std::int64_t n = row_length(c.spec.shape, t);
  if (x.empty() || n == 0) return;
  // The whole tensor, or one row of it (one query's or key's logits only).
  std::size_t lo = 0, hi = x.size();
  if (b.chance(0.5)) {
    lo = static_cast<std::size_t>(b.uniform(0, static_cast<std::int64_t>(x.size()) / n - 1) * n);
    hi = lo + static_cast<std::size_t>(n);
  }
  for (std::size_t i = lo; i < hi; ++i) x[i] = stored(c.spec, f * x[i]);
}

void redraw(Bits &b, Case &c, const CaseOptions &opts) {
  const Tensor t = pick_tensor(b, c, opts, false);
  std::vector<double> &x = values(c, t);
  if (x.empty()) return;
  rc::Random r(b.next());
  for (std::int64_t k = b.uniform(1, kMaxRedrawn); k > 0; --k)
    x[static_cast<std::size_t>(b.uniform(0, static_cast<std::int64_t>(x.size()) - 1))] =
        stored(c.spec, draw_value(r, family_of(c.spec, t), c.spec.dtype));
}

void nudge(Bits &b, Case &c, const CaseOptions &opts) {
  std::vector<double> &x = values(c, pick_tensor(b, c, opts, false));
  if (x.empty()) return;
  double &e = x[static_cast<std::size_t>(b.uniform(0, static_cast<std::int64_t>(x.size()) - 1))];
  const auto ulps = static_cast<double>(b.uniform(1, kMaxNudgeUlps)) * (b.chance(0.5) ? -1 : 1);
  e = stored(c.spec, e + ulps * ulp_in(c.spec.dtype, e));
}

/// Key j of (batch bb, kv head h) becomes a multiple of query row i of one of its query heads.
void dominate(Bits &b, Case &c) {
  const Shape &s = c.spec.shape;
  if (s.Lq == 0 || s.Lk == 0 || s.D == 0) return;
  const std::int64_t bb = b.uniform(0, s.B - 1), h = b.uniform(0, s.Hkv - 1), j = b.uniform(0, s.Lk - 1);
  const std::int64_t hq = h * s.group() + b.uniform(0, s.group() - 1), i = b.uniform(0, s.Lq - 1);
  const double f = b.pick(kDominate);
  for (std::int64_t d = 0; d < s.D; ++d)
    c.k[static_cast<std::size_t>(((bb * s.Hkv + h) * s.Lk + j) * s.D + d)] =
        stored(c.spec, f * c.q[static_cast<std::size_t>(((bb * s.Hq + hq) * s.Lq + i) * s.D + d)]);
}

/// Every key of (batch bb, kv head h) plus a multiple of one query row it meets: that row's logits all rise by the
/// same amount (its softmax unchanged in exact arithmetic), the others' by their own — large logits that do not
/// saturate, which the draws rarely give (their large logits are spread as widely).
void shift_keys(Bits &b, Case &c) {
  const Shape &s = c.spec.shape;
  if (s.Lq == 0 || s.Lk == 0 || s.D == 0) return;
  const std::int64_t bb = b.uniform(0, s.B - 1), h = b.uniform(0, s.Hkv - 1);
  const std::int64_t hq = h * s.group() + b.uniform(0, s.group() - 1), i = b.uniform(0, s.Lq - 1);
  const double f = b.pick(kShift);
  for (std::int64_t j = 0; j < s.Lk; ++j)
    for (std::int64_t d = 0; d < s.D; ++d) {
      double &x = c.k[static_cast<std::size_t>(((bb * s.Hkv + h) * s.Lk + j) * s.D + d)];
      x = stored(c.spec, x + f * c.q[static_cast<std::size_t>(((bb * s.Hq + hq) * s.Lq + i) * s.D + d)]);
    }
}

/// Keys j and j2 of (batch bb, kv head h) trade places (k and v rows); j2 at a tiling boundary when one fits.
void move_key(Bits &b, Case &c, const CaseOptions &opts) {
  const Shape &s = c.spec.shape;
  if (s.Lk < 2) return;
  const std::int64_t bb = b.uniform(0, s.B - 1), h = b.uniform(0, s.Hkv - 1), j = b.uniform(0, s.Lk - 1);
  std::vector<std::int64_t> to;
  for (std::int64_t t : kTileBoundaries)
    if (t < s.Lk) to.push_back(t);
  const std::int64_t j2 = !to.empty() && b.chance(0.5) ? b.pick(to) : b.uniform(0, s.Lk - 1);
  const auto swap_rows = [&](std::vector<double> &x, std::int64_t n) {
    for (std::int64_t d = 0; d < n; ++d)
      std::swap(x[static_cast<std::size_t>(((bb * s.Hkv + h) * s.Lk + j) * n + d)],
                x[static_cast<std::size_t>(((bb * s.Hkv + h) * s.Lk + j2) * n + d)]);
  };
  swap_rows(c.k, s.D);
  if (opts.draw_v) swap_rows(c.v, s.Dv);
}

/// Copies the entries of `from` [B, H, L, n] (L = from_len) that a tensor of length to_len keeps into `to`.
void copy_rows(const std::vector<double> &from, std::vector<double> &to, std::int64_t bh, std::int64_t from_len,
               std::int64_t to_len, std::int64_t n) {
  const std::int64_t keep = std::min(from_len, to_len);
  for (std::int64_t r = 0; r < bh; ++r)
    std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(r * from_len * n), keep * n,
                to.begin() + static_cast<std::ptrdiff_t>(r * to_len * n));
}

/// Lq or Lk to a neighbour (±1, or the next tiling boundary either way): the kept values stay, new ones are drawn.
/// Not for a stretched or pooled case, nor one whose head dims follow Lk, nor outside the options.
void resize(Bits &b, Case &c, const CaseOptions &opts) {
  if (c.spec.stretch.active() || opts.shape_pool || opts.dv_equals_lk) return;
  const bool keys = b.chance(2.0 / 3);
  const std::int64_t len = keys ? c.spec.shape.Lk : c.spec.shape.Lq;
  std::vector<std::int64_t> to{len - 1, len + 1};
  if (const auto up = std::upper_bound(kTileBoundaries.begin(), kTileBoundaries.end(), len);
      up != kTileBoundaries.end())
    to.push_back(*up);
  if (const auto down = std::lower_bound(kTileBoundaries.begin(), kTileBoundaries.end(), len);
      down != kTileBoundaries.begin())
    to.push_back(*(down - 1));
  CaseSpec spec = c.spec;
  (keys ? spec.shape.Lk : spec.shape.Lq) = b.pick(to);
  if (spec.shape.Lq < 1 || !opts.admits(spec) || spec.work() > opts.max_work) return;
  Case out = draw_case(rc::Random(b.next()), spec, opts);
  const Shape &s = c.spec.shape, &t = spec.shape;
  copy_rows(c.q, out.q, s.B * s.Hq, s.Lq, t.Lq, s.D);
  copy_rows(c.k, out.k, s.B * s.Hkv, s.Lk, t.Lk, s.D);
  if (opts.draw_v) copy_rows(c.v, out.v, s.B * s.Hkv, s.Lk, t.Lk, s.Dv);
  if (!c.dout.empty()) copy_rows(c.dout, out.dout, s.B * s.Hq, s.Lq, t.Lq, s.Dv);
  c = std::move(out);
}
}  // namespace

Case mutate_case(const Case &c, rc::Random &random, const CaseOptions &opts) {
  Bits b(rc::Random(random.next()));
  for (int tries = 0; tries < kMutationTries; ++tries) {
    Case m = c;
    switch (b.pick(kMutations)) {
      case Mutation::magnify: magnify(b, m, opts); break;
      case Mutation::redraw: redraw(b, m, opts); break;
      case Mutation::nudge: nudge(b, m, opts); break;
      case Mutation::dominate: dominate(b, m); break;
      case Mutation::shift_keys: shift_keys(b, m); break;
      case Mutation::move_key: move_key(b, m, opts); break;
      case Mutation::resize: resize(b, m, opts); break;
    }
    m.broadcast_values();  // an expanded input holds one slice's values
    if (!m.same_as(c)) return m;
  }
  return c;
}

}  // namespace attncheck
