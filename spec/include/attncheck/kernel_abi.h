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
 */
#ifndef ATTNCHECK_KERNEL_ABI_H
#define ATTNCHECK_KERNEL_ABI_H

#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNCHECK_ABI_VERSION 1
enum { ATTNCHECK_OK = 0, ATTNCHECK_UNSUPPORTED = 1, ATTNCHECK_ERROR = 2 };
enum { ATTNCHECK_MASK_NONE = 0, ATTNCHECK_MASK_CAUSAL = 1 }; /* causal: bottom-right aligned */

typedef struct attncheck_params {
  double scale; /* logits = scale * dot(q_i, k_j) */
  int32_t mask; /* ATTNCHECK_MASK_* */
} attncheck_params;

typedef struct attncheck_kernel {
  uint32_t abi_version; /* ATTNCHECK_ABI_VERSION */
  const char *name;     /* unique within its plugin */
  /* q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> out [B,Hq,Lq,Dv]; all one dtype (float32, float16 or
     bfloat16) on kDLCPU with explicit strides in elements; lse is NULL or float32 [B,Hq,Lq]. */
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

/* The symbol's name and type, for loaders (dlsym). */
#define ATTNCHECK_KERNELS_SYMBOL "attncheck_kernels"
typedef const attncheck_kernel *(*attncheck_kernels_fn)(int32_t *count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNCHECK_KERNEL_ABI_H */
