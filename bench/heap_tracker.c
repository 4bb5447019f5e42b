// Heap accounting for peak_extra_MB: this executable defines the allocator entry points, so the dynamic linker
// binds every malloc/free in the process (libstdc++'s operator new, libgomp, Eigen, the kernel plugin and glibc's
// own internal calls) to these. Each forwards to glibc's real allocator (__libc_*) and adds or subtracts the
// block's malloc_usable_size from a live counter; a peak counter follows the maximum. Written in C so that the
// definitions need no C++ exception specifications to match glibc's declarations.
#include "heap_tracker.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>

// glibc's exported implementations (GLIBC_2.2.5), the targets of the forwarding.
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

static _Atomic int64_t g_live;
static _Atomic int64_t g_peak;

static void raise_peak(int64_t now) {
  int64_t seen = atomic_load_explicit(&g_peak, memory_order_relaxed);
  while (now > seen &&
         !atomic_compare_exchange_weak_explicit(&g_peak, &seen, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void *tracked(void *p) {
  if (p) {
    const int64_t n = (int64_t)malloc_usable_size(p);
    raise_peak(atomic_fetch_add_explicit(&g_live, n, memory_order_relaxed) + n);
  }
  return p;
}

static void untrack(void *p) {
  if (p) atomic_fetch_sub_explicit(&g_live, (int64_t)malloc_usable_size(p), memory_order_relaxed);
}

int64_t attncheck_heap_live_bytes(void) { return atomic_load_explicit(&g_live, memory_order_relaxed); }
int64_t attncheck_heap_peak_bytes(void) { return atomic_load_explicit(&g_peak, memory_order_relaxed); }
void attncheck_heap_reset_peak(void) {
  atomic_store_explicit(&g_peak, atomic_load_explicit(&g_live, memory_order_relaxed), memory_order_relaxed);
}

void *malloc(size_t size) { return tracked(__libc_malloc(size)); }
void *calloc(size_t count, size_t size) { return tracked(__libc_calloc(count, size)); }
void *memalign(size_t alignment, size_t size) { return tracked(__libc_memalign(alignment, size)); }
void *aligned_alloc(size_t alignment, size_t size) { return tracked(__libc_memalign(alignment, size)); }
void *valloc(size_t size) { return tracked(__libc_valloc(size)); }
void *pvalloc(size_t size) { return tracked(__libc_pvalloc(size)); }

void free(void *ptr) {
  untrack(ptr);
  __libc_free(ptr);
}

void *realloc(void *ptr, size_t size) {
  // Account the old block as freed only once realloc succeeds: on failure it is left untouched.
  const int64_t old = ptr ? (int64_t)malloc_usable_size(ptr) : 0;
  void *q = __libc_realloc(ptr, size);
  if (q || (ptr && size == 0)) atomic_fetch_sub_explicit(&g_live, old, memory_order_relaxed);  // moved or freed
  return tracked(q);
}

// glibc's reallocarray calls its allocator internally, bypassing realloc above: route it through ours.
void *reallocarray(void *ptr, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(ptr, bytes);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  // The contract of posix_memalign: a power of two multiple of sizeof(void *), else EINVAL.
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void *p = tracked(__libc_memalign(alignment, size));
  if (!p && size != 0) return ENOMEM;
  *out = p;
  return 0;
}
