// empty_rows: a row that sees no key — bottom-right causal with Lq > Lk, rows i < Lq − Lk — has no softmax. The
// contract's default (empty-rows=zero, SPEC.md §2.3) fixes it to O_i = 0 and LSE_i = −∞ (+∞ accepted, as
// FlashAttention-2 writes) with dQ_i = 0; a kernel that declares empty-rows=unspecified may return anything there
// (the mean of v, as kernels masking with a large finite negative do) — but NaN or Inf in O or LSE still poisons
// whatever reads it, so that is a warning (the gradient of such a row is unspecified too, and not checked). Top-left causal masks leave no row without a key: nothing to check.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <cmath>
#include <limits>
#include <string>

namespace attncheck::props {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

void require(CaseOptions &o) {
  o.mask = Mask::causal;
  o.empty_rows = true;  // every case has Lq > Lk
  o.backward = true;    // dout, for kernels that have a backward
}

Tier tier(const KernelContract &k) {
  if (k.causal == CausalAlign::top_left) return Tier::off;
  return k.empty_rows == EmptyRows::zero ? Tier::required : Tier::advisory;
}

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  const bool fixed = env.contract.empty_rows == EmptyRows::zero;
  // The gradient of a row whose forward is unspecified is unspecified too: checked only under the fixed contract.
  std::optional<BackwardRun> br;
  if (fixed && env.kernel.backward != nullptr && p.dout) {
    br = run_backward(env, p, fr);
    if (br->call.status == ATTNCHECK_UNSUPPORTED) br.reset();  // still checked on its forward
    else if (!L.call(br->call, "backward") || !L.intact(br->dq, "dQ")) return L.outcome();
  }
  const std::vector<double> o = fr.out.to_vector(), lse = fr.lse.to_vector();
  const std::vector<double> dq = br ? br->dq.to_vector() : std::vector<double>{};
  // Visits the elements of the rows that see no key: f(name, tensor, value, index, fixed value) returns false to stop.
  auto each = [&](auto &&f) {
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          if (visible_count(c.spec.mask, i, s.Lq, s.Lk) > 0) continue;
          if (fr.has_lse) {
            const std::int64_t x = lse_offset(s, b, h, i);
            if (!f("LSE", fr.lse, lse[static_cast<std::size_t>(x)], x, -kInf)) return;
          }
          for (std::int64_t col = 0; col < s.Dv; ++col) {
            const std::int64_t x = out_offset(s, b, h, i, col);
            if (!f("O", fr.out, o[static_cast<std::size_t>(x)], x, 0.0)) return;
          }
          if (br)
            for (std::int64_t d = 0; d < s.D; ++d) {
              const std::int64_t x = ((b * s.Hq + h) * s.Lq + i) * s.D + d;
              if (!f("dQ", br->dq, dq[static_cast<std::size_t>(x)], x, 0.0)) return;
            }
        }
  };
  auto empty_row = [](std::string_view name, const Tensor &t, std::int64_t x, double got, std::optional<double> want) {
    Finding f = element_finding(Finding::Kind::value, name, t.shape(), x, got, want);
    f.empty_row = true;
    return f;
  };
  auto where = [&](std::string_view name, const Tensor &t, double got, std::int64_t x) {
    return element_name(name, t.shape(), x) + ": got " + hex_and_decimal(got) + " in a row that sees no key";
  };
  // Step finite: no NaN (an LSE is ±∞ under the fixed contract, anything but NaN otherwise); O and dQ finite.
  each([&](std::string_view name, const Tensor &t, double got, std::int64_t x, double) {
    const bool ok = name == "LSE" ? (fixed ? std::isinf(got) : !std::isnan(got)) : std::isfinite(got);
    return ok || L.fail(Step::finite, where(name, t, got, x), empty_row(name, t, x, got, std::nullopt));
  });
  // Step mask: the fixed values (O = 0, LSE = −∞ or +∞, dQ = 0), under the default contract only.
  if (fixed)
    each([&](std::string_view name, const Tensor &t, double got, std::int64_t x, double want) {
      const bool ok = got == want || (name == "LSE" && got == kInf);
      return ok || L.fail(Step::mask, where(name, t, got, x) + " (the contract fixes " + hex_and_decimal(want) + ")",
                          empty_row(name, t, x, got, want));
    });
  return L.outcome();
}
}  // namespace

const PropertyDef &empty_rows_property() {
  static const PropertyDef def{
      .id = "empty_rows",
      .formula = "V(i) = ∅ ⇒ O_i = 0, LSE_i = −∞ (or +∞), dQ_i = 0 (empty-rows=zero); O_i, LSE_i not NaN otherwise",
      .summary = "a row that sees no key is NaN, or (empty-rows=zero) not the fixed O = 0, LSE = −∞",
      .require = &require,
      .tier = &tier,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
