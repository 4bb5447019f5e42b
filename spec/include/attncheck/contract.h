// A kernel's contract: what it promises beyond the core math of SPEC.md §2 (SPEC.md §3.1). attncheck judges a
// kernel against the contract it declares — through the C ABI (attncheck_contracts), the exec hello (tokens on its
// `kernel` line) or the command line (--contract), each overriding the one before — and the defaults are what
// production kernels (FlashAttention-style, framework SDPA) promise, so a correct kernel that declares nothing
// passes. Behaviour beyond the contract that a careful user still wants to know about is a warning, not a failure.
//
// One text form serves all three ways of declaring: space- or comma-separated `key=value` tokens,
//   "causal=top-left lse=none empty-rows=unspecified determinism=within-bound"
// and the lone token `defaults`, which resets every key (what describe_changes() writes when nothing differs).
// Keys and values (defaults first):
//   causal          bottom-right | top-left          alignment of ATTNCHECK_MASK_CAUSAL when Lq ≠ Lk
//   lse             f32 | storage | none             the LSE output: float32, rounded to the storage dtype, or none
//   empty-rows      zero | unspecified               rows that see no key: O = 0, LSE = −∞ (or +∞); or anything
//   hidden-keys     finite | any                     changes of masked keys that never reach visible rows
//   determinism     forward=bitwise, backward=within-bound; `determinism=X` sets both,
//   forward-determinism / backward-determinism       bitwise | within-bound
//   batch-invariant no | bitwise                     a row's O and LSE bits do not depend on the batch it is in
//                                                    or on Lq (a decode call of the row): vLLM's and SGLang's
//                                                    batch-invariant modes; no = a warning when they do
//   accumulate      f32 | f16 | bf16                 every dot product and sum (sets accumulate-qk and -pv)
//   accumulate-qk   f32 | f16 | bf16                 the logits q·k (and the scale)
//   accumulate-pv   f32 | f16 | bf16                 softmax, P·V and every backward product
//   fp32-precision  ieee | tf32 | bf16 | f16         the float32 operands of every matrix product (q·k, P·V and the
//                                                    backward's): as they are, or rounded (or chopped) to TensorFloat-32,
//                                                    bfloat16 or float16 first, products accumulated in float32 — as
//                                                    torch.backends.*.fp32_precision = "tf32" / "bf16" make them
//   round-p         auto | yes | no                  P (and dS) rounded to storage before the matmuls; auto = yes
//                                                    for float16/bfloat16 storage
//   rowsum          auto | exact | rounded-p         l = Σ p from the unrounded p (auto, as FlashAttention-2), or
//                                                    from the rounded P (e.g. a ones column appended to V)
//   grad-sum        auto | exact | per-head          GQA dK, dV: summed over query heads before one store, or each
//                                                    head's part stored in the storage dtype first (auto: per-head
//                                                    allowed for float16/bfloat16 storage)
//   tanh            accurate | approx | approx-f16 | approx-bf16
//                                                    softcap's tanh: to a few ulps (libm, vector polynomials), or
//                                                    the hardware's approximation (PTX tanh.approx.f32, .f16, .bf16)
//   exp             accurate | approx | approx-f16 | approx-bf16
//                                                    the softmax's exp/exp2: to a few ulps (ex2.approx.f32 included:
//                                                    `approx` names it), or PTX ex2.approx.f16 / ex2.approx.ftz.bf16
//   dtypes          f32+f16+bf16 | any non-empty subset
//                                                    the storage dtypes the kernel implements: a run of another
//                                                    dtype is off (nothing is called), as FlashAttention's float32
//   features        none | window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8
//                                                    the ABI 1.2 features the kernel implements (SPEC.md §2.7):
//                                                    only these reach it; the others' properties are off (declined)
//
// Example:
//   attncheck::KernelContract c = attncheck::parse_contract("causal=top-left, lse=none");
//   attncheck::PrecisionProfile p = c.precision(attncheck::Dtype::bf16);   // f32 accumulation, P rounded
//   c.describe();   // "causal=top-left lse=none empty-rows=zero hidden-keys=finite ..."
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// How accurately a kernel evaluates softcap's tanh (SPEC.md §3.1, §4.1): within Budgets::kTanhUlps of the
/// accumulation dtype, or one of the hardware's approximations (PTX ISA): tanh.approx.f32 (relative error 2^-10.987,
/// FlashAttention-2's softcap), tanh.approx.f16 and .bf16 (the argument rounded to that dtype; absolute error
/// 2^-10.987 and 2^-8).
enum class Tanh : std::uint8_t { accurate, approx, approx_f16, approx_bf16 };
/// How accurately a kernel evaluates the softmax's exp (or exp2): within Budgets::kExpUlps (libm, vector
/// polynomials, and PTX ex2.approx.f32's 2 ulps, which `approx` names), or ex2.approx.f16 / ex2.approx.ftz.bf16 (the
/// argument and the result in that dtype; relative error 2^-9.9 and 2^-7).
enum class Exp : std::uint8_t { accurate, approx, approx_f16, approx_bf16 };
/// What an approximation is called where kernels meet it: "accurate", "tanh.approx.f32", "ex2.approx.f16", …
std::string_view approximation_name(Tanh t);
std::string_view approximation_name(Exp e);

/// The format a kernel rounds the float32 operands of its matrix products to (SPEC.md §3.1, §4.1): none (IEEE
/// float32 products), TensorFloat-32 (float32's range, 11 significant bits: tensor cores' float32 mode), bfloat16
/// or float16 — accumulation stays in its dtype. Operands already in a format the chosen one holds (float16 or
/// bfloat16 storage under tf32) are unchanged.
enum class Fp32Precision : std::uint8_t { ieee, tf32, bf16, f16 };
/// "ieee", "tf32", "bf16", "f16": the contract's spelling (PyTorch's fp32_precision values, plus f16).
std::string_view fp32_precision_name(Fp32Precision f);

/// What a kernel declares about its arithmetic (SPEC.md §4): the error model's input.
struct PrecisionProfile {
  Dtype storage = Dtype::f32;        ///< dtype of q, k, v, out (and dq, dk, dv)
  Dtype accumulate = Dtype::f32;     ///< softmax arithmetic, P·V and every backward product
  Dtype accumulate_qk = Dtype::f32;  ///< the logits q·k and their scale
  bool round_p = false;              ///< P (and dS in backward) rounded to the storage dtype before the matmuls
  bool rowsum_rounded_p = false;     ///< the row sum l may be Σ of the rounded P (only with round_p)
  bool grad_per_head = false;        ///< GQA dK, dV may be each query head's part rounded to storage, then summed
  Dtype lse = Dtype::f32;            ///< dtype the LSE is returned in (float32, or the storage dtype)
  Tanh tanh = Tanh::accurate;        ///< softcap's tanh
  Exp exp = Exp::accurate;           ///< the softmax's exp, its rescale factors and backward's recomputed P
  Fp32Precision fp32_precision = Fp32Precision::ieee;  ///< the format the matrix products' operands are rounded to
  /// FlashAttention-2's practice: float32 accumulation; for float16/bfloat16 P rounded to storage (its row sum
  /// from the unrounded P) and GQA gradients summed from per-head parts rounded to storage.
  static PrecisionProfile for_storage(Dtype storage);
  std::string describe() const;  ///< "f16 storage, f32 accumulation, P rounded"
  friend bool operator==(const PrecisionProfile &, const PrecisionProfile &) = default;
};

enum class CausalAlign : std::uint8_t { bottom_right, top_left };
enum class LseOutput : std::uint8_t { f32, storage, none };
enum class EmptyRows : std::uint8_t { zero, unspecified };
enum class HiddenKeys : std::uint8_t { finite, any };
enum class Determinism : std::uint8_t { bitwise, within_bound };
enum class BatchInvariance : std::uint8_t { no, bitwise };
/// A tri-state switch of the precision profile: auto follows the storage dtype (PrecisionProfile::for_storage).
enum class Allow : std::uint8_t { automatic, yes, no };

/// What a kernel promises beyond the core math. Value-initialized = the defaults (what FlashAttention-2 promises).
struct KernelContract {
  CausalAlign causal = CausalAlign::bottom_right;
  LseOutput lse = LseOutput::f32;
  EmptyRows empty_rows = EmptyRows::zero;
  HiddenKeys hidden_keys = HiddenKeys::finite;
  Determinism forward_determinism = Determinism::bitwise;
  Determinism backward_determinism = Determinism::within_bound;  ///< atomic dQ accumulation is FlashAttention-2's default
  BatchInvariance batch_invariant = BatchInvariance::no;  ///< split counts chosen by occupancy are the default
  Dtype accumulate_qk = Dtype::f32;
  Dtype accumulate_pv = Dtype::f32;
  Fp32Precision fp32_precision = Fp32Precision::ieee;
  Allow round_p = Allow::automatic;
  Allow rowsum_rounded_p = Allow::automatic;
  Allow grad_per_head = Allow::automatic;
  Tanh tanh = Tanh::accurate;
  Exp exp = Exp::accurate;
  std::uint8_t dtypes = kAllDtypes;  ///< dtype_bit()s of the storage dtypes the kernel implements
  std::uint32_t features = 0;  ///< ATTNCHECK_FEATURE_* bits the kernel implements (ABI 1.2)

  /// Whether the kernel implements storage dtype `dt` (dtypes=): runs of the others are off.
  bool implements(Dtype dt) const { return (dtypes & dtype_bit(dt)) != 0; }

  /// The precision profile for one storage dtype.
  PrecisionProfile precision(Dtype storage) const;
  /// The canonical text: every key, in the order of the table above ("causal=bottom-right lse=f32 …"); parses back
  /// to the same contract.
  std::string describe() const;
  /// Only the keys that differ from the defaults ("causal=top-left lse=none"), "defaults" when none does.
  std::string describe_changes() const;
  friend bool operator==(const KernelContract &, const KernelContract &) = default;
};

/// A contract text that does not parse; what() is one line naming the token and what is accepted.
struct ContractError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// `text` applied over `base`: each token overrides its key. Throws ContractError for an unknown key or value, or
/// a token without '='.
KernelContract parse_contract(std::string_view text, KernelContract base = {});

/// The contract a kernel is judged by: the text it `declared` (plugin symbol, exec hello, Python declaration), then
/// `overrides` over it (the front's: `--accumulate X` is the token `accumulate=X` before --contract's). The one
/// resolution every front uses. Throws ContractError.
KernelContract resolve_contract(std::string_view declared, std::string_view overrides = {});

/// The contract text each of a plugin's `n` kernels declares through `contracts` (its attncheck_contracts symbol,
/// ABI 1.1; nullptr for a 1.0 plugin): "" for a kernel without an entry. Every text is parsed to validate it.
/// Throws ContractError (one line naming the kernel) for an entry without a kernel name, one naming no kernel of
/// `kernels`, a kernel named twice, or a contract that does not parse.
std::vector<std::string> declared_contracts(const attncheck_kernel *kernels, std::int32_t n,
                                            attncheck_contracts_fn contracts);

/// True when `token` looks like a contract token (`key=value`): how the exec hello tells them from capabilities.
bool is_contract_token(std::string_view token);

}  // namespace attncheck
