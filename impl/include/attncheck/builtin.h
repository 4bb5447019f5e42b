/* attncheck's bundled kernels (libattncheck_builtin.so).
 *
 * The library is a plugin like any other: its kernels are reached through attncheck_kernels() (kernel_abi.h).
 *   "naive" — float32 only; materializes the L_q × L_k score matrix of each (sequence, head). Forward and
 *             backward. ABI 1.2 features: window, softcap, alibi, sinks, mask, varlen, paged (forward only) and
 *             dropout (a counter-based hash of the seed and (b, h, i, j): backward reproduces forward's mask).
 *   "flash" — FlashAttention-2 on the CPU: online softmax over key blocks, no L_q × L_k buffer, backward that
 *             recomputes P from the forward's LSE. float32, float16 and bfloat16 storage, float32 arithmetic.
 *             Multithreaded with OpenMP; deterministic (the result does not depend on the thread count).
 *             ABI 1.2 features: window (key blocks outside every row's window are skipped), softcap, alibi,
 *             sinks, varlen, and paged (forward only); not the mask tensor or dropout.
 * Neither implements FP8. A call with a feature (or combination, e.g. varlen with paged) a kernel does not
 * implement returns ATTNCHECK_UNSUPPORTED; malformed feature arguments return ATTNCHECK_ERROR; last_error() says
 * which.
 *
 * Backward contract of both kernels: lse must be the float32 LSE that forward returned (it is not recomputed);
 * a NULL lse is refused with ATTNCHECK_ERROR.
 *
 * This header adds one C function to the ABI: the thread count of "flash".
 */
#ifndef ATTNCHECK_BUILTIN_H
#define ATTNCHECK_BUILTIN_H

#include "attncheck/kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Threads "flash" uses from the next call on. n ≥ 1 fixes the count, on every call; n ≤ 0 restores the default:
 *  the environment variable ATTNCHECK_THREADS when it holds a positive integer, else OpenMP's default
 *  (omp_get_max_threads(), i.e. OMP_NUM_THREADS or the number of cores), and one thread on a call of fewer than
 *  2^18 multiply-adds B·Hq·Lq·Lk·(D + Dv), where a team costs more than it saves. Thread-safe. */
void attncheck_builtin_set_threads(int n);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNCHECK_BUILTIN_H */
