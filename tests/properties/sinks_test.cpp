// The sinks property: a per-head logit in every row's denominator with no value, within its bounds, and a sink far
// below every logit equal to no sink. A sink counted twice after an empty first split, and a sink left out of the
// denominator, fail on small cases; correct kernels — the feature kernel, naive and flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cstdint>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

namespace {
/// The keys of sink_twice_after_empty_split's first split: the row must see none of them and a later key.
constexpr std::int64_t kSplitKeys = 64;

/// The correct feature kernel called without its sinks: each row's LSE and denominator leave the sink out (a
/// kernel that never reads the sinks tensor). Forward only.
int sinks_ignored_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                          DLTensor *out, DLTensor *lse) {
  attncheck_params without = *params;
  without.features &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_SINKS);
  return support::feature_kernel(FeatureBug::none).forward(&without, q, k, v, out, lse);
}
const attncheck_kernel kSinksIgnored{ATTNCHECK_ABI_VERSION, "sinks_ignored", sinks_ignored_forward, nullptr,
                                     nullptr};
}  // namespace

TEST_CASE("sinks: a sink counted twice after an empty first split is caught on one row of 65 keys, 64 hidden") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::sink_twice_after_empty_split), "sinks",
                                     feature_bug_options(FeatureBug::sink_twice_after_empty_split));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "sinks");
  CHECK((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_SINKS) != 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lk == kSplitKeys + 1);  // the first split's keys all hidden, one key after them seen
  CHECK(s.Lq == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("sinks: a sink left out of the denominator is caught on a single row and key") {
  const RunReport r = check_property(kSinksIgnored, "sinks", feature_bug_options(FeatureBug::none));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "sinks");
  CHECK((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_SINKS) != 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq * s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("sinks: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("sinks"); }

TEST_CASE("sinks: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "sinks", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "sinks", builtin_options("flash", dt));
}
