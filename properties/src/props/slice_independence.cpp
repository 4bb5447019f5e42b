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
#include "attncheck/screen.h"
#include "../slack.h"

#include <bit>
#include <cstdint>
#include <memory>
#include <string>

namespace attncheck::props {

namespace {

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
          e = changed_value(e);
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

constexpr const char *kRepeatedWhat = "kv heads repeated per query head (Hkv = Hq)";

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

/// The kernel's answers: on the case, on each slice's perturbation, and (GQA) on the case with its kv heads repeated.
struct Runs {
  Case c;
  Problem p, rp;  // rp: the repeated problem (GQA only)
  ForwardRun base, rep;
  std::vector<Slice> slices;
  std::vector<ForwardRun> perturbed;
  bool gqa() const { return c.spec.shape.Hkv < c.spec.shape.Hq; }
};

/// The comparisons of runs whose calls returned intact outputs; `src` gives the exact values and bounds the GQA
/// comparison needs (null without GQA: the slices' comparisons are bit for bit).
Outcome compare_runs(const Runs &r, ExactSource *src) {
  const Case &c = r.c;
  const Shape &s = c.spec.shape;
  const ForwardRun &base = r.base, &rep = r.rep;
  const std::vector<Slice> &slices = r.slices;
  Ladder L;
  const auto judge = [&](const Slice &sl) { L.judging(perturbed(c, sl), "the " + sl.describe() + " changed"); };
  const auto judge_repeated = [&] { L.judging(repeated_kv(c), kRepeatedWhat); };

  // Compares the outputs (b, h) that slice `sl` does not read; `step_finite` only flags a finite base value turned
  // non-finite, else any bit change.
  const std::vector<double> o = base.out.to_vector(), lse = base.lse.to_vector();
  auto compare = [&](const Slice &sl, const ForwardRun &run, bool step_finite) {
    const std::vector<double> po = run.out.to_vector(), pl = run.lse.to_vector();
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
    compare(slices[n], r.perturbed[n], true);
  }
  if (src) {
    // The repeated problem computes the same exact values; its bounds are its own (another shape).
    src->values_not_compared();  // kernel against kernel
    const auto [exact, b1] = src->forward(r.p);
    const ForwardBounds b2 = src->forward_rearranged(r.rp, {}).second;
    L.judging_original();
    L.finite("O", base.out, exact.out, b1.out);
    if (base.has_lse) L.finite("LSE", base.lse, exact.lse, b1.lse);
    judge_repeated();
    L.finite("O (kv heads repeated)", rep.out, exact.out, b2.out);
    if (base.has_lse) L.finite("LSE (kv heads repeated)", rep.lse, exact.lse, b2.lse);
    for (std::size_t n = 0; n < slices.size(); ++n) {
      judge(slices[n]);
      compare(slices[n], r.perturbed[n], false);
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
      compare(slices[n], r.perturbed[n], false);
    }
  }
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  auto r = std::make_shared<Runs>();
  r->c = c;
  r->p = c.problem();
  r->base = run_forward(env, r->p);
  Ladder L;
  if (!L.call(r->base.call, "forward") || !L.intact(r->base.out, "O") || !L.intact(r->base.lse, "LSE"))
    return L.outcome();

  if (s.B > 1)
    for (std::int64_t b = 0; b < s.B; ++b) r->slices.push_back({Slice::Kind::batch, b});
  if (s.Hq > 1)
    for (std::int64_t h = 0; h < s.Hq; ++h) r->slices.push_back({Slice::Kind::query_head, h});
  if (s.Hkv > 1)
    for (std::int64_t g = 0; g < s.Hkv; ++g) r->slices.push_back({Slice::Kind::kv_head, g});
  // Checks of a perturbed or repeated run judge that case; a failure records it.
  for (const Slice &sl : r->slices) {
    const Case changed_case = perturbed(c, sl);
    L.judging(changed_case, "the " + sl.describe() + " changed");
    r->perturbed.push_back(run_forward(env, changed_case.problem()));
    const ForwardRun &run = r->perturbed.back();
    if (!L.call(run.call, "forward (" + sl.describe() + " changed)") || !L.intact(run.out, "O") ||
        !L.intact(run.lse, "LSE"))
      return L.outcome();
  }
  if (!r->gqa()) return compare_runs(*r, nullptr);
  const Case repeated = repeated_kv(c);
  L.judging(repeated, kRepeatedWhat);
  r->rp = repeated.problem();
  r->rep = run_forward(env, r->rp);
  if (!L.call(r->rep.call, "forward (kv heads repeated)") || !L.intact(r->rep.out, "O (kv heads repeated)") ||
      !L.intact(r->rep.lse, "LSE (kv heads repeated)"))
    return L.outcome();
  std::shared_ptr<const Runs> runs = std::move(r);
  return judged(env.precision, [runs](ExactSource &src) { return compare_runs(*runs, &src); });
}
}  // namespace

const PropertyDef &slice_independence_property() {
  static const PropertyDef def{
      .id = "slice_independence",
      .formula = "O[b,h], LSE[b,h] bit-identical when q[b',·], q[·,h'], k/v[·,g] (b' ≠ b, h' ≠ h, g ≠ h/G) change; "
                 "|O(k, v) − O(k, v repeated to Hq heads)| ≤ β + β_rep",
      .summary = "one batch or head leaks into another's output, or query heads read the wrong kv head",
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
