// The determinism property: correct kernels give the same bits on every call whatever the output buffers held; a
// kernel that accumulates into its outputs, and a test-local kernel that flips a bit on every other call, fail.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
/// Calls of the flaky kernel so far: every other call is perturbed.
std::atomic<unsigned> g_flaky_calls{0};

/// Flips the lowest bit of the first byte of the first element (the last significand bit on a little-endian host).
void flip_last_bit(DLTensor *t) {
  auto *first = reinterpret_cast<std::byte *>(static_cast<char *>(t->data) + t->byte_offset);
  *first ^= std::byte{1};
}

/// A correct forward whose O[0,0,0,0] is one ulp off on every other call: a race in a reduction, in miniature.
int flaky_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse) {
  const int status = support::variant_kernel(support::Variant{}).forward(params, q, k, v, out, lse);
  if (status == ATTNCHECK_OK && g_flaky_calls++ % 2 == 1) flip_last_bit(out);
  return status;
}
const attncheck_kernel kFlaky{ATTNCHECK_ABI_VERSION, "flaky_last_bit", flaky_forward, nullptr, nullptr};
}  // namespace

TEST_CASE("determinism: a correct kernel gives the same bits on every call, forward and backward, in every order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "determinism", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("determinism: output accumulated onto what the buffer held differs between NaN- and garbage-filled outputs") {
  const RunReport r = check_property(bug(Bug::output_not_zeroed), "determinism", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "determinism");
  CHECK(c.found_after == 1);  // every case shows it
  CHECK(c.outcome.step == Step::finite);
  CHECK(c.outcome.detail.find("garbage-filled") != std::string::npos);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("determinism: a kernel that flips the last bit on every other call fails at the values step") {
  const RunReport r = check_property(kFlaky, "determinism", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "determinism");
  CHECK(c.found_after == 1);
  CHECK(c.outcome.step == Step::values);
  CHECK(c.outcome.detail.rfind("O[0,0,0,0]", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("determinism: a forward promised only within its bound may flip a last bit, and bitwise_determinism warns") {
  // Rows that see no key are exact by contract (O = 0): left unspecified here, so that every flip is a rounding.
  const CheckOptions o = declaring("forward-determinism=within-bound empty-rows=unspecified");
  const RunReport r = check(kFlaky, [&] {
    CheckOptions x = o;
    x.properties = {"determinism", "bitwise_determinism"};
    return x;
  }());
  INFO(r.text());
  CHECK(r.find("determinism")->verdict == Verdict::pass);
  const PropertyReport &bits = *r.find("bitwise_determinism");
  CHECK(bits.tier == Tier::advisory);
  CHECK(bits.verdict == Verdict::warn);
  REQUIRE(bits.counterexample);
  CHECK(bits.counterexample->outcome.detail.rfind("O[0,0,0,0]", 0) == 0);
  CHECK(r.verdict() == Verdict::warn);
  CHECK(r.verdict(/*strict=*/true) == Verdict::fail);
}

TEST_CASE("determinism: results accumulated onto garbage are beyond any bound, even when only the bound is promised") {
  const RunReport r = check_property(bug(Bug::output_not_zeroed), "determinism", declaring("determinism=within-bound"));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
}
