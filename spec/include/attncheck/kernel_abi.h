/* attncheck kernel ABI — the contract a third-party attention kernel implements.
 *
 * C99 and C++ compatible. A plugin is a shared object exporting one symbol, attncheck_kernels(), that returns
 * an array of kernels. Each kernel computes scaled dot-product attention (spec/SPEC.md §2):
 *
 *   O = softmax(scale · Q Kᵀ + mask) V   row-wise over keys,   LSE_i = log Σ_{visible j} exp(scale · q_i·k_j)
 *
 * Example (a float32-only plugin with one forward kernel):
 *
 *   static int my_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k,
 *                         const DLTensor *v, DLTensor *out, DLTensor *lse) {
 *     if (q->dtype.code != kDLFloat || q->dtype.bits != 32) return ATTNCHECK_UNSUPPORTED;
 *     ... write out (and lse when it is not NULL) ...
 *     return ATTNCHECK_OK;
 *   }
 *   static const attncheck_kernel kKernels[] = {
 *     {ATTNCHECK_ABI_VERSION, "my_kernel", my_forward, NULL, NULL},
 *   };
 *   const attncheck_kernel *attncheck_kernels(int32_t *count) { *count = 1; return kKernels; }
 *
 * Since ABI 1.1 a plugin may also declare what each kernel promises beyond the core math — its contract
 * (spec/SPEC.md §3.1): causal alignment, LSE output, rows that see no key, determinism, precision:
 *
 *   static const attncheck_kernel_contract kContracts[] = {
 *     {"my_kernel", "causal=top-left lse=none determinism=within-bound"},
 *   };
 *   const attncheck_kernel_contract *attncheck_contracts(int32_t *count) { *count = 1; return kContracts; }
 *
 * Since ABI 1.2 a kernel may implement the features modern kernels ship (spec/SPEC.md §2.7): sliding windows,
 * softcap, ALiBi, attention sinks, a mask tensor, packed variable-length batches, a paged KV cache, dropout, FP8.
 * It declares the ones it implements in its contract ("features=window+softcap"); only then does attncheck send it
 * calls that use them, with params->features naming the features of the call and params->args their settings:
 *
 *   if (params->features & ATTNCHECK_FEATURE_WINDOW) { left = params->args->window_left; ... }
 *   if (params->features & ~(ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP)) return ATTNCHECK_UNSUPPORTED;
 */
#ifndef ATTNCHECK_KERNEL_ABI_H
#define ATTNCHECK_KERNEL_ABI_H

#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The major version: the layout of attncheck_kernel. A kernel's abi_version must equal it. */
#define ATTNCHECK_ABI_VERSION 1
/* The minor version of this header: 1.1 adds the optional attncheck_contracts symbol; 1.2 the features (the two
   fields after `mask` in attncheck_params, attncheck_args). Minor additions never change attncheck_kernel, so a 1.0
   plugin (without attncheck_contracts) loads unchanged and gets the default contract, and a kernel that declares no
   feature is never sent one. A 1.2 kernel that declares features fails to load in a host older than 1.2 (its
   contract does not parse there), so a kernel that declared them can rely on params->features. */
#define ATTNCHECK_ABI_MINOR 2
enum { ATTNCHECK_OK = 0, ATTNCHECK_UNSUPPORTED = 1, ATTNCHECK_ERROR = 2 };
/* causal: bottom-right aligned, unless the kernel's contract declares causal=top-left */
enum { ATTNCHECK_MASK_NONE = 0, ATTNCHECK_MASK_CAUSAL = 1 };

/* ABI 1.2: the features a call may use (spec/SPEC.md §2.7), bits of attncheck_params.features and the values of
   the contract key `features`. */
enum {
  ATTNCHECK_FEATURE_WINDOW = 1 << 0,  /* sliding window: window_left, window_right */
  ATTNCHECK_FEATURE_SOFTCAP = 1 << 1, /* logit softcapping: softcap */
  ATTNCHECK_FEATURE_ALIBI = 1 << 2,   /* ALiBi: alibi_slopes */
  ATTNCHECK_FEATURE_SINKS = 1 << 3,   /* attention sinks: sinks */
  ATTNCHECK_FEATURE_MASK = 1 << 4,    /* a mask tensor: attn_mask */
  ATTNCHECK_FEATURE_VARLEN = 1 << 5,  /* packed variable-length batch: cu_seqlens_q, cu_seqlens_k */
  ATTNCHECK_FEATURE_PAGED = 1 << 6,   /* paged KV cache: block_table, seqused_k, page_size */
  ATTNCHECK_FEATURE_DROPOUT = 1 << 7, /* dropout: dropout_p, dropout_seed, dropout_mask */
  ATTNCHECK_FEATURE_FP8 = 1 << 8      /* FP8 storage with per-tensor descale factors */
};

/* ABI 1.2: the settings of a call's features. Positions: with the rows and keys of one sequence (batch entry b, or
   packed sequence b under VARLEN) numbered from 0, row i is aligned to key i' = i + Lk_b − Lq_b (bottom-right, as
   causal), or i' = i under the contract's causal=top-left. A field is meaningful only when its feature's bit is set in
   params->features; later minor versions append fields (read `size` before any field past those named here). */
typedef struct attncheck_args {
  uint32_t size; /* sizeof(attncheck_args) as the host built it */
  /* WINDOW: row i sees keys j with i' − window_left ≤ j ≤ i' + window_right (inclusive); −1 = unbounded on that side.
     Combines with ATTNCHECK_MASK_CAUSAL (which caps the right side at i'). */
  int32_t window_left, window_right;
  /* SOFTCAP: the logit scale·q·k becomes softcap·tanh(scale·q·k / softcap) (> 0), before ALiBi and the mask. */
  float softcap;
  /* ALIBI: float32 [Hq]; the logit of (i, j) in query head h gains −alibi_slopes[h]·|i' − j|. */
  const DLTensor *alibi_slopes;
  /* SINKS: float32 [Hq]; every row of head h has one more term e^{sinks[h]} in its softmax denominator, with no
     value: O_i = Σ_j e^{s_ij} v_j / (Σ_j e^{s_ij} + e^{sink}); LSE_i = log(Σ_j e^{s_ij} + e^{sink}). */
  const DLTensor *sinks;
  /* MASK: [Bm, Hm, Lq, Lk], Bm ∈ {1, B}, Hm ∈ {1, Hq} (size 1 broadcasts): boolean as uint8 (nonzero = the key is
     visible) or float32 added to the logits after softcap and ALiBi (−∞ hides the key). Under VARLEN, Lq and Lk are
     max_seqlen_q, max_seqlen_k and row i, key j of sequence b are mask[b, h, i, j]. */
  const DLTensor *attn_mask;
  /* VARLEN: int32 [nseq + 1], nondecreasing from 0: sequence b has rows cu_seqlens_q[b] … cu_seqlens_q[b+1] − 1 of
     q [1, Hq, total_q, D] (and out, lse, dout, dq) and keys cu_seqlens_k[b] … of k, v [1, Hkv, total_k, D|Dv] (and
     dk, dv). A sequence may be empty. max_seqlen_q, max_seqlen_k: the longest. */
  const DLTensor *cu_seqlens_q, *cu_seqlens_k;
  int32_t max_seqlen_q, max_seqlen_k;
  /* PAGED: k, v are a cache of pages [num_pages, Hkv, page_size, D|Dv]; key j of batch entry b is row j % page_size
     of page block_table[b, j / page_size] (int32 [B, pages_per_seq]); batch entry b has seqused_k[b] keys (int32
     [B]). Pages may be in any order, and some unused. The kernel writes no gradient of k, v. */
  const DLTensor *block_table, *seqused_k;
  int32_t page_size;
  /* DROPOUT: each P_ij is kept with probability 1 − dropout_p and scaled by 1/(1 − dropout_p), or dropped, as a
     function of dropout_seed and (b, h, i, j) only. Forward writes the mask it applied into dropout_mask (uint8
     [B, Hq, Lq, Lk], 1 = kept) when it is not NULL; backward gets the forward's mask there and must apply the same
     one (reproduced from the seed). */
  float dropout_p;
  uint64_t dropout_seed;
  DLTensor *dropout_mask;
  /* FP8: q, k, v hold float8 bits (DLPack uint8; fp8_format 0 = e4m3fn, 1 = e5m2); out (and lse) are the run's
     dtype, as without FP8 (FlashAttention-3 writes bfloat16); the values are descale_x · stored. Forward only: FP8
     inputs have no backward in the ABI. */
  float descale_q, descale_k, descale_v;
  int32_t fp8_format;
} attncheck_args;

typedef struct attncheck_params {
  double scale; /* logits = scale * dot(q_i, k_j) */
  int32_t mask; /* ATTNCHECK_MASK_* */
  /* ABI 1.2 (in what was padding: a 1.0 or 1.1 struct is a prefix of this one): the ATTNCHECK_FEATURE_* bits this
     call uses — 0 for every kernel that declares no feature — and their settings (NULL when features is 0). */
  uint32_t features;
  const attncheck_args *args;
} attncheck_params;

typedef struct attncheck_kernel {
  uint32_t abi_version; /* ATTNCHECK_ABI_VERSION */
  const char *name;     /* unique within its plugin */
  /* q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> out [B,Hq,Lq,Dv]; all one dtype (float32, float16 or
     bfloat16) on kDLCPU with explicit strides in elements; lse is NULL or [B,Hq,Lq] in float32 (or in the storage
     dtype for a kernel whose contract says lse=storage; always NULL for lse=none). */
  int (*forward)(const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                 const DLTensor *v, DLTensor *out, DLTensor *lse);
  /* NULL when the kernel has no backward. out and lse are what forward returned; dq, dk, dv like q, k, v. */
  int (*backward)(const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                  const DLTensor *v, const DLTensor *out, const DLTensor *lse, const DLTensor *dout,
                  DLTensor *dq, DLTensor *dk, DLTensor *dv);
  const char *(*last_error)(void); /* NULL, or a message for the last non-OK return */
} attncheck_kernel;

/* The one symbol a plugin exports: its kernels and their number. */
const attncheck_kernel *attncheck_kernels(int32_t *count);

/* ABI 1.1, optional: a kernel's contract, in the text form of spec/SPEC.md §3.1 ("key=value" tokens separated by
   spaces or commas). A kernel with no entry, or a NULL or empty contract, gets the defaults; an entry naming no
   kernel of attncheck_kernels(), or a contract that does not parse, is a load error. */
typedef struct attncheck_kernel_contract {
  const char *kernel;   /* a name from attncheck_kernels() */
  const char *contract; /* e.g. "causal=top-left lse=none" or, ABI 1.2, "features=window+softcap" */
} attncheck_kernel_contract;
const attncheck_kernel_contract *attncheck_contracts(int32_t *count);

/* The symbols' names and types, for loaders (dlsym). */
#define ATTNCHECK_KERNELS_SYMBOL "attncheck_kernels"
typedef const attncheck_kernel *(*attncheck_kernels_fn)(int32_t *count);
#define ATTNCHECK_CONTRACTS_SYMBOL "attncheck_contracts"
typedef const attncheck_kernel_contract *(*attncheck_contracts_fn)(int32_t *count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNCHECK_KERNEL_ABI_H */
