// FMA-peak microbenchmark: independent fused multiply-add chains on float vectors, one team of OpenMP threads.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace attncheck::bench {

struct FmaIsa {
  std::string_view name;  ///< "avx2" or "avx512"
  int lanes;              ///< floats per vector: 8 or 16
  bool (*supported)();    ///< CPU (and OS) support, checked at run time
  /// Runs `trips` iterations of the chains on the calling thread; returns a value derived from the accumulators
  /// so that the work cannot be discarded.
  float (*run)(std::int64_t trips);
  int accumulators;  ///< independent chains, enough to cover FMA latency × FMA ports
};

/// The ISAs this build can target, widest last.
std::span<const FmaIsa> fma_isas();

/// Floating-point operations one thread performs in run(trips): 2 per lane per FMA.
inline double fma_flops(const FmaIsa &isa, std::int64_t trips) {
  return 2.0 * isa.lanes * isa.accumulators * static_cast<double>(trips);
}

}  // namespace attncheck::bench
