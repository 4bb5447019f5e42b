/* A plugin built against a future ABI: abi_version is not ATTNCHECK_ABI_VERSION. */
#include <attncheck/kernel_abi.h>
#include <stddef.h>

static int forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                   DLTensor *lse) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  return ATTNCHECK_ERROR;
}
static const attncheck_kernel kKernels[] = {{ATTNCHECK_ABI_VERSION + 98, "future", forward, NULL, NULL}};
const attncheck_kernel *attncheck_kernels(int32_t *count) {
  *count = 1;
  return kKernels;
}
