// The error model under the ABI 1.2 features (SPEC.md §2.7, §4.1: kTanhUlps, kBiasUlps, kDropoutUlps) is sound and
// not vacuous.
//
// Soundness: the correct feature kernels — support::feature_kernel(FeatureBug::none) (float32, float16, bfloat16
// storage, float32 arithmetic), the bundled "naive" (float32) and "flash" (float32/16, bfloat16; no mask tensor, no
// dropout) — stay within their contracts' bounds on every element of O, LSE, dQ, dK and dV of random problems of
// each feature (windows with edges at 16/32/64 ± 1, softcap from 0.5 to 100 with logits up to ±10³, ALiBi, sinks far
// above and below the logits, boolean and additive masks with fully masked rows, varlen with empty sequences, paged
// caches with odd page sizes, dropout p ∈ {0.1, 0.5, 0.9} judged with the mask the kernel returned) and of
// combinations. The worst ratio per feature, dtype and kernel is printed.
//
// Tightness: a scalar kernel of this file that computes in double but for one imprecise step — softcap's tanh rounded
// to bfloat16, or c·tanh(x/c) in float16; ALiBi's term in float16; dropout's 1/(1 − p) rounded to bfloat16 —
// exceeds the float32 bound it declares, while the same kernel without the step stays within it; the same kernel
// with the step perturbed by k ulps (k = the budget, then growing) shows how far the bound is from the budget.
#include "attncheck/builtin.h"
#include "attncheck/compare.h"
#include "attncheck/contract.h"
#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/reference.h"
#include "feature_kernels.h"
#include "random_problems.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace attncheck;

namespace {

constexpr std::uint64_t kSeed = 20261207;
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T, std::size_t N>
T pick(std::mt19937_64 &rng, const T (&values)[N]) {
  return values[rng() % N];
}
double as_float(double x) { return static_cast<double>(static_cast<float>(x)); }

// ---------------------------------------------------------------------------------------------------------------
// The correct kernels and the profiles of their contracts.

struct Candidate {
  std::string name;
  const attncheck_kernel *kernel = nullptr;
  KernelContract contract;
  bool f32_only = false;
  bool supports(const Problem &p) const {
    if (f32_only && p.dtype() != Dtype::f32) return false;
    return (p.features.bits() & ~contract.features) == 0;
  }
};

const std::vector<Candidate> &candidates() {
  static const std::vector<Candidate> all = [] {
    attncheck_builtin_set_threads(1);  // deterministic anyway; one core keeps the suite polite
    std::vector<Candidate> c;
    c.push_back({"features_correct", &support::feature_kernel(support::FeatureBug::none),
                 parse_contract(support::feature_contract(support::FeatureBug::none)), false});
    std::int32_t n = 0;
    const attncheck_kernel *ks = attncheck_kernels(&n);
    const std::vector<std::string> texts = declared_contracts(ks, n, &attncheck_contracts);
    for (std::int32_t i = 0; i < n; ++i) {
      const std::string name = ks[i].name;
      c.push_back({name, &ks[i], parse_contract(texts[static_cast<std::size_t>(i)]), name == "naive"});
    }
    return c;
  }();
  return all;
}

// ---------------------------------------------------------------------------------------------------------------
// Random problems per feature.

enum class Cat : std::uint8_t {
  window,
  softcap,
  alibi,
  sinks,
  mask_bool,
  mask_add,
  varlen,
  paged,
  dropout,
  scores,        ///< window + softcap + alibi + sinks
  layouts,       ///< varlen or paged + window, softcap, alibi, sinks
  mask_dropout,  ///< a mask + dropout + softcap, ALiBi, sinks, varlen
};
constexpr Cat kCats[] = {Cat::window,  Cat::softcap, Cat::alibi,   Cat::sinks,  Cat::mask_bool, Cat::mask_add,
                         Cat::varlen,  Cat::paged,   Cat::dropout, Cat::scores, Cat::layouts,   Cat::mask_dropout};

const char *cat_name(Cat c) {
  switch (c) {
    case Cat::window: return "window";
    case Cat::softcap: return "softcap";
    case Cat::alibi: return "alibi";
    case Cat::sinks: return "sinks";
    case Cat::mask_bool: return "mask(boolean)";
    case Cat::mask_add: return "mask(additive)";
    case Cat::varlen: return "varlen";
    case Cat::paged: return "paged";
    case Cat::dropout: return "dropout";
    case Cat::scores: return "window+softcap+alibi+sinks";
    case Cat::layouts: return "varlen|paged+scores";
    case Cat::mask_dropout: return "mask+dropout+scores";
  }
  return "?";
}

constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
/// Window sides around 16, 32 and 64 (flash's tiles and vectors) and −1 (unbounded).
constexpr std::int64_t kWindowSides[] = {-1, 0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65};

struct Drawn {
  Problem p;
  Values values = Values::normal;  ///< the family q, k, v were drawn from (q then rescaled under softcap)
};

/// Shape tiers: small (work B·Hq·Lq·Lk·(D + Dv) ≤ 5,000: the MPFR reference dominates the time), long keys (up to
/// 129, past the window edges at 16, 32, 64 ± 1; small D) and medium (rows up to 257 keys, D up to 64).
enum class Tier : std::uint8_t { small, long_keys, medium };

Shape random_shape(std::mt19937_64 &rng, Tier tier, std::int64_t max_batch) {
  constexpr std::int64_t kShort[] = {1, 2, 3, 5, 8, 17, 33};
  constexpr std::int64_t kDims[] = {1, 2, 3, 4, 8, 16};
  constexpr std::int64_t kLongK[] = {17, 33, 64, 65, 66, 70, 129};
  constexpr std::int64_t kLongQ[] = {1, 2, 3, 5, 33, 65};
  constexpr std::int64_t kSmallDims[] = {1, 2, 3, 4};
  constexpr std::int64_t kMediumL[] = {1, 3, 17, 64, 65, 127, 129, 257};
  constexpr std::int64_t kMediumDims[] = {8, 16, 33, 64};
  const std::int64_t max_work = tier == Tier::small ? 5000 : tier == Tier::long_keys ? 12000 : 60000;
  Shape s;
  do {
    s.B = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_batch));
    s.Hkv = 1 + static_cast<std::int64_t>(rng() % 2);
    s.Hq = s.Hkv * (1 + static_cast<std::int64_t>(rng() % 2));
    switch (tier) {
      case Tier::small:
        s.Lq = pick(rng, kShort), s.Lk = pick(rng, kShort), s.D = pick(rng, kDims), s.Dv = pick(rng, kDims);
        break;
      case Tier::long_keys:
        s.Lq = pick(rng, kLongQ), s.Lk = pick(rng, kLongK), s.D = pick(rng, kSmallDims), s.Dv = pick(rng, kSmallDims);
        break;
      case Tier::medium:
        s.Lq = pick(rng, kMediumL), s.Lk = pick(rng, kMediumL), s.D = pick(rng, kMediumDims),
        s.Dv = pick(rng, kMediumDims);
        break;
    }
  } while (s.work() > max_work);
  return s;
}


void add_window(std::mt19937_64 &rng, Features &f) {
  do {
    f.window_left = pick(rng, kWindowSides);
    f.window_right = pick(rng, kWindowSides);
  } while (!f.window());
}
/// softcap c ∈ [0.5, 100]; the logits rescaled to reach 10⁻¹…10³.
void add_softcap(std::mt19937_64 &rng, Problem &p) {
  constexpr double kCaps[] = {0.5, 1, 2.5, 5, 10, 30, 50, 100};
  p.features.softcap = pick(rng, kCaps);
  rescale_logits(p, log_uniform(rng, 0.1, 1000));
}
/// Geometric slopes 2^(−8(h+1)/Hq) times a factor in [0.01, 8] (float32 values).
void add_alibi(std::mt19937_64 &rng, Problem &p) {
  const double factor = log_uniform(rng, 0.01, 8);
  const auto Hq = static_cast<double>(p.shape.Hq);
  p.features.alibi_slopes.clear();
  for (std::int64_t h = 0; h < p.shape.Hq; ++h)
    p.features.alibi_slopes.push_back(as_float(factor * std::exp2(-8.0 * static_cast<double>(h + 1) / Hq)));
}
/// Sinks near the logits, or far above or below them.
void add_sinks(std::mt19937_64 &rng, Problem &p) {
  constexpr double kFar[] = {20, 40, 100, 1000, -40, -100, -1000};
  p.features.sinks.clear();
  for (std::int64_t h = 0; h < p.shape.Hq; ++h)
    p.features.sinks.push_back(as_float(rng() % 2 ? 2 * standard_normal(rng) : pick(rng, kFar)));
}
/// A boolean or additive mask [1|B, 1|Hq, Lq, Lk]: random density or values, −∞ entries, and fully masked rows.
void add_mask(std::mt19937_64 &rng, Problem &p, bool additive) {
  Features &f = p.features;
  const Shape &s = p.shape;
  f.mask_kind = additive ? MaskKind::additive : MaskKind::boolean;
  f.mask_B = rng() % 2 ? s.B : 1;
  f.mask_H = rng() % 2 ? s.Hq : 1;
  constexpr double kDensity[] = {0.1, 0.5, 0.9};
  constexpr double kSigma[] = {0.5, 3, 30, 300};
  const double density = pick(rng, kDensity), sigma = pick(rng, kSigma);
  const double hidden = rng() % 2 ? 0.0 : 0.3;  // additive: share of −∞
  const double empty_row = rng() % 3 ? 0.15 : 0.0;
  f.mask.assign(static_cast<std::size_t>(f.mask_B * f.mask_H * s.Lq * s.Lk), 0.0);
  for (std::int64_t r = 0; r < f.mask_B * f.mask_H * s.Lq; ++r) {
    const bool empty = uniform01(rng) < empty_row;
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      double &m = f.mask[static_cast<std::size_t>(r * s.Lk + j)];
      if (additive)
        m = empty || uniform01(rng) < hidden ? -kInf : as_float(sigma * standard_normal(rng));
      else
        m = !empty && uniform01(rng) < density ? 1 : 0;
    }
  }
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
void add_varlen(std::mt19937_64 &rng, Problem &p) {
  Features &f = p.features;
  f.storage = KvStorage::varlen;
  f.packed_layout = pick(rng, kLayouts);
  f.seqlens_q.clear(), f.seqlens_k.clear();
  for (std::int64_t b = 0; b < p.shape.B; ++b) {
    f.seqlens_q.push_back(random_length(rng, p.shape.Lq));
    f.seqlens_k.push_back(random_length(rng, p.shape.Lk));
  }
}
/// A paged cache with an odd page size: pages in random order, a few unused.
void add_paged(std::mt19937_64 &rng, Problem &p) {
  constexpr std::int64_t kPageSizes[] = {1, 3, 5, 7, 13};
  Features &f = p.features;
  f.storage = KvStorage::paged;
  f.packed_layout = pick(rng, kLayouts);
  f.page_size = pick(rng, kPageSizes);
  f.seqlens_k.clear();
  for (std::int64_t b = 0; b < p.shape.B; ++b) f.seqlens_k.push_back(random_length(rng, p.shape.Lk));
  f.pages_per_seq = (p.shape.Lk + f.page_size - 1) / f.page_size;
  f.num_pages = p.shape.B * f.pages_per_seq + static_cast<std::int64_t>(rng() % 4);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(f.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  f.block_table.assign(pages.begin(), pages.begin() + p.shape.B * f.pages_per_seq);
}
void add_dropout(std::mt19937_64 &rng, Problem &p) {
  constexpr double kP[] = {0.1, 0.5, 0.9};
  p.features.dropout_p = as_float(pick(rng, kP));  // the float32 the kernel receives
  p.features.dropout_seed = rng();
}

/// A random problem of category `c` and dtype `dt`.
Drawn draw(std::mt19937_64 &rng, Cat c, Dtype dt) {
  const bool windowed = c == Cat::window || c == Cat::scores;
  const std::uint64_t roll = rng() % 10;
  const Tier tier = roll < 1 ? Tier::medium : roll < (windowed ? 7 : 3) ? Tier::long_keys : Tier::small;
  const std::int64_t max_batch = c == Cat::varlen || c == Cat::paged || c == Cat::layouts ? 3 : 2;
  const Shape s = random_shape(rng, tier, max_batch);
  // Value families of the error-model suite; softcap chooses its own logit range.
  constexpr Values kValues[] = {Values::normal, Values::normal,       Values::uniform,
                                Values::small_ints, Values::dominant_key, Values::large_logits};
  Drawn d;
  d.values = pick(rng, kValues);
  d.p = make_problem(rng, s, dt, d.values, rng() % 2 ? Mask::causal : Mask::none, pick(rng, kLayouts));
  Problem &p = d.p;
  auto maybe = [&](double prob) { return uniform01(rng) < prob; };
  switch (c) {
    case Cat::window: add_window(rng, p.features); break;
    case Cat::softcap: add_softcap(rng, p); break;
    case Cat::alibi: add_alibi(rng, p); break;
    case Cat::sinks: add_sinks(rng, p); break;
    case Cat::mask_bool: add_mask(rng, p, false); break;
    case Cat::mask_add: add_mask(rng, p, true); break;
    case Cat::varlen: add_varlen(rng, p); break;
    case Cat::paged: add_paged(rng, p); break;
    case Cat::dropout: add_dropout(rng, p); break;
    case Cat::scores:
    case Cat::layouts:
      do {
        if (maybe(0.6)) add_window(rng, p.features);
        if (maybe(0.6)) add_softcap(rng, p);
        if (maybe(0.6)) add_alibi(rng, p);
        if (maybe(0.6)) add_sinks(rng, p);
      } while (std::popcount(p.features.bits()) < (c == Cat::scores ? 2 : 1));
      if (c == Cat::layouts) (rng() % 2 ? add_varlen : add_paged)(rng, p);
      break;
    case Cat::mask_dropout:
      add_mask(rng, p, rng() % 2 == 1);
      add_dropout(rng, p);
      if (maybe(0.5)) add_softcap(rng, p);
      if (maybe(0.5)) add_alibi(rng, p);
      if (maybe(0.3)) add_sinks(rng, p);
      if (maybe(0.3)) add_varlen(rng, p);
      break;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------------------------
// Checking one kernel on one problem.

struct Ratios {
  Worst out, lse, dq, dk, dv;
  double normal = 0;  ///< the worst over elements whose bound is not the subnormal spacing's (normal_range)
  double max() const { return std::max({out.ratio, lse.ratio, dq.ratio, dk.ratio, dv.ratio}); }
};

/// The worst ratio over the elements whose bound is at least 100·η (the storage dtype's subnormal spacing): where a
/// result is a subnormal, rounding it alone costs up to η/2 and the ratio says nothing about the model's terms.
double normal_range(const Tensor &got, const std::vector<double> &exact, std::vector<double> bound, double eta) {
  for (double &b : bound)
    if (b < 100 * eta) b = kInf;  // error_ratio: an infinite bound counts 0
  return compare(got, exact, bound).ratio;
}

struct Tally {
  double all = 0, normal = 0, out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
  int problems = 0;
  void merge(const Ratios &r) {
    all = std::max(all, r.max());
    normal = std::max(normal, r.normal);
    out = std::max(out, r.out.ratio);
    lse = std::max(lse, r.lse.ratio);
    dq = std::max(dq, r.dq.ratio);
    dk = std::max(dk, r.dk.ratio);
    dv = std::max(dv, r.dv.ratio);
    ++problems;
  }
};

/// "[b,h,i,c]" of a row-major index into a [d0, d1, d2, d3] (or rank-3) result.
std::string index_text(std::int64_t x, const std::vector<std::int64_t> &dims) {
  std::vector<std::int64_t> idx(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    idx[d] = x % dims[d];
    x /= dims[d];
  }
  std::ostringstream os;
  os << '[';
  for (std::size_t d = 0; d < idx.size(); ++d) os << (d ? "," : "") << idx[d];
  os << ']';
  return os.str();
}

std::string values_text(const char *name, const Tensor &t) {
  std::ostringstream os;
  os << "  " << name << " " << t.describe() << ":";
  for (double x : t.to_vector()) os << ' ' << std::setprecision(9) << x;
  return os.str() + "\n";
}

/// Everything needed to reproduce a problem: shape, mask, scale, features and (when small) the values.
std::string describe(const Drawn &d) {
  const Problem &p = d.p;
  std::ostringstream os;
  os << dtype_name(p.dtype()) << ' ' << p.shape.describe() << " mask=" << mask_name(p.params.mask)
     << " scale=" << p.params.scale << " values=" << values_name(d.values) << (p.features.softcap > 0 ? " (q rescaled)" : "") << " q " << p.q.describe() << " | "
     << p.features.describe();
  if (p.features.mask_kind != MaskKind::none && p.features.mask.size() <= 64) {
    os << " | mask values:";
    for (double m : p.features.mask) os << ' ' << m;
  }
  if (p.features.storage == KvStorage::paged) {
    os << " | block_table:";
    for (std::int32_t x : p.features.block_table) os << ' ' << x;
  }
  os << '\n';
  if (p.q.numel() + p.k.numel() + p.v.numel() <= 96) {
    os << values_text("q", p.q) << values_text("k", p.k) << values_text("v", p.v);
    if (p.dout) os << values_text("dout", *p.dout);
  }
  return os.str();
}

struct Violation {
  std::string text;
};

/// Runs kernel `c` on d.p (forward, then backward where the ABI has one) and compares every element with the bound
/// of its contract's profile. `exact` caches the reference per dropout mask.
struct Solved {
  std::vector<std::uint8_t> keep;
  ExactForward ef;
  std::optional<ExactBackward> eb;
};

/// The worst element seen so far (its ratio and where).
struct WorstSeen {
  double ratio = 0;
  std::string text;
};

Ratios check(const Candidate &c, const Drawn &d, std::vector<Solved> &cache, std::vector<Violation> &violations,
             WorstSeen &worst_seen) {
  Problem p = d.p;
  const Shape &s = p.shape;
  const Dtype dt = p.dtype();
  const PrecisionProfile prof = c.contract.precision(dt);
  Tensor out = make_out(s, dt), lse = make_lse(s);
  std::vector<std::uint8_t> keep;
  const CallResult fr = call_forward(*c.kernel, p, out, &lse, &keep);
  INFO(c.name << " on " << describe(d) << "forward: " << fr.message);
  REQUIRE(fr.ok());
  if (p.features.dropout_p > 0) p.features.dropout_keep = keep;
  const bool backward = c.kernel->backward && p.features.storage != KvStorage::paged && p.dout;
  Solved *sol = nullptr;
  for (Solved &x : cache)
    if (x.keep == p.features.dropout_keep) sol = &x;
  if (!sol) {
    cache.push_back({p.features.dropout_keep, reference_forward(p), std::nullopt});
    sol = &cache.back();
  }
  if (backward && !sol->eb) sol->eb = reference_backward(p);
  Ratios r;
  const ForwardBounds fb = forward_bounds(p, sol->ef, prof);
  const double eta = min_subnormal(dt), eta32 = min_subnormal(Dtype::f32);
  r.out = compare(out, sol->ef.out, fb.out);
  r.lse = compare(lse, sol->ef.lse, fb.lse);
  r.normal = std::max(normal_range(out, sol->ef.out, fb.out, eta), normal_range(lse, sol->ef.lse, fb.lse, eta32));
  if (backward) {
    Tensor dq = Tensor::contiguous(dt, p.q.shape()), dk = Tensor::contiguous(dt, p.k.shape()),
           dv = Tensor::contiguous(dt, p.v.shape());
    const CallResult br = call_backward(*c.kernel, p, out, &lse, dq, dk, dv);
    INFO("backward: " << br.message);
    REQUIRE(br.ok());
    const BackwardBounds bb = backward_bounds(p, sol->ef, prof);
    r.dq = compare(dq, sol->eb->dq, bb.dq);
    r.dk = compare(dk, sol->eb->dk, bb.dk);
    r.dv = compare(dv, sol->eb->dv, bb.dv);
    r.normal = std::max({r.normal, normal_range(dq, sol->eb->dq, bb.dq, eta), normal_range(dk, sol->eb->dk, bb.dk, eta),
                         normal_range(dv, sol->eb->dv, bb.dv, eta)});
  }
  const std::pair<const char *, const Worst *> outputs[] = {
      {"O", &r.out}, {"LSE", &r.lse}, {"dQ", &r.dq}, {"dK", &r.dk}, {"dV", &r.dv}};
  const std::vector<std::int64_t> dims[] = {{s.B, s.Hq, s.Lq, s.Dv}, {s.B, s.Hq, s.Lq}, {s.B, s.Hq, s.Lq, s.D},
                                            {s.B, s.Hkv, s.Lk, s.D}, {s.B, s.Hkv, s.Lk, s.Dv}};
  for (std::size_t o = 0; o < std::size(outputs); ++o) {
    const Worst &w = *outputs[o].second;
    if (w.ratio <= 1 && !(w.ratio > worst_seen.ratio)) continue;
    std::ostringstream os;
    os << c.name << ' ' << outputs[o].first << index_text(w.index, dims[o]) << ": ratio " << w.ratio << ", got "
       << hex_and_decimal(w.got) << ", exact " << hex_and_decimal(w.exact) << ", bound " << w.bound << " ("
       << prof.describe() << ")\n  problem: " << describe(d);
    if (w.ratio > worst_seen.ratio) worst_seen = {w.ratio, os.str()};
    if (w.ratio > 1) violations.push_back({os.str()});
  }
  return r;
}

/// Worst ratios per (category, kernel) of one dtype.
using Table = std::map<Cat, std::map<std::string, Tally>>;

void print(Dtype dt, const Table &t, int per_cat) {
  std::cout << std::setprecision(3) << "features soundness, " << dtype_name(dt) << ", " << per_cat
            << " random problems per feature (and the grid) — worst error ÷ bound per feature and kernel: all; where "
               "the bound is ≥ 100η; (O, LSE, dQ, dK, dV) [problems]\n";
  for (Cat c : kCats) {
    const auto it = t.find(c);
    if (it == t.end()) continue;
    for (const auto &[name, w] : it->second)
      std::cout << "  " << std::left << std::setw(28) << cat_name(c) << std::setw(17) << name << std::right << ' '
                << std::setw(9) << w.all << "; " << std::setw(9) << w.normal << "; (" << w.out
                << ", " << w.lse << ", " << w.dq << ", " << w.dk << ", " << w.dv << ") [" << w.problems << "]\n";
  }
}

/// Edges drawn deliberately rather than by chance: every window side at 16, 32, 64 ± 1 on rows aligned past 128
/// keys; every softcap against logits from 10⁻² to 10³; sinks from −10³ to 10³ against logits near 0 and near 30;
/// ALiBi slopes up to 8 on rows of 257 keys; every dropout p on rows of 1 to 64 keys with values of one sign.
std::vector<std::pair<Cat, Drawn>> grid(std::mt19937_64 &rng, Dtype dt) {
  std::vector<std::pair<Cat, Drawn>> out;
  auto base = [&](const Shape &s, Mask m) {
    Drawn d;
    d.p = make_problem(rng, s, dt, Values::normal, m, pick(rng, kLayouts));
    return d;
  };
  for (std::int64_t left : kWindowSides)
    for (std::int64_t right : {std::int64_t{-1}, std::int64_t{0}, std::int64_t{16}, std::int64_t{65}}) {
      if (left < 0 && right < 0) continue;
      Drawn d = base(Shape{1, 1, 1, left % 2 ? 66 : 5, 129, 2, 2}, right < 0 || left % 3 == 0 ? Mask::causal : Mask::none);
      d.p.features.window_left = left;
      d.p.features.window_right = right;
      out.emplace_back(Cat::window, std::move(d));
    }
  for (double cap : {0.5, 1.0, 5.0, 30.0, 100.0})
    for (double target : {0.01, 1.0, cap, 10 * cap, 1000.0}) {
      Drawn d = base(Shape{1, 2, 1, 3, 33, 16, 8}, Mask::none);
      d.p.features.softcap = cap;
      rescale_logits(d.p, target);
      out.emplace_back(Cat::softcap, std::move(d));
    }
  for (double logits : {1.0, 30.0})
    for (double sink : {-1000.0, -100.0, -40.0, 0.0, 40.0, 100.0, 1000.0}) {
      Drawn d = base(Shape{2, 2, 1, 3, 17, 8, 8}, Mask::causal);  // causal with Lq < Lk: every row sees keys
      rescale_logits(d.p, logits);
      d.p.features.sinks = {sink, logits + sink / 40};
      out.emplace_back(Cat::sinks, std::move(d));
    }
  for (double slope : {0.5, 2.0, 8.0})
    for (double logits : {0.1, 10.0})
      for (std::int64_t Lq : {3, 65}) {
        Drawn d = base(Shape{1, 2, 1, Lq, 257, 2, 2}, Lq == 3 ? Mask::none : Mask::causal);
        rescale_logits(d.p, logits);
        d.p.features.alibi_slopes = {as_float(slope * 1.001), as_float(slope / 64)};  // steep: ALiBi's term dominates
        out.emplace_back(Cat::alibi, std::move(d));
      }
  for (double p_drop : {0.1, 0.5, 0.9})
    for (std::int64_t Lk : {1, 2, 4, 64}) {
      Drawn d = base(Shape{1, 2, 1, 4, Lk, 4, 4}, Mask::none);
      for_each_index(d.p.v.shape(), [&](std::span<const std::int64_t> idx) { d.p.v.set(idx, std::fabs(d.p.v.get(idx))); });
      d.p.features.dropout_p = as_float(p_drop);  // values of one sign: the kept weights' sum is |O|
      d.p.features.dropout_seed = rng();
      out.emplace_back(Cat::dropout, std::move(d));
    }
  return out;
}

/// What the drawn problems reached: rows that see no key (fully masked, outside a window, empty sequences), empty
/// sequences, the largest softcapped |logit| and the sinks 40 or more from 0.
struct Coverage {
  std::int64_t empty_rows = 0, empty_seqs = 0, far_sinks = 0;
  double max_capped_logit = 0;
  void add(const Problem &p) {
    const Shape &s = p.shape;
    const Features &f = p.features;
    for (std::int64_t b = 0; b < s.B; ++b) {
      if (seq_rows(f, b, s.Lq) == 0 || seq_keys(f, b, s.Lk) == 0) ++empty_seqs;
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i < seq_rows(f, b, s.Lq); ++i) {
          const RowFrame fr = row_frame(f, p.params.mask, b, i, s.Lq, s.Lk);
          bool any = false;
          for (std::int64_t j = 0; j < s.Lk && !any; ++j) any = sees(f, p.params.mask, fr, s.Lq, s.Lk, b, h, i, j);
          if (!any) ++empty_rows;
          if (f.softcap > 0)
            for (std::int64_t j = 0; j < s.Lk; ++j) {
              double x = 0;
              for (std::int64_t d = 0; d < s.D; ++d) x += p.q.get({b, h, i, d}) * p.k.get({b, s.kv_head(h), j, d});
              max_capped_logit = std::max(max_capped_logit, std::fabs(p.params.scale * x));
            }
        }
    }
    for (double x : f.sinks) far_sinks += std::fabs(x) >= 40;
  }
};

/// `per_cat` random problems of each category in dtype `dt` (and the grid), every correct kernel that implements
/// them; returns the worst ratio per category over the kernels and the elements whose bound is ≥ 100η.
std::map<Cat, double> soundness(Dtype dt, int per_cat) {
  std::mt19937_64 rng(kSeed + 101 * static_cast<std::uint64_t>(dt));
  Table table;
  std::vector<Violation> violations;
  WorstSeen worst_seen;
  Coverage cov;
  auto run_all = [&](Cat c, const Drawn &d) {
    cov.add(d.p);
    std::vector<Solved> cache;
    for (const Candidate &k : candidates())
      if (k.supports(d.p)) table[c][k.name].merge(check(k, d, cache, violations, worst_seen));
  };
  for (const auto &[c, d] : grid(rng, dt)) run_all(c, d);
  for (Cat c : kCats)
    for (int n = 0; n < per_cat; ++n) run_all(c, draw(rng, c, dt));
  print(dt, table, per_cat);
  std::cout << "  coverage: " << cov.empty_rows << " rows that see no key, " << cov.empty_seqs
            << " empty sequences, softcapped |scale·q·k| up to " << cov.max_capped_logit << ", " << cov.far_sinks
            << " sinks with |sink| ≥ 40\n  the worst element: " << worst_seen.text;
  std::map<Cat, double> worst;
  for (const auto &[c, row] : table)
    for (const auto &[name, w] : row) worst[c] = std::max(worst[c], w.normal);
  for (std::size_t n = 0; n < violations.size() && n < 12; ++n) std::cout << "VIOLATION " << violations[n].text;
  INFO(violations.size() << " elements' worst over the bound; the first: "
                         << (violations.empty() ? std::string() : violations[0].text));
  CHECK(violations.empty());
  return worst;
}

/// Random problems per feature and dtype (12 features: 2,400 problems, about 4 s per dtype on one core).
constexpr int kProblemsPerFeature = 200;

// ---------------------------------------------------------------------------------------------------------------
// A scalar kernel with one imprecise step (tightness). Dense storage only (float32, float16, bfloat16, any strides);
// causal (bottom-right), window, softcap, ALiBi, sinks and dropout (support::feature_dropout_keep's decisions,
// written to the mask); every other step in double, the results rounded once to storage. Forward only.

enum class Step : std::uint8_t {
  exact,         ///< no imprecise step
  tanh_bf16,     ///< tanh(x/c) rounded to bfloat16
  softcap_f16,   ///< c·tanh(x/c) evaluated in float16 (x, c, x/c, tanh, the product each rounded)
  tanh_ulps,     ///< tanh(x/c)·(1 + k·2⁻²⁴): k float32 ulps
  alibi_f16,     ///< slope·|i' − j| evaluated in float16 (the slope and the product rounded)
  alibi_ulps,    ///< slope·|i' − j|·(1 + k·2⁻²⁴)
  dropout_bf16,  ///< 1/(1 − p) rounded to bfloat16
  dropout_ulps,  ///< 1/(1 − p)·(1 + k·2⁻²⁴)
};
struct Sloppiness {
  Step step = Step::exact;
  double ulps = 0;
};
Sloppiness g_sloppy;  // the tests are single-threaded

double to_f16(double x) { return round_to(Dtype::f16, x); }
double to_bf16(double x) { return round_to(Dtype::bf16, x); }
constexpr double kU32 = 0x1p-24;

/// Element access on a DLTensor of rank ≤ 4 (NULL strides: compact).
struct View {
  const DLTensor *t = nullptr;
  std::int64_t st[4] = {0, 0, 0, 0};
  Dtype dt = Dtype::f32;
  explicit View(const DLTensor *x) : t(x) {
    std::int64_t compact = 1;
    for (int d = x->ndim - 1; d >= 0; --d) {
      st[d] = x->strides ? x->strides[d] : compact;
      compact *= x->shape[d];
    }
    if (x->dtype.code != kDLUInt) from_dlpack(x->dtype, &dt);
  }
  std::int64_t dim(int d) const { return t->shape[d]; }
  std::byte *at(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    const std::int64_t off = a * st[0] + b * st[1] + c * st[2] + d * st[3];
    const int size = t->dtype.bits / 8;
    return static_cast<std::byte *>(t->data) + t->byte_offset + off * size;
  }
  double get(std::int64_t a, std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) const {
    const std::byte *p = at(a, b, c, d);
    if (dt == Dtype::f32) {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return dt == Dtype::f16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
  }
  void set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, double x) const {
    std::byte *p = at(a, b, c, d);
    const auto f = static_cast<float>(x);
    if (dt == Dtype::f32) {
      std::memcpy(p, &f, sizeof f);
      return;
    }
    const std::uint16_t bits = dt == Dtype::f16 ? float_to_f16_bits(f) : float_to_bf16_bits(f);
    std::memcpy(p, &bits, sizeof bits);
  }
  void set_u8(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, std::uint8_t x) const {
    *reinterpret_cast<std::uint8_t *>(at(a, b, c, d)) = x;
  }
};

int sloppy_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   DLTensor *out, DLTensor *lse) {
  constexpr std::uint32_t kSupported = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI |
                                       ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_DROPOUT;
  if (params->features & ~kSupported) return ATTNCHECK_UNSUPPORTED;
  const attncheck_args *a = params->args;
  const View Q(q), K(k), V(v), O(out);
  const std::int64_t B = Q.dim(0), Hq = Q.dim(1), Lq = Q.dim(2), D = Q.dim(3), Hkv = K.dim(1), Lk = K.dim(2),
                     Dv = V.dim(3);
  const auto on = [&](std::uint32_t f) { return (params->features & f) != 0; };
  const double cap = on(ATTNCHECK_FEATURE_SOFTCAP) ? a->softcap : 0;
  const double p_drop = on(ATTNCHECK_FEATURE_DROPOUT) ? a->dropout_p : 0;
  double z_kept = p_drop > 0 ? 1 / (1 - p_drop) : 1;
  if (g_sloppy.step == Step::dropout_bf16) z_kept = to_bf16(z_kept);
  if (g_sloppy.step == Step::dropout_ulps) z_kept *= 1 + g_sloppy.ulps * kU32;
  std::vector<double> s(static_cast<std::size_t>(Lk)), z(static_cast<std::size_t>(Lk));
  std::vector<bool> seen(static_cast<std::size_t>(Lk));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h) {
      const std::int64_t hk = h / (Hq / Hkv);
      const double slope = on(ATTNCHECK_FEATURE_ALIBI) ? View(a->alibi_slopes).get(h) : 0;
      const double sink = on(ATTNCHECK_FEATURE_SINKS) ? View(a->sinks).get(h) : -kInf;
      for (std::int64_t i = 0; i < Lq; ++i) {
        const std::int64_t ip = i + Lk - Lq;
        double m = sink;
        for (std::int64_t j = 0; j < Lk; ++j) {
          bool vis = !(params->mask == ATTNCHECK_MASK_CAUSAL && j > ip);
          if (on(ATTNCHECK_FEATURE_WINDOW)) {
            if (a->window_left >= 0 && j < ip - a->window_left) vis = false;
            if (a->window_right >= 0 && j > ip + a->window_right) vis = false;
          }
          const bool keep = p_drop > 0 ? support::feature_dropout_keep(a->dropout_seed, a->dropout_p, b, h, i, j) : true;
          if (p_drop > 0 && a->dropout_mask) View(a->dropout_mask).set_u8(b, h, i, j, keep ? 1 : 0);
          seen[static_cast<std::size_t>(j)] = vis;
          if (!vis) continue;
          long double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<long double>(Q.get(b, h, i, d)) * K.get(b, hk, j, d);
          double x = static_cast<double>(dot) * params->scale, sv = x;
          if (cap > 0) {
            double t = std::tanh(x / cap);
            if (g_sloppy.step == Step::tanh_bf16) t = to_bf16(t);
            if (g_sloppy.step == Step::tanh_ulps) t *= 1 + g_sloppy.ulps * kU32;
            sv = cap * t;
            if (g_sloppy.step == Step::softcap_f16) sv = to_f16(to_f16(cap) * to_f16(std::tanh(to_f16(to_f16(x) / to_f16(cap)))));
          }
          if (slope != 0) {
            const auto dist = static_cast<double>(ip > j ? ip - j : j - ip);
            double bias = slope * dist;
            if (g_sloppy.step == Step::alibi_f16) bias = to_f16(to_f16(slope) * dist);
            if (g_sloppy.step == Step::alibi_ulps) bias *= 1 + g_sloppy.ulps * kU32;
            sv -= bias;
          }
          s[static_cast<std::size_t>(j)] = sv;
          z[static_cast<std::size_t>(j)] = keep ? z_kept : 0;
          m = std::max(m, sv);
        }
        if (m == -kInf) {  // no key, no sink
          for (std::int64_t c = 0; c < Dv; ++c) O.set(b, h, i, c, 0);
          if (lse) View(lse).set(b, h, i, 0, -kInf);
          continue;
        }
        double l = sink > -kInf ? std::exp(sink - m) : 0;
        std::vector<double> acc(static_cast<std::size_t>(Dv), 0.0);
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!seen[static_cast<std::size_t>(j)]) continue;
          const double e = std::exp(s[static_cast<std::size_t>(j)] - m);
          l += e;
          for (std::int64_t c = 0; c < Dv; ++c)
            acc[static_cast<std::size_t>(c)] += e * z[static_cast<std::size_t>(j)] * V.get(b, hk, j, c);
        }
        for (std::int64_t c = 0; c < Dv; ++c) O.set(b, h, i, c, acc[static_cast<std::size_t>(c)] / l);
        if (lse) View(lse).set(b, h, i, 0, m + std::log(l));
      }
    }
  return ATTNCHECK_OK;
}
const attncheck_kernel kSloppy{ATTNCHECK_ABI_VERSION, "sloppy", &sloppy_forward, nullptr, nullptr};

/// The sloppy kernel's forward with `how` on p: worst O and LSE ratios under the default float32 contract.
Ratios run_sloppy(const Problem &problem, Sloppiness how) {
  g_sloppy = how;
  Problem p = problem;
  Tensor out = make_out(p.shape, p.dtype()), lse = make_lse(p.shape);
  std::vector<std::uint8_t> keep;
  const CallResult r = call_forward(kSloppy, p, out, &lse, &keep);
  g_sloppy = {};
  REQUIRE(r.ok());
  if (p.features.dropout_p > 0) p.features.dropout_keep = keep;
  const ExactForward ef = reference_forward(p);
  const ForwardBounds fb = forward_bounds(p, ef, PrecisionProfile::for_storage(p.dtype()));
  Ratios x;
  x.out = compare(out, ef.out, fb.out);
  x.lse = compare(lse, ef.lse, fb.lse);
  return x;
}

/// Ratios of the sloppy kernel for an imprecise `step` and for the same step perturbed by k ulps (k = budget, …).
struct Sweep {
  double exact = 0, imprecise = 0;
  std::vector<std::pair<double, double>> ulps;  ///< (k, worst ratio)
  /// The smallest k whose worst ratio exceeds 1 (+∞ if none).
  double crossing() const {
    for (const auto &[k, w] : ulps)
      if (w > 1) return k;
    return kInf;
  }
};
Sweep sweep(const std::vector<Problem> &problems, Step step, Step ulps_step, double budget) {
  Sweep s;
  for (const Problem &p : problems) {
    s.exact = std::max(s.exact, run_sloppy(p, {Step::exact, 0}).max());
    s.imprecise = std::max(s.imprecise, run_sloppy(p, {step, 0}).max());
  }
  for (double k : {budget, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0}) {
    double w = 0;
    for (const Problem &p : problems) w = std::max(w, run_sloppy(p, {ulps_step, k}).max());
    s.ulps.emplace_back(k, w);
  }
  return s;
}
void print(const std::string &what, const Sweep &s) {
  std::cout << std::setprecision(4) << what << ": exact steps " << s.exact << " × the float32 bound, the imprecise step "
            << s.imprecise << " ×; the step off by k float32 ulps:";
  for (const auto &[k, w] : s.ulps) std::cout << " k=" << static_cast<int>(k) << ": " << w;
  std::cout << " (first above 1 at k=" << s.crossing() << ")\n";
}

/// The shapes of a family of tightness problems.
struct Family {
  const char *name;
  std::vector<std::int64_t> lq, lk, d, dv;
};
/// Random shapes of every size.
Family random_family() { return {"random", {1, 4, 16, 33, 64}, {1, 4, 16, 33, 64}, {1, 4, 16, 64}, {1, 4, 16, 64}}; }

/// `n` problems of family `fam` (float32, N(0, 1) values, causal or not, any layout) with `add` applied.
template <class F>
std::vector<Problem> sloppy_problems(std::uint64_t seed, int n, const Family &fam, F &&add) {
  std::mt19937_64 rng(seed);
  auto any = [&](const std::vector<std::int64_t> &xs) { return xs[rng() % xs.size()]; };
  std::vector<Problem> out;
  for (int t = 0; t < n; ++t) {
    Shape s;
    s.Hkv = 1 + static_cast<std::int64_t>(rng() % 2);
    s.Hq = s.Hkv;
    s.Lq = any(fam.lq), s.Lk = any(fam.lk), s.D = any(fam.d), s.Dv = any(fam.dv);
    Problem p = make_problem(rng, s, Dtype::f32, Values::normal, rng() % 2 ? Mask::causal : Mask::none,
                             pick(rng, kLayouts), false);
    add(rng, p);
    out.push_back(std::move(p));
  }
  return out;
}

/// Runs the sweep of `step` on the random family and on `focused` (shapes where the feature's term dominates the
/// bound), prints both, and checks: exact steps and a step within its budget stay within the bound, the imprecise
/// step exceeds it.
template <class F>
void tightness(const char *what, std::uint64_t seed, const Family &focused, Step step, Step ulps_step, double budget,
               F &&add) {
  double imprecise = 0;
  for (const Family &fam : {random_family(), focused}) {
    const std::vector<Problem> ps = sloppy_problems(seed, 16, fam, add);
    const Sweep s = sweep(ps, step, ulps_step, budget);
    print(std::string(what) + ", " + fam.name + " problems", s);
    INFO(what << ", " << fam.name);
    CHECK(s.exact <= 1);
    CHECK(s.ulps.front().second <= 1);  // the step within its budget
    imprecise = std::max(imprecise, s.imprecise);
  }
  CHECK(imprecise > 1);
}

}  // namespace

TEST_CASE("correct feature kernels stay within the bound on random problems of every feature in float32",
          "[error_model][soundness][features]") {
  const std::map<Cat, double> worst = soundness(Dtype::f32, kProblemsPerFeature);
  // Not vacuous: on every feature a correct float32 kernel comes within 20× of the bound, on elements whose bound
  // is not the subnormal spacing's.
  for (const auto &[c, w] : worst) {
    INFO(cat_name(c) << ": worst float32 ratio " << w);
    CHECK(w > 0.05);
  }
}

TEST_CASE("correct feature kernels stay within the bound on random problems of every feature in float16",
          "[error_model][soundness][features]") {
  soundness(Dtype::f16, kProblemsPerFeature);
}

TEST_CASE("correct feature kernels stay within the bound on random problems of every feature in bfloat16",
          "[error_model][soundness][features]") {
  soundness(Dtype::bf16, kProblemsPerFeature);
}

TEST_CASE("softcap's tanh rounded to bfloat16 or evaluated in float16 exceeds the float32 bound",
          "[error_model][tightness][features]") {
  auto add = [](std::mt19937_64 &rng, Problem &p) {
    constexpr double kCaps[] = {2.5, 5, 10, 30};
    p.features.softcap = pick(rng, kCaps);
    rescale_logits(p, p.features.softcap * 2);  // the unsaturated part of tanh, where its error shows
  };
  const Family focused{"D=1, few keys", {1, 4, 16}, {2, 4, 16}, {1}, {1, 4}};
  tightness("softcap, tanh rounded to bfloat16", kSeed + 1, focused, Step::tanh_bf16, Step::tanh_ulps,
            Budgets::kTanhUlps, add);
  double f16 = 0;
  for (const Problem &p : sloppy_problems(kSeed + 1, 16, random_family(), add))
    f16 = std::max(f16, run_sloppy(p, {Step::softcap_f16, 0}).max());
  std::cout << "softcap, c·tanh(x/c) in float16, random problems: " << f16 << " × the float32 bound\n";
  CHECK(f16 > 1);
}

TEST_CASE("ALiBi's term evaluated in float16 exceeds the float32 bound", "[error_model][tightness][features]") {
  // Focused: slopes in [0.5, 2] and logits below 0.1, so that ALiBi's term is most of the logit.
  const Family focused{"D=1, steep slopes, small logits", {4, 16, 33, 64}, {4, 16, 33, 64}, {1}, {1, 4}};
  tightness("ALiBi, slope·|i' − j| in float16", kSeed + 2, focused, Step::alibi_f16, Step::alibi_ulps,
            Budgets::kBiasUlps, [&](std::mt19937_64 &rng, Problem &p) {
              add_alibi(rng, p);
              if (p.shape.D == 1) {
                for (double &x : p.features.alibi_slopes) x = 0.5 + 1.5 * uniform01(rng);
                rescale_logits(p, 0.1);
              }
              for (double &x : p.features.alibi_slopes) x = as_float(x * (1 + 1e-3 * uniform01(rng)));  // not float16
            });
}

TEST_CASE("dropout's 1/(1 − p) rounded to bfloat16 exceeds the float32 bound", "[error_model][tightness][features]") {
  // Focused: a few keys and values of one sign, so that the kept weights' sum is |O| itself.
  const Family focused{"D=1, 1-4 keys, v > 0", {1, 4}, {1, 2, 4}, {1}, {1, 4}};
  tightness("dropout, 1/(1 − p) rounded to bfloat16", kSeed + 3, focused, Step::dropout_bf16, Step::dropout_ulps,
            Budgets::kDropoutUlps, [](std::mt19937_64 &rng, Problem &p) {
              constexpr double kP[] = {0.1, 0.3};  // 1/(1 − p) not a bfloat16 value (0.5 and 0.9 give 2 and ≈10)
              p.features.dropout_p = as_float(pick(rng, kP));
              p.features.dropout_seed = rng();
              if (p.shape.D == 1)
                for_each_index(p.v.shape(), [&](std::span<const std::int64_t> idx) { p.v.set(idx, std::fabs(p.v.get(idx))); });
            });
}
