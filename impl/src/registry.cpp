// The plugin's ABI symbols, attncheck_kernels() and attncheck_contracts(), and builtin.h's
// attncheck_builtin_set_threads(): the only symbols libattncheck_builtin.so exports (hidden visibility + exports.map).
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

/// What both promise beyond the defaults, and are checked against as required: bitwise results forward and
/// backward (fixed reduction orders, no atomics); masked keys never read (NaN in them cannot leak); GQA gradients
/// summed over heads before one store (the tighter bound). naive computes in float32 only (dtypes=f32; flash takes
/// all three). Then the ABI 1.2 features each implements: naive all nine, flash all but the mask tensor, dropout
/// and FP8 (a paged cache has no backward in the ABI).
#define ATTNCHECK_PROMISE "determinism=bitwise hidden-keys=any grad-sum=exact"
const attncheck_kernel_contract kContracts[] = {
    {"naive", ATTNCHECK_PROMISE " dtypes=f32 features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8"},
    {"flash", ATTNCHECK_PROMISE " features=window+softcap+alibi+sinks+varlen+paged"},
};
#undef ATTNCHECK_PROMISE
}  // namespace

extern "C" ATTNCHECK_EXPORT const attncheck_kernel *attncheck_kernels(int32_t *count) {
  if (count) *count = static_cast<int32_t>(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}

extern "C" ATTNCHECK_EXPORT const attncheck_kernel_contract *attncheck_contracts(int32_t *count) {
  if (count) *count = static_cast<int32_t>(sizeof kContracts / sizeof kContracts[0]);
  return kContracts;
}

extern "C" ATTNCHECK_EXPORT void attncheck_builtin_set_threads(int n) { set_threads(n); }
