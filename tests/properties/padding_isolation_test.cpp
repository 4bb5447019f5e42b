// The padding_isolation property: correct kernels never read the NaN padding of a padded layout, in several
// summation orders; a kernel that reads one key past the last one reads it and fails.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("padding_isolation: a correct kernel never reads NaN padding, in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "padding_isolation", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("padding_isolation: a key loop that runs one key past the end reads the NaN padding after a head") {
  const RunReport r = check_property(bug(Bug::read_past_last_key), "padding_isolation", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "padding_isolation");
  CHECK(c.outcome.step == Step::finite);
  const Shape &s = c.minimal.spec.shape;
  // Past the last element of the last head the bug reads 0, not padding: it needs a second kv head or batch.
  CHECK(s.B * s.Hkv == 2);
  CHECK(s.Lq * s.Lk * s.D * s.Dv == 1);
}

namespace {
/// A DLTensor as a kernel that ignores byte_offset sees it: the first element taken at `data` itself, which DLPack
/// aligns to 256 bytes, in front of the real first element (attncheck passes padding there).
DLTensor ignoring_offset(const DLTensor *t) {
  DLTensor u = *t;
  u.byte_offset = 0;
  return u;
}
/// The default correct kernel, called as if byte_offset did not exist.
int offset_blind_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                         DLTensor *out, DLTensor *lse) {
  const DLTensor q0 = ignoring_offset(q), k0 = ignoring_offset(k), v0 = ignoring_offset(v);
  return support::variant_kernel(support::Variant{}).forward(params, &q0, &k0, &v0, out, lse);
}
const attncheck_kernel kOffsetBlind{ATTNCHECK_ABI_VERSION, "offset_blind", offset_blind_forward, nullptr, nullptr};
}  // namespace

TEST_CASE("a kernel that ignores DLPack's byte_offset reads the NaN padding in front of the data and fails") {
  const RunReport r = check_property(kOffsetBlind, "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  CHECK(counterexample(r, "accuracy")->outcome.step == Step::finite);
  CHECK(check_property(kOffsetBlind, "padding_isolation", options()).verdict() == Verdict::fail);
}
