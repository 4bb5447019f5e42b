// The lse property: a correct kernel's log-sum-exp stays within its bound in several summation orders and in the
// bundled kernels; an LSE in base 2, a missing scale and an LSE written at compact offsets whatever its strides fail
// within the default case budget on small shrunk cases.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
/// A correct kernel whose forward returns LSE in base 2 (log2 Σ 2^(s·log2 e)) — a classic slip of exp2-based
/// kernels — while O stays right.
int lse_base2_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                      DLTensor *out, DLTensor *lse) {
  const attncheck_kernel &good = support::variant_kernel(support::Variant{});
  const int status = good.forward(params, q, k, v, out, lse);
  if (status != ATTNCHECK_OK || lse == nullptr) return status;
  // Every element through its strides: the LSE may come in a layout of its own (CaseSpec::layouts).
  auto *data = reinterpret_cast<float *>(static_cast<char *>(lse->data) + lse->byte_offset);
  for (std::int64_t b = 0; b < lse->shape[0]; ++b)
    for (std::int64_t h = 0; h < lse->shape[1]; ++h)
      for (std::int64_t i = 0; i < lse->shape[2]; ++i) {
        float &x = data[b * lse->strides[0] + h * lse->strides[1] + i * lse->strides[2]];
        x = static_cast<float>(x * std::numbers::log2e);
      }
  return ATTNCHECK_OK;
}
const attncheck_kernel kLseBase2{ATTNCHECK_ABI_VERSION, "lse_base2", lse_base2_forward, nullptr, nullptr};

const Shape &shrunk(const RunReport &r, std::string_view id) { return counterexample(r, id)->minimal.spec.shape; }
}  // namespace

TEST_CASE("lse: a correct kernel's log-sum-exp stays within its bound in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "lse", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("lse: an LSE left in base 2 is caught although O is right") {
  const RunReport r = check_property(kLseBase2, "lse", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "lse");
  CHECK(s.Lq * s.Lk * s.D <= 2);
  CHECK(counterexample(r, "lse")->outcome.step == Step::sums);
}

TEST_CASE("lse: a missing scale is caught and shrinks to L ≤ 2, D ≤ 4") {
  const RunReport r = check_property(bug(Bug::missing_scale), "lse", options(Dtype::f16));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "lse");
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
}

TEST_CASE("lse: an LSE written at compact offsets whatever its strides is caught on an LSE of its own layout alone") {
  const RunReport r = check_property(bug(Bug::lse_assumed_compact), "lse", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "lse");
  CHECK(own_layouts(c) == std::vector<Operand>{Operand::lse});
  CHECK(c.minimal.spec.layouts[Operand::lse].layout != Layout::bhld);
  const Shape &s = c.minimal.spec.shape;
  // The fewest rows the layout places apart from BHLD: two (padded), or two heads of two rows (blhd).
  CHECK(s.Lq * s.Hq * s.B <= 4);
  CHECK(s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("lse: the bundled naive kernel's LSE stays within its bound in float32, flash's in every storage dtype") {
  const RunReport naive = check_property(builtin("naive"), "lse", builtin_options("naive"));
  INFO(naive.text());
  CHECK(naive.verdict() == Verdict::pass);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const RunReport r = check_property(builtin("flash"), "lse", builtin_options("flash", dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
