// The attention a user writes first with Eigen: S = scale·Q Kᵀ (Eigen GEMM), row softmax with max subtraction,
// O = P V — materializing the Lq×Lk scores of each (batch, head).
#pragma once

#include <cstdint>

namespace attncheck::bench {

/// q [heads, Lq, D], k and v [heads, Lk, D], out [heads, Lq, D]: contiguous float32. Causal masks the scores
/// (bottom-right aligned, as the contract). Runs on `threads` threads.
void eigen_attention(const float *q, const float *k, const float *v, float *out, std::int64_t heads,
                     std::int64_t Lq, std::int64_t Lk, std::int64_t D, float scale, bool causal, int threads);

/// Bytes of scores live at once: one Lq×Lk float matrix per concurrently processed head.
std::int64_t eigen_attention_score_bytes(std::int64_t heads, std::int64_t Lq, std::int64_t Lk, int threads);

}  // namespace attncheck::bench
