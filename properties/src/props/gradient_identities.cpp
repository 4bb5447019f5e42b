// gradient_identities: two sums the backward's math fixes, per batch and kv head (dK, dV sum over the query heads
// h of the kv head's group and their rows i; V(i) = the keys row i sees):
//
//   Σ_j dK_jd = 0:        O is invariant to adding one vector to every key (each row's logits shift by a constant),
//                         so the gradient along that direction vanishes; algebraically
//                         Σ_j dK_jd = scale Σ_{h,i} q_id Σ_j dS_ij and Σ_j dS_ij = Σ_j P_ij dP_ij − D_i = 0.
//   Σ_j dV_jc = Σ_{h,i: V(i)≠∅} dO_ic:   dV_jc = Σ_{h,i} P_ij dO_ic and Σ_j P_ij = 1 for a row that sees a key;
//                         a row that sees none (causal, Lq > Lk) has P_i· = 0 and contributes no dO.
//
// Bounds: |Σ_j dK̂_jd − 0| ≤ Σ_j β_dK,jd (each element within its bound, SPEC §4.4), plus the rounding of the
// double sum here, γ_Lk(u)·Σ_j |dK̂_jd|; likewise for dV, plus the rounding of the dO sum, γ_{G·Lq}(u)·Σ|dO_ic|.
// Both are consequences of gradient_accuracy's element bounds, but they name the broken structure: a dS rows that
// do not sum to 0 (the −D_i term), or dV collecting dO from the wrong rows or heads.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"
#include "../slack.h"

#include <cmath>
#include <memory>
#include <vector>

namespace attncheck::props {

namespace {

void require(CaseOptions &o) { o.backward = true; }

/// Per (b, kv head, column x) of a [B, Hkv, Lk, W] tensor: Σ_j t, Σ_j β and Σ_j |t| over the keys j.
struct KeySums {
  std::vector<double> sum, bound, magnitude;
};
KeySums key_sums(const std::vector<double> &t, const std::vector<double> &beta, const Shape &s, std::int64_t W) {
  const auto groups = static_cast<std::size_t>(s.B * s.Hkv), width = static_cast<std::size_t>(W),
             keys = static_cast<std::size_t>(s.Lk);
  KeySums r{std::vector<double>(groups * width), std::vector<double>(groups * width),
            std::vector<double>(groups * width)};
  for (std::size_t g = 0; g < groups; ++g)
    for (std::size_t j = 0; j < keys; ++j)
      for (std::size_t x = 0; x < width; ++x) {
        const std::size_t at = (g * keys + j) * width + x;
        r.sum[g * width + x] += t[at];
        r.bound[g * width + x] += beta[at];
        r.magnitude[g * width + x] += std::abs(t[at]);
      }
  return r;
}

/// The backward's dK and dV, intact, against the sums the math fixes; element bounds from `src`.
Outcome compare(const Problem &p, const BackwardRun &br, const std::vector<double> &dout, ExactSource &src) {
  const Shape &s = p.shape;
  src.values_not_compared();  // against the sums the math fixes
  const ExactForward exact = src.forward(p).first;
  const auto [grad, bb] = src.backward(p, exact);
  Ladder L;
  // Finite, then masked (keys no query sees: exactly 0); their sums below.
  if (!L.each({{"dK", br.dk, grad.dk, bb.dk, Step::mask}, {"dV", br.dv, grad.dv, bb.dv, Step::mask}}))
    return L.outcome();

  const std::vector<std::int64_t> shape_k{s.B, s.Hkv, s.D}, shape_v{s.B, s.Hkv, s.Dv};
  const double key_rounding = gamma_n(static_cast<double>(s.Lk), kDoubleRoundoff);

  // Σ_j dK_jd = 0.
  KeySums dk = key_sums(br.dk.to_vector(), bb.dk, s, s.D);
  for (std::size_t x = 0; x < dk.bound.size(); ++x) dk.bound[x] = dk.bound[x] * (1 + key_rounding) + key_rounding * dk.magnitude[x];
  L.within(Step::sums, "Σ_j dK", dk.sum, std::vector<double>(dk.sum.size(), 0.0), dk.bound, shape_k);

  // Σ_j dV_jc = Σ_{h∈group, i: V(i)≠∅} dO_ic.
  KeySums dv = key_sums(br.dv.to_vector(), bb.dv, s, s.Dv);
  std::vector<double> dout_sum(dv.sum.size()), dout_mag(dv.sum.size());
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        if (visible_count(p.params.mask, i, s.Lq, s.Lk) == 0) continue;
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          const double g = dout[static_cast<std::size_t>(out_offset(s, b, h, i, x))];
          const auto at = static_cast<std::size_t>((b * s.Hkv + s.kv_head(h)) * s.Dv + x);
          dout_sum[at] += g;
          dout_mag[at] += std::abs(g);
        }
      }
  const double row_rounding = gamma_n(static_cast<double>(s.group() * s.Lq), kDoubleRoundoff);
  for (std::size_t x = 0; x < dv.bound.size(); ++x)
    dv.bound[x] = dv.bound[x] * (1 + key_rounding) + key_rounding * dv.magnitude[x] + row_rounding * dout_mag[x];
  L.within(Step::sums, "Σ_j dV − Σ_i dO", dv.sum, dout_sum, dv.bound, shape_v);
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  BackwardRun br = run_backward(env, p, fr);
  if (!L.call(br.call, "backward") || !L.intact(br.dk, "dK") || !L.intact(br.dv, "dV")) return L.outcome();
  auto run = std::make_shared<const BackwardRun>(std::move(br));
  return judged(env.precision, [p, run, dout = c.dout](ExactSource &src) { return compare(p, *run, dout, src); });
}

}  // namespace

const PropertyDef &gradient_identities_property() {
  static const PropertyDef def{
      .id = "gradient_identities",
      .formula = "Σ_j dK_j = 0 and Σ_j dV_j = Σ_{h,i: V(i)≠∅} dO_i per batch and kv head, within Σ_j β",
      .summary = "the backward breaks a sum its math fixes: dS rows that do not sum to 0 (keys' shift invariance) "
                 "or dV that does not redistribute exactly the dO of the rows that see a key",
      .needs_backward = true,
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
