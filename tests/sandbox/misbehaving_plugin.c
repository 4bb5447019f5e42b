/* A plugin of misbehaving kernels for the sandbox tests and the time-to-verdict benchmark, and one well-behaved
 * kernel ("naive": float32 attention, forward and backward, any strides) that the misbehaving ones build on. Every
 * kernel is float32 only, but slow_flash_f16 (float16 only: correct, and slow). */
#include "attncheck/kernel_abi.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- strided access ---- */

static int64_t stride(const DLTensor *t, int d) {
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int e = t->ndim - 1; e > d; --e) s *= t->shape[e];
  return s;
}
static float *at4(const DLTensor *t, int64_t b, int64_t h, int64_t i, int64_t c) {
  return (float *)((char *)t->data + t->byte_offset) + b * stride(t, 0) + h * stride(t, 1) + i * stride(t, 2) +
         c * stride(t, 3);
}
static float *at3(const DLTensor *t, int64_t b, int64_t h, int64_t i) {
  return (float *)((char *)t->data + t->byte_offset) + b * stride(t, 0) + h * stride(t, 1) + i * stride(t, 2);
}
/* Storage offset (elements) of the highest element. */
static int64_t last_offset(const DLTensor *t) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; ++d) off += (t->shape[d] - 1) * stride(t, d);
  return off;
}
static float *base(const DLTensor *t) { return (float *)((char *)t->data + t->byte_offset); }

static int is_f32(const DLTensor *t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32; }

static const char *g_error = NULL;
static const char *last_error(void) { return g_error; }

/* ---- the well-behaved kernel ---- */

static int visible(const attncheck_params *p, int64_t i, int64_t j, int64_t Lq, int64_t Lk) {
  return p->mask == ATTNCHECK_MASK_NONE || j <= i + Lk - Lq;
}

/* Logit of query i against key j, and the row's log-sum-exp (float accumulation, fixed order). */
static float logit(const attncheck_params *p, const DLTensor *q, const DLTensor *k, int64_t b, int64_t h,
                   int64_t hk, int64_t i, int64_t j) {
  float s = 0;
  for (int64_t c = 0; c < q->shape[3]; ++c) s += *at4(q, b, h, i, c) * *at4(k, b, hk, j, c);
  return (float)p->scale * s;
}
static float row_lse(const attncheck_params *p, const DLTensor *q, const DLTensor *k, int64_t b, int64_t h,
                     int64_t hk, int64_t i) {
  const int64_t Lq = q->shape[2], Lk = k->shape[2];
  float m = -INFINITY, sum = 0;
  for (int64_t j = 0; j < Lk; ++j)
    if (visible(p, i, j, Lq, Lk)) m = fmaxf(m, logit(p, q, k, b, h, hk, i, j));
  if (m == -INFINITY) return -INFINITY;
  for (int64_t j = 0; j < Lk; ++j)
    if (visible(p, i, j, Lq, Lk)) sum += expf(logit(p, q, k, b, h, hk, i, j) - m);
  return m + logf(sum);
}

static int naive_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                         DLTensor *out, DLTensor *lse) {
  if (!is_f32(q)) {
    g_error = "naive: float32 only";
    return ATTNCHECK_UNSUPPORTED;
  }
  const int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], Hkv = k->shape[1], Lk = k->shape[2];
  const int64_t Dv = v->shape[3];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        const float l = row_lse(p, q, k, b, h, hk, i);
        for (int64_t c = 0; c < Dv; ++c) *at4(out, b, h, i, c) = 0;
        if (lse) *at3(lse, b, h, i) = l;
        if (l == -INFINITY) continue;
        for (int64_t j = 0; j < Lk; ++j) {
          if (!visible(p, i, j, Lq, Lk)) continue;
          const float pij = expf(logit(p, q, k, b, h, hk, i, j) - l);
          for (int64_t c = 0; c < Dv; ++c) *at4(out, b, h, i, c) += pij * *at4(v, b, hk, j, c);
        }
      }
    }
  return ATTNCHECK_OK;
}

static int naive_backward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                          const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                          DLTensor *dk, DLTensor *dv) {
  (void)lse;
  if (!is_f32(q)) {
    g_error = "naive: float32 only";
    return ATTNCHECK_UNSUPPORTED;
  }
  const int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], D = q->shape[3];
  const int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hk = 0; hk < Hkv; ++hk)
      for (int64_t j = 0; j < Lk; ++j) {
        for (int64_t c = 0; c < D; ++c) *at4(dk, b, hk, j, c) = 0;
        for (int64_t c = 0; c < Dv; ++c) *at4(dv, b, hk, j, c) = 0;
      }
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        for (int64_t c = 0; c < D; ++c) *at4(dq, b, h, i, c) = 0;
        const float l = row_lse(p, q, k, b, h, hk, i);
        if (l == -INFINITY) continue;
        float di = 0; /* D_i = dO_i · O_i */
        for (int64_t c = 0; c < Dv; ++c) di += *at4(dout, b, h, i, c) * *at4(out, b, h, i, c);
        for (int64_t j = 0; j < Lk; ++j) {
          if (!visible(p, i, j, Lq, Lk)) continue;
          const float pij = expf(logit(p, q, k, b, h, hk, i, j) - l);
          float dp = 0;
          for (int64_t c = 0; c < Dv; ++c) {
            dp += *at4(dout, b, h, i, c) * *at4(v, b, hk, j, c);
            *at4(dv, b, hk, j, c) += pij * *at4(dout, b, h, i, c);
          }
          const float ds = pij * (dp - di) * (float)p->scale;
          for (int64_t c = 0; c < D; ++c) {
            *at4(dq, b, h, i, c) += ds * *at4(k, b, hk, j, c);
            *at4(dk, b, hk, j, c) += ds * *at4(q, b, h, i, c);
          }
        }
      }
    }
  }
  return ATTNCHECK_OK;
}

/* ---- misbehaving kernels ---- */

#define FORWARD(name) \
  static int name(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, \
                  DLTensor *out, DLTensor *lse)

FORWARD(fails_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  g_error = "fails: this kernel always fails";
  return ATTNCHECK_ERROR;
}

FORWARD(segfault_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  *(volatile float *)NULL = 1.0f;
  return ATTNCHECK_OK;
}

FORWARD(abort_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  abort();
}

FORWARD(hang_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  for (volatile unsigned long spin = 0;; spin = spin + 1) {
  }
  return ATTNCHECK_OK;
}

FORWARD(exit_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  exit(3);
}

/* Correct below kHangAboveKeys keys, hangs above: the time-to-verdict benchmark's kernel (bench/time_to_verdict). */
enum { kHangAboveKeys = 100 };
FORWARD(hang_above_100_keys_forward) {
  if (k->shape[2] > kHangAboveKeys) return hang_forward(p, q, k, v, out, lse);
  return naive_forward(p, q, k, v, out, lse);
}
static int hang_above_100_keys_backward(const attncheck_params *p, const DLTensor *q, const DLTensor *k,
                                        const DLTensor *v, const DLTensor *out, const DLTensor *lse,
                                        const DLTensor *dout, DLTensor *dq, DLTensor *dk, DLTensor *dv) {
  if (k->shape[2] > kHangAboveKeys) return hang_forward(p, q, k, v, dq, NULL);
  return naive_backward(p, q, k, v, out, lse, dout, dq, dk, dv);
}

/* ---- a correct kernel that is merely slow ---- */

/* float16 attention as FlashAttention computes it — one online-softmax pass per row, float32 accumulation, O
 * rounded to float16 once — but scalar and single-threaded, with float16 converted element by element: more than 10×
 * slower than the bundled flash kernel. A slow kernel is not a hanging one (the load tests, cli_load_test.cpp). */
static float f16_at4(const DLTensor *t, int64_t b, int64_t h, int64_t i, int64_t c) {
  const _Float16 *x = (const _Float16 *)((const char *)t->data + t->byte_offset) + b * stride(t, 0) +
                      h * stride(t, 1) + i * stride(t, 2) + c * stride(t, 3);
  return (float)*x;
}
FORWARD(slow_flash_f16_forward) {
  if (q->dtype.code != kDLFloat || q->dtype.bits != 16) {
    g_error = "slow_flash_f16: float16 only";
    return ATTNCHECK_UNSUPPORTED;
  }
  const int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], D = q->shape[3];
  const int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
  float *acc = malloc((size_t)(Dv > 0 ? Dv : 1) * sizeof(float));
  if (!acc) return ATTNCHECK_ERROR;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        float m = -INFINITY, l = 0;
        for (int64_t c = 0; c < Dv; ++c) acc[c] = 0;
        for (int64_t j = 0; j < Lk; ++j) {
          if (!visible(p, i, j, Lq, Lk)) continue;
          float s = 0;
          for (int64_t c = 0; c < D; ++c) s += f16_at4(q, b, h, i, c) * f16_at4(k, b, hk, j, c);
          s *= (float)p->scale;
          if (s > m) {  /* a new maximum: rescale what the row has summed so far */
            const float correction = m == -INFINITY ? 0 : expf(m - s);
            l *= correction;
            for (int64_t c = 0; c < Dv; ++c) acc[c] *= correction;
            m = s;
          }
          const float pij = expf(s - m);
          l += pij;
          for (int64_t c = 0; c < Dv; ++c) acc[c] += pij * f16_at4(v, b, hk, j, c);
        }
        _Float16 *o = (_Float16 *)((char *)out->data + out->byte_offset) + b * stride(out, 0) + h * stride(out, 1) +
                      i * stride(out, 2);
        for (int64_t c = 0; c < Dv; ++c) o[c * stride(out, 3)] = (_Float16)(l > 0 ? acc[c] / l : 0.0f);
        if (lse) *at3(lse, b, h, i) = l > 0 ? m + logf(l) : -INFINITY;
      }
    }
  free(acc);
  return ATTNCHECK_OK;
}

/* Correct results, then one more element right after out's last one. */
FORWARD(write_past_end_forward) {
  const int r = naive_forward(p, q, k, v, out, lse);
  base(out)[last_offset(out) + 1] = 0.0f;
  return r;
}

/* Correct results, then two elements right before out's first one. */
FORWARD(write_before_start_forward) {
  const int r = naive_forward(p, q, k, v, out, lse);
  base(out)[-1] = 0.0f;
  base(out)[-2] = 0.0f;
  return r;
}

/* Reads v three elements past its last one. */
FORWARD(read_past_end_forward) {
  const int r = naive_forward(p, q, k, v, out, lse);
  volatile float x = base(v)[last_offset(v) + 3];
  (void)x;
  return r;
}

/* Correct results, then scribbles on input k at storage offset 17. */
FORWARD(write_input_forward) {
  const int r = naive_forward(p, q, k, v, out, lse);
  base(k)[17] = 42.0f;
  return r;
}

/* Returns OK without writing anything. */
FORWARD(no_write_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  return ATTNCHECK_OK;
}

/* Correct results plus a different perturbation on every call. */
FORWARD(nondeterministic_forward) {
  static int calls = 0;
  const int r = naive_forward(p, q, k, v, out, lse);
  *at4(out, 0, 0, 0, 0) += 0.001f * (float)++calls;
  return r;
}

FORWARD(nan_forward) {
  const int r = naive_forward(p, q, k, v, out, lse);
  for (int64_t b = 0; b < out->shape[0]; ++b)
    for (int64_t h = 0; h < out->shape[1]; ++h)
      for (int64_t i = 0; i < out->shape[2]; ++i)
        for (int64_t c = 0; c < out->shape[3]; ++c) *at4(out, b, h, i, c) = NAN;
  return r;
}

/* 64 GiB, every page touched, no check of malloc's result. */
FORWARD(huge_alloc_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  const size_t n = (size_t)64 << 30;
  volatile char *mem = malloc(n);
  for (size_t i = 0; i < n; i += 4096) mem[i] = 1;
  free((void *)mem);
  return ATTNCHECK_OK;
}

/* 16 MiB blocks, touched, until malloc fails (at most 2 GiB); then a polite error. */
FORWARD(alloc_loop_forward) {
  enum { kBlock = 16 << 20, kMaxBlocks = 128 };
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  void *blocks[kMaxBlocks];
  int n = 0;
  int failed = 0;
  while (n < kMaxBlocks) {
    void *b = malloc(kBlock);
    if (!b) {
      failed = 1;
      break;
    }
    memset(b, 1, kBlock);
    blocks[n++] = b;
  }
  while (n > 0) free(blocks[--n]);
  if (!failed) return ATTNCHECK_OK;
  g_error = "alloc_loop: out of memory";
  return ATTNCHECK_ERROR;
}

/* A correct forward, and a backward that writes its input dout. */
static int write_dout_backward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                               const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                               DLTensor *dk, DLTensor *dv) {
  const int r = naive_backward(p, q, k, v, out, lse, dout, dq, dk, dv);
  *at4(dout, 0, 0, 0, 1) = 0.0f;
  return r;
}

/* ---- correct results, but careless with the process: what the soak test (soak_test.cpp) throws at the sandbox ---- */

enum { kLeakedFds = 16, kChattyBytes = 48 * 1024, kTmpFileBytes = 1 << 16, kLeakedBytes = 1 << 20 };

FORWARD(leak_fds_forward) { /* opens descriptors it never closes */
  for (int i = 0; i < kLeakedFds; ++i) (void)open("/dev/null", O_RDONLY);
  return naive_forward(p, q, k, v, out, lse);
}

FORWARD(spawn_child_forward) { /* leaves a child that would sleep for an hour */
  if (fork() == 0) {
    sleep(3600);
    _exit(0);
  }
  return naive_forward(p, q, k, v, out, lse);
}

FORWARD(fill_tmp_forward) { /* writes a file into $TMPDIR and keeps it */
  const char *dir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/attncheck-soak-XXXXXX", dir && *dir ? dir : "/tmp");
  const int fd = mkstemp(path);
  if (fd >= 0) {
    static char block[kTmpFileBytes];
    (void)!write(fd, block, sizeof block);
    close(fd);
  }
  return naive_forward(p, q, k, v, out, lse);
}

FORWARD(chatty_forward) { /* writes to stdout and stderr */
  static char text[kChattyBytes];
  memset(text, 'x', sizeof text - 1);
  fputs(text, stdout);
  fputs(text, stderr);
  fflush(stdout);
  return naive_forward(p, q, k, v, out, lse);
}

/* Reserves 64 GiB of address space it never writes (PROT_NONE, as CUDA builds of frameworks do), then computes:
 * no memory, so the memory limit must not see it. */
FORWARD(reserve_address_space_forward) {
  const size_t n = (size_t)64 << 30;
  void *reserved = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) {
    g_error = "reserve_address_space: mmap of 64 GiB failed";
    return ATTNCHECK_ERROR;
  }
  const int status = naive_forward(p, q, k, v, out, lse);
  munmap(reserved, n);
  return status;
}

FORWARD(leak_memory_forward) { /* allocates and never frees */
  char *volatile leak = malloc(kLeakedBytes);
  if (leak) memset(leak, 1, kLeakedBytes);
  return naive_forward(p, q, k, v, out, lse);
}

/* ---- hostile: what the containment tests (containment_test.cpp, cli_containment_test.cpp) try against the gate ---- */

/* Tries what would let a kernel change the gate (the server's parent): opening its memory for writing, and signalling
 * it (signal 0, which only asks for permission). Always fails, its message saying what was allowed:
 * "poke_gate: mem=denied signal=allowed". */
FORWARD(poke_gate_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  static char message[128];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
  const int fd = open(path, O_RDWR);
  if (fd >= 0) close(fd);
  const int signalled = kill(getppid(), 0) == 0;
  snprintf(message, sizeof message, "poke_gate: mem=%s signal=%s", fd >= 0 ? "allowed" : "denied",
           signalled ? "allowed" : "denied");
  g_error = message;
  return ATTNCHECK_ERROR;
}

enum { kForgeIntervalUs = 2000, kForgeSeconds = 60 };

/* Leaves a daemon outside its process group (a double fork and setsid) that keeps writing a forged passing report
 * into $ATTNCHECK_TEST_FORGE_DIR (report.json, summary.md, junit.xml) for a minute, its pid in forger.pid beside
 * them; the call returns once the daemon has left its process group, with an output of zeros, which fails. */
FORWARD(forge_report_forward) {
  static int started = 0;
  const char *dir = getenv("ATTNCHECK_TEST_FORGE_DIR");
  int ready[2];
  if (dir && !started && pipe(ready) == 0) {
    started = 1;
    const pid_t middle = fork();
    if (middle == 0) {
      close(ready[0]);
      setsid();
      if (fork() == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/forger.pid", dir);
        FILE *f = fopen(path, "w");
        if (f) fprintf(f, "%d\n", (int)getpid()), fclose(f);
        (void)!write(ready[1], "", 1);  /* out of the group: the call may return */
        close(ready[1]);
        static const char *const kFiles[] = {"report.json", "summary.md", "junit.xml"};
        for (long i = 0; i < kForgeSeconds * 1000000L / kForgeIntervalUs; ++i) {
          for (int n = 0; n < 3; ++n) {
            snprintf(path, sizeof path, "%s/%s", dir, kFiles[n]);
            FILE *r = fopen(path, "w");
            if (r) fputs("forged: every property passed\n", r), fclose(r);
          }
          usleep(kForgeIntervalUs);
        }
      }
      _exit(0);
    }
    close(ready[1]);
    char byte;
    (void)!read(ready[0], &byte, 1);  /* until the daemon has left the group (or its side is gone) */
    close(ready[0]);
    if (middle > 0) waitpid(middle, NULL, 0);
  }
  const int r = naive_forward(p, q, k, v, out, lse);
  for (int64_t b = 0; b < out->shape[0]; ++b)
    for (int64_t h = 0; h < out->shape[1]; ++h)
      for (int64_t i = 0; i < out->shape[2]; ++i)
        for (int64_t c = 0; c < out->shape[3]; ++c) *at4(out, b, h, i, c) = 0.0f;
  return r;
}

/* Tries to change $ATTNCHECK_TEST_FORGE_DIR (a report directory holding report.json) and to write beside it (into its
 * sibling directory elsewhere/, which must exist) and into $TMPDIR. Always fails, its message saying what was allowed:
 * "touch_reports: write=denied create=denied rename=denied remove=denied sibling=allowed tmpdir=allowed" — of its
 * first call in the process (a later call would find report.json removed). */
static const char *allowed(int ok) { return ok ? "allowed" : "denied"; }
FORWARD(touch_reports_forward) {
  (void)p, (void)q, (void)k, (void)v, (void)out, (void)lse;
  static char message[256];
  g_error = message;
  if (message[0]) return ATTNCHECK_ERROR;
  const char *dir = getenv("ATTNCHECK_TEST_FORGE_DIR"), *tmp = getenv("TMPDIR");
  if (!dir || !tmp) {
    g_error = "touch_reports: set ATTNCHECK_TEST_FORGE_DIR";
    return ATTNCHECK_ERROR;
  }
  char report[4096], made[4096], moved[4096], sibling[4096], scratch[4096];
  snprintf(report, sizeof report, "%s/report.json", dir);
  snprintf(made, sizeof made, "%s/planted.json", dir);
  snprintf(moved, sizeof moved, "%s/moved.json", dir);
  snprintf(sibling, sizeof sibling, "%s/../elsewhere/kernel-was-here", dir);
  snprintf(scratch, sizeof scratch, "%s/touch-reports-scratch", tmp);
  int fd = open(report, O_WRONLY);
  const int wrote = fd >= 0;
  if (fd >= 0) close(fd);
  fd = open(made, O_WRONLY | O_CREAT, 0644);
  const int created = fd >= 0;
  if (fd >= 0) close(fd);
  fd = open(scratch, O_WRONLY | O_CREAT, 0644);
  const int in_tmp = fd >= 0;
  if (fd >= 0) close(fd);
  const int renamed = rename(scratch, moved) == 0;
  const int removed = unlink(report) == 0;
  fd = open(sibling, O_WRONLY | O_CREAT, 0644);
  const int beside = fd >= 0;
  if (fd >= 0) close(fd);
  snprintf(message, sizeof message, "touch_reports: write=%s create=%s rename=%s remove=%s sibling=%s tmpdir=%s",
           allowed(wrote), allowed(created), allowed(renamed), allowed(removed), allowed(beside), allowed(in_tmp));
  return ATTNCHECK_ERROR;
}

static const attncheck_kernel kKernels[] = {
    {ATTNCHECK_ABI_VERSION, "naive", naive_forward, naive_backward, last_error},
    {ATTNCHECK_ABI_VERSION, "fails", fails_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "segfault", segfault_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "abort", abort_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "hang", hang_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "hang_above_100_keys", hang_above_100_keys_forward, hang_above_100_keys_backward,
     last_error},
    {ATTNCHECK_ABI_VERSION, "slow_flash_f16", slow_flash_f16_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "exit", exit_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "write_past_end", write_past_end_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "write_before_start", write_before_start_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "read_past_end", read_past_end_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "write_input", write_input_forward, write_dout_backward, last_error},
    {ATTNCHECK_ABI_VERSION, "no_write", no_write_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "nondeterministic", nondeterministic_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "nan", nan_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "huge_alloc", huge_alloc_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "alloc_loop", alloc_loop_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "reserve_address_space", reserve_address_space_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "leak_fds", leak_fds_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "spawn_child", spawn_child_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "fill_tmp", fill_tmp_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "chatty", chatty_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "leak_memory", leak_memory_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "poke_gate", poke_gate_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "forge_report", forge_report_forward, NULL, last_error},
    {ATTNCHECK_ABI_VERSION, "touch_reports", touch_reports_forward, NULL, last_error},
};

const attncheck_kernel *attncheck_kernels(int32_t *count) {
  *count = (int32_t)(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}
