// Shrinkers: simpler candidates for specs and values (see shrink.h). Pure functions, no RapidCheck.
#include "attncheck/shrink.h"

#include "attncheck/gen.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <tuple>

namespace attncheck::shrink {

namespace {
constexpr int kDoubleSignificandBits = 53;

bool representable(Dtype dt, double x) { return std::isfinite(x) && round_to(dt, x) == x; }

bool is_integer(double x) { return std::isfinite(x) && std::trunc(x) == x; }

/// Rank of x in the simplicity order: (class, primary, magnitude, negative), compared lexicographically.
std::tuple<int, double, double, bool> key(double x) {
  enum Class { kZero, kInteger, kFraction, kNonFinite };
  if (x == 0) return {kZero, 0, 0, std::signbit(x)};
  if (!std::isfinite(x)) return {kNonFinite, std::isnan(x) ? 1 : 0, 0, std::signbit(x)};
  if (is_integer(x)) return {kInteger, std::abs(x), 0, x < 0};
  return {kFraction, significant_bits(x), std::abs(x), x < 0};
}

void add_spec(std::vector<CaseSpec> &out, const CaseSpec &from, const CaseSpec &cand) {
  if (cand == from) return;
  if (std::find(out.begin(), out.end(), cand) == out.end()) out.push_back(cand);
}
/// Simpler settings of the case's features: first without each feature the property does not need (a combined one),
/// then a window with one side unbounded, then narrower; softcap a small power of two; a mask shared by batches and heads, all visible,
/// without empty rows or a hidden prefix, boolean; pages of one key; dropout at 1/2; the seed 0.
void feature_shrinks(const CaseSpec &s, const CaseOptions &opts, std::vector<CaseSpec> &out) {
  const FeatureSpec &f = s.features;
  if (!f.active()) return;
  auto with = [&](auto edit) {
    CaseSpec c = s;
    edit(c.features);
    add_spec(out, s, c);
  };
  for (std::uint32_t extra : kAllFeatures)
    if ((f.bits & extra) && !(opts.features & extra)) with([&](FeatureSpec &x) { x.bits &= ~extra; });
  if (f.window_left >= 0 && f.window_right >= 0) {
    with([](FeatureSpec &x) { x.window_left = -1; });
    with([](FeatureSpec &x) { x.window_right = -1; });
  }
  for (auto n : dim_toward(f.window_left, 0)) with([&](FeatureSpec &x) { x.window_left = n; });
  for (auto n : dim_toward(f.window_right, 0)) with([&](FeatureSpec &x) { x.window_right = n; });
  if (f.softcap > 0)
    for (double c = 1; c < f.softcap; c *= 2) with([&](FeatureSpec &x) { x.softcap = c; });
  if (f.mask_per_batch) with([](FeatureSpec &x) { x.mask_per_batch = false; });
  if (f.mask_per_head) with([](FeatureSpec &x) { x.mask_per_head = false; });
  if ((f.bits & ATTNCHECK_FEATURE_MASK) && f.mask_keep < 1) with([](FeatureSpec &x) { x.mask_keep = 1; });
  if (f.mask_bytes) with([](FeatureSpec &x) { x.mask_bytes = false; });
  if (f.mask_empty_rows) with([](FeatureSpec &x) { x.mask_empty_rows = false; });
  for (auto n : dim_toward(f.mask_prefix, 0)) with([&](FeatureSpec &x) { x.mask_prefix = n; });
  if (f.strided_args) with([](FeatureSpec &x) { x.strided_args = false; });
  if (f.mask_kind == MaskKind::additive) with([](FeatureSpec &x) { x.mask_kind = MaskKind::boolean; });
  for (auto n : dim_toward(f.page_size, 1)) with([&](FeatureSpec &x) { x.page_size = n; });
  if ((f.bits & ATTNCHECK_FEATURE_DROPOUT) && f.dropout_p != 0.5) with([](FeatureSpec &x) { x.dropout_p = 0.5; });
  if (f.fp8 != Fp8::e4m3fn) with([](FeatureSpec &x) { x.fp8 = Fp8::e4m3fn; });
  if (f.seed != 0) with([](FeatureSpec &x) { x.seed = 0; });
}
}  // namespace

std::vector<std::int64_t> dim_toward(std::int64_t n, std::int64_t lo) {
  std::vector<std::int64_t> out;
  if (n <= lo) return out;
  out.push_back(lo);
  for (std::int64_t step = (n - lo) / 2; step >= 1; step /= 2)
    if (n - step != out.back()) out.push_back(n - step);
  if (out.back() != n - 1) out.push_back(n - 1);
  return out;
}

std::vector<CaseSpec> spec_shrinks(const CaseSpec &s, const CaseOptions &opts) {
  std::vector<CaseSpec> out;
  if (is_huge(s)) return out;
  const Shape &sh = s.shape;
  auto with = [&](auto edit) {
    CaseSpec c = s;
    edit(c.shape);
    opts.tie(c.shape);
    add_spec(out, s, c);
  };
  // A stretched case's long lengths first (its structure stays: fewer and shorter rows, then fewer live keys below).
  const Stretch &st = s.stretch;
  if (st.active()) {
    auto stretched = [&](auto edit) {
      CaseSpec c = s;
      edit(c.stretch);
      add_spec(out, s, c);
    };
    // Fewer rows first: a long row's failure usually survives on a few rows, and each candidate is then cheap.
    for (auto n : dim_toward(st.Lq, sh.Lq)) stretched([&](Stretch &x) { x.Lq = n; });
    if (st.Lq == st.Lk)
      for (auto n : dim_toward(st.Lq, std::max(sh.Lq, sh.Lk))) stretched([&](Stretch &x) { x.Lq = x.Lk = n; });
    for (auto n : dim_toward(st.Lk, sh.Lk)) stretched([&](Stretch &x) { x.Lk = n; });
  }
  // Lengths first: they dominate the cost and the size of the printed counterexample.
  if (sh.Lq == sh.Lk)
    for (auto n : dim_toward(sh.Lq, 1)) with([&](Shape &x) { x.Lq = x.Lk = n; });
  for (auto n : dim_toward(sh.Lk, 1)) with([&](Shape &x) { x.Lk = n; });
  for (auto n : dim_toward(sh.Lq, 1)) with([&](Shape &x) { x.Lq = n; });
  if (sh.D == sh.Dv && !opts.tied_dim(&Shape::Dv))
    for (auto n : dim_toward(sh.D, 1)) with([&](Shape &x) { x.D = x.Dv = n; });
  if (!opts.tied_dim(&Shape::D))
    for (auto n : dim_toward(sh.D, 1)) with([&](Shape &x) { x.D = n; });
  for (auto n : dim_toward(sh.Dv, 1)) with([&](Shape &x) { x.Dv = n; });
  // Heads: one head; the GQA group on a single kv head; MHA; then fewer kv heads or a smaller group.
  const std::int64_t G = sh.group();
  with([](Shape &x) { x.Hq = x.Hkv = 1; });
  with([&](Shape &x) { x.Hq = G, x.Hkv = 1; });
  with([](Shape &x) { x.Hq = x.Hkv; });
  for (auto n : dim_toward(sh.Hkv, 1)) with([&](Shape &x) { x.Hkv = n, x.Hq = n * G; });
  for (auto g : dim_toward(G, 1)) with([&](Shape &x) { x.Hq = x.Hkv * g; });
  for (auto n : dim_toward(sh.B, 1)) with([&](Shape &x) { x.B = n; });
  // Then the qualitative choices.
  if (!opts.mask && s.mask != Mask::none) {
    CaseSpec c = s;
    c.mask = Mask::none;
    add_spec(out, s, c);
  }
  if (!opts.layout && s.layout != Layout::bhld) {
    CaseSpec c = s;
    c.layout = Layout::bhld;
    add_spec(out, s, c);
  }
  for (const TensorLayouts &t : layout_shrinks(s.layouts)) {
    CaseSpec c = s;
    c.layouts = t;
    add_spec(out, s, c);
  }
  if (!opts.family)
    for (Family f : {Family::small_ints, Family::normal})
      if (f < s.family) {
        CaseSpec c = s;
        c.family = f;
        add_spec(out, s, c);
      }
  feature_shrinks(s, opts, out);
  return out;
}

namespace {
/// Axes no longer than this also get keep-one and drop-one candidates (longer ones are halved first).
constexpr std::int64_t kMaxIndexedAxis = 32;

std::int64_t axis_length(const Shape &sh, Slice::Axis a) {
  switch (a) {
    case Slice::Axis::key: return sh.Lk;
    case Slice::Axis::query: return sh.Lq;
    case Slice::Axis::diagonal: return sh.Lq == sh.Lk ? sh.Lq : 1;
    case Slice::Axis::head_dim: return sh.D;
    case Slice::Axis::value_dim: return sh.Dv;
    case Slice::Axis::kv_head: return sh.Hkv;
    case Slice::Axis::group: return sh.group();
    case Slice::Axis::batch: return sh.B;
  }
  return 1;
}

/// The kept indices of an axis of length n under slice s (all of them when s is on another axis).
std::vector<std::int64_t> kept(std::int64_t n, const Slice *s) {
  std::vector<std::int64_t> out;
  const std::int64_t lo = s ? s->begin : 0, hi = s ? s->end : n;
  for (std::int64_t x = lo; x < hi; ++x)
    if (!s || x < s->hole_begin || x >= s->hole_end) out.push_back(x);
  return out;
}
}  // namespace

std::vector<Slice> slices(const Case &c, const CaseOptions &opts) {
  using A = Slice::Axis;
  std::vector<Slice> out;
  const Shape &sh = c.spec.shape;
  for (A a : {A::key, A::query, A::diagonal, A::head_dim, A::value_dim, A::kv_head, A::group, A::batch}) {
    if ((a == A::value_dim && opts.tied_dim(&Shape::Dv)) || (a == A::head_dim && opts.tied_dim(&Shape::D)))
      continue;  // the dim follows Lk
    const std::int64_t n = axis_length(sh, a);
    if (n <= 1) continue;
    auto add = [&](Slice s) {
      const bool keys = a == A::key || a == A::diagonal;
      s.value_dim_too = keys && opts.tied_dim(&Shape::Dv);
      s.head_dim_too = keys && opts.tied_dim(&Shape::D);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    };
    add({a, 0, n / 2});
    add({a, n / 2, n});
    if (n > kMaxIndexedAxis) continue;
    for (std::int64_t x = 0; x < n; ++x) add({a, x, x + 1});
    for (std::int64_t x = 0; x < n; ++x) add({a, 0, n, x, x + 1});
  }
  return out;
}

Case apply(const Case &c, const Slice &s) {
  using A = Slice::Axis;
  const Shape &sh = c.spec.shape;
  auto on = [&](A a) { return s.axis == a ? &s : nullptr; };
  const Slice *diag = on(A::diagonal);
  const std::vector<std::int64_t> kb = kept(sh.B, on(A::batch)), kkv = kept(sh.Hkv, on(A::kv_head)),
                                  kg = kept(sh.group(), on(A::group)),
                                  kq = kept(sh.Lq, diag ? diag : on(A::query)),
                                  kk = kept(sh.Lk, diag ? diag : on(A::key)),
                                  kd = s.head_dim_too ? kk : kept(sh.D, on(A::head_dim));
  const std::vector<std::int64_t> kdv = s.value_dim_too ? kk : kept(sh.Dv, on(A::value_dim));
  std::vector<std::int64_t> khq;  // query heads: the kept members of every kept kv head's group
  for (auto g : kkv)
    for (auto m : kg) khq.push_back(g * sh.group() + m);

  Case out;
  out.spec = c.spec;
  Shape &ns = out.spec.shape;
  ns.B = static_cast<std::int64_t>(kb.size());
  ns.Hkv = static_cast<std::int64_t>(kkv.size());
  ns.Hq = static_cast<std::int64_t>(khq.size());
  ns.Lq = static_cast<std::int64_t>(kq.size());
  ns.Lk = static_cast<std::int64_t>(kk.size());
  ns.D = static_cast<std::int64_t>(kd.size());
  ns.Dv = static_cast<std::int64_t>(kdv.size());
  auto gather = [](const std::vector<double> &from, const std::array<std::int64_t, 4> &dims,
                   const std::array<const std::vector<std::int64_t> *, 4> &keep) {
    std::vector<double> to;
    if (from.empty()) return to;
    to.reserve(keep[0]->size() * keep[1]->size() * keep[2]->size() * keep[3]->size());
    for (auto a : *keep[0])
      for (auto b : *keep[1])
        for (auto x : *keep[2])
          for (auto y : *keep[3])
            to.push_back(from[static_cast<std::size_t>(((a * dims[1] + b) * dims[2] + x) * dims[3] + y)]);
    return to;
  };
  out.q = gather(c.q, {sh.B, sh.Hq, sh.Lq, sh.D}, {&kb, &khq, &kq, &kd});
  out.k = gather(c.k, {sh.B, sh.Hkv, sh.Lk, sh.D}, {&kb, &kkv, &kk, &kd});
  out.v = gather(c.v, {sh.B, sh.Hkv, sh.Lk, sh.Dv}, {&kb, &kkv, &kk, &kdv});
  out.dout = gather(c.dout, {sh.B, sh.Hq, sh.Lq, sh.Dv}, {&kb, &khq, &kq, &kdv});
  return out;
}

std::vector<Case> relabel_shrinks(const Case &c, const CaseOptions &opts) {
  std::vector<Case> out;
  if (!opts.mask && c.spec.mask != Mask::none) {
    out.push_back(c);
    out.back().spec.mask = Mask::none;
  }
  if (!opts.layout && c.spec.layout != Layout::bhld) {
    out.push_back(c);
    out.back().spec.layout = Layout::bhld;
  }
  for (const TensorLayouts &t : layout_shrinks(c.spec.layouts)) {
    out.push_back(c);
    out.back().spec.layouts = t;
  }
  return out;
}

std::vector<TensorLayouts> layout_shrinks(const TensorLayouts &t) {
  std::vector<TensorLayouts> out;
  if (!t.any()) return out;
  out.emplace_back();
  std::size_t own = 0;
  for (const TensorLayout &x : t.of) own += x.layout.has_value() + (x.broadcast != Broadcast::none);
  if (own == 1) return out;  // the one change is all of them
  for (std::size_t x = 0; x < t.of.size(); ++x)
    if (t.of[x].broadcast != Broadcast::none) {
      out.push_back(t);
      out.back().of[x].broadcast = Broadcast::none;
    }
  for (std::size_t x = 0; x < t.of.size(); ++x)
    if (t.of[x].layout) {
      out.push_back(t);
      out.back().of[x].layout.reset();
    }
  return out;
}

int significant_bits(double x) {
  if (x == 0 || !std::isfinite(x)) return 0;
  int e = 0;
  const double m = std::frexp(std::abs(x), &e);  // m ∈ [0.5, 1)
  const auto mant = static_cast<std::uint64_t>(std::ldexp(m, kDoubleSignificandBits));
  return kDoubleSignificandBits - std::countr_zero(mant);
}

double round_to_bits(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);
  const double ulp = std::ldexp(1.0, e - bits + 1);
  return std::nearbyint(x / ulp) * ulp;
}

bool simpler(double a, double b) { return key(a) < key(b); }

std::vector<double> value_shrinks(double x, Dtype dt) {
  std::vector<double> cand;
  const double sign = std::signbit(x) ? -1.0 : 1.0;
  if (!std::isfinite(x)) {
    cand = {0.0, 1.0, sign * max_finite(dt)};
  } else if (x == 0) {
    if (std::signbit(x)) cand = {0.0};  // −0 → +0
  } else if (is_integer(x)) {
    const double a = std::abs(x);
    cand.push_back(0.0);
    if (a > 1) cand.push_back(sign);
    cand.push_back(sign * std::trunc(a / 2));  // halving: exact for the wide integers of narrow dtypes
    const auto steps = dim_toward(static_cast<std::int64_t>(std::min(a, 0x1p62)), 1);
    for (auto n : steps) cand.push_back(sign * static_cast<double>(n));
    if (x < 0) cand.push_back(-x);
  } else {
    cand.push_back(0.0);
    cand.push_back(std::nearbyint(x));
    const int bits = significant_bits(x);
    for (int b : {1, bits / 2, bits - 1})
      if (b >= 1 && b < bits) cand.push_back(round_to_bits(x, b));
    if (x < 0) cand.push_back(-x);
  }
  std::vector<double> out;
  for (double c : cand)
    if (representable(dt, c) && simpler(c, x) &&
        std::find_if(out.begin(), out.end(), [&](double o) { return o == c && std::signbit(o) == std::signbit(c); }) ==
            out.end())
      out.push_back(c);
  return out;
}

std::vector<std::vector<double>> all_values_shrinks(const std::vector<double> &values, Dtype dt) {
  auto integerize = [](double x) {
    if (!std::isfinite(x) || is_integer(x)) return x;
    const double r = std::max(1.0, std::nearbyint(std::abs(x)));
    return std::signbit(x) ? -r : r;
  };
  auto fewer_bits = [](double x) {
    if (!std::isfinite(x) || is_integer(x)) return x;  // halving an integer's bits may grow it
    return round_to_bits(x, std::max(1, significant_bits(x) / 2));
  };
  auto to_sign = [](double x) {
    if (!std::isfinite(x) || x == 0) return x;
    return std::signbit(x) ? -1.0 : 1.0;
  };
  std::vector<std::vector<double>> out;
  auto add = [&](auto f) {
    std::vector<double> c = values;
    bool changed = false;
    for (double &x : c) {
      const double y = f(x);
      if (representable(dt, y) && simpler(y, x)) {
        x = y;
        changed = true;
      }
    }
    if (changed) out.push_back(std::move(c));
  };
  add(integerize);
  add(fewer_bits);
  add(to_sign);
  return out;
}

}  // namespace attncheck::shrink
