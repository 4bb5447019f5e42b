// The scale_parameter property: correct kernels honour params.scale in every summation order; a kernel that
// hard-codes 1/√D passes every other property but fails this one.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace attncheck;
using namespace attncheck::test;

namespace {
/// The default correct kernel, but with 1/√D in place of the scale it is given — FlashAttention-style code that
/// ignores its softmax_scale argument.
int own_scale_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                      DLTensor *out, DLTensor *lse) {
  attncheck_params own = *params;
  own.scale = 1.0 / std::sqrt(static_cast<double>(q->shape[3]));
  return support::variant_kernel(support::Variant{}).forward(&own, q, k, v, out, lse);
}
const attncheck_kernel kOwnScale{ATTNCHECK_ABI_VERSION, "own_scale", own_scale_forward, nullptr, nullptr};
}  // namespace

TEST_CASE("scale_parameter: correct kernels honour the scale they are passed, in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "scale_parameter", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  const RunReport r16 = check_property(support::variant_kernel(support::Variant{}), "scale_parameter",
                                    options(Dtype::f16));
  INFO(r16.text());
  CHECK(r16.verdict() == Verdict::pass);
}

TEST_CASE("scale_parameter: a kernel that hard-codes 1/√D passes accuracy but fails here with a small case") {
  CHECK(check_property(kOwnScale, "accuracy", options()).verdict() == Verdict::pass);
  const RunReport r = check_property(kOwnScale, "scale_parameter", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = counterexample(r, "scale_parameter")->minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk <= 4);
  CHECK(s.D <= 4);
}
