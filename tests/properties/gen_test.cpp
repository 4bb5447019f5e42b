// The generators and shrinkers themselves: shapes reach the tiling boundaries and long rows at the intended rates,
// values are exactly representable and every family appears, and shrinking moves toward smaller shapes and
// simpler values.
// RapidCheck's Maybe<Shrinkable<T>>, inlined into findLocalMin here, trips GCC's -Wmaybe-uninitialized: a false
// positive (the storage is only destroyed when it was constructed).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "attncheck/coverage.h"
#include "attncheck/gen.h"
#include "attncheck/property.h"
#include "attncheck/shrink.h"
#include "variant_kernels.h"

#include <rapidcheck/shrinkable/Operations.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>

using namespace attncheck;

namespace {
constexpr int kSpecDraws = 4000;  ///< spec draws for the rate tests (specs are cheap: no values)
constexpr int kCaseDraws = 400;   ///< case draws per dtype for the value tests
/// Rates are binomial: with kSpecDraws draws, 4σ of a 5 % rate is ≈ 1.4 %; this tolerance is looser still.
constexpr double kRateTolerance = 0.02;
/// "Most cases stay small": at least this share of specs are in the small regime's cost range.
constexpr double kMinSmallShare = 0.6;
constexpr std::int64_t kSmallWork = CaseOptions::kDefaultMaxWork / 8;
constexpr int kSizes = rc::kNominalSize + 1;
constexpr double kLargeLogit = 100;  ///< Family::large reaches |scale·q·k| ≥ this
/// Cases in a rare bucket (G ≥ 16 or B > 8) at the nominal size: at least this share keeps Lq, Lk ≥ 2 and
/// Lq·Lk ≥ kMinRareRows.
constexpr double kMinRareSeveralShare = 0.5;
constexpr std::int64_t kMinRareRows = 4;

std::vector<CaseSpec> draw_specs(const CaseOptions &opts, int n, std::uint64_t seed) {
  std::vector<CaseSpec> out;
  rc::Random r(seed);
  for (int x = 0; x < n; ++x) out.push_back(draw_spec(r.split(), x % kSizes, opts));
  return out;
}

bool representable(Dtype dt, double x) { return std::isfinite(x) && round_to(dt, x) == x; }
}  // namespace

TEST_CASE("generated shapes reach every tiling boundary, odd head dim and long rows at the intended rates") {
  const std::vector<CaseSpec> specs = draw_specs(CaseOptions{}, kSpecDraws, 1);
  std::set<std::int64_t> lengths, head_dims;
  int long_rows = 0, small = 0;
  bool lq_gt_lk = false, lq_lt_lk = false, lq1 = false, lk1 = false, gqa = false, mqa = false, dv_ne_d = false;
  std::set<Mask> masks;
  std::set<Layout> layouts;
  for (const CaseSpec &s : specs) {
    const Shape &sh = s.shape;
    REQUIRE_NOTHROW(sh.validate());
    REQUIRE(s.work() <= CaseOptions::kDefaultMaxWork);
    lengths.insert({sh.Lq, sh.Lk});
    head_dims.insert({sh.D, sh.Dv});
    long_rows += sh.Lk >= kLongRowMin;
    small += s.work() <= kSmallWork;
    lq_gt_lk |= sh.Lq > sh.Lk;
    lq_lt_lk |= sh.Lq < sh.Lk;
    lq1 |= sh.Lq == 1 && sh.Lk > 1;
    lk1 |= sh.Lk == 1 && sh.Lq > 1;
    gqa |= sh.Hkv > 1 && sh.Hq > sh.Hkv;
    mqa |= sh.Hkv == 1 && sh.Hq > 1;
    dv_ne_d |= sh.D != sh.Dv;
    masks.insert(s.mask);
    layouts.insert(s.layout);
  }
  for (std::int64_t b : kTileBoundaries) {
    INFO("boundary " << b);
    CHECK(lengths.count(b));
    CHECK(head_dims.count(b));
  }
  for (std::int64_t d : kOddHeadDims) CHECK(head_dims.count(d));
  const double long_share = static_cast<double>(long_rows) / kSpecDraws;
  CHECK(long_share == Approx(kLongRowRate).margin(kRateTolerance));
  CHECK(static_cast<double>(small) / kSpecDraws >= kMinSmallShare);
  CHECK((lq_gt_lk && lq_lt_lk && lq1 && lk1 && gqa && mqa && dv_ne_d));
  CHECK(masks.size() == 2);
  CHECK(layouts.size() == 4);
}

TEST_CASE("screened properties' cases reach production head dims against rows of hundreds to 2,048 keys") {
  CaseOptions with_reach;
  with_reach.reach = true;
  const std::vector<CaseSpec> specs = draw_specs(with_reach, kSpecDraws, 2);
  const std::vector<CaseSpec> plain = draw_specs(CaseOptions{}, kSpecDraws, 2);
  // The same Random draws the same spec unless it lands in the reach regime.
  int reached = 0, extremes = 0;
  std::set<std::int64_t> head_dims;
  std::int64_t most_keys = 0, most_keys_at_256 = 0;
  for (std::size_t x = 0; x < specs.size(); ++x) {
    const CaseSpec &s = specs[x];
    REQUIRE_NOTHROW(s.shape.validate());
    extremes += s.family == Family::extremes;
    if (s == plain[x]) continue;
    ++reached;
    INFO(s.shape.Lq << "×" << s.shape.Lk << " D " << s.shape.D << " Dv " << s.shape.Dv << " Hq " << s.shape.Hq);
    CHECK(s.family != Family::extremes);
    CHECK(s.shape.Lk >= kReachMinKeys);
    CHECK(s.shape.Lk <= kReachMaxKeys);
    CHECK(s.shape.D >= kReachMinOddDim);
    CHECK(s.work() <= CaseOptions::kReachMaxWork);
    head_dims.insert(s.shape.D);
    most_keys = std::max(most_keys, s.shape.Lk);
    if (s.shape.D == kProductionHeadDims.back()) most_keys_at_256 = std::max(most_keys_at_256, s.shape.Lk);
  }
  CHECK(static_cast<double>(reached) / kSpecDraws == Approx(kReachRate).margin(kRateTolerance));
  for (std::int64_t d : kProductionHeadDims) CHECK(head_dims.count(d));
  CHECK(std::count_if(head_dims.begin(), head_dims.end(), [](std::int64_t d) { return d % 2 == 1; }) >= 10);
  CHECK(most_keys >= kReachMaxKeys - 1);  // log-uniform, a third at a power of two or one off it
  CHECK(most_keys_at_256 >= CaseOptions::kReachMaxWork / (2 * kProductionHeadDims.back() * kLongRowMaxHeads));
  // Extremes stay in the other regimes, at their share of them.
  CHECK(static_cast<double>(extremes) / kSpecDraws >= (1 - kReachRate) / kFamilyCount - kRateTolerance);
}

TEST_CASE("generated values are exactly representable in the storage dtype and every family appears") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    INFO(dtype_name(dt));
    CaseOptions opts;
    opts.dtype = dt;
    opts.backward = true;
    const rc::Gen<Case> g = gen_case(opts);
    rc::Random r(7);
    std::map<Family, int> seen;
    double max_logit = 0;
    bool f16_max = false, subnormal = false, fraction_free_ints = true;
    int not_representable = 0;
    for (int x = 0; x < kCaseDraws; ++x) {
      const Case c = g(r.split(), x % kSizes).value();
      ++seen[c.spec.family];
      REQUIRE(c.q.size() == static_cast<std::size_t>(c.spec.shape.B * c.spec.shape.Hq * c.spec.shape.Lq *
                                                     c.spec.shape.D));
      REQUIRE_FALSE(c.dout.empty());
      for (double v : c.flat()) {
        not_representable += !representable(dt, v);
        f16_max |= std::abs(v) == 65504;
        subnormal |= v != 0 && std::abs(v) < 0x1p-14;
      }
      if (c.spec.family == Family::small_ints)
        for (double v : c.flat()) fraction_free_ints &= std::trunc(v) == v && std::abs(v) <= kSmallIntMax;
      if (c.spec.family == Family::large) {
        const Shape &s = c.spec.shape;
        for (std::int64_t d = 0; d < s.D; ++d)  // q_0 · k_0 of batch 0, head 0, spread over d
          max_logit = std::max(max_logit, std::abs(c.q[static_cast<std::size_t>(d)] * c.k[static_cast<std::size_t>(d)]) *
                                              default_scale(s.D));
      }
    }
    CHECK(not_representable == 0);
    CHECK(seen.size() == static_cast<std::size_t>(kFamilyCount));
    CHECK(fraction_free_ints);
    CHECK(max_logit >= kLargeLogit);
    CHECK(subnormal);
    if (dt != Dtype::bf16) CHECK(f16_max);  // 65504 is not a bfloat16 value (it rounds to 65536)
  }
}

TEST_CASE("near-tie keys differ from the first key by at most one ulp per entry") {
  CaseOptions opts;
  opts.dtype = Dtype::f16;
  opts.family = Family::near_ties;
  rc::Random r(3);
  for (int x = 0; x < 50; ++x) {
    const Case c = draw_case(r.split(), draw_spec(r.split(), rc::kNominalSize, opts), opts);
    const Shape &s = c.spec.shape;
    for (std::int64_t j = 1; j < s.Lk; ++j)
      for (std::int64_t d = 0; d < s.D; ++d) {
        const double base = c.k[static_cast<std::size_t>(d)], kj = c.k[static_cast<std::size_t>(j * s.D + d)];
        CHECK(std::abs(kj - base) <= std::max(std::abs(base) * 0x1p-10, 0x1p-24));
      }
  }
}

TEST_CASE("the same Random and size give the same case") {
  CaseOptions opts;
  opts.dtype = Dtype::bf16;
  opts.backward = true;
  const rc::Gen<Case> g = gen_case(opts);
  for (std::uint64_t seed = 1; seed < 20; ++seed)
    CHECK(g(rc::Random(seed), static_cast<int>(seed)).value().same_as(g(rc::Random(seed), static_cast<int>(seed)).value()));
}

TEST_CASE("mutants of a case meet its options, stay representable and broadcast, and change it") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (const bool tied : {false, true}) {
      INFO(dtype_name(dt) << (tied ? " Dv = Lk" : ""));
      CaseOptions opts;
      opts.dtype = dt;
      opts.backward = true;
      opts.dv_equals_lk = tied;
      const rc::Gen<Case> g = gen_case(opts);
      rc::Random r(11), m(12);
      int changed = 0, resized = 0, not_representable = 0;
      for (int x = 0; x < 200; ++x) {
        const Case c = g(r.split(), x % kSizes).value();
        const Case mutant = mutate_case(c, m, opts);
        CHECK(opts.admits(mutant.spec));
        CHECK(mutant.spec.work() <= opts.max_work);
        CHECK(mutant.broadcast_consistent());
        CHECK(opts.tied(mutant.spec.shape));
        for (double v : mutant.flat()) not_representable += !representable(dt, v);
        changed += !mutant.same_as(c);
        resized += !(mutant.spec.shape == c.spec.shape);
      }
      CHECK(not_representable == 0);
      CHECK(changed >= 190);
      if (tied) CHECK(resized == 0);  // a shape whose head dims follow Lk is kept
      else CHECK(resized > 0);
    }
}

TEST_CASE("the same Random gives the same mutant") {
  CaseOptions opts;
  opts.backward = true;
  const Case c = gen_case(opts)(rc::Random(5), rc::kNominalSize).value();
  rc::Random a(9), b(9);
  for (int x = 0; x < 20; ++x) CHECK(mutate_case(c, a, opts).same_as(mutate_case(c, b, opts)));
}

TEST_CASE("shrinking a spec reaches the smallest spec that keeps the failure") {
  CaseSpec big;
  big.shape = Shape{2, 8, 2, 65, 129, 64, 32};
  big.mask = Mask::causal;
  big.layout = Layout::transposed;
  big.family = Family::large;
  // "Fails" while Lk ≥ 3, D ≥ 2 and some GQA group is left.
  const auto [min, steps] = rc::shrinkable::findLocalMin(shrinkable_spec(big, CaseOptions{}), [](const CaseSpec &s) {
    return s.shape.Lk >= 3 && s.shape.D >= 2 && s.shape.Hq > s.shape.Hkv;
  });
  CHECK(steps > 0);
  CHECK(min.shape == Shape{1, 2, 1, 1, 3, 2, 1});
  CHECK(min.mask == Mask::none);
  CHECK(min.layout == Layout::bhld);
  CHECK(min.family == Family::small_ints);
}

TEST_CASE("slicing a case keeps the values that fail") {
  Case c;
  c.spec.shape = Shape{2, 4, 2, 5, 6, 3, 2};
  c.resize_values(true);
  for (auto *t : {&c.q, &c.k, &c.v, &c.dout})
    for (std::size_t x = 0; x < t->size(); ++x) (*t)[x] = static_cast<double>(x % 7);
  // Plant one "bad" value: key 4 of batch 1, kv head 1, column 2.
  constexpr double kBad = 1000;
  const Shape &s = c.spec.shape;
  c.k[static_cast<std::size_t>(((1 * s.Hkv + 1) * s.Lk + 4) * s.D + 2)] = kBad;
  auto has_bad = [&](const Case &x) { return std::find(x.k.begin(), x.k.end(), kBad) != x.k.end(); };
  const auto [min, steps] = rc::shrinkable::findLocalMin(shrinkable_case(c, CaseOptions{}), has_bad);
  CHECK(steps > 0);
  CHECK(min.spec.shape == Shape{1, 1, 1, 1, 1, 1, 1});
  CHECK(min.k == std::vector<double>{kBad});
  CHECK(min.q == std::vector<double>{0});
}

TEST_CASE("a value shrinks toward small integers and fewer significant bits") {
  auto min_of = [](double x, Dtype dt, auto pred) {
    return rc::shrinkable::findLocalMin(shrinkable_value(x, dt), pred).first;
  };
  CHECK(min_of(1234.5678, Dtype::f32, [](double x) { return x > 3; }) == 4);
  CHECK(min_of(-987.5, Dtype::f16, [](double x) { return x < -2.5; }) == -3);
  CHECK(min_of(0.123456789, Dtype::f32, [](double x) { return x > 0 && x < 0.2; }) == 0.125);
  CHECK(min_of(65504, Dtype::f16, [](double x) { return x > 100; }) == 101);
  CHECK(min_of(std::numeric_limits<double>::quiet_NaN(), Dtype::f16, [](double x) { return x != 0; }) == 1);
  // A vector whose sum must stay above 10 ends as small integers.
  const auto v = rc::shrinkable::findLocalMin(shrinkable_values({3.75, -12.5, 77.5, 9.5}, Dtype::bf16),
                                              [](const std::vector<double> &x) {
                                                double s = 0;
                                                for (double y : x) s += y;
                                                return s > 10;
                                              })
                     .first;
  double sum = 0;
  for (double y : v) {
    CHECK(std::trunc(y) == y);
    CHECK(std::abs(y) <= 11);
    sum += y;
  }
  CHECK(sum == 11);
}

TEST_CASE("every shrink candidate is strictly simpler and exactly representable") {
  rc::Random r(11);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (int f = 0; f < kFamilyCount; ++f)
      for (int x = 0; x < 50; ++x) {
        const double v = draw_value(r, static_cast<Family>(f), dt);
        for (double c : shrink::value_shrinks(v, dt)) {
          INFO(dtype_name(dt) << " " << v << " -> " << c);
          CHECK(shrink::simpler(c, v));
          CHECK(representable(dt, c));
        }
      }
}

TEST_CASE("poison in the keys the causal mask hides leaves a correct kernel's earlier rows unchanged") {
  CaseOptions opts;
  opts.mask = Mask::causal;
  const rc::Gen<Case> g = gen_case(opts);
  const Env env{support::variant_kernel(support::Variant{}), PrecisionProfile::for_storage(Dtype::f32), KernelContract{}};
  rc::Random r(5);
  constexpr double kPoison = std::numeric_limits<double>::quiet_NaN();
  int poisoned_cases = 0;
  for (int x = 0; x < 40; ++x) {
    const Case c = g(r.split(), x).value();
    const Shape &s = c.spec.shape;
    if (c.spec.work() > CaseOptions::kDefaultMaxWork / 10) continue;  // keep it quick
    const std::int64_t row = s.Lq / 2, first_hidden = row + s.Lk - s.Lq + 1;
    const Case p = with_hidden_poison(c, row, kPoison);
    for (std::int64_t j = 0; j < s.Lk; ++j)  // batch 0, kv head 0, column 0
      CHECK(std::isnan(p.k[static_cast<std::size_t>(j * s.D)]) == (j >= first_hidden));
    poisoned_cases += first_hidden < s.Lk;
    const ForwardRun a = run_forward(env, c.problem()), b = run_forward(env, p.problem());
    REQUIRE(a.call.ok());
    REQUIRE(b.call.ok());
    const std::vector<double> oa = a.out.to_vector(), ob = b.out.to_vector();
    for (std::int64_t bh = 0; bh < s.B * s.Hq; ++bh)
      for (std::int64_t i = 0; i <= row; ++i)
        for (std::int64_t d = 0; d < s.Dv; ++d) {
          const auto at = static_cast<std::size_t>((bh * s.Lq + i) * s.Dv + d);
          CHECK(std::memcmp(&oa[at], &ob[at], sizeof(double)) == 0);
        }
  }
  CHECK(poisoned_cases > 0);
  CHECK_THROWS_AS(with_hidden_poison(Case{}, 0, kPoison), std::invalid_argument);  // not causal
}

TEST_CASE("with a shape pool every drawn shape is a pool shape, and shrinking tries pool shapes first") {
  CaseOptions opts;
  auto pool = std::make_shared<std::vector<Shape>>(
      std::vector<Shape>{Shape{}, Shape{1, 2, 1, 17, 64, 8, 8}, Shape{2, 4, 2, 3, 129, 16, 4}});
  opts.shape_pool = pool;
  std::set<std::int64_t> seen;
  std::set<Mask> masks;
  std::set<Layout> layouts;
  for (const CaseSpec &s : draw_specs(opts, 300, 7)) {
    const auto at = std::find(pool->begin(), pool->end(), s.shape);
    REQUIRE(at != pool->end());
    seen.insert(at - pool->begin());
    masks.insert(s.mask);
    layouts.insert(s.layout);
  }
  CHECK(seen.size() == pool->size());  // every pool shape is drawn
  CHECK(masks.size() == 2);            // masks and layouts stay random
  CHECK(layouts.size() == 4);
  // A spec failing while Lk ≥ 3 shrinks onto a pool shape first (the pool's {…, Lk = 64} before halving Lk).
  CaseSpec big;
  big.shape = Shape{2, 4, 2, 3, 129, 16, 4};
  const rc::Shrinkable<CaseSpec> s = shrinkable_spec(big, opts);
  const auto first = s.shrinks().next();
  REQUIRE(first);
  CHECK(std::find(pool->begin(), pool->end(), first->value().shape) != pool->end());
}

TEST_CASE("a run of as many cases as pool shapes draws every pool shape once, at RapidCheck's spread of sizes") {
  constexpr int kLargestPool = rc::kNominalSize / 2;
  for (int n = 2; n <= kLargestPool; ++n) {
    auto pool = std::make_shared<std::vector<Shape>>();
    for (int k = 0; k < n; ++k) pool->push_back(Shape{.Lk = k + 1});
    CaseOptions opts;
    opts.shape_pool = pool;
    std::set<std::int64_t> seen;
    rc::Random r(static_cast<std::uint64_t>(n));
    for (int i = 0; i < n; ++i)  // RapidCheck's sizes for n cases (fewer than kNominalSize + 1): i·100 / (n − 1)
      seen.insert(draw_spec(r.split(), i * rc::kNominalSize / (n - 1), opts).shape.Lk);
    INFO("pool of " << n);
    CHECK(seen.size() == static_cast<std::size_t>(n));
  }
}

TEST_CASE("with a constraint the pool's shapes are adjusted to it (Dv = Lk, no empty rows)") {
  CaseOptions opts;
  opts.shape_pool = std::make_shared<std::vector<Shape>>(std::vector<Shape>{Shape{1, 1, 1, 9, 3, 4, 2}});
  opts.dv_equals_lk = true;
  opts.empty_rows = false;
  for (const CaseSpec &s : draw_specs(opts, 100, 3)) {
    CHECK(s.shape.Dv == s.shape.Lk);
    CHECK(opts.admits(s));
  }
}

TEST_CASE("feature cases add the declared combinable features now and then and shrink them away first") {
  CaseOptions o;
  o.features = ATTNCHECK_FEATURE_VARLEN;
  o.combinable = kCombinableFeatures;
  int combined = 0;
  for (int n = 0; n < 200; ++n) {
    const CaseSpec s = draw_spec(rc::Random(static_cast<std::uint64_t>(n)), 50, o);
    REQUIRE((s.features.bits & ATTNCHECK_FEATURE_VARLEN) != 0);
    REQUIRE((s.features.bits & ~(ATTNCHECK_FEATURE_VARLEN | kCombinableFeatures)) == 0u);
    CHECK(o.admits(s));
    if (s.features.bits == ATTNCHECK_FEATURE_VARLEN) continue;
    ++combined;
    // The first candidates drop each extra feature; none drops the property's own.
    const std::vector<CaseSpec> cands = shrink::spec_shrinks(s, o);
    bool dropped = false;
    for (const CaseSpec &c : cands) {
      CHECK((c.features.bits & ATTNCHECK_FEATURE_VARLEN) != 0);
      dropped |= c.features.bits != s.features.bits && (c.features.bits | s.features.bits) == s.features.bits;
    }
    CHECK(dropped);
  }
  // Four features at 1/8 each: 41 % of the cases combine, 83 of 200 expected (60 to 105: beyond 3 sigma each side).
  CHECK(combined > 60);
  CHECK(combined < 105);
  o.combinable = 0;
  for (int n = 0; n < 50; ++n)
    CHECK(draw_spec(rc::Random(static_cast<std::uint64_t>(n)), 50, o).features.bits == ATTNCHECK_FEATURE_VARLEN);
}

namespace {
constexpr int kReachDraws = 2000;  ///< specs drawn at the nominal size for the bucket tests
/// A bucket met in a default run (100 cases per property) is one of at least this share of the cases: missed by a
/// run with probability 0.97¹⁰⁰ ≈ 5 %.
constexpr double kCommonShare = 0.03;
/// A single group (7, 5: inside the 5–8 bucket) or production head dim, at least this often in kReachDraws.
constexpr int kMinEach = 8;

std::vector<CaseSpec> nominal_specs(const CaseOptions &opts, int n, std::uint64_t seed) {
  std::vector<CaseSpec> out;
  rc::Random r(seed);
  for (int x = 0; x < n; ++x) out.push_back(draw_spec(r.split(), rc::kNominalSize, opts));
  return out;
}

bool power_of_two(std::int64_t n) { return (n & (n - 1)) == 0; }
}  // namespace

TEST_CASE("generated shapes reach every GQA group and batch bucket and every production head dim at the nominal size") {
  const std::vector<CaseSpec> specs = nominal_specs(CaseOptions{}, kReachDraws, 23);
  std::map<std::string, int> groups, batches;
  std::map<std::int64_t, int> group_sizes, head_dims;
  for (const CaseSpec &s : specs) {
    const Shape &sh = s.shape;
    REQUIRE_NOTHROW(sh.validate());
    REQUIRE(s.work() <= CaseOptions::kDefaultMaxWork);
    const std::int64_t G = sh.group();
    ++group_sizes[G];
    if (G <= 4) ++groups["G=" + std::to_string(G)];
    if (G >= 5 && G <= 8 && !power_of_two(G)) ++groups["G=5..8, not a power of two"];
    if (G == 16 || G == 32 || G == 64) ++groups["G=" + std::to_string(G)];
    if (sh.Hkv == 1 && sh.Hq >= 32) ++groups["MQA, Hq >= 32"];
    ++batches[sh.B == 1 ? "B=1" : sh.B == 2 ? "B=2" : sh.B <= 8 ? "B=3..8" : "B>8"];
    ++head_dims[sh.D];
  }
  const int common = static_cast<int>(kCommonShare * kReachDraws);
  for (const std::string g : {"G=1", "G=2", "G=3", "G=4", "G=5..8, not a power of two", "G=16", "G=32", "G=64",
                              "MQA, Hq >= 32"}) {
    INFO(g << ": " << groups[g] << " of " << kReachDraws);
    CHECK(groups[g] >= common);
  }
  for (const std::string b : {"B=1", "B=2", "B=3..8", "B>8"}) {
    INFO(b << ": " << batches[b] << " of " << kReachDraws);
    CHECK(batches[b] >= common);
  }
  for (std::int64_t g : {5, 7}) {
    INFO("G=" << g << ": " << group_sizes[g]);
    CHECK(group_sizes[g] >= kMinEach);
  }
  for (std::int64_t d : kProductionHeadDims) {
    INFO("D=" << d << ": " << head_dims[d]);
    CHECK(head_dims[d] >= kMinEach);
  }
}

TEST_CASE("a case in a rare group or batch bucket keeps rows of several keys within the work cap") {
  // The work cap makes lengths and head dims give way, not the group or the batch: a large group must not meet only
  // 1×1 problems.
  int rare = 0, several = 0;
  for (const CaseSpec &s : nominal_specs(CaseOptions{}, kReachDraws, 29)) {
    const Shape &sh = s.shape;
    if (sh.group() < 16 && sh.B <= 8) continue;
    ++rare;
    several += sh.Lq >= 2 && sh.Lk >= 2 && sh.Lq * sh.Lk >= kMinRareRows;
  }
  INFO(several << " of " << rare << " rare cases have Lq, Lk >= 2 and Lq·Lk >= " << kMinRareRows);
  REQUIRE(rare > 0);
  CHECK(static_cast<double>(several) / rare >= kMinRareSeveralShare);
}

TEST_CASE("shrinking a large or non-power-of-two group or a large batch stops at the smallest one that fails") {
  CaseSpec big;
  big.shape = Shape{16, 128, 2, 5, 7, 64, 64};
  const auto min_of = [&](auto fails) {
    return rc::shrinkable::findLocalMin(shrinkable_spec(big, CaseOptions{}), fails).first;
  };
  // A group past 8 (G = 64 on two kv heads).
  CHECK(min_of([](const CaseSpec &s) { return s.shape.group() > 8; }).shape == Shape{1, 9, 1, 1, 1, 1, 1});
  // A group past 8 on two kv heads; a batch past 2.
  CHECK(min_of([](const CaseSpec &s) { return s.shape.group() > 8 && s.shape.Hkv == 2; }).shape ==
        Shape{1, 18, 2, 1, 1, 1, 1});
  CHECK(min_of([](const CaseSpec &s) { return s.shape.B > 2; }).shape == Shape{3, 1, 1, 1, 1, 1, 1});
  // A group that is not a power of two: from 48, through 24, 12 and 6, to 3; from Qwen2.5-0.5B's 14/2 = 7 to 3.
  const auto not_power_of_two = [](const CaseSpec &s) { return !power_of_two(s.shape.group()); };
  big.shape = Shape{16, 96, 2, 5, 7, 64, 64};
  CHECK(min_of(not_power_of_two).shape == Shape{1, 3, 1, 1, 1, 1, 1});
  big.shape = Shape{1, 14, 2, 3, 3, 8, 8};
  CHECK(min_of(not_power_of_two).shape == Shape{1, 3, 1, 1, 1, 1, 1});
}

namespace {
/// Own layouts and broadcasts met in kReachDraws backward specs: "<operand> <layout>" and "<operand> expand-<dim>".
std::map<std::string, int> layout_reach(const std::vector<CaseSpec> &specs) {
  std::map<std::string, int> met;
  for (const CaseSpec &s : specs)
    for (int x = 0; x < kOperandCount; ++x) {
      const auto o = static_cast<Operand>(x);
      const TensorLayout &t = s.layouts[o];
      if (t.layout) ++met[std::string(operand_name(o)) + " " + std::string(layout_name(*t.layout))];
      if (t.broadcast != Broadcast::none)
        ++met[std::string(operand_name(o)) + " expand-" + std::string(broadcast_name(t.broadcast))];
    }
  return met;
}
}  // namespace

TEST_CASE("every tensor of a call meets a layout of its own and every input a stride-0 batch and head dimension") {
  CaseOptions opts;
  opts.backward = true;
  const std::map<std::string, int> met = layout_reach(nominal_specs(opts, kReachDraws, 31));
  auto count = [&](const std::string &k) { return met.count(k) ? met.at(k) : 0; };
  for (std::string o : {"q", "k", "v", "out", "dout"})
    for (Layout l : {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded}) {
      INFO(o << " " << layout_name(l) << ": " << count(o + " " + std::string(layout_name(l))));
      CHECK(count(o + " " + std::string(layout_name(l))) >= kMinEach);
    }
  for (std::string l : {"bhld", "blhd", "padded"}) {
    INFO("lse " << l << ": " << count("lse " + l));
    CHECK(count("lse " + l) >= kMinEach);
  }
  CHECK(count("lse transposed") == 0);  // an LSE has no feature dim to transpose
  for (std::string o : {"q", "k", "v", "dout"})
    for (std::string d : {"batch", "heads"}) {
      INFO(o << " expand-" << d << ": " << count(o + " expand-" + d));
      CHECK(count(o + " expand-" + d) >= kMinEach);
    }
  CHECK(count("out expand-batch") + count("out expand-heads") + count("lse expand-batch") +
            count("lse expand-heads") ==
        0);  // outputs never alias
  // A forward-only run has no dout to lay out.
  const std::map<std::string, int> fwd = layout_reach(nominal_specs(CaseOptions{}, kReachDraws, 31));
  for (const auto &[k, n] : fwd) CHECK(k.rfind("dout", 0) != 0);
}

TEST_CASE("a fixed layout or a varlen case keeps every tensor in the case's layout") {
  CaseOptions fixed;
  fixed.layout = Layout::blhd;
  for (const CaseSpec &s : nominal_specs(fixed, 500, 37)) CHECK_FALSE(s.layouts.any());
  CaseOptions varlen;
  varlen.features = ATTNCHECK_FEATURE_VARLEN;
  for (const CaseSpec &s : nominal_specs(varlen, 500, 37)) CHECK_FALSE(s.layouts.any());
}

TEST_CASE("an expanded input holds one slice's values and is sent with stride 0, and a derived case that breaks it "
          "is materialized") {
  CaseOptions opts;
  opts.backward = true;
  rc::Random r(41);
  int expanded = 0;
  for (int n = 0; n < 400 && expanded < 20; ++n) {
    const CaseSpec s = draw_spec(r.split(), rc::kNominalSize, opts);
    if (s.broadcast_of(Operand::k) == Broadcast::none || s.shape.Hkv * s.shape.B == 1) continue;
    ++expanded;
    Case c = draw_case(r.split(), s, opts);
    INFO(c.spec.describe());
    REQUIRE(c.broadcast_consistent());
    const int d = broadcast_dim(s.broadcast_of(Operand::k));
    const Problem p = c.problem();
    CHECK(p.k.strides()[static_cast<std::size_t>(d)] == 0);
    CHECK(p.k.to_vector() == c.k);
    // A property's derived case (here: one key entry changed) no longer repeats one slice: sent in full.
    Case derived = c;
    derived.k.back() = c.k.back() == 1 ? 2 : 1;  // exactly representable in every dtype
    CHECK_FALSE(derived.broadcast_consistent());
    const Problem q = derived.problem();
    CHECK(q.k.strides()[static_cast<std::size_t>(d)] != 0);
    CHECK(q.k.to_vector() == derived.k);
  }
  CHECK(expanded == 20);
}

TEST_CASE("layouts shrink all at once, then one broadcast, then one own layout at a time") {
  TensorLayouts t;
  t[Operand::v].layout = Layout::transposed;
  t[Operand::k].broadcast = Broadcast::heads;
  t[Operand::lse].layout = Layout::blhd;
  const std::vector<TensorLayouts> s = shrink::layout_shrinks(t);
  REQUIRE(s.size() == 4);
  CHECK_FALSE(s[0].any());
  CHECK(s[1].describe() == "v=transposed lse=blhd");
  CHECK(s[2].describe() == "k=expand-heads lse=blhd");
  CHECK(s[3].describe() == "k=expand-heads v=transposed");
  TensorLayouts one;
  one[Operand::dout].broadcast = Broadcast::batch;
  CHECK(shrink::layout_shrinks(one).size() == 1);
  CHECK(shrink::layout_shrinks(TensorLayouts{}).empty());
  // A failure that needs v's layout ends with v's layout alone.
  CaseSpec big;
  big.shape = Shape{2, 4, 2, 3, 5, 4, 4};
  big.layouts = t;
  const CaseSpec min = rc::shrinkable::findLocalMin(shrinkable_spec(big, CaseOptions{}), [](const CaseSpec &x) {
                         return x.layouts[Operand::v].layout == Layout::transposed;
                       }).first;
  CHECK(min.layouts.describe() == "v=transposed");
}

TEST_CASE("every shrink of an expanded case changes it and keeps its inputs expanded") {
  Case c;
  c.spec.shape = Shape{3, 2, 2, 2, 3, 2, 2};
  c.spec.layouts[Operand::k].broadcast = Broadcast::batch;
  c.spec.layouts[Operand::dout].broadcast = Broadcast::heads;
  c.resize_values(true);
  for (auto *t : {&c.q, &c.k, &c.v, &c.dout})
    for (std::size_t x = 0; x < t->size(); ++x) (*t)[x] = static_cast<double>(x % 5) + 0.5;
  c.broadcast_values();
  const rc::Shrinkable<Case> root = shrinkable_case(c, CaseOptions{});
  int children = 0;
  for (auto seq = root.shrinks(); auto child = seq.next(); ++children) {
    const Case y = child->value();
    CHECK_FALSE(y.same_as(c));
    CHECK(y.broadcast_consistent());
  }
  CHECK(children > 0);
}

namespace {
/// Shares of a spec list: Lq = Lk, causal with Lq > Lk, Lk a multiple of 16 or one off it (≥ 15).
double share(const std::vector<CaseSpec> &specs, bool (*is)(const CaseSpec &)) {
  return static_cast<double>(std::count_if(specs.begin(), specs.end(), is)) / static_cast<double>(specs.size());
}
bool square(const CaseSpec &s) { return s.shape.Lq == s.shape.Lk; }
bool long_keys(const CaseSpec &s) { return s.shape.Lk >= kLongRowMin; }
bool tile_keys(const CaseSpec &s) { return s.shape.Lk >= 15 && (s.shape.Lk % 16 <= 1 || s.shape.Lk % 16 == 15); }
bool causal_more_rows(const CaseSpec &s) { return is_causal(s.mask) && s.shape.Lq > s.shape.Lk; }
bool has_corner(const CaseSpec &s, std::string_view id) {
  return corners_of(s, {.backward = true, .lse = true})[*corner_index(id)];
}
}  // namespace

TEST_CASE("feature cases reach the shapes plain cases reach: Lq = Lk at the plain rate, long keys, Lq ≠ Lk both ways") {
  const double plain_square = share(draw_specs(CaseOptions{}, kSpecDraws, 7), &square);
  REQUIRE(plain_square > 0.1);
  for (const std::uint32_t bit : kAllFeatures) {
    CaseOptions o;
    o.features = bit;
    o.combinable = kCombinableFeatures;
    const std::vector<CaseSpec> specs = draw_specs(o, kSpecDraws, 7);
    INFO(feature_name(bit));
    // Within a factor of two of the plain cases' rate (admission used to swap every feature case's Lq and Lk).
    CHECK(share(specs, &square) > plain_square / 2);
    CHECK(share(specs, &square) < plain_square * 2);
    CHECK(share(specs, &long_keys) > 0.02);  // the long-row regime's 5 %, keys kept
    CHECK(std::any_of(specs.begin(), specs.end(), [](const CaseSpec &s) { return s.shape.Lq < s.shape.Lk; }));
    CHECK(std::any_of(specs.begin(), specs.end(), [](const CaseSpec &s) { return s.shape.Lq > s.shape.Lk; }));
    for (const CaseSpec &s : specs) CHECK(o.admits(s));
  }
}

TEST_CASE("under empty-rows=unspecified no feature case is causal with more rows than keys") {
  for (const std::uint32_t bit : kAllFeatures) {
    CaseOptions o;
    o.features = bit;
    o.empty_rows = false;
    const std::vector<CaseSpec> specs = draw_specs(o, kSpecDraws / 4, 8);
    INFO(feature_name(bit));
    CHECK(share(specs, &causal_more_rows) == 0);
    CHECK(share(specs, &square) > 0.05);
  }
}

TEST_CASE("feature cases meet tile-boundary key lengths, and split corners with sinks, in a good share of cases") {
  for (const std::uint32_t bit : kAllFeatures) {
    CaseOptions o;
    o.features = bit;
    o.combinable = kCombinableFeatures;
    o.backward = true;
    const std::vector<CaseSpec> specs = draw_specs(o, kSpecDraws / 4, 9);
    INFO(feature_name(bit));
    CHECK(share(specs, &tile_keys) > 0.25);  // the boundary regime's 40 %, less the work cap's halvings
  }
  CaseOptions sinks;
  sinks.features = ATTNCHECK_FEATURE_SINKS;
  sinks.combinable = kCombinableFeatures;
  const std::vector<CaseSpec> specs = draw_specs(sinks, kSpecDraws / 4, 10);
  const auto split = std::count_if(specs.begin(), specs.end(), [](const CaseSpec &s) {
    return has_corner(s, "split-empty-sinks");
  });
  const auto decode = std::count_if(specs.begin(), specs.end(), [](const CaseSpec &s) {
    return has_corner(s, "decode-gqa-splits");
  });
  // The split regime's 20 %, half of them past the first 64 keys: at least one sinks case in twenty.
  CHECK(split > static_cast<long>(specs.size()) / 20);
  CHECK(decode > 0);
  // A mask alone makes the corner too: its hidden prefix.
  CaseOptions mask;
  mask.features = ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_SINKS;
  const std::vector<CaseSpec> masked = draw_specs(mask, kSpecDraws / 4, 11);
  CHECK(std::any_of(masked.begin(), masked.end(), [](const CaseSpec &s) {
    return s.features.mask_prefix > 0 && has_corner(s, "split-empty-sinks");
  }));
}

TEST_CASE("the independence properties' cases carry the declared combinable features at their rate, and none else") {
  CaseOptions o;
  o.declared_features = true;
  o.combinable = ATTNCHECK_FEATURE_WINDOW;
  const std::vector<CaseSpec> specs = draw_specs(o, kSpecDraws, 12);
  const double windowed = share(specs, [](const CaseSpec &s) { return s.features.bits == ATTNCHECK_FEATURE_WINDOW; });
  CHECK(windowed > kIndependenceFeatureRate - kRateTolerance);
  CHECK(windowed < kIndependenceFeatureRate + kRateTolerance);
  for (const CaseSpec &s : specs) CHECK((s.features.bits == 0 || s.features.bits == ATTNCHECK_FEATURE_WINDOW));
  for (const CaseSpec &s : specs) CHECK((s.features.active() || s.features == FeatureSpec{}));  // no stray seed
  o.combinable = 0;
  for (const CaseSpec &s : draw_specs(o, 200, 13)) CHECK(!s.features.active());
}
