// explain_failure: a counterexample re-judged under the declarations that production kernels make, so that a report
// can tell a documented practice left undeclared from a bug (SPEC.md §3.1).
#include "attncheck/check.h"

#include <array>
#include <exception>
#include <string_view>

namespace attncheck {

namespace {

/// A candidate declaration: its contract tokens, when it applies, and what it means for the kernel.
struct Candidate {
  std::string_view declaration;
  std::string_view meaning;
  bool (*applies)(const KernelContract &, const Case &);
};

/// Narrow on purpose: a loose declaration (a bfloat16 tanh, a float16 exp) would also pass many real bugs on small
/// cases, and an explanation must not excuse a bug.
constexpr std::array<Candidate, 1> kCandidates{{
    {"tanh=approx",
     "softcap's tanh is the hardware approximation (tanh.approx.f32, relative error 2^-10.987, as in FlashAttention-2)",
     [](const KernelContract &k, const Case &c) {
       return k.tanh == Tanh::accurate && (c.spec.features.bits & ATTNCHECK_FEATURE_SOFTCAP) != 0;
     }},
}};

}  // namespace

std::vector<Explanation> explain_failure(const PropertyDef &def, const Env &env, const Case &c, const Outcome &o) {
  std::vector<Explanation> out;
  if (o.verdict != Verdict::fail || !o.step || *o.step < Step::sums) return out;
  for (const Candidate &cand : kCandidates) {
    if (!cand.applies(env.contract, c)) continue;
    const KernelContract changed = parse_contract(cand.declaration, env.contract);
    const Env judged{env.kernel, changed.precision(env.precision.storage), changed};
    try {
      if (def.run(judged, c).verdict == Verdict::pass)
        out.push_back({std::string(cand.declaration), std::string(cand.meaning)});
    } catch (const std::exception &) {
      // The engine's trouble, not evidence for the declaration.
    }
  }
  return out;
}

}  // namespace attncheck
