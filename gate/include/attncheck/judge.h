// The gate's second entry beside gate::run: judging tensors a kernel already returned (attncheck.judge in Python,
// `attncheck judge` on the command line) — its inputs and outputs held element by element against the exact values,
// under the contract the kernel declares. The fronts convert arrays into a JudgeRequest and print what
// report/ renders (judgment_text).
//
//   gate::JudgeRequest rq;
//   rq.q = q, rq.k = k, rq.v = v;             // logical [B, H, L, D] tensors in the storage dtype
//   rq.given.out = out, rq.given.lse = lse;   // what the kernel returned
//   rq.causal = true, rq.contract = "causal=top-left";
//   const Judgment j = gate::judge(rq);       // gate::RunError for what does not fit
//   std::puts(reporting::judgment_text(j).c_str());
//   return gate::judge_exit_code(j, /*strict=*/false);
#pragma once

#include "attncheck/features.h"
#include "attncheck/given.h"
#include "attncheck/results.h"
#include "attncheck/tensor.h"

#include <optional>
#include <string>

namespace attncheck::gate {

/// What a front hands the judge.
struct JudgeRequest {
  Tensor q, k, v;             ///< [B, Hq, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv], one storage dtype
  std::optional<Tensor> dout; ///< [B, Hq, Lq, Dv]: the backward's input, for given gradients
  GivenOutputs given;         ///< out, lse, dq, dk, dv as the kernel returned them
  std::optional<double> scale;  ///< the kernel's scale; 1/√D when not given
  bool causal = false;          ///< the kernel was called with the causal mask (aligned as the contract says)
  /// The features the kernel was called with (SPEC.md §2.7), on the logical tensors: a window, softcap, ALiBi slopes
  /// and sinks [Hq], a mask [B|1, Hq|1, Lq, Lk]; a varlen batch (storage varlen, seqlens_q and seqlens_k: sequence b's
  /// rows and keys, its tensors unpacked into [B, H, longest, D] with O and the gradients 0 and the LSE −∞ past each
  /// length). Paged caches, dropout and FP8 are judged by check() on the kernel itself.
  Features features;
  std::string contract;         ///< what the kernel declares (contract.h text; "" for the defaults)
  bool explain = true;          ///< name the declarations a failure passes under (Judgment::explained_by)
  /// A bar of the rows bounded on stderr while it judges, when stderr is a terminal (a long judgment: minutes at a
  /// model's shapes).
  bool progress = false;
};

/// Judges `rq`'s outputs. Throws RunError (run.h: exit code kExitUsage, `input` the argument it concerns) for a shape,
/// dtype or contract that does not fit, a missing dout or lse a given gradient needs, non-finite inputs or scale, a
/// feature argument of the wrong size, or a feature judge does not take.
Judgment judge(const JudgeRequest &rq);

/// The judge's exit code (gate.h): 1 for a failure (a warning too under `strict`), 3 when it could not decide, 0
/// otherwise.
int judge_exit_code(const Judgment &j, bool strict);

/// The command line that judges `j`'s tensors again from `inputs` (an .npz of q, k, v, the outputs and dout in
/// `layout`): `attncheck judge --inputs … --dtype … --scale … [--causal] [--contract …]`; "" when the judgment used
/// features, which the command does not take.
std::string judge_replay(const Judgment &j, std::string_view inputs, std::string_view layout = "bhld");

}  // namespace attncheck::gate
