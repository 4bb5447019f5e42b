#include "eigen_baseline.h"

#include <Eigen/Dense>

#include <algorithm>
#include <limits>

namespace attncheck::bench {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;
using Map = Eigen::Map<RowMatrix>;

// Keys query row i sees under the causal mask: j ≤ i + Lk − Lq.
std::int64_t visible_keys(std::int64_t i, std::int64_t Lq, std::int64_t Lk) {
  return std::clamp<std::int64_t>(i + Lk - Lq + 1, 0, Lk);
}

void softmax_row(RowMatrix &s, std::int64_t i, std::int64_t Lq, std::int64_t Lk, bool causal) {
  auto row = s.row(i).array();
  if (causal) {
    const std::int64_t n = visible_keys(i, Lq, Lk);
    if (n == 0) {  // nothing visible: the contract's output row is zero
      row.setZero();
      return;
    }
    row.tail(Lk - n).setConstant(-std::numeric_limits<float>::infinity());
  }
  row = (row - row.maxCoeff()).exp();
  row /= row.sum();
}

// One head, single-threaded or with Eigen's own GEMM threads plus a parallel softmax (`row_threads` > 1).
void one_head(const float *q, const float *k, const float *v, float *out, std::int64_t Lq, std::int64_t Lk,
              std::int64_t D, float scale, bool causal, int row_threads) {
  const ConstMap Q(q, Lq, D), K(k, Lk, D), V(v, Lk, D);
  RowMatrix S(Lq, Lk);
  S.noalias() = scale * Q * K.transpose();
#pragma omp parallel for num_threads(row_threads) schedule(static) if (row_threads > 1)
  for (std::int64_t i = 0; i < Lq; ++i) softmax_row(S, i, Lq, Lk, causal);
  Map(out, Lq, D).noalias() = S * V;
}

}  // namespace

std::int64_t eigen_attention_score_bytes(std::int64_t heads, std::int64_t Lq, std::int64_t Lk, int threads) {
  const std::int64_t concurrent = heads >= threads ? threads : 1;
  return concurrent * Lq * Lk * static_cast<std::int64_t>(sizeof(float));
}

void eigen_attention(const float *q, const float *k, const float *v, float *out, std::int64_t heads,
                     std::int64_t Lq, std::int64_t Lk, std::int64_t D, float scale, bool causal, int threads) {
  const std::int64_t qs = Lq * D, kvs = Lk * D;
  if (heads >= threads) {
    // Enough heads to feed every thread: one head per thread at a time, Eigen single-threaded inside.
    Eigen::setNbThreads(1);
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (std::int64_t h = 0; h < heads; ++h)
      one_head(q + h * qs, k + h * kvs, v + h * kvs, out + h * qs, Lq, Lk, D, scale, causal, 1);
  } else {
    // Fewer heads than threads: heads in turn, each with all threads (Eigen's OpenMP GEMM).
    Eigen::setNbThreads(threads);
    for (std::int64_t h = 0; h < heads; ++h)
      one_head(q + h * qs, k + h * kvs, v + h * kvs, out + h * qs, Lq, Lk, D, scale, causal, threads);
  }
}

}  // namespace attncheck::bench
