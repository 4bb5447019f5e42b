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
/* The minor version of this header: 1.1 adds the optional attncheck_contracts symbol. Minor additions never change
   attncheck_kernel, so a 1.0 plugin (without attncheck_contracts) loads unchanged and gets the default contract. */
#define ATTNCHECK_ABI_MINOR 1
enum { ATTNCHECK_OK = 0, ATTNCHECK_UNSUPPORTED = 1, ATTNCHECK_ERROR = 2 };
/* causal: bottom-right aligned, unless the kernel's contract declares causal=top-left */
enum { ATTNCHECK_MASK_NONE = 0, ATTNCHECK_MASK_CAUSAL = 1 };

typedef struct attncheck_params {
  double scale; /* logits = scale * dot(q_i, k_j) */
  int32_t mask; /* ATTNCHECK_MASK_* */
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
  const char *contract; /* e.g. "causal=top-left lse=none" */
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
