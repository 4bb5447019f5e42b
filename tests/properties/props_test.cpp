// The lse, sum_to_one and gradient_accuracy properties: correct kernels pass in several summation orders, planted
// bugs fail within the default case budget, and their counterexamples shrink small.
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

/// A correct forward without a backward.
const attncheck_kernel &forward_only() {
  static const attncheck_kernel k = [] {
    attncheck_kernel x = support::variant_kernel(support::Variant{});
    x.name = "forward_only";
    x.backward = nullptr;
    return x;
  }();
  return k;
}

const Shape &shrunk(const RunReport &r, std::string_view id) { return counterexample(r, id)->minimal.spec.shape; }
/// The tensors of `c` that have a layout of their own.
std::vector<Operand> own_layouts(const Counterexample &c) {
  std::vector<Operand> out;
  for (int x = 0; x < kOperandCount; ++x)
    if (c.minimal.spec.layouts[static_cast<Operand>(x)].own()) out.push_back(static_cast<Operand>(x));
  return out;
}
}  // namespace

// ---- lse ----

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

// ---- sum_to_one ----

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

TEST_CASE("sum_to_one: each softmax row of a correct kernel sums to 1 within its bound") {
  // Dv = Lk makes these cases the suite's most expensive: three summation orders suffice here.
  const std::vector<support::Variant> orders = summation_orders();
  for (std::size_t n = 0; n < orders.size(); n += 2) {
    const RunReport r = check_property(support::variant_kernel(orders[n]), "sum_to_one", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("sum_to_one: a bfloat16-accumulating kernel passes when it declares bfloat16 accumulation") {
  support::Variant v;
  v.accumulate = Dtype::bf16;
  CheckOptions o = options(Dtype::bf16);
  o.contract = parse_contract("accumulate=bf16 round-p=no");
  const RunReport declared = check_property(support::variant_kernel(v), "sum_to_one", o);
  INFO(declared.text());
  CHECK(declared.verdict() != Verdict::fail);
  // Under the default profile (float32 accumulation) its row sums are out of bounds.
  const RunReport undeclared = check_property(support::variant_kernel(v), "sum_to_one", options(Dtype::bf16));
  INFO(undeclared.text());
  CHECK(undeclared.verdict() == Verdict::fail);
}

TEST_CASE("sum_to_one: an accumulator not rescaled when the row max grows breaks the row sums") {
  const RunReport r = check_property(bug(Bug::no_rescale), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "sum_to_one");
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // the second key raises the max: the smallest row that rescales
  CHECK(s.D <= 2);
}

TEST_CASE("sum_to_one: output accumulated onto what the buffer held shows up as non-finite output") {
  const RunReport r = check_property(bug(Bug::output_not_zeroed), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  CHECK(counterexample(r, "sum_to_one")->outcome.step == Step::finite);
  const Shape &s = shrunk(r, "sum_to_one");
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D == 1);
}

TEST_CASE("sum_to_one: NaN in rows that see no key breaks the masking step") {
  const RunReport r = check_property(bug(Bug::nan_fully_masked_rows), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "sum_to_one");
  CHECK(c.minimal.spec.mask == Mask::causal);
  CHECK(c.minimal.spec.shape.Lq == 2);  // one row that sees no key needs Lq > Lk
  CHECK(c.minimal.spec.shape.Lk == 1);
}

// ---- gradient_accuracy ----

TEST_CASE("gradient_accuracy: a correct backward stays within the error bound in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "gradient_accuracy", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("gradient_accuracy: dK without the scale factor is caught and shrinks to L ≤ 2, D ≤ 4") {
  const RunReport r = check_property(bug(Bug::dk_missing_scale), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "gradient_accuracy");
  CHECK(c.outcome.detail.rfind("dK", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
}

TEST_CASE("gradient_accuracy: dS without the −D_i term is caught and shrinks to a two-key row") {
  const RunReport r = check_property(bug(Bug::ds_without_d_term), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "gradient_accuracy");
  CHECK(s.Lq == 1);
  CHECK(s.Lk <= 2);
  CHECK(s.D * s.Dv <= 2);
}

TEST_CASE("gradient_accuracy: a dO read at compact offsets whatever its strides is caught on a dO of its own layout "
          "alone") {
  const RunReport r = check_property(bug(Bug::dout_assumed_compact), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "gradient_accuracy");
  CHECK(own_layouts(c) == std::vector<Operand>{Operand::dout});
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lk * s.D == 1);
}

TEST_CASE("gradient_accuracy: a kernel without a backward is unsupported, not failed") {
  const RunReport r = check_property(forward_only(), "gradient_accuracy", options());
  INFO(r.text());
  CHECK(r.verdict() == Verdict::unsupported);
  CHECK(r.properties.at(0).cases == 0);
}
