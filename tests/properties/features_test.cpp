// The feature properties (window, softcap, alibi, sinks, attn_mask, varlen, paged, dropout, fp8; SPEC.md §2.7): a correct
// feature kernel passes each in every storage dtype, and a kernel that does not declare a feature has it declined.
// Each planted feature bug is caught in selftest_test.cpp.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

namespace {
/// options() under the feature kernels' contract (every feature they implement).
CheckOptions feature_options(Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.contract = parse_contract(support::feature_contract(FeatureBug::none));
  return o;
}

constexpr const char *kFeatureProperties[] = {"window",    "softcap", "alibi", "sinks",  "attn_mask",
                                              "varlen", "paged",   "dropout", "fp8"};
}  // namespace

TEST_CASE("features: a correct feature kernel passes every feature property in float32") {
  for (const char *id : kFeatureProperties) {
    const RunReport r = check_property(support::feature_kernel(FeatureBug::none), id, feature_options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("features: a correct feature kernel passes every feature property in float16 and bfloat16") {
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (const char *id : kFeatureProperties) {
      CheckOptions o = feature_options(dt);
      o.cases = 40;
      const RunReport r = check_property(support::feature_kernel(FeatureBug::none), id, o);
      INFO(r.text());
      CHECK(r.verdict() == Verdict::pass);
    }
}

TEST_CASE("features: a kernel that does not declare a feature has its property declined") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::none), "window", options());
  INFO(r.text());
  const PropertyReport *p = r.find("window");
  REQUIRE(p);
  CHECK(p->tier == Tier::off);
  CHECK(p->verdict == Verdict::unsupported);
  CHECK(p->note.find("declined") != std::string::npos);
}

namespace {
/// features_correct, but NaN in O and +1 in the LSE of every row that sees no key: what a kernel declaring
/// empty-rows=unspecified may return there.
int garbage_empty_rows_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                               DLTensor *out, DLTensor *lse) {
  const int st = support::feature_kernel(FeatureBug::none).forward(params, q, k, v, out, lse);
  if (st != ATTNCHECK_OK || !lse || out->dtype.code != kDLFloat || out->dtype.bits != 32) return st;
  auto at = [](const DLTensor *t, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
    const std::int64_t off = b * t->strides[0] + h * t->strides[1] + i * t->strides[2] + (t->ndim == 4 ? c * t->strides[3] : 0);
    return reinterpret_cast<float *>(static_cast<char *>(t->data) + t->byte_offset) + off;
  };
  for (std::int64_t b = 0; b < lse->shape[0]; ++b)
    for (std::int64_t h = 0; h < lse->shape[1]; ++h)
      for (std::int64_t i = 0; i < lse->shape[2]; ++i) {
        float *l = at(lse, b, h, i, 0);
        if (*l != -std::numeric_limits<float>::infinity()) continue;
        *l = 1;
        for (std::int64_t c = 0; c < out->shape[3]; ++c) *at(out, b, h, i, c) = std::numeric_limits<float>::quiet_NaN();
      }
  return ATTNCHECK_OK;
}
const attncheck_kernel kGarbageEmptyRows{ATTNCHECK_ABI_VERSION, "garbage_empty_rows", garbage_empty_rows_forward,
                                         nullptr, nullptr};
}  // namespace

TEST_CASE("features: rows a window or mask leaves empty are not judged under empty-rows=unspecified") {
  for (const char *id : {"window", "attn_mask", "dropout"}) {
    CheckOptions o = feature_options();
    const RunReport strict = check_property(kGarbageEmptyRows, id, o);
    INFO(strict.text());
    CHECK(strict.verdict() == Verdict::fail);  // the default contract fixes them: O = 0, LSE = −∞
    o.contract = parse_contract("empty-rows=unspecified " + support::feature_contract(FeatureBug::none));
    const RunReport lenient = check_property(kGarbageEmptyRows, id, o);
    INFO(lenient.text());
    CHECK(lenient.verdict() == Verdict::pass);
  }
}
