// The input_integrity property: correct kernels never write q, k, v (nor dout, out, lse in backward); a test-local
// kernel that scales q in place, and one that zeroes dout as scratch, fail at the shape step.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cstdint>

using namespace attncheck;
using namespace attncheck::test;

namespace {
const attncheck_kernel &good() { return support::variant_kernel(support::Variant{}); }

/// Applies f to every float32 element of a rank-4 tensor (strides in elements; NULL strides mean compact).
template <class F>
void for_each_f32(const DLTensor *t, F f) {
  std::int64_t compact[4] = {t->shape[1] * t->shape[2] * t->shape[3], t->shape[2] * t->shape[3], t->shape[3], 1};
  const std::int64_t *st = t->strides ? t->strides : compact;
  auto *base = reinterpret_cast<float *>(static_cast<char *>(t->data) + t->byte_offset);
  for (std::int64_t a = 0; a < t->shape[0]; ++a)
    for (std::int64_t b = 0; b < t->shape[1]; ++b)
      for (std::int64_t c = 0; c < t->shape[2]; ++c)
        for (std::int64_t d = 0; d < t->shape[3]; ++d) f(base[a * st[0] + b * st[1] + c * st[2] + d * st[3]]);
}

/// Folds the scale into q in place (q ← scale·q, then attention with scale 1) and restores nothing: a classic
/// shortcut that corrupts the caller's q. float32 only.
int prescale_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                     DLTensor *out, DLTensor *lse) {
  if (q->dtype.code != kDLFloat || q->dtype.bits != 32) return ATTNCHECK_UNSUPPORTED;
  const auto scale = static_cast<float>(params->scale);
  for_each_f32(q, [scale](float &x) { x *= scale; });
  attncheck_params unit = *params;
  unit.scale = 1;
  return good().forward(&unit, q, k, v, out, lse);
}
const attncheck_kernel kPrescaleQ{ATTNCHECK_ABI_VERSION, "prescale_q_in_place", prescale_forward, nullptr, nullptr};

/// A correct forward, and a backward that uses dout as scratch: it zeroes dout after computing the gradients.
int scratch_dout_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                          const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                          DLTensor *dv) {
  const int status = good().backward(params, q, k, v, out, lse, dout, dq, dk, dv);
  if (status == ATTNCHECK_OK && dout->dtype.bits == 32) for_each_f32(dout, [](float &x) { x = 0; });
  return status;
}
const attncheck_kernel &scratch_dout() {
  static const attncheck_kernel k = [] {
    attncheck_kernel x = good();
    x.name = "scratch_dout";
    x.backward = scratch_dout_backward;
    return x;
  }();
  return k;
}
}  // namespace

TEST_CASE("input_integrity: a correct kernel leaves every input byte as it was, forward and backward") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "input_integrity", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("input_integrity: a kernel that folds the scale into q in place is found with D = 2") {
  const RunReport r = check_property(kPrescaleQ, "input_integrity", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "input_integrity");
  CHECK(c.outcome.step == Step::shape);
  CHECK(c.outcome.detail.rfind("forward wrote its input q", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.D == 2);  // D = 1 has scale 1: the in-place scaling changes nothing
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.Dv == 1);
}

TEST_CASE("input_integrity: a backward that zeroes dout as scratch is found") {
  const RunReport r = check_property(scratch_dout(), "input_integrity", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "input_integrity");
  CHECK(c.outcome.detail.rfind("backward wrote its input dout", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}
