// Contract semantics in one place (leave_unspecified_rows, property.h): a declaration takes the same rows out of every
// property's comparisons — derived problems (stretched, with and without a sink, padded, after other calls) included.
// Kernels built to exploit a declaration — garbage in every row that sees no key under empty-rows=unspecified, a
// hidden NaN leaking through a dense P·V under hidden-keys=finite — fail no property; the garbage fails the defaults.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <limits>
#include <string>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

namespace {
/// Cases per property: enough for every feature property's windows, masks and stretched rows to make rows that see
/// no key, in a test that runs every property.
constexpr int kCases = 40;

/// The correct feature kernel, but NaN in O and 1 in the LSE of every row whose LSE is −∞ (a row that sees no key,
/// without a sink): what a kernel declaring empty-rows=unspecified may return there.
int garbage_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                    DLTensor *out, DLTensor *lse) {
  const int st = support::feature_kernel(FeatureBug::none).forward(params, q, k, v, out, lse);
  if (st != ATTNCHECK_OK || !lse || out->dtype.code != kDLFloat || out->dtype.bits != 32) return st;
  auto at = [](const DLTensor *t, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
    const std::int64_t off =
        b * t->strides[0] + h * t->strides[1] + i * t->strides[2] + (t->ndim == 4 ? c * t->strides[3] : 0);
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
const attncheck_kernel kGarbageEmptyRows{ATTNCHECK_ABI_VERSION, "garbage_empty_rows", garbage_forward, nullptr,
                                         nullptr};

/// Every property of `kernel` at kCases cases under `contract`: no failure, and warnings only from `warns` (a
/// property whose check under the declaration is advisory).
void no_failure(const attncheck_kernel &kernel, const std::string &contract, const std::string &warns = "") {
  CheckOptions o = options();
  o.cases = kCases;
  o.contract = parse_contract(contract);
  const RunReport r = check(kernel, o);
  INFO(contract << "\n" << r.text());
  for (const PropertyReport &p : r.properties) {
    INFO(p.id << ": " << p.note);
    CHECK(p.verdict != Verdict::fail);
    if (p.verdict == Verdict::warn) CHECK(p.id == warns);
  }
}
}  // namespace

TEST_CASE("garbage in every row that sees no key fails no property under empty-rows=unspecified, and fails the "
          "defaults") {
  const std::string features = support::feature_contract(FeatureBug::none);
  // empty_rows' check under unspecified is advisory: no NaN there.
  no_failure(kGarbageEmptyRows, "empty-rows=unspecified " + features, "empty_rows");
  CheckOptions o = options();
  o.cases = kCases;
  o.contract = parse_contract(features);  // empty-rows=zero: the same rows are judged, and fail
  const RunReport strict = check(kGarbageEmptyRows, o);
  CHECK(strict.verdict() == Verdict::fail);
  CHECK(strict.find("empty_rows")->verdict == Verdict::fail);
}

TEST_CASE("the mean of v in every row that sees no key fails no property under empty-rows=unspecified") {
  for (const support::Variant &v : support::contract_variants())
    if (v.empty_rows_mean) no_failure(support::variant_kernel(v), support::contract_of(v).describe_changes());
}

TEST_CASE("a hidden key's NaN leaking through a dense P·V fails nothing under hidden-keys=finite, the default") {
  // masked_nonfinite's promise is hidden-keys=any's: under finite it only warns.
  for (const support::Variant &v : support::contract_variants())
    if (v.dense_pv) no_failure(support::variant_kernel(v), "hidden-keys=finite", "masked_nonfinite");
}

TEST_CASE("rows a window or mask leaves empty fail each feature property under the defaults, not under empty-rows=unspecified") {
  for (const char *id : {"window", "attn_mask", "dropout"}) {
    CheckOptions o = options();
    o.contract = parse_contract(support::feature_contract(FeatureBug::none));
    const RunReport strict = check_property(kGarbageEmptyRows, id, o);
    INFO(strict.text());
    CHECK(strict.verdict() == Verdict::fail);  // the default contract fixes them: O = 0, LSE = −∞
    o.contract = parse_contract("empty-rows=unspecified " + support::feature_contract(FeatureBug::none));
    const RunReport lenient = check_property(kGarbageEmptyRows, id, o);
    INFO(lenient.text());
    CHECK(lenient.verdict() == Verdict::pass);
  }
}
