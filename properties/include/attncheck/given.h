// Judging given tensors: outputs a kernel already returned — from a user's own test, at their model's shapes — held
// element by element against the exact values within the error model's bounds, with the ladders and contract
// semantics of `accuracy` (O, LSE) and `gradient_accuracy` (dQ, dK, dV). No kernel is called and nothing is drawn:
// the verdict is about these tensors only.
//
// Example:
//   attncheck::Problem p = …;                                   // q, k, v (and dout) as the kernel got them
//   attncheck::GivenOutputs g{.out = my_out, .lse = my_lse};    // what it returned, logical [B, H, L, D] shapes
//   attncheck::Judgment j = attncheck::judge_given(p, g, attncheck::parse_contract("causal=top-left"));
//   if (j.verdict() == attncheck::Verdict::fail) std::puts(j.forward.detail.c_str());
#pragma once

#include "attncheck/contract.h"
#include "attncheck/results.h"
#include "attncheck/problem.h"
#include "attncheck/tensor.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace attncheck {

/// How far judge_given is: the query rows whose bounds the error model computed, of `total` — each row once for O and
/// LSE, once more for given gradients (a row may be bounded again: `rows` stays at most `total`) — then, on a failure,
/// `explaining`: judging again under the candidate declarations. For a front's progress bar on a long judgment.
struct JudgeProgress {
  std::int64_t rows = 0, total = 0;
  bool explaining = false;
};

/// What a kernel returned on a Problem, in the logical shapes of SPEC.md §2.1 (any strides): out [B, Hq, Lq, Dv] in
/// the storage dtype; lse [B, Hq, Lq] in float32 or the storage dtype (none: O alone is judged); dq, dk, dv like
/// q, k, v, all three or none (they need the problem's dout and, as the bounds assume the backward read the
/// forward's own results, out and lse).
struct GivenOutputs {
  std::optional<Tensor> out, lse, dq, dk, dv;
};

/// Judges `given` as `p`'s outputs under `contract` (its precision profile for p's dtype, its causal alignment — a
/// causal p.params.mask is the mask a kernel receives, aligned as the contract declares —, its empty-rows
/// semantics). Throws std::invalid_argument, one line naming the tensor, for a shape that does not fit
/// `p`, a dtype other than p's (LSE: float32 or p's), gradients without dout or without out and lse, or no out; and
/// for a storage dtype the contract does not implement. `explain`: on a failure, judge again under each candidate
/// declaration (Judgment::explained_by; up to 14 more judgments).
///
/// `on_progress` hears, from the calling thread, how far the judgment is: rows the error model has bounded.
Judgment judge_given(const Problem &p, const GivenOutputs &given, const KernelContract &contract, bool explain = true,
                     const std::function<void(const JudgeProgress &)> &on_progress = {});

}  // namespace attncheck
