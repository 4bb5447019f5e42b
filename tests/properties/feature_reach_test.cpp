// Feature cases reach what plain cases reach (gen.h's feature regimes, SPEC.md §7): a bug that only a feature's shape
// corner shows is caught at the default profile (100 cases) for seeds 1 to 5 — batch bits that differ only under a
// window, NaN in dQ for a mask with Lk ≡ 64 (mod 128) on a row that sees no key, a sink counted twice after an empty
// first split — while the correct feature kernel passes the same runs.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <string>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

namespace {
constexpr int kDefaultProfileCases = 100;  ///< gate.h's default profile
constexpr std::uint64_t kSeeds = 5;

/// The default profile's run of `property` at `seed`, under the feature kernels' contract and `extra` declarations.
CheckOptions reach_options(std::uint64_t seed, const std::string &extra = "") {
  CheckOptions o = options(Dtype::f32, seed);
  o.cases = kDefaultProfileCases;
  o.contract = parse_contract(extra + " " + support::feature_contract(FeatureBug::none));
  return o;
}

/// `bug` fails `property` at seeds 1 … kSeeds with a counterexample that has `feature`; the correct kernel passes.
void caught_every_seed(FeatureBug bug, const char *property, std::uint32_t feature, const std::string &extra = "") {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    INFO(support::feature_bug_name(bug) << " on " << property << ", seed " << seed);
    const RunReport r = check_property(support::feature_kernel(bug), property, reach_options(seed, extra));
    INFO(r.text());
    REQUIRE(r.verdict() == Verdict::fail);
    const Counterexample *cx = counterexample(r, property);
    REQUIRE(cx);
    CHECK((cx->minimal.spec.features.bits & feature) != 0);
  }
}

void correct_passes(const char *property, const std::string &extra = "") {
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    const RunReport r = check_property(support::feature_kernel(FeatureBug::none), property, reach_options(seed, extra));
    INFO(property << ", seed " << seed << "\n" << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
}  // namespace

TEST_CASE("batch bits that change only under a window fail batch_invariance at every seed, under batch-invariant=bitwise") {
  caught_every_seed(FeatureBug::window_batch_variant, "batch_invariance", ATTNCHECK_FEATURE_WINDOW,
                    "batch-invariant=bitwise");
  correct_passes("batch_invariance", "batch-invariant=bitwise");
}

namespace {
/// Row i's O = Σ v_j over the keys of its window aligned top-left (i − left ≤ j ≤ i + right, j ≤ i when causal), its
/// LSE the count: not attention, but bits that depend on the row and its window alone, as a batch-invariant kernel's
/// do. Float32 only, the window its only feature.
int top_left_window_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                            DLTensor *out, DLTensor *lse) {
  if ((params->features & ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_WINDOW)) || q->dtype.bits != 32)
    return ATTNCHECK_UNSUPPORTED;
  const bool window = params->features & ATTNCHECK_FEATURE_WINDOW;
  const std::int64_t left = window ? params->args->window_left : -1, right = window ? params->args->window_right : -1;
  const std::int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], Hkv = k->shape[1], Lk = k->shape[2];
  const std::int64_t Dv = v->shape[3];
  auto at = [](const DLTensor *t, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
    const std::int64_t off = b * t->strides[0] + h * t->strides[1] + i * t->strides[2] + (t->ndim == 4 ? c * t->strides[3] : 0);
    return reinterpret_cast<float *>(static_cast<char *>(t->data) + t->byte_offset) + off;
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h)
      for (std::int64_t i = 0; i < Lq; ++i) {
        float count = 0;
        for (std::int64_t c = 0; c < Dv; ++c) *at(out, b, h, i, c) = 0;
        for (std::int64_t j = 0; j < Lk; ++j) {
          const bool seen = (left < 0 || j >= i - left) && (right < 0 || j <= i + right) &&
                            (params->mask != ATTNCHECK_MASK_CAUSAL || j <= i);
          if (!seen) continue;
          count += 1;
          for (std::int64_t c = 0; c < Dv; ++c) *at(out, b, h, i, c) += *at(v, b, h / (Hq / Hkv), j, c);
        }
        if (lse) *at(lse, b, h, i, 0) = count;
      }
  return ATTNCHECK_OK;
}
const attncheck_kernel kTopLeftWindow{ATTNCHECK_ABI_VERSION, "top_left_window", top_left_window_forward, nullptr,
                                      nullptr};
}  // namespace

TEST_CASE("batch_invariance compares a top-left window's rows only where a call alone keeps their window") {
  // The last row called alone (Lq = 1) is row 0 under top-left alignment: its window moves. Only the batch entries
  // alone are compared for such a case.
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    CheckOptions o = options(Dtype::f32, seed);
    o.cases = kDefaultProfileCases;
    o.contract = parse_contract("causal=top-left batch-invariant=bitwise features=window");
    const RunReport r = check_property(kTopLeftWindow, "batch_invariance", o);
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
    CHECK(r.find("batch_invariance")->cases > 0);
  }
}

TEST_CASE("NaN in dQ for a mask with Lk ≡ 64 (mod 128) on a row that sees no key fails attn_mask at every seed") {
  caught_every_seed(FeatureBug::mask_backward_tile_nan, "attn_mask", ATTNCHECK_FEATURE_MASK);
}

TEST_CASE("a sink counted twice after an empty first split fails sinks at every seed") {
  caught_every_seed(FeatureBug::sink_twice_after_empty_split, "sinks", ATTNCHECK_FEATURE_SINKS);
}

TEST_CASE("the correct feature kernel passes the feature properties and the independence properties with features") {
  for (const char *id : {"attn_mask", "sinks", "window", "determinism", "bitwise_determinism", "call_history",
                         "padding_isolation"})
    correct_passes(id);
}
