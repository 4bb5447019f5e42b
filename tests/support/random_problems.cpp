#include "random_problems.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <span>

namespace attncheck {

namespace {
constexpr std::array<std::int64_t, 9> kLengths{1, 2, 3, 17, 63, 64, 65, 127, 129};
constexpr std::array<std::int64_t, 7> kHeadDims{1, 3, 8, 64, 80, 128, 256};
constexpr std::array<std::int64_t, 3> kGroups{1, 2, 4};
constexpr std::array<Layout, 4> kLayouts{Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
constexpr std::int64_t kPad = 3;
constexpr int kSmallIntRange = 3;
/// Target logit magnitudes of Values::large_logits: log-uniform in [10², 10⁴].
constexpr double kLargeLogitMinLog10 = 2, kLargeLogitMaxLog10 = 4;

template <class C>
auto pick(std::mt19937_64 &rng, const C &c) {
  return c[static_cast<std::size_t>(rng() % c.size())];
}
}  // namespace

std::string_view values_name(Values v) {
  switch (v) {
    case Values::normal: return "normal";
    case Values::uniform: return "uniform";
    case Values::small_ints: return "small_ints";
    case Values::large_logits: return "large_logits";
    case Values::dominant_key: return "dominant_key";
  }
  return "?";
}

double uniform01(std::mt19937_64 &rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

double log_uniform(std::mt19937_64 &rng, double lo, double hi) {
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * uniform01(rng));
}

void rescale_logits(Problem &p, double target) {
  const Shape &s = p.shape;
  double mx = 0, qmax = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        for (std::int64_t d = 0; d < s.D; ++d) qmax = std::max(qmax, std::fabs(p.q.get({b, h, i, d})));
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          double x = 0;
          for (std::int64_t d = 0; d < s.D; ++d) x += p.q.get({b, h, i, d}) * p.k.get({b, s.kv_head(h), j, d});
          mx = std::max(mx, std::fabs(p.params.scale * x));
        }
      }
  if (mx == 0 || qmax == 0) return;
  const double factor = std::min(target / mx, max_finite(p.dtype()) / 8 / qmax);
  for_each_index(p.q.shape(), [&](std::span<const std::int64_t> idx) { p.q.set(idx, factor * p.q.get(idx)); });
}

double standard_normal(std::mt19937_64 &rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Problem random_problem(std::mt19937_64 &rng, Dtype dt, const RandomProblemOptions &opt) {
  Shape s;
  do {
    s.B = 1 + static_cast<std::int64_t>(rng() % 2);
    s.Hkv = 1 + static_cast<std::int64_t>(rng() % 2);
    s.Hq = s.Hkv * pick(rng, kGroups);
    s.Lq = pick(rng, kLengths);
    s.Lk = pick(rng, kLengths);
    s.D = pick(rng, kHeadDims);
    s.Dv = (rng() % 2) ? s.D : pick(rng, kHeadDims);
  } while (s.work() > opt.max_work);

  const auto drawn_values = static_cast<Values>(rng() % 5);
  const Layout layout = pick(rng, kLayouts);
  const Mask drawn_mask = (rng() % 2) ? Mask::causal : Mask::none;
  return make_problem(rng, s, dt, opt.values.value_or(drawn_values), opt.mask.value_or(drawn_mask), layout,
                      opt.backward);
}

Problem make_problem(std::mt19937_64 &rng, const Shape &s, Dtype dt, Values values, Mask mask, Layout layout,
                     bool backward) {
  s.validate();
  Problem p;
  p.shape = s;
  p.params.scale = default_scale(s.D);
  p.params.mask = mask;
  p.q = Tensor::with_layout(dt, {s.B, s.Hq, s.Lq, s.D}, layout, kPad);
  p.k = Tensor::with_layout(dt, {s.B, s.Hkv, s.Lk, s.D}, layout, kPad);
  p.v = Tensor::with_layout(dt, {s.B, s.Hkv, s.Lk, s.Dv}, layout, kPad);

  // Logit magnitude of large_logits: scale·σ²·√D ≈ target for N(0, σ²) entries, capped by the dtype's range.
  double qk_sigma = 1;
  if (values == Values::large_logits) {
    const double target =
        std::pow(10.0, kLargeLogitMinLog10 + (kLargeLogitMaxLog10 - kLargeLogitMinLog10) * uniform01(rng));
    qk_sigma = std::min(std::sqrt(target / (p.params.scale * std::sqrt(static_cast<double>(s.D)))),
                        max_finite(dt) / 8);
  }
  auto draw = [&](double sigma) {
    switch (values) {
      case Values::uniform: return 2 * uniform01(rng) - 1;
      case Values::small_ints:
        return static_cast<double>(static_cast<int>(rng() % (2 * kSmallIntRange + 1)) - kSmallIntRange);
      default: return sigma * standard_normal(rng);
    }
  };
  auto fill = [&](Tensor &t, double sigma) {
    t.fill_storage(0);
    for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, draw(sigma)); });
  };
  fill(p.q, qk_sigma);
  fill(p.k, qk_sigma);
  fill(p.v, 1);
  if (values == Values::dominant_key) {
    // Key j* of each kv head becomes the sum of its queries' directions, scaled up: one logit dominates.
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t hk = 0; hk < s.Hkv; ++hk) {
        const std::int64_t jstar = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.Lk));
        for (std::int64_t d = 0; d < s.D; ++d) {
          double acc = 0;
          for (std::int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h)
            for (std::int64_t i = 0; i < s.Lq; ++i) acc += p.q.get({b, h, i, d});
          p.k.set({b, hk, jstar, d}, 4 * acc / std::sqrt(static_cast<double>(s.Lq * s.group())));
        }
      }
  }
  if (backward) {
    p.dout = Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.Dv});
    fill(*p.dout, 1);
  }
  return p;
}

}  // namespace attncheck
