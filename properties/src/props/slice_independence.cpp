// slice_independence: batches and heads are independent problems (SPEC.md §2.1). Changing the inputs of one batch,
// one query head's q, or one kv head's k and v leaves every output that does not read them bit-identical; and a
// GQA/MQA problem equals the same problem with its kv heads repeated per query head (Hkv' = Hq), within the sum of
// both problems' error bounds.
//
// A correct kernel computes each (batch, query head) from its own q and its kv head h / G only, with the same
// operations whatever the other slices hold: the untouched outputs must keep their exact bits. The repeated
// problem is a different shape, which a kernel may tile differently, hence bounds there.
#include "attncheck/compare.h"
#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <bit>
#include <cstdint>
#include <string>

namespace attncheck::props {

namespace {
/// The finite replacement of a changed input: kAltValue, or −kAltValue where the input already is kAltValue (so
/// every element of the slice changes). Exact in every storage dtype.
constexpr double kAltValue = 2;

double changed(double x) { return x == kAltValue ? -kAltValue : kAltValue; }

/// Which inputs a perturbation changes, and which (batch, query head) outputs may follow.
struct Slice {
  enum class Kind { batch, query_head, kv_head } kind;
  std::int64_t index;
  std::string describe() const {
    switch (kind) {
      case Kind::batch: return "q, k, v of batch " + std::to_string(index);
      case Kind::query_head: return "q of query head " + std::to_string(index);
      case Kind::kv_head: return "k, v of kv head " + std::to_string(index);
    }
    return "?";
  }
  /// True when output (b, h) reads the changed inputs (and so may change).
  bool reads(const Shape &s, std::int64_t b, std::int64_t h) const {
    switch (kind) {
      case Kind::batch: return b == index;
      case Kind::query_head: return h == index;
      case Kind::kv_head: return s.kv_head(h) == index;
    }
    return true;
  }
};

/// The case with the inputs of `sl` changed (every batch for a head).
Case perturbed(const Case &c, const Slice &sl) {
  const Shape &s = c.spec.shape;
  Case out = c;
  // Changes rows [b, h, ·, ·] of a [B, H, L, X] tensor stored row-major.
  auto change = [&](std::vector<double> &t, std::int64_t H, std::int64_t L, std::int64_t X, bool by_batch) {
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        if ((by_batch ? b : h) != sl.index) continue;
        for (std::int64_t x = 0; x < L * X; ++x) {
          double &e = t[static_cast<std::size_t>((b * H + h) * L * X + x)];
          e = changed(e);
        }
      }
  };
  switch (sl.kind) {
    case Slice::Kind::batch:
      change(out.q, s.Hq, s.Lq, s.D, true);
      change(out.k, s.Hkv, s.Lk, s.D, true);
      change(out.v, s.Hkv, s.Lk, s.Dv, true);
      break;
    case Slice::Kind::query_head: change(out.q, s.Hq, s.Lq, s.D, false); break;
    case Slice::Kind::kv_head:
      change(out.k, s.Hkv, s.Lk, s.D, false);
      change(out.v, s.Hkv, s.Lk, s.Dv, false);
      break;
  }
  return out;
}

/// The case with each query head given its own copy of its kv head: Hkv' = Hq, k'[b, h] = k[b, h / G].
Case repeated_kv(const Case &c) {
  const Shape &s = c.spec.shape;
  Case out = c;
  out.spec.shape.Hkv = s.Hq;
  out.resize_values(!c.dout.empty());
  out.q = c.q;
  out.dout = c.dout;
  auto copy = [&](std::vector<double> &dst, const std::vector<double> &src, std::int64_t X) {
    const std::int64_t row = s.Lk * X;
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t x = 0; x < row; ++x)
          dst[static_cast<std::size_t>((b * s.Hq + h) * row + x)] =
              src[static_cast<std::size_t>((b * s.Hkv + s.kv_head(h)) * row + x)];
  };
  copy(out.k, c.k, s.D);
  copy(out.v, c.v, s.Dv);
  return out;
}

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  const Problem p = c.problem();
  const ForwardRun base = run_forward(env, p);
  Ladder L;
  if (!L.call(base.call, "forward") || !L.intact(base.out, "O") || !L.intact(base.lse, "LSE")) return L.outcome();

  std::vector<Slice> slices;
  if (s.B > 1)
    for (std::int64_t b = 0; b < s.B; ++b) slices.push_back({Slice::Kind::batch, b});
  if (s.Hq > 1)
    for (std::int64_t h = 0; h < s.Hq; ++h) slices.push_back({Slice::Kind::query_head, h});
  if (s.Hkv > 1)
    for (std::int64_t g = 0; g < s.Hkv; ++g) slices.push_back({Slice::Kind::kv_head, g});
  std::vector<ForwardRun> runs;
  // Checks of a perturbed or repeated run judge that case; a failure records it.
  const auto judge = [&](const Slice &sl) { L.judging(perturbed(c, sl), "the " + sl.describe() + " changed"); };
  for (const Slice &sl : slices) {
    judge(sl);
    runs.push_back(run_forward(env, perturbed(c, sl).problem()));
    const ForwardRun &r = runs.back();
    if (!L.call(r.call, "forward (" + sl.describe() + " changed)") || !L.intact(r.out, "O") ||
        !L.intact(r.lse, "LSE"))
      return L.outcome();
  }
  const bool gqa = s.Hkv < s.Hq;
  const auto judge_repeated = [&] { L.judging(repeated_kv(c), "kv heads repeated per query head (Hkv = Hq)"); };
  if (gqa) judge_repeated();
  const Problem rp = gqa ? repeated_kv(c).problem() : Problem{};
  const ForwardRun rep = gqa ? run_forward(env, rp) : ForwardRun{};
  if (gqa && (!L.call(rep.call, "forward (kv heads repeated)") || !L.intact(rep.out, "O (kv heads repeated)") ||
              !L.intact(rep.lse, "LSE (kv heads repeated)")))
    return L.outcome();

  // Compares the outputs (b, h) that slice `sl` does not read; `step_finite` only flags a finite base value turned
  // non-finite, else any bit change.
  const std::vector<double> o = base.out.to_vector(), lse = base.lse.to_vector();
  auto compare = [&](const Slice &sl, const ForwardRun &r, bool step_finite) {
    const std::vector<double> po = r.out.to_vector(), pl = r.lse.to_vector();
    auto differs = [&](double was, double now) {
      return step_finite ? std::isfinite(was) && !std::isfinite(now) : !same_bits(was, now);
    };
    const Step step = step_finite ? Step::finite : Step::values;
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h) {
        if (sl.reads(s, b, h)) continue;
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          auto report = [&](std::string_view name, const std::vector<std::int64_t> &shape, std::int64_t x,
                            double was, double now) {
            return L.fail(step,
                          element_name(name, shape, x) + ": changed from " + hex_and_decimal(was) + " to " +
                              hex_and_decimal(now) + " when the " + sl.describe() + " changed",
                          element_finding(Finding::Kind::changed, name, shape, x, now, was));
          };
          const auto li = static_cast<std::size_t>(lse_offset(s, b, h, i));
          if (differs(lse[li], pl[li])) return report("LSE", base.lse.shape(), lse_offset(s, b, h, i), lse[li], pl[li]);
          for (std::int64_t x = 0; x < s.Dv; ++x) {
            const auto oi = static_cast<std::size_t>(out_offset(s, b, h, i, x));
            if (differs(o[oi], po[oi])) return report("O", base.out.shape(), out_offset(s, b, h, i, x), o[oi], po[oi]);
          }
        }
      }
    return true;
  };

  // Each check is a no-op once one has failed: the outcome names the first failing step.
  for (std::size_t n = 0; n < slices.size(); ++n) {
    judge(slices[n]);
    compare(slices[n], runs[n], true);
  }
  if (gqa) {
    const ExactForward exact = reference_forward(p);
    const ForwardBounds b1 = forward_bounds(p, exact, env.precision), b2 = forward_bounds(rp, exact, env.precision);
    L.judging_original();
    L.finite("O", base.out, exact.out, b1.out);
    if (base.has_lse) L.finite("LSE", base.lse, exact.lse, b1.lse);
    judge_repeated();
    L.finite("O (kv heads repeated)", rep.out, exact.out, b2.out);
    if (base.has_lse) L.finite("LSE (kv heads repeated)", rep.lse, exact.lse, b2.lse);
    for (std::size_t n = 0; n < slices.size(); ++n) {
      judge(slices[n]);
      compare(slices[n], runs[n], false);
    }
    L.judging_original();  // the GQA problem is the one under test; the repeated one is its reference
    // |Ô − Ô_rep| ≤ β + β_rep: each is within its own bound of the same exact value.
    auto sum = [](std::vector<double> a, const std::vector<double> &b) {
      for (std::size_t x = 0; x < a.size(); ++x) a[x] += b[x];
      return a;
    };
    L.within(Step::values, "O vs O (kv heads repeated)", base.out.to_vector(), rep.out.to_vector(),
             sum(b1.out, b2.out), base.out.shape());
    if (base.has_lse)
      L.within(Step::values, "LSE vs LSE (kv heads repeated)", base.lse.to_vector(), rep.lse.to_vector(),
               sum(b1.lse, b2.lse), base.lse.shape());
  } else {
    for (std::size_t n = 0; n < slices.size(); ++n) {
      judge(slices[n]);
      compare(slices[n], runs[n], false);
    }
  }
  return L.outcome();
}
}  // namespace

const PropertyDef &slice_independence_property() {
  static const PropertyDef def{
      .id = "slice_independence",
      .formula = "O[b,h], LSE[b,h] bit-identical when q[b',·], q[·,h'], k/v[·,g] (b' ≠ b, h' ≠ h, g ≠ h/G) change; "
                 "|O(k, v) − O(k, v repeated to Hq heads)| ≤ β + β_rep",
      .summary = "one batch or head leaks into another's output, or query heads read the wrong kv head",
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
