/* A histogram of the large heap allocations a process makes, by power of two: malloc and posix_memalign
 * requests above 1032 bytes (glibc's per-thread cache serves smaller ones without its slower paths).
 *
 *     gcc -O2 -shared -fPIC -o /tmp/malloc_sizes.so bench/proxy/malloc_sizes.c -ldl
 *     LD_PRELOAD=/tmp/malloc_sizes.so MALLOC_SIZES_OUT=/tmp/sizes .build/release/formwall serve ...
 *
 * The counts are written to MALLOC_SIZES_OUT (default /tmp/malloc_sizes) every 1024 large allocations, as
 * `<=2^K:N` for requests of 2^(K-1)+1 to 2^K bytes. Divide by the requests served (wrk's count) for the rate
 * per request; docs/performance.md, ninth session, has the figures it gave. A measuring aid only: never linked
 * into Formwall. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static _Atomic unsigned long histogram[32];
static _Atomic unsigned long large;

static void dump(void) {
    char text[1024];
    int used = 0;
    for (int k = 0; k < 32; k++) {
        unsigned long n = histogram[k];
        if (n) used += snprintf(text + used, sizeof text - (size_t)used, "<=2^%d:%lu ", k, n);
    }
    text[used++] = '\n';
    const char *path = getenv("MALLOC_SIZES_OUT");
    int fd = open(path ? path : "/tmp/malloc_sizes", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        ssize_t ignored = write(fd, text, (size_t)used);
        (void)ignored;
        close(fd);
    }
}

static void count(size_t n) {
    if (n <= 1032) return;
    int k = 0;
    while ((1UL << k) < n && k < 31) k++;
    atomic_fetch_add(&histogram[k], 1);
    if ((atomic_fetch_add(&large, 1) & 1023) == 0) dump();
}

void *malloc(size_t n) {
    if (!real_malloc) real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    count(n);
    return real_malloc(n);
}

int posix_memalign(void **out, size_t alignment, size_t n) {
    if (!real_posix_memalign) real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    count(n);
    return real_posix_memalign(out, alignment, n);
}
