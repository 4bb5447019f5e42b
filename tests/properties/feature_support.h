// Shared helpers of the feature properties' tests (window_test.cpp … fp8_test.cpp): options under the feature
// kernels' contract, and a correct kernel's short run that must pass its feature's property as a requirement.
#pragma once

#include "attncheck/check.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string_view>

namespace attncheck::test {

/// Cases of a correct kernel's run: a fifth of the default plan, since features_test.cpp already runs the correct
/// feature kernel through every feature property at the full plan; each kernel and dtype here adds its own cases.
inline constexpr int kFeatureCases = 20;
/// Another seed than features_test.cpp's (1), so that these runs draw cases of their own.
inline constexpr std::uint64_t kFeatureSeed = 2;

/// options(dt) under the contract of the feature kernel carrying `bug` (every feature the family implements).
inline CheckOptions feature_bug_options(support::FeatureBug bug, Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.contract = parse_contract(support::feature_contract(bug));
  return o;
}

/// `kernel` passes `property` under `o` on kFeatureCases cases of kFeatureSeed, as a requirement: a kernel that
/// declined the feature (tier off, verdict unsupported) would not count as passing.
inline void passes_feature(const attncheck_kernel &kernel, std::string_view property, CheckOptions o) {
  o.cases = kFeatureCases;
  o.seed = kFeatureSeed;
  const RunReport r = check_property(kernel, property, o);
  INFO(kernel.name << " in " << dtype_name(o.dtype) << "\n" << r.text());
  const PropertyReport *p = r.find(property);
  REQUIRE(p);
  CHECK(p->tier == Tier::required);
  CHECK(p->verdict == Verdict::pass);
}

/// The correct feature kernel passes `property` in float32 and in bfloat16 storage.
inline void feature_kernel_passes(std::string_view property) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16})
    passes_feature(support::feature_kernel(support::FeatureBug::none), property,
                   feature_bug_options(support::FeatureBug::none, dt));
}

}  // namespace attncheck::test
