// The check that the certified (MPFI) reference encloses the MPFR values at `bits` and is at most one ulp of double
// wide, forward and backward: shared by the property and feature tests of the reference. Returns the MPFR values.
#pragma once

#include "attncheck/reference.h"

#include <catch2/catch.hpp>

namespace attncheck::test {

struct Exact {
  ExactForward forward;
  ExactBackward backward;
};

inline Exact require_certified(const Problem &p, unsigned bits) {
  const CertifiedForward c = certified_forward(p);
  const ExactForward x = reference_forward(p, bits);
  for (std::size_t n = 0; n < x.out.size(); ++n) REQUIRE(c.out.contains(n, x.out[n]));
  for (std::size_t n = 0; n < x.lse.size(); ++n) REQUIRE(c.lse.contains(n, x.lse[n]));
  CHECK(c.out.max_width_ulps() <= 1);
  CHECK(c.lse.max_width_ulps() <= 1);
  const CertifiedBackward cg = certified_backward(p);
  const ExactBackward g = reference_backward(p, bits);
  for (std::size_t n = 0; n < g.dq.size(); ++n) REQUIRE(cg.dq.contains(n, g.dq[n]));
  for (std::size_t n = 0; n < g.dk.size(); ++n) REQUIRE(cg.dk.contains(n, g.dk[n]));
  for (std::size_t n = 0; n < g.dv.size(); ++n) REQUIRE(cg.dv.contains(n, g.dv[n]));
  CHECK(cg.dq.max_width_ulps() <= 1);
  CHECK(cg.dk.max_width_ulps() <= 1);
  CHECK(cg.dv.max_width_ulps() <= 1);
  return {x, g};
}

}  // namespace attncheck::test
