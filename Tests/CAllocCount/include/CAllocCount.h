// Per-thread heap allocation counter for tests. alloc_count.c replaces the C allocator in the test executable
// (malloc and friends forward to glibc's __libc_* entry points) and counts each allocating call on the calling
// thread. Linked into ProxyTests only: never into the formwall executable.
#ifndef FORMWALL_CALLOCCOUNT_H
#define FORMWALL_CALLOCCOUNT_H

#include <stdint.h>

/// Allocating calls (malloc, calloc, growing realloc, the memalign family) made so far by this thread.
uint64_t fw_alloc_count_thread(void);

/// Bytes asked for by those calls (the requested sizes, not the allocator's rounding).
uint64_t fw_alloc_bytes_thread(void);

/// 1 if the replacement allocator is the one the process really uses: an allocation made inside libc
/// (strdup calls malloc through libc's own symbol lookup) reached it. 0 if the counter would count nothing.
int fw_alloc_counting_active(void);

#endif
