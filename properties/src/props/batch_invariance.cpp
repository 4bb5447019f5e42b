// batch_invariance: a row's output does not depend on the batch it is in, nor on how many query rows share its call
// (vLLM's and SGLang's batch-invariant inference). The case's O and LSE rows must equal, bit for bit, those of the
// first and the last batch entry called alone (B = 1), and of the last query row of batch 0 called alone (Lq = 1: a
// decode call of that row, which sees the same keys under no mask or a bottom-right causal one).
//
// Required when the contract declares batch-invariant=bitwise; a warning otherwise: kernels that pick their split
// count by occupancy (FlashDecoding) give a row other bits in another batch, within the bound.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <string>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
/// Rows [b, h, i, ·] of a row-major [B, H, L, X] vector for b in [b0, b0 + nb) and i in [i0, i0 + ni).
std::vector<double> rows_of(const std::vector<double> &t, std::int64_t H, std::int64_t L, std::int64_t X,
                            std::int64_t b0, std::int64_t nb, std::int64_t i0, std::int64_t ni) {
  std::vector<double> out;
  for (std::int64_t b = b0; b < b0 + nb; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = i0; i < i0 + ni; ++i) {
        const auto at = t.begin() + static_cast<std::ptrdiff_t>(((b * H + h) * L + i) * X);
        out.insert(out.end(), at, at + static_cast<std::ptrdiff_t>(X));
      }
  return out;
}

/// Batch entry b of `c` alone, and with `last_row` only its last query row.
Case alone(const Case &c, std::int64_t b, bool last_row) {
  const Shape &s = c.spec.shape;
  Case out = c;
  out.spec.shape.B = 1;
  const std::int64_t i0 = last_row ? s.Lq - 1 : 0, ni = last_row ? 1 : s.Lq;
  if (last_row) out.spec.shape.Lq = 1;
  out.q = rows_of(c.q, s.Hq, s.Lq, s.D, b, 1, i0, ni);
  out.k = rows_of(c.k, s.Hkv, s.Lk, s.D, b, 1, 0, s.Lk);
  out.v = rows_of(c.v, s.Hkv, s.Lk, s.Dv, b, 1, 0, s.Lk);
  out.dout.clear();
  return out;
}

/// One call alone and where its rows sit in the whole case's outputs.
struct Part {
  Case c;
  std::int64_t b;
  bool last_row;
  std::string what;
  ForwardRun fr;
};

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  Ladder L;
  const ForwardRun whole = run_forward(env, c.problem());
  if (!L.call(whole.call, "forward") || !L.intact(whole.out, "O") || !L.intact(whole.lse, "LSE")) return L.outcome();
  std::vector<Part> parts;
  if (s.B > 1)
    for (std::int64_t b : {std::int64_t{0}, s.B - 1})
      parts.push_back({alone(c, b, false), b, false, "batch entry " + std::to_string(b) + " alone (B = 1)", {}});
  // A decode call of the last row sees the keys it sees in the case: no mask, or causal aligned bottom-right — and
  // a window's edges and ALiBi's distances, which follow the row's alignment, the same only bottom-right.
  const bool aligned_features = c.spec.features.bits & (ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_ALIBI);
  if (s.Lq > 1 && (c.spec.mask == Mask::none || c.spec.mask == Mask::causal) &&
      !(aligned_features && c.spec.features.top_left))
    parts.push_back({alone(c, 0, true), 0, true, "the last query row of batch entry 0 alone (Lq = 1)", {}});
  for (Part &p : parts) {
    L.judging(p.c, p.what);
    p.fr = run_forward(env, p.c.problem());
    if (!L.call(p.fr.call, "forward on " + p.what) || !L.intact(p.fr.out, "O") || !L.intact(p.fr.lse, "LSE"))
      return L.outcome();
  }
  const std::vector<double> out = whole.out.to_vector(), lse = whole.lse.to_vector();
  for (Part &p : parts) {
    L.judging(p.c, p.what);
    const std::int64_t i0 = p.last_row ? s.Lq - 1 : 0, ni = p.last_row ? 1 : s.Lq;
    const std::vector<std::pair<std::string, std::pair<std::vector<double>, std::vector<double>>>> outputs = {
        {"O", {rows_of(out, s.Hq, s.Lq, s.Dv, p.b, 1, i0, ni), p.fr.out.to_vector()}},
        {"LSE", {whole.has_lse ? rows_of(lse, s.Hq, s.Lq, 1, p.b, 1, i0, ni) : std::vector<double>{},
                 whole.has_lse ? p.fr.lse.to_vector() : std::vector<double>{}}}};
    for (const auto &[name, pair] : outputs) {
      const auto &[in_case, called_alone] = pair;
      const std::vector<std::int64_t> shape = name == "O" ? p.fr.out.shape() : p.fr.lse.shape();
      for (std::size_t x = 0; x < in_case.size(); ++x)
        if (!same_bits(in_case[x], called_alone[x])) {
          L.fail(Step::values,
                 element_name(name, shape, static_cast<std::int64_t>(x)) + ": " + hex_and_decimal(called_alone[x]) +
                     " called as " + p.what + ", " + hex_and_decimal(in_case[x]) + " in the case (" + s.describe() +
                     ")",
                 element_finding(Finding::Kind::changed, name, shape, static_cast<std::int64_t>(x), called_alone[x],
                                 in_case[x]));
          return L.outcome();
        }
    }
  }
  return L.outcome();
}

/// The declared features now and then: a kernel's split size may change with the batch on one feature's path only.
void require(CaseOptions &o) { o.declared_features = true; }

Tier tier(const KernelContract &k) {
  return k.batch_invariant == BatchInvariance::bitwise ? Tier::required : Tier::advisory;
}
}  // namespace

const PropertyDef &batch_invariance_property() {
  static const PropertyDef def{
      .id = "batch_invariance",
      .formula = "O, LSE rows ≡ bitwise the same rows called alone: batch entry 0 and B − 1 with B = 1, the last "
                 "query row with Lq = 1 (a decode call)",
      .summary = "a row's bits depend on the batch it is in or on how many rows share the call (a split count or a "
                 "tiling chosen by occupancy)",
      .require = &require,
      .tier = &tier,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
