// attncheck properties inside a user's Catch2 (v2) suite: the test fails with the full report text (verdict,
// counterexample inputs in hex and decimal, seed and reproduce string) unless the property passes.
//
// Example:
//   #include <catch2/catch.hpp>
//   #include "attncheck/catch.h"
//   TEST_CASE("my kernel's forward is accurate in float16") {
//     attncheck::CheckOptions opt;
//     opt.dtype = attncheck::Dtype::f16;
//     ATTNCHECK_REQUIRE_PROPERTY(my_kernel, "accuracy", opt);     // stops the test case on failure
//     ATTNCHECK_CHECK_PROPERTY(my_kernel, "sum_to_one", opt);     // records the failure and goes on
//   }
// Link attncheck_properties (and Catch2). Header-only: the library itself does not depend on Catch2.
#pragma once

#include "attncheck/check.h"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

namespace attncheck::catch_support {

/// The report of one property and whether it counts as passed (verdict pass: an undecided or unsupported
/// property fails the assertion too, since it checked nothing conclusive).
struct PropertyResult {
  RunReport report;
  bool passed = false;
  std::string message;  ///< "attncheck property '<id>' on <kernel>: <verdict>\n" + report text
};

inline PropertyResult run(const attncheck_kernel &kernel, std::string_view id, const CheckOptions &options) {
  PropertyResult r{check_property(kernel, id, options), false, {}};
  r.passed = r.report.verdict() == Verdict::pass;
  r.message = "attncheck property '" + std::string(id) + "' on " + r.report.kernel + ": " +
              std::string(verdict_name(r.report.verdict())) + "\n" + r.report.text();
  return r;
}

}  // namespace attncheck::catch_support

/// Fails (and ends) the current test case with the full report unless property `id` passes for `kernel`.
#define ATTNCHECK_REQUIRE_PROPERTY(kernel, id, options)                                          \
  do {                                                                                           \
    const auto attncheck_result_ = ::attncheck::catch_support::run((kernel), (id), (options));    \
    if (!attncheck_result_.passed) FAIL(attncheck_result_.message);                              \
    SUCCEED("attncheck property '" << (id) << "' passed");                                       \
  } while (false)

/// Like ATTNCHECK_REQUIRE_PROPERTY, but the test case continues after a failure.
#define ATTNCHECK_CHECK_PROPERTY(kernel, id, options)                                            \
  do {                                                                                           \
    const auto attncheck_result_ = ::attncheck::catch_support::run((kernel), (id), (options));    \
    if (!attncheck_result_.passed)                                                               \
      FAIL_CHECK(attncheck_result_.message);                                                     \
    else                                                                                         \
      SUCCEED("attncheck property '" << (id) << "' passed");                                     \
  } while (false)
