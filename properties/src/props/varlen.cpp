// varlen: packed variable-length batches (SPEC.md §2.7; cu_seqlens_q, cu_seqlens_k, sequences of length 0 and 1) —
// O, LSE and the gradients within their bounds, and the relation that defines them: each sequence gives what it
// gives run alone, as a batch of one.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
/// Sequence b of `c` alone: B = 1, its Lq_b rows and Lk_b keys, the other features kept.
Case alone(const Case &c, std::int64_t b, std::int64_t Lq_b, std::int64_t Lk_b) {
  const Shape &s = c.spec.shape;
  Case one;
  one.spec = c.spec;
  one.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_VARLEN);
  one.spec.shape.B = 1;
  one.spec.shape.Lq = Lq_b;
  one.spec.shape.Lk = Lk_b;
  one.resize_values(!c.dout.empty());
  auto copy = [&](const std::vector<double> &from, std::vector<double> &to, std::int64_t H, std::int64_t L,
                  std::int64_t n, std::int64_t X) {
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t x = 0; x < X; ++x)
          to[static_cast<std::size_t>((h * n + i) * X + x)] = from[static_cast<std::size_t>(((b * H + h) * L + i) * X + x)];
  };
  copy(c.q, one.q, s.Hq, s.Lq, Lq_b, s.D);
  copy(c.k, one.k, s.Hkv, s.Lk, Lk_b, s.D);
  copy(c.v, one.v, s.Hkv, s.Lk, Lk_b, s.Dv);
  if (!c.dout.empty()) copy(c.dout, one.dout, s.Hq, s.Lq, Lq_b, s.Dv);
  return one;
}

Outcome run(const Env &env, const Case &c) {
  Ladder L;
  FeatureRun packed;
  if (!call_feature(env, c.problem(), L, packed, "forward", true)) return L.outcome();
  const Shape &s = c.spec.shape;
  const Features &f = packed.p.features;
  struct Alone {
    std::int64_t b, Lq_b;
    Case one;
  };
  std::vector<Alone> alone_cases;
  std::vector<FeatureRun> runs(1);
  for (std::int64_t b = 0; b < s.B; ++b) {
    const std::int64_t Lq_b = seq_rows(f, b, s.Lq), Lk_b = seq_keys(f, b, s.Lk);
    if (Lq_b == 0 || Lk_b == 0) continue;  // no dense problem of that shape; accuracy checks its rows (O = 0)
    const Alone &a = alone_cases.emplace_back(Alone{b, Lq_b, alone(c, b, Lq_b, Lk_b)});
    if (!call_feature(env, a.one.problem(), L, runs.emplace_back(), "forward of one sequence alone"))
      return L.outcome();
  }
  runs[0] = std::move(packed);
  return judged_runs(env, std::move(runs), [alone_cases](std::vector<FeatureRun> &r, ExactSource &src) {
    const FeatureRun &packed = r[0];
    const Shape &s = packed.p.shape;
    Ladder J;
    if (!feature_accuracy(packed, src, J)) return J.outcome();
    for (std::size_t n = 0; n < alone_cases.size(); ++n) {
      const Alone &a = alone_cases[n];
      J.judging(a.one, "sequence " + std::to_string(a.b) + " alone");
      if (!rows_agree(J, "O (packed vs sequence " + std::to_string(a.b) + " alone)", packed, r[n + 1],
                      [&](std::int64_t row) -> std::int64_t {
                        const std::int64_t i = row % s.Lq, h = (row / s.Lq) % s.Hq, bb = row / (s.Lq * s.Hq);
                        return bb == a.b && i < a.Lq_b ? h * a.Lq_b + i : -1;
                      }))
        break;
    }
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &varlen_property() {
  static const PropertyDef def{
      .id = "varlen",
      .formula = "sequence b = rows cu_q[b]…cu_q[b+1)−1, keys cu_k[b]…: |Ô − O| ≤ β (LSE, dQ, dK, dV too); each "
                 "sequence = itself alone",
      .summary = "a packed sequence reads keys or rows of its neighbours, misses its own, aligns causal to the "
                 "batch instead of itself, or leaves rows unwritten",
      .require = &with_feature<ATTNCHECK_FEATURE_VARLEN>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_VARLEN>,
      .feature = ATTNCHECK_FEATURE_VARLEN,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
