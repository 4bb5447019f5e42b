// The accuracy property: correct kernels pass in every summation order; planted forward bugs fail and shrink small.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;
using support::kGroupTile;

TEST_CASE("accuracy: a correct kernel stays within the error bound in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "accuracy", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("accuracy: a missing scale is found and shrinks to L ≤ 2, D ≤ 4 with small integer values") {
  const RunReport r = check_property(bug(Bug::missing_scale), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "accuracy");
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
  for (double x : c.minimal.flat()) CHECK((std::trunc(x) == x && std::abs(x) <= kSmallIntMax));
}

TEST_CASE("accuracy: a correct kernel stays within the error bound in float16 and bfloat16 storage") {
  // FlashAttention-like (P rounded to storage) and FlashDecoding-like (split-KV) kernels, under the default
  // profile of the storage dtype.
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (const support::Variant &v : support::correct_variants())
      if (v.round_p && v.accumulate == Dtype::f32) {
        const RunReport r = check_property(support::variant_kernel(v), "accuracy", options(dt));
        INFO(r.text());
        CHECK(r.verdict() == Verdict::pass);
      }
}

TEST_CASE("accuracy: a causal mask that lets each row see one future key is found on two rows of at most two keys") {
  const RunReport r = check_property(bug(Bug::causal_off_by_one), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "accuracy");
  CHECK(c.minimal.spec.mask == Mask::causal);
  const Shape &s = c.minimal.spec.shape;
  // The smallest rows with a hidden key: a 2×2 square's first row, or (Lq > Lk) a first row that should see no key.
  CHECK(s.Lq == 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D * s.Dv * s.B * s.Hq == 1);
}

TEST_CASE("accuracy: query heads reading kv head h mod Hkv are found on the smallest GQA layout") {
  const Shape s = minimal_failing_shape(bug(Bug::gqa_head_mod), "accuracy");
  CHECK(s.Hkv == 2);  // h / G and h mod Hkv differ only with two kv heads and a group of two
  CHECK(s.Hq == 4);
  CHECK(s.Lq * s.Lk * s.D * s.Dv * s.B == 1);
}

TEST_CASE("accuracy: q·k accumulated in float16 exceeds the float32-accumulation bound") {
  const RunReport r = check_property(bug(Bug::f16_dot_accumulation), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = counterexample(r, "accuracy")->minimal.spec.shape;
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
}

TEST_CASE("accuracy: query heads of a group past 8 reading kv head h / 8 are found and shrink to a group of 9") {
  // Hq/Hkv ≤ 8 is computed correctly: only the group buckets 16, 32 and 64 expose it.
  const Shape s = minimal_failing_shape(bug(Bug::gqa_group_past_8), "accuracy");
  CHECK(s.group() == kGroupTile + 1);  // the smallest group past the tile
  CHECK(s.Hkv == 2);                   // with one kv head every mapping is right
  CHECK(s.Lq * s.Lk * s.D * s.Dv * s.B == 1);
}

TEST_CASE("accuracy: k and v of batch entries past 2 read from entry b mod 2 are found and shrink to a batch of 3") {
  const Shape s = minimal_failing_shape(bug(Bug::kv_batch_wraps_2), "accuracy");
  CHECK(s.B == 3);
  CHECK(s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("accuracy: a v expanded with stride 0 but read at compact offsets is found on an expanded v alone") {
  const RunReport r = check_property(bug(Bug::v_zero_stride_as_compact), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const CaseSpec &m = counterexample(r, "accuracy")->minimal.spec;
  INFO(m.describe());
  TensorLayouts only_v;
  only_v[Operand::v].broadcast = m.broadcast_of(Operand::v);
  CHECK(m.layouts == only_v);
  REQUIRE(only_v.any());
  // The broadcast dimension is 2 long (one slice more than the storage holds), everything else 1.
  const Shape &s = m.shape;
  CHECK((m.broadcast_of(Operand::v) == Broadcast::batch ? s.B : s.Hkv) == 2);
  CHECK(s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("accuracy: the bundled naive and flash kernels pass on the new large groups and batches and head dims") {
  for (const char *name : {"naive", "flash"}) {
    const RunReport r = check_property(builtin(name), "accuracy", options());
    INFO(name << ": " << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
