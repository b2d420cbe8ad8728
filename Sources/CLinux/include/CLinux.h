// Linux system interfaces that Swift's Glibc module does not import:
// epoll, eventfd, timerfd, signalfd, and socket option constants.
#ifndef FORMWALL_CLINUX_H
#define FORMWALL_CLINUX_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>
#include <pthread.h>

/// Packs a registration generation and an fd into epoll's 64-bit user data.
static inline uint64_t cl_epoll_pack(uint32_t generation, int32_t fd) {
    return ((uint64_t)generation << 32) | (uint32_t)fd;
}

/// Builds a sigset holding the given signals and blocks them for this thread.
/// Returns 0 on success or -1 with errno set.
int cl_block_signals(const int *signals, int count, sigset_t *out);

/// Creates a non-blocking, close-on-exec signalfd for the given blocked set.
int cl_signalfd(const sigset_t *set);

/// Reads one signalfd record; returns the signal number, 0 on EAGAIN, -1 on error.
int cl_signalfd_read(int fd);

/// glibc's memmem, a GNU extension that Swift's Glibc module does not import (declared here rather than
/// defining _GNU_SOURCE, which would make this module's libc types differ from SwiftGlibc's).
extern void *memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len);

/// memmem under a name Swift can see.
static inline void *cl_memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len) {
    return memmem(haystack, haystack_len, needle, needle_len);
}

// Constants exposed as functions so Swift sees them as plain values.
static inline int cl_sock_nonblock(void) { return SOCK_NONBLOCK; }
static inline int cl_sock_cloexec(void) { return SOCK_CLOEXEC; }
static inline int cl_so_reuseport(void) { return SO_REUSEPORT; }
static inline uint32_t cl_epollin(void) { return EPOLLIN; }
static inline uint32_t cl_epollout(void) { return EPOLLOUT; }
static inline uint32_t cl_epollerr(void) { return EPOLLERR; }
static inline uint32_t cl_epollhup(void) { return EPOLLHUP; }
static inline uint32_t cl_epollrdhup(void) { return EPOLLRDHUP; }
static inline uint32_t cl_epollet(void) { return EPOLLET; }

#endif
