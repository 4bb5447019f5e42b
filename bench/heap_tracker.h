// Live/peak heap bytes of this process, measured by interposing the allocator (heap_tracker.c).
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Bytes currently allocated (sum of malloc_usable_size over live blocks).
int64_t attncheck_heap_live_bytes(void);
/// Highest live byte count since the last reset.
int64_t attncheck_heap_peak_bytes(void);
/// Sets the peak to the current live count, so that the next peak is the high-water mark from now on.
void attncheck_heap_reset_peak(void);

#ifdef __cplusplus
}
#endif
