// Counts heap allocations per thread by defining the allocator's symbols in the test executable. The dynamic
// linker binds every malloc call in the process (libc's own, libswiftCore's, Foundation's) to the first
// definition it finds, and the executable comes first once it exports them (the linker exports those a linked
// shared library refers to; Package.swift exports the rest by name). Each function forwards to glibc's real allocator through its __libc_* aliases and
// bumps a thread-local counter. No locks, no I/O and no allocation here: this code runs inside every malloc.
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "CAllocCount.h"

// glibc's allocator under names nobody else defines (exported by libc.so.6 since GLIBC_2.2.5).
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

// initial-exec: the executable's TLS sits in the static block, so reaching it never calls __tls_get_addr
// (which may allocate).
static __thread unsigned long count __attribute__((tls_model("initial-exec")));
static __thread unsigned long bytes __attribute__((tls_model("initial-exec")));

static inline void *counted(void *result, size_t size) {
    if (result != NULL) {
        count++;
        bytes += size;
    }
    return result;
}

void *malloc(size_t size) { return counted(__libc_malloc(size), size); }

// An overflowing n * size makes __libc_calloc fail (NULL), so the product is never counted then.
void *calloc(size_t n, size_t size) { return counted(__libc_calloc(n, size), n * size); }

void free(void *ptr) { __libc_free(ptr); }

// Counted when it allocates (ptr NULL) or grows past the block's usable size; shrinking or growing in place
// within the block is not an allocation.
void *realloc(void *ptr, size_t size) {
    size_t had = ptr == NULL ? 0 : malloc_usable_size(ptr);
    void *result = __libc_realloc(ptr, size);
    if (result != NULL && (ptr == NULL || size > had)) {
        count++;
        bytes += size;
    }
    return result;
}

void *memalign(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size), size); }

void *aligned_alloc(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size), size); }

void *valloc(size_t size) { return counted(__libc_valloc(size), size); }

void *pvalloc(size_t size) { return counted(__libc_pvalloc(size), size); }

// POSIX: the alignment must be a power of two and a multiple of sizeof(void *); errors are returned, errno
// is left alone, and *out is untouched on failure.
int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    int saved = errno;
    void *result = __libc_memalign(alignment, size);
    if (result == NULL) {
        errno = saved;
        return ENOMEM;
    }
    *out = result;
    count++;
    bytes += size;
    return 0;
}

uint64_t fw_alloc_count_thread(void) { return count; }

uint64_t fw_alloc_bytes_thread(void) { return bytes; }

int fw_alloc_counting_active(void) {
    // strdup is libc's: its malloc call goes through libc's PLT, so it lands here only if this file's malloc
    // is the process's malloc. (A malloc call from this file would bind here statically and prove nothing.)
    unsigned long before = count;
    char *volatile copy = strdup("x");
    unsigned long after = count;
    free(copy);
    return after > before ? 1 : 0;
}
