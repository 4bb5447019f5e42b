// The gradient_identities property: a correct backward keeps Σ_j dK_j = 0 and Σ_j dV_j = Σ_i dO_i (rows that see a
// key) within the summed element bounds; a dS without its −D_i term and dV gathered from the wrong heads or rows
// fail at the sums step and shrink small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
constexpr const char *kId = "gradient_identities";
constexpr std::array<std::uint64_t, 3> kSeeds{2, 3, 5};

/// The shrunk counterexample of a failing report (`r` must outlive it).
const Counterexample &failed(const RunReport &r) {
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, kId);
  CHECK(c.outcome.step == Step::sums);
  CHECK(c.found_after <= CheckOptions::kDefaultCases);
  return c;
}
}  // namespace

TEST_CASE("gradient_identities: a correct backward keeps both sums in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), kId, options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("gradient_identities: a correct backward raises no false alarm over three more seeds and low precision") {
  for (std::uint64_t seed : kSeeds) {
    const RunReport r = check_property(support::variant_kernel(support::Variant{}), kId, options(Dtype::f32, seed));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  for (Dtype dt : {Dtype::bf16}) {
    support::Variant v;
    v.round_p = true;
    const RunReport r = check_property(support::variant_kernel(v), kId, options(dt));
    INFO(r.text());
    CHECK(r.verdict() != Verdict::fail);
  }
}

TEST_CASE("gradient_identities: dS without the −D_i term breaks Σ_j dK_j = 0 down to a single element") {
  const RunReport r = check_property(bug(Bug::ds_without_d_term), kId, options());
  const Counterexample &c = failed(r);
  INFO(c.outcome.detail);
  CHECK(c.outcome.detail.rfind("Σ_j dK", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);  // one key: dK = scale·dO·v·q ≠ 0
}

TEST_CASE("gradient_identities: query heads reading kv head h mod Hkv break Σ_j dV_j = Σ_i dO_i") {
  const RunReport r = check_property(bug(Bug::gqa_head_mod), kId, options());
  const Counterexample &c = failed(r);
  INFO(c.outcome.detail);
  CHECK(c.outcome.detail.rfind("Σ_j dV", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Hkv == 2);
  CHECK(s.Hq == 4);
  CHECK(s.B * s.Lq * s.Lk * s.Dv == 1);
}

TEST_CASE("gradient_identities: a top-left causal mask feeds dO of rows that see no key into dV") {
  const RunReport r = check_property(bug(Bug::causal_top_left), kId, options());
  const Counterexample &c = failed(r);
  INFO(c.outcome.detail);
  CHECK(c.outcome.detail.rfind("Σ_j dV", 0) == 0);
  CHECK(c.minimal.spec.mask == Mask::causal);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);  // row 0 sees no key bottom-right, key 0 top-left
  CHECK(s.Lk == 1);
}

TEST_CASE("gradient_identities: a kernel without a backward is unsupported, not failed") {
  attncheck_kernel fwd = support::variant_kernel(support::Variant{});
  fwd.backward = nullptr;
  const RunReport r = check_property(fwd, kId, options());
  CHECK(r.verdict() == Verdict::unsupported);
}
