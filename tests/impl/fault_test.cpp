// The checks can fail: deliberately wrong variants of flash exceed the error model's bounds.
#include "impl_support.h"

#include <catch2/catch.hpp>

using namespace implt;

namespace {
/// Relative error the "mis-scaled" variant puts into scale (a plausible bug: scale rounded through float16,
/// or 1/√D computed from a wrong D, is far larger).
constexpr double kScaleError = 1e-3;

int misscaled_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                      DLTensor *out, DLTensor *lse) {
  const attncheck_params wrong{params->scale * (1 + kScaleError), params->mask, params->features, params->args};
  return kernel("flash").forward(&wrong, q, k, v, out, lse);
}
int misscaled_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                       const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                       DLTensor *dv) {
  const attncheck_params wrong{params->scale * (1 + kScaleError), params->mask, params->features, params->args};
  return kernel("flash").backward(&wrong, q, k, v, out, lse, dout, dq, dk, dv);
}
const attncheck_kernel kMisscaled{ATTNCHECK_ABI_VERSION, "flash_misscaled", misscaled_forward, misscaled_backward,
                                  nullptr};
}  // namespace

TEST_CASE("a flash variant with the scale off by one part in a thousand is rejected", "[impl][fault]") {
  std::mt19937_64 rng(0xbad5ca1e);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const Shape s{1, 2, 1, 33, 40, 16, 12};
    const Problem p = make_problem(rng, dt, s, Mask::causal, default_scale(s.D));
    Outputs good(rng, p), bad(rng, p);
    REQUIRE(run(kernel("flash"), p, good).ok());
    REQUIRE(run(kMisscaled, p, bad).ok());
    const Expected e(p);
    const Ratios g = ratios(good, e), r = ratios(bad, e);
    INFO(dtype_name(dt) << ": flash " << g.describe() << "; mis-scaled " << r.describe());
    CHECK(g.max() <= 1.0);
    CHECK(r.lse > 1.0);  // lse is float32 whatever the storage
    // bfloat16 rounds out, dq, dk, dv with u = 2⁻⁸, which hides a 10⁻³ relative error there; f32/f16 do not.
    if (dt != Dtype::bf16) {
      CHECK(r.out > 1.0);
      CHECK(std::max({r.dq, r.dk, r.dv}) > 1.0);
    }
  }
}

TEST_CASE("one output element moved by twice its bound is rejected and no other is blamed", "[impl][fault]") {
  std::mt19937_64 rng(0x0e1e);
  const Shape s{1, 1, 1, 17, 65, 8, 8};
  const Problem p = make_problem(rng, Dtype::f32, s, Mask::none, default_scale(s.D));
  Outputs o(rng, p);
  REQUIRE(run(kernel("flash"), p, o).ok());
  const Expected e(p);
  const std::int64_t i = 5, c = 3;
  const std::size_t at = static_cast<std::size_t>(out_offset(s, 0, 0, i, c));
  const double bound = e.fwd_bound.out[at];
  REQUIRE(bound > 0);
  // Away from the exact value by twice the bound, whichever side the kernel's own error is on.
  const double got = o.out.get({0, 0, i, c});
  o.out.set({0, 0, i, c}, got + (got >= e.fwd.out[at] ? 2 : -2) * bound);
  const auto v = o.out.to_vector();
  for (std::size_t x = 0; x < v.size(); ++x) {
    INFO("element " << x);
    const double r = error_ratio(v[x], e.fwd.out[x], e.fwd_bound.out[x]);
    if (x == at)
      CHECK(r > 1.0);
    else
      CHECK(r <= 1.0);
  }
}
