/* A plugin for the sandbox's ABI 1.2 tests: kernels that declare every feature and echo what reached them, so that a
 * test can see each scalar of params->args and each args tensor arrive (in the sandbox's child as in-process), and
 * kernels that misuse an args tensor.
 *
 *   echo            forward: fills out and lse, element n (row-major) with echo[n % kEcho], a digest of the call
 *                   (below); writes dropout_mask[n] = a hash of (dropout_seed, n) & 1. backward: dq, dk, dv the same,
 *                   with slot 22 the sum of the dropout_mask it was given (the forward's).
 *   write_sinks     forward writes sinks[1] (an input)
 *   read_alibi      forward reads alibi_slopes two elements past its end
 *   write_dropout   backward writes dropout_mask[0] (an input there)
 */
#include "attncheck/kernel_abi.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

enum { kEcho = 24 };

/* Calls f(element pointer, n) for each element of t in row-major order. */
typedef void (*visit_fn)(char *e, int64_t n, void *ctx);
static void for_each(const DLTensor *t, visit_fn f, void *ctx) {
  if (!t) return;
  const int64_t size = (t->dtype.bits * t->dtype.lanes) / 8;
  int64_t idx[8] = {0}, n = 0;
  for (int d = 0; d < t->ndim; ++d)
    if (t->shape[d] == 0) return;
  while (1) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; ++d) {
      int64_t stride = 1;
      if (t->strides) stride = t->strides[d];
      else
        for (int e = d + 1; e < t->ndim; ++e) stride *= t->shape[e];
      off += idx[d] * stride;
    }
    f((char *)t->data + t->byte_offset + off * size, n++, ctx);
    int d = t->ndim - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

static double value(const DLTensor *t, const char *e) {
  if (t->dtype.code == kDLFloat && t->dtype.bits == 32) {
    float x;
    memcpy(&x, e, 4);
    return x;
  }
  if (t->dtype.code == kDLInt && t->dtype.bits == 32) {
    int32_t x;
    memcpy(&x, e, 4);
    return x;
  }
  if (t->dtype.code == kDLUInt && t->dtype.bits == 8) return (unsigned char)*e;
  return NAN;
}

struct Sum {
  const DLTensor *t;
  double sum;
};
static void add(char *e, int64_t n, void *ctx) {
  struct Sum *s = (struct Sum *)ctx;
  const double x = value(s->t, e);
  (void)n;
  if (isfinite(x)) s->sum += x;
  else s->sum += 1000; /* −∞ in an additive mask counts, but keeps the sum finite */
}
/* Σ of a tensor's elements; −1 when the pointer is NULL. */
static double sum(const DLTensor *t) {
  struct Sum s = {t, 0};
  if (!t) return -1;
  for_each(t, add, &s);
  return s.sum;
}

static void digest(const attncheck_params *p, const DLTensor *dropout_given, float echo[kEcho]) {
  const attncheck_args *a = p->args;
  memset(echo, 0, kEcho * sizeof(float));
  echo[0] = (float)p->features;
  echo[23] = (float)p->scale;
  if (!a) {
    echo[1] = -7;
    return;
  }
  echo[1] = (float)a->window_left;
  echo[2] = (float)a->window_right;
  echo[3] = a->softcap;
  echo[4] = (float)sum(a->alibi_slopes);
  echo[5] = (float)sum(a->sinks);
  echo[6] = (float)sum(a->attn_mask);
  echo[7] = (float)sum(a->cu_seqlens_q);
  echo[8] = (float)sum(a->cu_seqlens_k);
  echo[9] = (float)a->max_seqlen_q;
  echo[10] = (float)a->max_seqlen_k;
  echo[11] = (float)sum(a->block_table);
  echo[12] = (float)sum(a->seqused_k);
  echo[13] = (float)a->page_size;
  echo[14] = a->dropout_p;
  echo[15] = (float)(a->dropout_seed % 1000003u);
  echo[16] = a->descale_q;
  echo[17] = a->descale_k;
  echo[18] = a->descale_v;
  echo[19] = (float)a->fp8_format;
  echo[20] = (float)a->size;
  echo[21] = a->attn_mask ? (float)(a->attn_mask->dtype.code * 100 + a->attn_mask->dtype.bits) : -1;
  echo[22] = (float)sum(dropout_given);
}

static void put_echo(char *e, int64_t n, void *ctx) {
  const float *echo = (const float *)ctx;
  memcpy(e, &echo[n % kEcho], 4);
}

struct Drop {
  uint64_t seed;
};
static void put_drop(char *e, int64_t n, void *ctx) {
  uint64_t x = ((struct Drop *)ctx)->seed ^ (uint64_t)n * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  *(unsigned char *)e = (unsigned char)(x & 1);
}

static const char *g_error = NULL;
static const char *last_error(void) { return g_error; }

static int is_f32(const DLTensor *t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32; }

static int echo_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                        DLTensor *out, DLTensor *lse) {
  float echo[kEcho];
  (void)k, (void)v;
  if (!is_f32(q)) {
    g_error = "echo: float32 only";
    return ATTNCHECK_UNSUPPORTED;
  }
  digest(p, NULL, echo);
  for_each(out, put_echo, echo);
  for_each(lse, put_echo, echo);
  if (p->args && p->args->dropout_mask) {
    struct Drop d = {p->args->dropout_seed};
    for_each(p->args->dropout_mask, put_drop, &d);
  }
  return ATTNCHECK_OK;
}

static int echo_backward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                         const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                         DLTensor *dv) {
  float echo[kEcho];
  (void)q, (void)k, (void)v, (void)out, (void)lse, (void)dout;
  digest(p, p->args ? p->args->dropout_mask : NULL, echo);
  for_each(dq, put_echo, echo);
  for_each(dk, put_echo, echo);
  for_each(dv, put_echo, echo);
  return ATTNCHECK_OK;
}

static int write_sinks_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                               DLTensor *out, DLTensor *lse) {
  if (!p->args || !p->args->sinks) return ATTNCHECK_UNSUPPORTED;
  float *s = (float *)((char *)p->args->sinks->data + p->args->sinks->byte_offset);
  s[1] += 1;
  return echo_forward(p, q, k, v, out, lse);
}

static volatile float g_sink;
static int read_alibi_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                              DLTensor *out, DLTensor *lse) {
  if (!p->args || !p->args->alibi_slopes) return ATTNCHECK_UNSUPPORTED;
  const DLTensor *a = p->args->alibi_slopes;
  const float *s = (const float *)((const char *)a->data + a->byte_offset);
  g_sink = s[a->shape[0] + 2];
  return echo_forward(p, q, k, v, out, lse);
}

static int write_dropout_backward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                                  const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                                  DLTensor *dk, DLTensor *dv) {
  if (!p->args || !p->args->dropout_mask) return ATTNCHECK_UNSUPPORTED;
  DLTensor *m = p->args->dropout_mask;
  unsigned char *e = (unsigned char *)m->data + m->byte_offset;
  e[0] ^= 1;
  return echo_backward(p, q, k, v, out, lse, dout, dq, dk, dv);
}

static const attncheck_kernel kKernels[] = {
    {ATTNCHECK_ABI_VERSION, "echo", echo_forward, echo_backward, last_error},
    {ATTNCHECK_ABI_VERSION, "write_sinks", write_sinks_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "read_alibi", read_alibi_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "write_dropout", echo_forward, write_dropout_backward, last_error},
};

#define ALL_FEATURES "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8"
static const attncheck_kernel_contract kContracts[] = {
    {"echo", ALL_FEATURES},
    {"write_sinks", ALL_FEATURES},
    {"read_alibi", ALL_FEATURES},
    {"write_dropout", ALL_FEATURES},
};

const attncheck_kernel *attncheck_kernels(int32_t *count) {
  *count = (int32_t)(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}
const attncheck_kernel_contract *attncheck_contracts(int32_t *count) {
  *count = (int32_t)(sizeof kContracts / sizeof kContracts[0]);
  return kContracts;
}
