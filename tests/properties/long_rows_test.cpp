// long_rows: correct kernels of every summation order pass on stretched problems up to 65,536 keys; kernels that
// break only at scale are caught with counterexamples whose shape shows the threshold.
#include "property_support.h"

#include "attncheck/gen.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;
using support::Variant;

namespace {
/// Few cases: a long row of a scalar variant kernel costs up to seconds; every kStretchMaxEvery-th is a maximum.
constexpr int kCases = 2 * kStretchMaxEvery;

CheckOptions long_options(Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.cases = o.min_cases = kCases;
  return o;
}
}  // namespace

TEST_CASE("long_rows: correct kernels of every summation order pass on rows up to 65536 keys") {
  for (const Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "long_rows", long_options());
    INFO(v.name() << "\n" << r.text());
    CHECK(r.verdict() == Verdict::pass);
    CHECK(r.properties.at(0).note.find("sizes run: rows up to Lk=") != std::string::npos);
  }
}

TEST_CASE("long_rows: FlashAttention-like float16 and bfloat16 kernels that round P pass") {
  Variant v;
  v.key_block = 64;
  v.exp2_fold = true;
  v.round_p = true;
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const RunReport r = check_property(support::variant_kernel(v), "long_rows", long_options(dt));
    INFO(dtype_name(dt) << "\n" << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("long_rows: a dropped partial last key block is caught and shrinks to one key past a block") {
  const RunReport r = check_property(bug(Bug::drop_last_partial_block), "long_rows", long_options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const CaseSpec &s = counterexample(r, "long_rows")->minimal.spec;
  CHECK(s.stretch.Lk == 17);  // the 16-key block and one key of the next
  CHECK(s.stretch.Lq == 1);
}

namespace {
/// Checks scale bug `b` against long_rows with the default options: caught, and the shrunk long problem has
/// Lk′ in [min_lk, max_lk] (just past the bug's threshold) and, when `decode`, one row.
void caught_at_scale(Bug b, std::int64_t min_lk, std::int64_t max_lk, bool decode = false) {
  const RunReport r = check_property(bug(b), "long_rows", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const CaseSpec &s = counterexample(r, "long_rows")->minimal.spec;
  CHECK(s.stretch.Lk >= min_lk);
  CHECK(s.stretch.Lk <= max_lk);
  if (decode) CHECK(s.stretch.Lq == 1);
  for (std::int64_t d : {s.shape.B, s.shape.Hq, s.shape.Lq, s.shape.D, s.shape.Dv}) CHECK(d <= 4);
}
}  // namespace

TEST_CASE("long_rows: an 8-bit block counter is caught and shrinks to a row just past 256 blocks of 8 keys") {
  caught_at_scale(Bug::block_counter_8bit, 2049, 2048 + 8);
}

TEST_CASE("long_rows: a split-KV combine written for two splits is caught and shrinks to just past two splits") {
  caught_at_scale(Bug::split_combine_over_two, 2 * support::kSplitKeys + 1, 2 * support::kSplitKeys + 16);
}

TEST_CASE("long_rows: a decode path that drops its tail block past 4096 keys is caught on one row just past it") {
  caught_at_scale(Bug::decode_drops_tail_block, support::kDecodeLongRow + 1, support::kDecodeLongRow + 63, true);
}

TEST_CASE("long_rows: a case of more than 2^31 elements that does not fit the memory limit is skipped and said so") {
  CheckOptions o = long_options();
  o.huge_cases = true;
  o.memory_limit_mib = 1024;
  const RunReport r = check_property(support::variant_kernel(Variant{}), "long_rows", o);
  INFO(r.text());
  CHECK(r.verdict() == Verdict::pass);
  CHECK(r.properties.at(0).note.find("no case of more than 2³¹ elements: its tensors take") != std::string::npos);
}
