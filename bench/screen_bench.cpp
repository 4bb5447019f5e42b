// attncheck_screen_bench: what the screen (the fast reference first, MPFR where it cannot decide: SPEC.md §5.1,
// properties/src/attncheck/screen.h) saves a check, in one run: each screened property checked on the bundled
// flash kernel (float32, its declared contract, a fixed seed and plan) with CheckOptions::screen on and off. The
// reports are the same (tests/properties/screen_test.cpp); the counters give cases per CPU second and the elements
// the screen decided, MPFR judged, and the confirmations. bench/screen_cost prints the ratio per property.
#include "attncheck/check.h"
#include "attncheck/contract.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/property.h"
#include "bundled_flash.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace {

using namespace attncheck;

constexpr int kCases = 30;
constexpr std::uint64_t kSeed = 21;

const attncheck_kernel &flash() { return bench::bundled_flash(); }

KernelContract flash_contract() { return parse_contract(bench::bundled_flash_contract()); }

/// The properties that judge through the screen (PropertyDef::screened) and that flash's contract turns on, in the
/// registry's order.
const std::vector<std::string_view> &screened() {
  static const std::vector<std::string_view> ids = [] {
    std::vector<std::string_view> v;
    const KernelContract contract = flash_contract();
    for (const PropertyDef *def : all_properties())
      if (def->screened && tier_of(*def, contract) != Tier::off) v.push_back(def->id);
    return v;
  }();
  return ids;
}

void check_property(benchmark::State &st) {
  const std::string_view id = screened()[static_cast<std::size_t>(st.range(0))];
  CheckOptions o;
  o.dtype = Dtype::f32;
  o.seed = kSeed;
  o.cases = kCases;
  o.properties = {std::string(id)};
  o.contract = flash_contract();
  o.screen = st.range(1) != 0;
  std::int64_t cases = 0;
  ReferenceCounts counts;
  for (auto _ : st) {
    const RunReport r = check(flash(), o);
    cases += r.properties.at(0).cases + r.properties.at(0).targeted.cases;
    counts = r.properties.at(0).reference;
  }
  st.SetLabel(std::string(id));
  st.counters["cases_per_s"] = benchmark::Counter(static_cast<double>(cases), benchmark::Counter::kIsRate);
  st.counters["fast_elements"] = static_cast<double>(counts.fast_elements);
  st.counters["mpfr_elements"] = static_cast<double>(counts.mpfr_elements);
  st.counters["confirmations"] = static_cast<double>(counts.confirmations);
}

void screened_properties(benchmark::internal::Benchmark *b) {
  b->ArgNames({"property", "screen"});
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(screened().size()); ++p)
    for (std::int64_t screen : {1, 0}) b->Args({p, screen});
}

BENCHMARK(check_property)->Apply(screened_properties)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
