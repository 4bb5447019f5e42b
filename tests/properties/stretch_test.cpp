// Stretched problems (stretch.h): live key positions, the long problem's exact answer from its core, the stretched
// generator's regimes and its shrinking.
#include "attncheck/gen.h"
#include "attncheck/shrink.h"
#include "attncheck/stretch.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace attncheck;

namespace {
constexpr int kSpecDraws = 2000;
/// The exact long answer and the core's differ by the filler's weight, below e^{−kFillerMargin}·n.
constexpr double kFillerTolerance = 1e-30;

/// A stretched case of the given core and lengths with values drawn (normal family).
Case stretched(const Shape &core, std::int64_t Lq, std::int64_t Lk, Mask mask, std::uint64_t seed) {
  CaseSpec s;
  s.shape = core;
  s.mask = mask;
  s.stretch = {.Lq = Lq, .Lk = Lk};
  CaseOptions o;
  o.stretch = true;
  return draw_case(rc::Random(seed), s, o);
}
}  // namespace

TEST_CASE("live keys ascend from the first key to the last, as many as asked, on every length") {
  constexpr std::int64_t N = 64;
  for (std::int64_t length : {std::int64_t{1}, std::int64_t{3}, std::int64_t{7}, std::int64_t{16}, N / 2, N, N + 1,
                              3 * N, std::int64_t{65536}})
    for (std::int64_t live : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}, kMaxLiveKeys, length}) {
      if (live > length || live > 4 * kMaxLiveKeys) continue;
      const std::vector<std::int64_t> pos = live_positions(length, live);
      INFO("length " << length << ", live " << live);
      REQUIRE(static_cast<std::int64_t>(pos.size()) == live);
      CHECK(pos.front() == 0);
      if (live > 1) CHECK(pos.back() == length - 1);
      CHECK(std::is_sorted(pos.begin(), pos.end()));
      CHECK(std::adjacent_find(pos.begin(), pos.end()) == pos.end());
    }
}

TEST_CASE("a stretched problem's exact answer is its core's, within the filler's weight") {
  // Small enough for the MPFR reference of the whole long problem: GQA, several core queries, causal or not.
  const Shape core{.B = 2, .Hq = 4, .Hkv = 2, .Lq = 2, .Lk = 5, .D = 3, .Dv = 2};
  for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left})
    for (std::int64_t Lk : {std::int64_t{5}, std::int64_t{40}, std::int64_t{97}}) {
      const Case c = stretched(core, 7, Lk, mask, static_cast<std::uint64_t>(Lk));
      const Problem p = c.problem();
      CHECK(p.shape == stretched_shape(c.spec));
      const ExactForward direct = reference_forward(p);
      const StretchedForward sf = stretched_forward(c, PrecisionProfile::for_storage(Dtype::f32));
      INFO(c.describe());
      REQUIRE(direct.out.size() == sf.exact.out.size());
      for (std::size_t x = 0; x < direct.out.size(); ++x)
        CHECK(std::abs(direct.out[x] - sf.exact.out[x]) <= kFillerTolerance * (1 + std::abs(direct.out[x])));
      for (std::size_t x = 0; x < direct.lse.size(); ++x) {
        if (std::isinf(direct.lse[x])) {
          CHECK(direct.lse[x] == sf.exact.lse[x]);
          continue;
        }
        CHECK(std::abs(direct.lse[x] - sf.exact.lse[x]) <= kFillerTolerance * (1 + std::abs(direct.lse[x])));
      }
    }
}

TEST_CASE("stretched draws reach decode rows of 65536 keys and squares of 8192 within the work cap") {
  CaseOptions o;
  o.stretch = true;
  rc::Random random(7);
  std::int64_t longest_decode = 0, largest_square = 0;
  bool gqa_long = false, causal_long = false;
  for (int n = 0; n < kSpecDraws; ++n) {
    const CaseSpec s = draw_spec(random.split(), n % (rc::kNominalSize + 1), o);
    REQUIRE(s.stretch.active());
    CHECK(o.admits(s));
    CHECK(s.work() <= kMaxStretchWork);
    CHECK(s.shape.Lk <= kMaxLiveKeys);
    CHECK(s.problem_shape().D <= kMaxStretchHeadDim);
    if (s.stretch.Lq <= kMaxStretchDecodeLq) longest_decode = std::max(longest_decode, s.stretch.Lk);
    if (s.stretch.Lq == s.stretch.Lk) largest_square = std::max(largest_square, s.stretch.Lk);
    gqa_long |= s.shape.group() > 1 && s.stretch.Lk >= 4096;
    causal_long |= s.mask == Mask::causal && s.stretch.Lk >= 4096;
  }
  CHECK(longest_decode == kMaxStretchKeys);
  CHECK(largest_square == kMaxStretchSquare);
  CHECK(gqa_long);
  CHECK(causal_long);
}

TEST_CASE("shrinking a stretched spec keeps the structure and tries fewer rows first") {
  CaseSpec s;
  s.shape = Shape{.Lk = 4, .D = 8, .Dv = 8};
  s.stretch = {.Lq = 16, .Lk = 65536};
  CaseOptions o;
  o.stretch = true;
  const std::vector<CaseSpec> cands = shrink::spec_shrinks(s, o);
  REQUIRE(!cands.empty());
  CHECK(cands.front().stretch.Lq < s.stretch.Lq);  // fewer rows first: cheap candidates
  for (const CaseSpec &c : cands) {
    CHECK(c.stretch.active());
    if (o.admits(c)) CHECK(c.stretch.Lk >= c.shape.Lk);
  }
}

TEST_CASE("the huge case holds more than 2^31 elements in k and is drawn at its size only when it fits") {
  const CaseSpec h = huge_stretch(Dtype::bf16);
  const Shape p = h.problem_shape();
  CHECK(p.B * p.Hkv * p.Lk * p.D > (std::int64_t{1} << 31));
  CHECK(tensor_bytes(h) > (std::uint64_t{1} << 32));  // two bytes each
  CaseOptions o;
  o.stretch = true;
  o.dtype = Dtype::bf16;
  o.huge_bytes = tensor_bytes(h);
  CHECK(draw_spec(rc::Random(1), kHugeSize, o).problem_shape().Lk == kHugeKeys);
  CHECK(draw_spec(rc::Random(1), kHugeSize + 1, o).problem_shape().Lk < kHugeKeys);
  o.huge_bytes = tensor_bytes(h) - 1;  // does not fit: an ordinary stretched case
  CHECK(draw_spec(rc::Random(1), kHugeSize, o).work() <= kMaxStretchWork);
}

TEST_CASE("the huge case is not shrunk: it is at its threshold, and each candidate would cost gigabytes") {
  const CaseSpec h = huge_stretch(Dtype::bf16);
  CHECK(is_huge(h));
  CaseOptions o;
  o.stretch = true;
  CHECK(shrink::spec_shrinks(h, o).empty());
  CaseSpec below = h;
  --below.stretch.Lk;  // 2³¹ elements in k: offsets up to 2³¹ − 1
  CHECK(!is_huge(below));
}
