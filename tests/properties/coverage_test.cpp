// The coverage model (coverage.h): cases classified into corners by the problem the kernel is given, the engine's
// counts (every decided case in exactly one bucket of a dimension), the run's statuses under its contract — and the
// default profile on a kernel declaring every feature reaching every corner with a handful of decided cases.
#include "attncheck/coverage.h"

#include "attncheck/check.h"
#include "attncheck/gen.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <string_view>

using namespace attncheck;
using namespace attncheck::test;

namespace {

/// Decided cases every corner gets from the default profile, at least: a corner met once may be met by luck.
constexpr int kHandful = 3;

bool has(const CornerSet &set, std::string_view id) {
  const auto i = corner_index(id);
  REQUIRE(i.has_value());
  return set[*i];
}

CaseSpec spec_of(Shape s) {
  CaseSpec c;
  c.shape = s;
  return c;
}

int decided_in(const Coverage &c, std::string_view dimension) {
  int n = 0;
  for (std::size_t i = 0; i < kCornerCount; ++i) n += corners()[i].dimension == dimension ? c.decided[i] : 0;
  return n;
}

}  // namespace

TEST_CASE("every corner has its own id, a dimension and a name, and corner_index finds it") {
  std::set<std::string_view> ids;
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    const Corner &c = corners()[i];
    INFO(c.id);
    CHECK(ids.insert(c.id).second);
    CHECK_FALSE(c.dimension.empty());
    CHECK_FALSE(c.name.empty());
    CHECK(corner_index(c.id) == i);
  }
  CHECK_FALSE(corner_index("no-such-corner").has_value());
}

TEST_CASE("a case reaches the corners of the problem it gives the kernel") {
  const CornerSet c = corners_of(spec_of({.B = 9, .Hq = 14, .Hkv = 2, .Lq = 1, .Lk = 0, .D = 64, .Dv = 64}), {});
  for (std::string_view id : {"b9+", "g5-8", "g-npot5+", "gqa-kv2+", "lq1", "lk0", "d64", "dv-prod", "mask-none",
                              "normal"})
    CHECK(has(c, id));
  for (std::string_view id : {"b1", "g1", "g4", "mqa", "lk1", "lq-gt-lk", "d-small", "d-ne-dv", "causal", "stretched"})
    CHECK_FALSE(has(c, id));

  const CornerSet mqa = corners_of(spec_of({.B = 1, .Hq = 71, .Hkv = 1, .Lq = 3, .Lk = 65, .D = 59, .Dv = 7}), {});
  for (std::string_view id : {"b1", "mqa", "g-npot5+", "decode-multi", "lk-tile", "lq-lt-lk", "d-odd", "d-ne-dv"})
    CHECK(has(mqa, id));
  CHECK_FALSE(has(mqa, "gqa-kv2+"));  // one kv head: the group index cannot be wrong across kv heads
}

TEST_CASE("a stretched case is classified by its long problem, not its core") {
  CaseSpec s = spec_of({.B = 1, .Hq = 1, .Hkv = 1, .Lq = 1, .Lk = 4, .D = 8, .Dv = 8});
  s.stretch = {.Lq = 1, .Lk = 20000};
  const CornerSet c = corners_of(s, {});
  CHECK(has(c, "stretched"));
  CHECK(has(c, "lk-16k"));
  CHECK(has(c, "decode-1"));
  CHECK_FALSE(has(c, "lk-short"));
}

TEST_CASE("dO's layouts count only for a backward property, LSE's only when an LSE is passed") {
  CaseSpec s = spec_of({.B = 2, .Hq = 2, .Hkv = 2, .Lq = 3, .Lk = 3, .D = 4, .Dv = 4});
  s.layouts[Operand::dout].layout = Layout::transposed;
  s.layouts[Operand::lse].layout = Layout::padded;
  s.layouts[Operand::dout].broadcast = Broadcast::batch;
  CHECK_FALSE(has(corners_of(s, {.backward = false}), "dout-transposed"));
  CHECK_FALSE(has(corners_of(s, {.backward = false}), "dout-expand-batch"));
  CHECK(has(corners_of(s, {.backward = true}), "dout-transposed"));
  CHECK(has(corners_of(s, {.backward = true}), "dout-expand-batch"));
  CHECK(has(corners_of(s, {.lse = true}), "lse-padded"));
  CHECK_FALSE(has(corners_of(s, {.lse = false}), "lse-padded"));
}

TEST_CASE("a zero stride on a dimension of length 1 is no corner: it reads what a dense tensor reads") {
  CaseSpec s = spec_of({.B = 1, .Hq = 2, .Hkv = 1, .Lq = 3, .Lk = 3, .D = 4, .Dv = 4});
  s.layouts[Operand::v].broadcast = Broadcast::batch;
  s.layouts[Operand::k].broadcast = Broadcast::heads;
  s.layouts[Operand::q].broadcast = Broadcast::heads;
  const CornerSet c = corners_of(s, {});
  CHECK_FALSE(has(c, "v-expand-batch"));  // B = 1
  CHECK_FALSE(has(c, "k-expand-heads"));  // Hkv = 1
  CHECK(has(c, "q-expand-heads"));        // Hq = 2
}

TEST_CASE("a feature's corners need the feature in the case, and its settings pick the corner") {
  CaseSpec s = spec_of({.B = 3, .Hq = 2, .Hkv = 1, .Lq = 4, .Lk = 40, .D = 4, .Dv = 4});
  s.features.page_size = 1;
  s.features.fp8 = Fp8::e5m2;
  CHECK_FALSE(has(corners_of(s, {}), "paged-page1"));  // settings without the feature bit are no feature
  CHECK_FALSE(has(corners_of(s, {}), "fp8-e4m3fn"));
  s.features.bits = ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_FP8 | ATTNCHECK_FEATURE_MASK;
  s.features.mask_kind = MaskKind::boolean;
  s.features.mask_bytes = true;
  s.features.mask_per_head = true;
  const CornerSet c = corners_of(s, {});
  for (std::string_view id : {"paged-page1", "fp8-e5m2", "mask-bool", "mask-bytes", "mask-shared", "combined"})
    CHECK(has(c, id));
  for (std::string_view id : {"paged-pages", "fp8-e4m3fn", "mask-additive", "mask-full", "varlen", "win-left"})
    CHECK_FALSE(has(c, id));
}

TEST_CASE("empty rows are a corner of bottom-right causal cases with more queries than keys") {
  CaseSpec s = spec_of({.B = 1, .Hq = 1, .Hkv = 1, .Lq = 5, .Lk = 3, .D = 4, .Dv = 4});
  s.mask = Mask::causal;
  CHECK(has(corners_of(s, {}), "empty-rows"));
  CHECK(has(corners_of(s, {}), "causal-rect"));
  s.mask = Mask::causal_top_left;
  CHECK_FALSE(has(corners_of(s, {}), "empty-rows"));
  CHECK(has(corners_of(s, {}), "causal-rect"));
}

TEST_CASE("the engine counts each decided case once per dimension and each declined case apart") {
  CheckOptions opt = options();
  opt.cases = 30;
  opt.targeted_cases = 0;  // the targeted phase's mutants count too, but not in p.cases
  const RunReport r = check_property(support::variant_kernel(support::Variant{}), "accuracy", opt);
  const PropertyReport &p = r.properties.front();
  REQUIRE(p.verdict == Verdict::pass);
  const int decided = p.cases - p.undecided;
  for (std::string_view dim : {"B", "values"}) {  // each case is in exactly one bucket of these
    INFO(dim);
    CHECK(decided_in(p.coverage, dim) == decided);
  }
  const auto of = [&](std::string_view id) { return p.coverage.decided[*corner_index(id)]; };
  CHECK(of("mask-none") + of("causal") == decided);
  CHECK(p.coverage.backward == 0);  // accuracy calls the forward only
  for (std::size_t i = 0; i < kCornerCount; ++i) CHECK(p.coverage.declined[i] == 0);
}

TEST_CASE("the kernel's declines are counted as declined, not as reached") {
  CheckOptions opt = options(Dtype::f16);
  opt.cases = 10;
  opt.min_cases = 0;
  const RunReport r = check_property(builtin("naive"), "accuracy", opt);  // naive is float32 only
  const PropertyReport &p = r.properties.front();
  REQUIRE(p.unsupported > 0);
  int declined_b = 0;
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    CHECK(p.coverage.decided[i] == 0);
    declined_b += corners()[i].dimension == "B" ? p.coverage.declined[i] : 0;
  }
  CHECK(declined_b == p.unsupported);
  const RunCoverage rc = r.coverage();
  CHECK(rc.count(CornerStatus::reached) == 0);
  CHECK(rc.corners[*corner_index("b1")].status == CornerStatus::declined);
}

namespace {
/// A kernel of production head dims only (as FlashAttention builds one per head dim): it declines every other D, Dv.
int production_dims_only(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                         DLTensor *out, DLTensor *lse) {
  if (!is_production_head_dim(q->shape[3]) || !is_production_head_dim(v->shape[3])) return ATTNCHECK_UNSUPPORTED;
  return support::variant_kernel(support::Variant{}).forward(p, q, k, v, out, lse);
}
const attncheck_kernel kProductionDimsOnly{ATTNCHECK_ABI_VERSION, "production_dims_only", &production_dims_only,
                                           nullptr, nullptr};
}  // namespace

TEST_CASE("a kernel of production head dims only gets rows of several tiles from the reach regime") {
  const RunReport r = check_property(kProductionDimsOnly, "accuracy", options());
  const PropertyReport &p = r.properties.front();
  INFO(r.text());
  const auto of = [&](std::string_view id) { return p.coverage.decided[*corner_index(id)]; };
  // Every decided case has a production head dim; the boundary regime's have short rows, the reach regime's long.
  CHECK(of("d-small") + of("d-odd") == 0);
  CHECK(of("lk-multi") + of("lk-long") >= kHandful);
}

TEST_CASE("a run's corners: not declared without the feature, not applicable without the backward") {
  RunReport r;
  r.contract = parse_contract("lse=none");
  PropertyReport p;
  p.id = "accuracy";
  p.cases = 1;
  p.coverage.decided[*corner_index("b1")] = 1;
  p.coverage.declined[*corner_index("b2")] = 2;
  r.properties.push_back(p);
  const RunCoverage rc = r.coverage();
  const auto status = [&](std::string_view id) { return rc.corners[*corner_index(id)].status; };
  CHECK(status("b1") == CornerStatus::reached);
  CHECK(status("b2") == CornerStatus::declined);
  CHECK(status("b3-8") == CornerStatus::not_reached);
  CHECK(status("win-left") == CornerStatus::not_declared);
  CHECK(status("dout-blhd") == CornerStatus::not_applicable);  // no backward property ran
  CHECK(status("lse-blhd") == CornerStatus::not_applicable);   // lse=none
  CHECK(status("combined") == CornerStatus::not_applicable);   // no features
  CHECK(rc.corners[*corner_index("b2")].declined == 2);
  const std::string line = rc.describe();
  CHECK(line.rfind("corners reached 1/", 0) == 0);
  CHECK(line.find("declined: b2") != std::string::npos);
  CHECK(line.find("not reached: b3-8, b9+") != std::string::npos);
  CHECK(line.find("more") != std::string::npos);  // the list of corners not reached is cut at kNamed
}

TEST_CASE("a run of a dtype the contract does not declare has every corner not declared, none to reach") {
  RunReport r;
  r.dtype = Dtype::f16;
  r.contract = parse_contract("dtypes=f32");
  PropertyReport p;
  p.id = "accuracy";
  p.tier = Tier::off;
  p.verdict = Verdict::unsupported;
  r.properties.push_back(p);
  const RunCoverage rc = r.coverage();
  CHECK(rc.count(CornerStatus::not_declared) == static_cast<int>(rc.corners.size()));
  CHECK(rc.describe() == "corners reached 0/0");
  r.dtype = Dtype::f32;  // the declared dtype's run: its corners are to be reached
  CHECK(r.coverage().count(CornerStatus::not_reached) > 0);
}

TEST_CASE("the default profile on a kernel declaring every feature reaches every corner with a handful of cases",
          "[coverage]") {
  CheckOptions opt = options();
  opt.contract = declared_contract("naive");  // every feature of SPEC §2.7
  for (const std::uint32_t bit : kAllFeatures) REQUIRE((opt.contract.features & bit) != 0);
  const RunReport r = check(builtin("naive"), opt);
  const RunCoverage rc = r.coverage();
  INFO(rc.describe());
  CHECK(rc.applicable() == static_cast<int>(kCornerCount));
  for (const CornerCount &c : rc.corners) {
    INFO(c.corner->id << " (" << c.corner->name << "): " << c.decided << " decided, " << c.declined << " declined");
    CHECK(c.decided >= kHandful);
  }
}
