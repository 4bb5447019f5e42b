/* An example third-party kernel: float32 scaled dot-product attention, forward only, written the way a first
 * version usually is — one query row at a time, two passes over the keys (max, then sum), any strides.
 * It implements spec/SPEC.md §2 exactly (causal bottom-right aligned, GQA, rows that see no key give 0 / −inf),
 * so `attncheck check --plugin libexample_attention.so` passes. */
#include <attncheck/kernel_abi.h>

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

static const char *g_error = NULL;
static const char *last_error(void) { return g_error; }

/* Element (a, b, c, d) of a rank-4 float32 tensor; NULL strides mean compact row-major (DLPack). */
static float *at(const DLTensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t s3 = 1, s2 = t->shape[3], s1 = t->shape[2] * t->shape[3], s0 = t->shape[1] * t->shape[2] * t->shape[3];
  if (t->strides) {
    s0 = t->strides[0];
    s1 = t->strides[1];
    s2 = t->strides[2];
    s3 = t->strides[3];
  }
  return (float *)((char *)t->data + t->byte_offset) + a * s0 + b * s1 + c * s2 + d * s3;
}

static int is_f32(const DLTensor *t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1; }

static int forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                   DLTensor *lse) {
  if (!is_f32(q) || !is_f32(k) || !is_f32(v) || !is_f32(out)) {
    g_error = "example_attention: float32 only";
    return ATTNCHECK_UNSUPPORTED;
  }
  if (p->mask != ATTNCHECK_MASK_NONE && p->mask != ATTNCHECK_MASK_CAUSAL) return ATTNCHECK_UNSUPPORTED;
  const int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], D = q->shape[3];
  const int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
  float *s = malloc((size_t)(Lk > 0 ? Lk : 1) * sizeof *s);
  if (!s) {
    g_error = "example_attention: out of memory";
    return ATTNCHECK_ERROR;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        /* Bottom-right aligned causal mask: query i sees keys j <= i + Lk - Lq. */
        int64_t n = p->mask == ATTNCHECK_MASK_CAUSAL ? i + Lk - Lq + 1 : Lk;
        if (n < 0) n = 0;
        if (n > Lk) n = Lk;
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot += *at(q, b, h, i, d) * *at(k, b, hk, j, d);
          s[j] = (float)p->scale * dot;
          if (s[j] > m) m = s[j];
        }
        for (int64_t j = 0; j < n; ++j) {
          s[j] = expf(s[j] - m);
          l += s[j];
        }
        for (int64_t c = 0; c < Dv; ++c) {
          float acc = 0.0f;
          for (int64_t j = 0; j < n; ++j) acc += s[j] * *at(v, b, hk, j, c);
          *at(out, b, h, i, c) = n > 0 ? acc / l : 0.0f;
        }
        if (lse) {
          float *x = (float *)((char *)lse->data + lse->byte_offset) +
                     (lse->strides ? b * lse->strides[0] + h * lse->strides[1] + i * lse->strides[2]
                                   : (b * Hq + h) * Lq + i);
          *x = n > 0 ? m + logf(l) : -INFINITY;
        }
      }
    }
  free(s);
  return ATTNCHECK_OK;
}

static const attncheck_kernel kKernels[] = {
    {ATTNCHECK_ABI_VERSION, "example_f32", forward, NULL, last_error},
};

const attncheck_kernel *attncheck_kernels(int32_t *count) {
  *count = (int32_t)(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}
