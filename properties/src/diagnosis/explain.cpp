// diagnose (diagnosis.h): a counterexample re-judged under the declarations that production kernels make, so that a
// report can tell a documented practice left undeclared from a bug (SPEC.md §3.1).
#include "diagnosis.h"

#include "attncheck/check.h"
#include "attncheck/gen.h"
#include "attncheck/screen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <optional>
#include <string_view>

namespace attncheck {

namespace {

/// A candidate declaration: its contract tokens, what the kernel then does, whether it can account for a failure at
/// all (null: any value a check compares), and whether a case it leaves undecided is explained (the practice puts
/// the value past what any bound covers: an LSE beyond the storage dtype's range is +Inf by design).
struct Candidate {
  std::string_view declaration;
  std::string_view meaning;
  bool (*applies)(const Outcome &) = nullptr;
  bool undecided_explains = false;
  std::uint8_t dtypes = kAllDtypes;  ///< the storage dtypes whose runs it is tried on (dtype_bit)
};

constexpr std::uint8_t kF32 = dtype_bit(Dtype::f32), kF16 = dtype_bit(Dtype::f16), kBf16 = dtype_bit(Dtype::bf16);

/// lse=none drops every LSE check: it explains an LSE the kernel left unwritten (the harness's NaN), not a wrong one.
bool lse_unwritten(const Outcome &o) {
  return o.finding && o.finding->tensor == "LSE" && o.finding->got && std::isnan(*o.finding->got);
}

/// Every practice the contract can declare (SPEC.md §3.1) that production kernels follow, narrowest first — those
/// that concern one kind of case (softcap, a causal Lq ≠ Lk, rows that see no key) before those that loosen the
/// bounds of every case, and among those the logits' arithmetic before every product's operands: a report names the
/// one that explains most of a run's counterexamples (reporting::group_failures), and this order breaks ties. Narrow
/// logits are offered in the arithmetic a kernel of the run's dtype has (float16 for float32 and float16 runs,
/// bfloat16 for bfloat16 ones), narrower operands only to float32 runs. Left out on purpose: the float16 and bfloat16
/// tanh and exp instructions (errors of 2^-11 to 2^-7 per element that excuse real bugs on small cases), and
/// accumulate=f16 for the same reason.
constexpr std::array<Candidate, 14> kCandidates{{
    {"tanh=approx",
     "softcap's tanh is the hardware approximation (tanh.approx.f32, relative error 2^-10.987, as in FlashAttention-2)"},
    {"causal=top-left", "the causal mask is aligned top-left (row i sees keys j ≤ i when Lq ≠ Lk, as PyTorch's "
                        "is_causal and FlashAttention before 2.1)"},
    {"empty-rows=unspecified", "rows that see no key are left to the kernel (e.g. an additive finite mask gives them "
                               "the mean of V)"},
    {"hidden-keys=any", "NaN or Inf in masked keys may reach visible rows (dense P·V over masked keys, as tensor-core "
                        "GEMMs do)"},
    {"forward-determinism=within-bound", "the forward's bits may change from call to call (e.g. split counts chosen "
                                         "at run time)"},
    {"grad-sum=per-head", "GQA dK and dV are summed from each query head's part stored in the storage dtype"},
    {"rowsum=rounded-p", "the row sum is taken from the P rounded to storage (e.g. a ones column appended to V)"},
    {"lse=storage", "the LSE is returned rounded to the storage dtype", nullptr, true},
    {"accumulate-qk=f16", "the logits q·k are accumulated in float16", nullptr, false, kF32 | kF16},
    {"accumulate-qk=bf16", "the logits q·k are accumulated in bfloat16", nullptr, false, kBf16},
    {"fp32-precision=tf32", "the matrix products read float32 operands as TensorFloat-32 (11 significant bits: "
                            "tensor cores under PyTorch's allow_tf32 or fp32_precision=\"tf32\")",
     nullptr, false, kF32},
    {"fp32-precision=f16", "the matrix products read float32 operands cast to float16", nullptr, false, kF32},
    {"fp32-precision=bf16", "the matrix products read float32 operands as bfloat16 (a float32 model computed in "
                            "bfloat16: oneDNN's fpmath_mode, PyTorch's fp32_precision=\"bf16\")",
     nullptr, false, kF32},
    {"lse=none", "the kernel returns no LSE", lse_unwritten},
}};

/// A declaration that loosens the precision profile fits a case when the kernel's error uses at least this share
/// of the bound it grants: one loose enough to pass anything (a float16 q·k granted to a float32 kernel that is
/// merely off) would excuse a bug, not explain it. A practice's own error uses far more of its bound on the minimal
/// case that it failed the defaults with.
constexpr double kMinFit = 1.0 / 64;

/// Whether candidate `cand` is tried on failure `o` of a run of storage dtype `dt`: it can account for that failure
/// (Candidate::applies) and is offered to that dtype (Candidate::dtypes).
bool tried(const Candidate &cand, const Outcome &o, Dtype dt) {
  return (!cand.applies || cand.applies(o)) && (cand.dtypes & dtype_bit(dt)) != 0;
}

/// Whether a failing case judged again under a declaration, with outcome `again`, is explained by it: it passes (or,
/// with `undecided_explains`, is undecided by design), and under a declaration that loosens the precision (`looser`)
/// its error uses at least kMinFit of the bound granted — one loose enough to pass anything excuses, it does not
/// explain.
bool explained(const Outcome &again, bool undecided_explains, bool looser) {
  if (again.verdict != Verdict::pass) return again.verdict == Verdict::undecided && undecided_explains;
  return !looser || !(exact_if_at_least(again, kMinFit).worst_ratio < kMinFit);
}

/// A declaration that explains the minimal case must also leave these fresh cases of the property without a failure
/// (drawn from the property's seed under the declared contract): a minimal case is small enough to be ambiguous —
/// a causal mask off by one and a top-left one agree on 2 × 1 — and a practice holds on every case, a bug does not.
/// Stretched properties (long_rows) confirm on fewer: each case is a long row.
constexpr int kConfirmCases = 12, kConfirmStretchedCases = 2;

/// `c` as the kernel received it, read under `changed`: the causal flag means the other alignment there, so a
/// causal case becomes one of that alignment. nullopt when the case has nothing the declaration changes.
std::optional<Case> as_received(const Case &c, const KernelContract &was, const KernelContract &changed) {
  if (changed.causal == was.causal) return c;
  const Mask from = was.causal == CausalAlign::top_left ? Mask::causal_top_left : Mask::causal;
  if (c.spec.mask != from || c.spec.shape.Lq == c.spec.shape.Lk) return std::nullopt;
  Case moved = c;
  moved.spec.mask = from == Mask::causal ? Mask::causal_top_left : Mask::causal;
  return moved;
}

/// The property's case options `co` (drawn under `was`) as they are under `changed`: its causal alignment, and
/// whether rows that see no key are drawn.
CaseOptions options_under(CaseOptions co, const KernelContract &was, const KernelContract &changed) {
  const Mask causal = changed.causal == CausalAlign::top_left ? Mask::causal_top_left : Mask::causal;
  if (co.mask == co.causal) co.mask = causal;
  co.causal = causal;
  if (changed.empty_rows == EmptyRows::unspecified && was.empty_rows != EmptyRows::unspecified) co.empty_rows = false;
  return co;
}

/// No fresh case of the property fails under `judged`, nor accuracy on the same cases (a property about one corner,
/// such as the rows that see no key, says little about the rest of the kernel; declined and undecided cases say
/// nothing against it).
bool holds_on_fresh_cases(const PropertyDef &def, const Env &judged, const CaseOptions &co, std::uint64_t seed,
                          const std::function<bool()> &stop) {
  const int n = co.stretch ? kConfirmStretchedCases : kConfirmCases;
  const PropertyDef *accuracy = co.stretch ? nullptr : find_property("accuracy");
  rc::Random random(seed);
  for (int i = 0; i < n; ++i) {
    if (stop && stop()) return false;  // not confirmed
    const CaseSpec spec = draw_spec(random.split(), (i + 1) * rc::kNominalSize / n, co);
    const Case c = draw_case(random.split(), spec, co);
    if (def.run(judged, c).verdict == Verdict::fail) return false;
    if (accuracy && accuracy != &def && accuracy->run(judged, c).verdict == Verdict::fail) return false;
  }
  return true;
}

/// How far a declaration explains a counterexample: not at all, on its minimal case only (its fresh cases fail — for
/// another reason when the kernel follows a second practice as well), or wholly.
enum class Fit { none, minimal_only, whole };

/// Whether the contract `changed` explains the failure `o` of `c` (SPEC.md §3.1): the minimal case as the kernel
/// received it passes under it (or leaves the plan, or is undecided by design with `undecided_explains`), a looser
/// precision fits, and fresh cases of the property hold.
Fit fits(const PropertyDef &def, const Env &env, const CaseOptions &co, std::uint64_t seed, const Case &c,
         const KernelContract &changed, bool undecided_explains, const std::function<bool()> &stop) {
  const std::optional<Case> received = as_received(c, env.contract, changed);
  if (!received) return Fit::none;
  const Env judged{env.kernel, changed.precision(env.precision.storage), changed};
  const CaseOptions under = options_under(co, env.contract, changed);
  try {
    // A case the declaration takes out of the plan (rows that see no key under empty-rows=unspecified) is
    // explained by it; any other must pass under it, and a looser precision must fit.
    const bool excluded = changed.empty_rows != env.contract.empty_rows && !under.admits(received->spec);
    if (!excluded &&
        !explained(def.run(judged, *received), undecided_explains, judged.precision != env.precision))
      return Fit::none;
    return holds_on_fresh_cases(def, judged, under, seed, stop) ? Fit::whole : Fit::minimal_only;
  } catch (const std::exception &) {
    return Fit::none;  // the engine's trouble, not evidence for the declaration
  }
}

}  // namespace

namespace diagnosis {

Diagnosis diagnose(const PropertyDef &def, const Env &env, const CaseOptions &co, std::uint64_t seed, const Case &c,
                   const Outcome &o, const std::function<bool()> &stop) {
  Diagnosis d;
  std::vector<Explanation> &out = d.explained_by;
  if (o.verdict != Verdict::fail || !o.step) return d;
  // A failed call, or a write where the kernel may not write, is what it is under any contract.
  if (o.finding && (o.finding->kind == Finding::Kind::call || o.finding->kind == Finding::Kind::wrote_input ||
                    o.finding->kind == Finding::Kind::wrote_padding))
    return d;
  std::vector<const Candidate *> partial;  // explain the minimal case, but not every fresh case
  for (const Candidate &cand : kCandidates) {
    if (stop && stop()) break;
    if (!tried(cand, o, env.precision.storage)) continue;
    const KernelContract changed = parse_contract(cand.declaration, env.contract);
    if (changed == env.contract) continue;  // declared already
    const Fit f = fits(def, env, co, seed, c, changed, cand.undecided_explains, stop);
    if (f == Fit::whole) out.push_back({std::string(cand.declaration), std::string(cand.meaning)});
    if (f == Fit::minimal_only) partial.push_back(&cand);
  }
  if (!out.empty()) return d;
  // None alone: a kernel may follow two practices at once (rows that see no key and float16 logits), and then the
  // fresh cases of each one fail for the other's reason. The smallest set is a pair: a declaration that explains the
  // minimal case with any other, tried in the candidates' order — at most one of them loosening the precision: two
  // looser bounds together excuse an error neither practice makes (a float16 exp under float16 logits and a rounded
  // row sum), and the fit (kMinFit) cannot tell which one the kernel uses.
  const auto loosens = [&](const Candidate &x) {
    const KernelContract alone = parse_contract(x.declaration, env.contract);
    return alone.precision(env.precision.storage) != env.precision;
  };
  for (const Candidate *first : partial) {
    const bool first_loosens = loosens(*first);
    for (const Candidate &second : kCandidates) {
      if (stop && stop()) return d;
      if (&second == first || !tried(second, o, env.precision.storage) ||
          (first_loosens && loosens(second)))
        continue;
      const bool ordered = first < &second;
      const Candidate &a = ordered ? *first : second, &b = ordered ? second : *first;
      const KernelContract one = parse_contract(a.declaration, env.contract);
      const KernelContract both = parse_contract(b.declaration, one);
      if (both == one || one == env.contract ||
          std::any_of(out.begin(), out.end(), [&](const Explanation &e) {
            return e.declaration == std::string(a.declaration) + " " + std::string(b.declaration);
          }))
        continue;
      if (fits(def, env, co, seed, c, both, a.undecided_explains || b.undecided_explains, stop) == Fit::whole)
        out.push_back({std::string(a.declaration) + " " + std::string(b.declaration),
                       std::string(a.meaning) + "; and " + std::string(b.meaning)});
    }
  }
  if (out.empty())
    for (const Candidate *x : partial) d.passes_under.emplace_back(x->declaration);
  return d;
}

std::vector<Explanation> explain_given(const Outcome &o, const KernelContract &contract, Dtype dt,
                                       const std::function<Outcome(const KernelContract &)> &rejudge) {
  std::vector<Explanation> out;
  if (o.verdict != Verdict::fail || !o.step) return out;
  for (const Candidate &cand : kCandidates) {
    if (!tried(cand, o, dt)) continue;
    const KernelContract changed = parse_contract(cand.declaration, contract);
    if (changed == contract) continue;  // declared already
    try {
      if (explained(rejudge(changed), cand.undecided_explains, changed.precision(dt) != contract.precision(dt)))
        out.push_back({std::string(cand.declaration), std::string(cand.meaning)});
    } catch (const std::exception &) {
      // the engine's trouble, not evidence for the declaration
    }
  }
  return out;
}

}  // namespace diagnosis

}  // namespace attncheck
