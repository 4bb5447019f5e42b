// The plugin's one ABI symbol, attncheck_kernels(), and builtin.h's attncheck_builtin_set_threads().
// These two are the only symbols libattncheck_builtin.so exports (hidden visibility + exports.map).
#include "attncheck/builtin.h"
#include "attncheck/kernel_abi.h"
#include "common.h"

#define ATTNCHECK_EXPORT __attribute__((visibility("default")))

namespace {
using namespace attncheck::builtin;

const attncheck_kernel kKernels[] = {
    {ATTNCHECK_ABI_VERSION, "naive", naive_forward, naive_backward, last_error},
    {ATTNCHECK_ABI_VERSION, "flash", flash_forward, flash_backward, last_error},
};
}  // namespace

extern "C" ATTNCHECK_EXPORT const attncheck_kernel *attncheck_kernels(int32_t *count) {
  if (count) *count = static_cast<int32_t>(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}

extern "C" ATTNCHECK_EXPORT void attncheck_builtin_set_threads(int n) { set_threads(n); }
