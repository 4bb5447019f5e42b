// The suite's self-tests: (a) every planted bug is caught by the property meant for it within the default case
// budget, on a small shrunk counterexample; (b) the bundled kernels (libattncheck_builtin.so, reached through
// attncheck_kernels() like any plugin) pass every property over more than 10,000 decided cases without a false
// alarm.
//
// With ATTNCHECK_SELFTEST_RESULTS=<file> in the environment, each test appends one Markdown table row of what it
// measured (property, found after, seconds, shrunk shape; or cases and seconds) to that file —
// tests/properties/SELFTEST_RESULTS.md is made from such a run.
#include "attncheck/check.h"
#include "attncheck/kernel_abi.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {

constexpr std::int64_t kSmallDim = 4;        // every dim of a shrunk counterexample, unless the bug needs more
constexpr std::int64_t kPastOneBlock = 17;   // one key past drop_last_partial_block's 16-key block
constexpr std::int64_t kTwoBlocks = 32;      // ... and no more than two blocks
constexpr int kSelfTestCases = 180;          // per property: 16 × 180 = 2,880 per (kernel, dtype)
constexpr int kTotalDecided = 10'000;        // false-alarm-free decided cases over the four runs below
constexpr int kRuns = 4;                     // naive f32, flash f32, f16, bf16
constexpr int kDecidedPerRun = kTotalDecided / kRuns;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Appends one line to $ATTNCHECK_SELFTEST_RESULTS when it is set.
void record(const std::string &row) {
  if (const char *path = std::getenv("ATTNCHECK_SELFTEST_RESULTS")) std::ofstream(path, std::ios::app) << row << '\n';
}

/// Largest and smallest dims a shrunk counterexample may have.
struct ShapeBound {
  std::int64_t max_dim = kSmallDim;
  std::int64_t min_lk = 1, max_lk = kSmallDim;
};

/// Checks the buggy `kernel` (planted bug `name`) against `property` with options `opt` (the default ones, or under
/// the kernel's contract): it fails, and the shrunk case fits `bound`.
void caught(const attncheck_kernel &kernel, std::string_view name, std::string_view property, const CheckOptions &opt,
            ShapeBound bound) {
  const Clock::time_point t0 = Clock::now();
  const RunReport r = check_property(kernel, property, opt);
  const double secs = seconds_since(t0);
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, property);
  CHECK(c.found_after <= CheckOptions::kDefaultCases);
  const Shape &s = c.minimal.spec.shape;
  for (std::int64_t d : {s.B, s.Hq, s.Hkv, s.Lq, s.D, s.Dv}) CHECK(d <= bound.max_dim);
  CHECK(s.Lk >= bound.min_lk);
  CHECK(s.Lk <= bound.max_lk);
  std::ostringstream row;
  row << std::fixed << std::setprecision(2) << "| " << name << " | " << property << " | "
      << c.found_after << " | " << secs << " | " << c.minimal.spec.describe() << " | "
      << (c.outcome.step ? step_id(*c.outcome.step) : "?") << " |";
  record(row.str());
}

/// Checks bug `b` against `property` with the default options.
void caught(Bug b, std::string_view property, ShapeBound bound = {}) {
  caught(bug(b), support::bug_name(b), property, options(), bound);
}

/// Checks the feature bug `b` against its feature's `property`, under the feature kernels' contract.
void caught(support::FeatureBug b, std::string_view property, ShapeBound bound = {}) {
  CheckOptions opt = options();
  opt.contract = parse_contract(support::feature_contract(b));
  caught(support::feature_kernel(b), support::feature_bug_name(b), property, opt, bound);
}

/// Every property on `kernel` in `dt` under its declared contract, kSelfTestCases each: all pass (the features it
/// does not declare are declined), with at least kDecidedPerRun decided cases.
void passes_everything(std::string_view kernel, Dtype dt) {
  CheckOptions opt = options(dt);
  opt.cases = kSelfTestCases;
  opt.contract = declared_contract(kernel);
  const Clock::time_point t0 = Clock::now();
  const RunReport r = check(builtin(kernel), opt);
  const double secs = seconds_since(t0);
  int decided = 0, undecided = 0;
  for (const PropertyReport &p : r.properties) {
    INFO(p.id << ": " << p.note);
    CHECK((p.verdict == Verdict::pass || p.tier == Tier::off));
    decided += p.cases - p.undecided;
    undecided += p.undecided;
    if (p.undecided > 0) CHECK_THAT(p.note, Catch::Contains("(the first: case "));  // which case, and why
  }
  INFO(r.text());
  CHECK(r.verdict() == Verdict::pass);
  CHECK(decided >= kDecidedPerRun);
  std::ostringstream row;
  row << std::fixed << std::setprecision(1) << "| " << kernel << " | " << dtype_name(dt) << " | "
      << r.properties.size() << " | " << decided << " | " << undecided << " | " << secs << " |";
  record(row.str());
}

}  // namespace

// ---- (a) each planted bug is caught by the property meant for it ----

TEST_CASE("self-test: a missing scale is caught by accuracy on a case with every dim at most 4") {
  caught(Bug::missing_scale, "accuracy");
}
TEST_CASE("self-test: a missing scale is caught by variance_normalization on a case with every dim at most 4") {
  caught(Bug::missing_scale, "variance_normalization");
}
TEST_CASE("self-test: a scale of 1/D is caught by variance_normalization on a case with every dim at most 4") {
  caught(Bug::scale_1_over_d, "variance_normalization");
}
TEST_CASE("self-test: a scale of 1/√Dv is caught by variance_normalization on a case with every dim at most 4") {
  caught(Bug::scale_1_over_sqrt_dv, "variance_normalization");
}
TEST_CASE("self-test: softmax without max subtraction is caught by overflow_robustness on a small case") {
  caught(Bug::no_max_subtraction, "overflow_robustness");
}
TEST_CASE("self-test: an accumulator not rescaled when the max grows is caught by sum_to_one on a small case") {
  caught(Bug::no_rescale, "sum_to_one");
}
TEST_CASE("self-test: a dropped partial last key block is caught by accuracy on a single key, a partial block") {
  caught(Bug::drop_last_partial_block, "accuracy");  // Lk < 16: every key is in the dropped block, LSE = −∞
}
TEST_CASE("self-test: a dropped partial last key block is caught by permutation_equivariance past a full block") {
  // A permutation changes which key is dropped only once a full block of 16 precedes the partial one.
  caught(Bug::drop_last_partial_block, "permutation_equivariance", {.min_lk = kPastOneBlock, .max_lk = kTwoBlocks});
}
TEST_CASE("self-test: a causal mask one key too wide is caught by causal on a case with every dim at most 4") {
  caught(Bug::causal_off_by_one, "causal");
}
TEST_CASE("self-test: a top-left aligned causal mask is caught by causal on a case with every dim at most 4") {
  caught(Bug::causal_top_left, "causal");
}
TEST_CASE("self-test: q·k accumulated in float16 is caught by accuracy on a case with every dim at most 4") {
  caught(Bug::f16_dot_accumulation, "accuracy");
}
TEST_CASE("self-test: query heads reading kv head h mod Hkv are caught by slice_independence on a small case") {
  caught(Bug::gqa_head_mod, "slice_independence");
}
TEST_CASE("self-test: NaN in rows that see no key is caught by empty_rows on a case with every dim at most 4") {
  caught(Bug::nan_fully_masked_rows, "empty_rows");
}
TEST_CASE("self-test: dK without the scale is caught by gradient_accuracy on a case with every dim at most 4") {
  caught(Bug::dk_missing_scale, "gradient_accuracy");
}
TEST_CASE("self-test: dS without the −D term is caught by gradient_identities on a case with every dim at most 4") {
  caught(Bug::ds_without_d_term, "gradient_identities");
}
TEST_CASE("self-test: outputs added to instead of overwritten are caught by determinism on a small case") {
  caught(Bug::output_not_zeroed, "determinism");
}
TEST_CASE("self-test: reading one key past the last is caught by padding_isolation on a small case") {
  caught(Bug::read_past_last_key, "padding_isolation");
}

// ---- (a') each planted feature bug is caught by its feature's property (SPEC.md §2.7) ----

TEST_CASE("self-test: a window one key too wide on its right edge is caught by window on a small case") {
  caught(support::FeatureBug::window_right_off_by_one, "window");
}
TEST_CASE("self-test: softcap applied after the mask is caught by softcap on a small case") {
  caught(support::FeatureBug::softcap_after_mask, "softcap");
}
TEST_CASE("self-test: ALiBi slopes in reverse head order are caught by alibi on a small case") {
  caught(support::FeatureBug::alibi_reversed_slopes, "alibi");
}
TEST_CASE("self-test: varlen reading one key across a sequence boundary is caught by varlen on a small case") {
  caught(support::FeatureBug::varlen_reads_across_boundary, "varlen");
}
TEST_CASE("self-test: paged KV read at the logical page is caught by paged on a small case") {
  caught(support::FeatureBug::paged_logical_page, "paged");
}
TEST_CASE("self-test: a dropout mask not reproducible from its seed is caught by dropout on a small case") {
  caught(support::FeatureBug::dropout_mask_not_reproducible, "dropout");
}
TEST_CASE("self-test: a dropout draw shared across query heads is caught by dropout's independence test") {
  caught(support::FeatureBug::dropout_shared_across_heads, "dropout");
}
TEST_CASE("self-test: a dropout draw shared across batch entries is caught by dropout's independence test") {
  caught(support::FeatureBug::dropout_shared_across_batch, "dropout");
}
TEST_CASE("self-test: a dropout draw shared across rows is caught by dropout's independence test") {
  caught(support::FeatureBug::dropout_shared_across_rows, "dropout");
}
TEST_CASE("self-test: a dropout draw shared across the keys of a row is caught by dropout's independence test") {
  caught(support::FeatureBug::dropout_shared_across_keys, "dropout");
}
TEST_CASE("self-test: a boolean mask read as visible only where it is 1 is caught by attn_mask on a small case") {
  caught(support::FeatureBug::mask_byte_one, "attn_mask");
}
TEST_CASE("self-test: argument tensors read as compact are caught by each feature's property, shrunk to them strided") {
  for (const std::string_view property : {"alibi", "sinks", "attn_mask", "varlen", "paged"}) {
    INFO(property);
    caught(support::FeatureBug::args_assumed_compact, property);
    CheckOptions opt = options();
    opt.contract = parse_contract(support::feature_contract(support::FeatureBug::args_assumed_compact));
    const RunReport r = check_property(support::feature_kernel(support::FeatureBug::args_assumed_compact), property, opt);
    REQUIRE(r.verdict() == Verdict::fail);
    CHECK(counterexample(r, property)->minimal.spec.features.strided_args);  // compact, it passes: not shrunk away
  }
}
TEST_CASE("self-test: FP8 inputs read without their descales are caught by fp8 on a small case") {
  caught(support::FeatureBug::fp8_without_descale, "fp8");
}

// ---- (b) the bundled kernels pass every property without a false alarm (4 runs × ≥ 2,500 decided cases) ----

TEST_CASE("self-test: the bundled naive kernel passes every property in float32 without a false alarm") {
  passes_everything("naive", Dtype::f32);
}
TEST_CASE("self-test: the bundled flash kernel passes every property in float32 without a false alarm") {
  passes_everything("flash", Dtype::f32);
}
TEST_CASE("self-test: the bundled flash kernel passes every property in float16 without a false alarm") {
  passes_everything("flash", Dtype::f16);
}
TEST_CASE("self-test: the bundled flash kernel passes every property in bfloat16 without a false alarm") {
  passes_everything("flash", Dtype::bf16);
}
