// "naive": the textbook algorithm, float32 only. For each (batch, head) it materializes the L_q × L_k score
// matrix S = scale·Q Kᵀ, takes a max-shifted softmax row by row and multiplies by V. Backward recomputes
// P = exp(S − LSE) from the forward's LSE and applies the chain rule with D_i = Σ_c dO_ic O_ic:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − D),  dQ = scale·dS K,  dK = scale·dSᵀ Q.
// Single-threaded and unblocked on purpose: it is the simple baseline "flash" is compared with.
#include "common.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <new>
#include <vector>

namespace attncheck::builtin {

namespace {
constexpr const char *kName = "naive";
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int refuse_dtype(Dtype dt) {
  return fail(ATTNCHECK_UNSUPPORTED,
              std::string(kName) + ": float32 only; got " + std::string(dtype_name(dt)) + " (use \"flash\")");
}

int report(const std::exception &e) { return fail(ATTNCHECK_ERROR, std::string(kName) + ": " + e.what()); }

/// S[i·Lk + j] = scale·q_i·k_j for visible (i, j), −∞ elsewhere, for query head h of batch b.
void scores(const Operands &o, std::int64_t b, std::int64_t h, float scale, std::vector<float> &S) {
  const Shape &s = o.shape;
  const std::int64_t hk = s.kv_head(h);
  for (std::int64_t i = 0; i < s.Lq; ++i)
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      float dot = 0.0f;
      if (visible(o.mask, i, j, s.Lq, s.Lk))
        for (std::int64_t d = 0; d < s.D; ++d) dot += o.q.get(b, h, i, d) * o.k.get(b, hk, j, d);
      S[static_cast<std::size_t>(i * s.Lk + j)] =
          visible(o.mask, i, j, s.Lq, s.Lk) ? scale * dot : kMinusInf;
    }
}
}  // namespace

int naive_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse) try {
  Operands o;
  if (int st = check_forward(kName, params, q, k, v, out, lse, &o)) return st;
  if (o.dtype != Dtype::f32) return refuse_dtype(o.dtype);
  const Shape &s = o.shape;
  const float scale = static_cast<float>(o.scale);
  std::vector<float> S(static_cast<std::size_t>(s.Lq * s.Lk)), acc(static_cast<std::size_t>(s.Dv));
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t hk = s.kv_head(h);
      scores(o, b, h, scale, S);
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        float *row = &S[static_cast<std::size_t>(i * s.Lk)];
        float m = kMinusInf;
        for (std::int64_t j = 0; j < s.Lk; ++j) m = std::max(m, row[j]);
        if (m == kMinusInf) {  // the row sees no key
          for (std::int64_t c = 0; c < s.Dv; ++c) o.out.set(b, h, i, c, 0.0f);
          if (o.lse.data) o.lse.at(b, h, i) = kMinusInf;
          continue;
        }
        float l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          const float p = std::exp(row[j] - m);  // exp(−∞) = 0 for masked keys
          l += p;
          if (p != 0.0f)
            for (std::int64_t c = 0; c < s.Dv; ++c) acc[static_cast<std::size_t>(c)] += p * o.v.get(b, hk, j, c);
        }
        for (std::int64_t c = 0; c < s.Dv; ++c) o.out.set(b, h, i, c, acc[static_cast<std::size_t>(c)] / l);
        if (o.lse.data) o.lse.at(b, h, i) = m + std::log(l);
      }
    }
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

int naive_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv) try {
  Operands o;
  if (int st = check_backward(kName, params, q, k, v, out, lse, dout, dq, dk, dv, &o)) return st;
  if (o.dtype != Dtype::f32) return refuse_dtype(o.dtype);
  const Shape &s = o.shape;
  const float scale = static_cast<float>(o.scale);
  const auto at = [](std::vector<float> &a, std::int64_t r, std::int64_t ld, std::int64_t c) -> float & {
    return a[static_cast<std::size_t>(r * ld + c)];
  };
  std::vector<float> S(static_cast<std::size_t>(s.Lq * s.Lk)), dS(S.size());
  std::vector<float> dk_acc(static_cast<std::size_t>(s.Lk * s.D)), dv_acc(static_cast<std::size_t>(s.Lk * s.Dv));
  std::vector<float> dq_row(static_cast<std::size_t>(s.D));
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t hk = 0; hk < s.Hkv; ++hk) {
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      // dK, dV of a kv head sum over the group of query heads that read it.
      for (std::int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h) {
        scores(o, b, h, scale, S);
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          const float lse_i = o.lse.at(b, h, i);
          float D_i = 0.0f;
          for (std::int64_t c = 0; c < s.Dv; ++c) D_i += o.dout.get(b, h, i, c) * o.out.get(b, h, i, c);
          for (std::int64_t j = 0; j < s.Lk; ++j) {
            // P = exp(S − LSE); 0 for a masked key and for a row that sees none (LSE = −∞).
            float &p = at(S, i, s.Lk, j);
            p = (p == kMinusInf || lse_i == kMinusInf) ? 0.0f : std::exp(p - lse_i);
            float dP = 0.0f;
            for (std::int64_t c = 0; c < s.Dv; ++c) dP += o.dout.get(b, h, i, c) * o.v.get(b, hk, j, c);
            at(dS, i, s.Lk, j) = p * (dP - D_i);
          }
        }
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          std::fill(dq_row.begin(), dq_row.end(), 0.0f);
          for (std::int64_t j = 0; j < s.Lk; ++j) {
            const float p = at(S, i, s.Lk, j), ds = at(dS, i, s.Lk, j);
            for (std::int64_t d = 0; d < s.D; ++d) {
              dq_row[static_cast<std::size_t>(d)] += ds * o.k.get(b, hk, j, d);
              at(dk_acc, j, s.D, d) += ds * o.q.get(b, h, i, d);
            }
            for (std::int64_t c = 0; c < s.Dv; ++c) at(dv_acc, j, s.Dv, c) += p * o.dout.get(b, h, i, c);
          }
          for (std::int64_t d = 0; d < s.D; ++d) o.dq.set(b, h, i, d, scale * dq_row[static_cast<std::size_t>(d)]);
        }
      }
      for (std::int64_t j = 0; j < s.Lk; ++j) {
        for (std::int64_t d = 0; d < s.D; ++d) o.dk.set(b, hk, j, d, scale * at(dk_acc, j, s.D, d));
        for (std::int64_t c = 0; c < s.Dv; ++c) o.dv.set(b, hk, j, c, at(dv_acc, j, s.Dv, c));
      }
    }
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

}  // namespace attncheck::builtin
