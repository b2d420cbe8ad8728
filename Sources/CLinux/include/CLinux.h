// Linux system interfaces that Swift's Glibc module does not import:
// epoll, eventfd, timerfd, signalfd, and socket option constants.
#ifndef FORMWALL_CLINUX_H
#define FORMWALL_CLINUX_H

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/types.h>
#include <sys/syscall.h>

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

/// Each of the eight bytes of `w` ASCII-lowercased at once: a byte in A-Z (its high bit clear) gains 0x20, every
/// other byte, non-ASCII included, is unchanged. Per byte, the low seven bits plus 0x3F reach 0x80 from 'A'
/// (0x41) up and plus 0x25 from '[' (0x5B) up, never carrying into the next byte. (HTTP1's `lowercased(word:)`.)
static inline uint64_t cl_lower_word(uint64_t w) {
    const uint64_t low7 = w & 0x7F7F7F7F7F7F7F7FULL;
    const uint64_t upper = (low7 + 0x3F3F3F3F3F3F3F3FULL) & ~(low7 + 0x2525252525252525ULL) & ~w
                           & 0x8080808080808080ULL;
    return w | (upper >> 2);
}

/// Whether the `n` bytes at `text` equal the `n` bytes at `lower` (lowercase ASCII) when A-Z in `text` are
/// lowercased; other bytes, non-ASCII ones too, compare as they are. Eight bytes at a time (`cl_lower_word`).
static inline int cl_equals_lower(const void *text, const void *lower, size_t n) {
    const unsigned char *p = (const unsigned char *)text, *q = (const unsigned char *)lower;
    while (n >= 8) {
        uint64_t w, l;
        memcpy(&w, p, 8);
        memcpy(&l, q, 8);
        if (cl_lower_word(w) != l) return 0;
        p += 8; q += 8; n -= 8;
    }
    while (n > 0) {
        unsigned c = *p++;
        if (c - 'A' < 26u) c |= 0x20;
        if (c != *q++) return 0;
        n--;
    }
    return 1;
}

/// The first occurrence of `needle` in `haystack`, like memmem, for the multipart delimiter: an AVX2 filter on the
/// needle's first and last bytes (64 positions per step, then 32) and a memcmp of the middle only where both
/// match; the fewer than 32 positions left after that by the same test, one position at a time. glibc's memmem
/// for short inputs, needles under 2 bytes and CPUs without AVX2.
void *cl_find_delimiter(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len);

/// The first `<` in the `len` bytes at `haystack` that may open a form `MarkupScanner` matches: followed by `?`,
/// `%`, `!` or (either case) `j c s h b i o e`, or the last byte. An AVX2 loop tests 64 positions per step for `<`
/// and looks at the byte after a `<` only when there is one; memchr without AVX2 and for the tail. NULL: none.
void *cl_find_markup_open(const void *haystack, size_t len);

/// Whether every one of the `n` bytes at `p` is an RFC 2046 bchar (DIGIT / ALPHA / `'()+_,-./:=?` and space):
/// one table load per byte.
int cl_all_bchars(const void *p, size_t n);

/// The length of the run of RFC 9110 tchar bytes at the start of `p` (at most `n`).
size_t cl_tchar_span(const void *p, size_t n);

/// `cl_tchar_span` without the uppercase letters.
size_t cl_lower_tchar_span(const void *p, size_t n);

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

// ---- Reactor helpers -------------------------------------------------------------------------------------------

/// Creates a close-on-exec epoll instance.
static inline int cl_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// Adds, modifies or deletes an epoll registration; `op` is one of the cl_epoll_ctl_* values.
static inline int cl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}
static inline int cl_epoll_ctl_add(void) { return EPOLL_CTL_ADD; }
static inline int cl_epoll_ctl_mod(void) { return EPOLL_CTL_MOD; }
static inline int cl_epoll_ctl_del(void) { return EPOLL_CTL_DEL; }

/// Waits for events and unpacks them into two parallel arrays, so Swift never touches the packed
/// `struct epoll_event` layout. `max` is clamped to 256. Returns the count or -1 with errno set.
/// Through `syscall(2)`, as the socket calls below (see `cl_recv`): `epoll_pwait` with no signal mask, which is
/// `epoll_wait` and, unlike it, exists on every Linux architecture (aarch64 has no `epoll_wait` system call).
static inline int cl_epoll_wait(int epfd, uint64_t *datas, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) { max = 256; }
    int n = (int)syscall(SYS_epoll_pwait, epfd, evs, max, timeout_ms, (const sigset_t *)0, (size_t)0);
    for (int i = 0; i < n; i++) {
        datas[i] = evs[i].data.u64;
        events[i] = evs[i].events;
    }
    return n;
}

/// Creates a non-blocking, close-on-exec eventfd counter starting at zero.
static inline int cl_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/// Creates a non-blocking, close-on-exec CLOCK_MONOTONIC timerfd.
static inline int cl_timerfd_create(void) {
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

/// Arms `fd` to fire once at the absolute CLOCK_MONOTONIC time `deadline_ns`; 0 disarms it.
static inline int cl_timerfd_set_absolute(int fd, uint64_t deadline_ns) {
    struct itimerspec spec;
    spec.it_interval.tv_sec = 0;
    spec.it_interval.tv_nsec = 0;
    spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

/// Reads CLOCK_MONOTONIC in nanoseconds.
static inline uint64_t cl_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/// Blocks `signals` for this thread and points `fd` (an existing signalfd, or -1 for a new one)
/// at exactly that set. Returns the signalfd or -1 with errno set.
int cl_signalfd_update(int fd, const int *signals, int count);

/// Accepts a connection as non-blocking and close-on-exec. Returns the fd or -1 with errno set.
int cl_accept(int fd, struct sockaddr *addr, socklen_t *len);

/// Opens a non-blocking, close-on-exec TCP socket for `family`.
static inline int cl_tcp_socket(int family) {
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
}

/// Starts a non-blocking connect to the AF_UNIX stream socket at `path` (close-on-exec). Returns the fd, or -1
/// with errno set (ENAMETOOLONG for a path that does not fit sun_path). A connect still in progress returns the
/// fd with errno EINPROGRESS or EAGAIN left for the caller to check through *in_progress.
int cl_unix_connect(const char *path, int *in_progress);

/// Creates a non-blocking, close-on-exec pipe.
int cl_pipe(int fds[2]);

/// Names the calling thread (truncated to 15 bytes) for ps/top/gdb.
int cl_set_thread_name(const char *name);

/// Sets an int socket option; returns 0 or -1 with errno set.
static inline int cl_setsockopt_int(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

/// Reads an int socket option into `*out`; returns 0 or -1 with errno set.
static inline int cl_getsockopt_int(int fd, int level, int name, int *out) {
    socklen_t len = sizeof *out;
    return getsockopt(fd, level, name, out, &len);
}

// The socket calls on the event loops' hot path go through `syscall(2)`, not glibc's wrappers. `recv`, `send`,
// `sendmsg` and `epoll_wait` are thread cancellation points: in a process with more than one thread glibc wraps each
// call in `__pthread_enable_asynccancel` and `__pthread_disable_asynccancel`, two atomic read-modify-writes of the
// thread's cancel state (about 0.1 us per proxied request in a sampled profile). Formwall never cancels a thread,
// so the plain system call does the same work. Each returns what the wrapper returns: the count, or -1 with errno.

/// Reads up to `len` bytes from a socket (`recv` with no flags).
static inline ssize_t cl_recv(int fd, void *buf, size_t len) {
    return (ssize_t)syscall(SYS_recvfrom, fd, buf, len, 0, (struct sockaddr *)0, (socklen_t *)0);
}

/// Sends without raising SIGPIPE when the peer has gone away.
static inline ssize_t cl_send(int fd, const void *buf, size_t len) {
    return (ssize_t)syscall(SYS_sendto, fd, buf, len, MSG_NOSIGNAL, (const struct sockaddr *)0, (socklen_t)0);
}

/// Gathers up to `count` iovecs without raising SIGPIPE.
static inline ssize_t cl_sendmsg_iov(int fd, const struct iovec *iov, int count) {
    struct msghdr msg = {0};
    msg.msg_iov = (struct iovec *)iov;
    msg.msg_iovlen = (size_t)count;
    return (ssize_t)syscall(SYS_sendmsg, fd, &msg, MSG_NOSIGNAL);
}

static inline int cl_sol_socket(void) { return SOL_SOCKET; }
static inline int cl_so_reuseaddr(void) { return SO_REUSEADDR; }
static inline int cl_so_type(void) { return SO_TYPE; }
static inline int cl_sock_stream(void) { return SOCK_STREAM; }
static inline int cl_so_error(void) { return SO_ERROR; }
static inline int cl_so_sndbuf(void) { return SO_SNDBUF; }
static inline int cl_so_rcvbuf(void) { return SO_RCVBUF; }
static inline int cl_ipproto_tcp(void) { return IPPROTO_TCP; }
static inline int cl_ipproto_ipv6(void) { return IPPROTO_IPV6; }
static inline int cl_ipv6_v6only(void) { return IPV6_V6ONLY; }
static inline int cl_tcp_nodelay(void) { return TCP_NODELAY; }
static inline int cl_shut_wr(void) { return SHUT_WR; }
static inline int cl_af_inet(void) { return AF_INET; }
static inline int cl_af_inet6(void) { return AF_INET6; }

// ---- Process supervision -----------------------------------------------------------------------------------------

/// Starts `path` with `argv` and `envp` (NULL-terminated) through posix_spawn, which is safe in a multithreaded
/// process. In the child, the `count` signals in `blocked` stay blocked (a signal sent before the program watches
/// it stays pending instead of killing it), every other signal is unblocked, and every signal's disposition is
/// reset to the default. Returns 0 and stores the pid, or an errno value.
int cl_spawn(const char *path, char *const argv[], char *const envp[], const int *blocked, int count, pid_t *pid);

/// Reaps one exited child without blocking. Returns its pid (filling `exit_status` with the exit code or -1, and
/// `term_signal` with the killing signal or 0), 0 when no child has exited, or -1 with errno set (ECHILD: none).
int cl_reap_child(int *exit_status, int *term_signal);

/// Sets or clears FD_CLOEXEC on `fd`; returns 0 or -1 with errno set.
int cl_set_cloexec(int fd, int on);

/// Asks the kernel to send `signal` to this process when its parent exits; returns 0 or -1 with errno set.
int cl_set_parent_death_signal(int signal);


/// The abbreviated name of a signal ("KILL" for SIGKILL), or NULL when it has none.
const char *cl_signal_abbreviation(int signal);

/// A file in `directory` that never has a name (O_TMPFILE), read-write, close-on-exec, mode 0600; -1 with errno
/// set when the file system cannot do that (the caller then falls back to a named file it unlinks).
int cl_open_tmpfile(const char *directory);

/// mkostemp with O_CLOEXEC: a named 0600 file, close-on-exec from the start.
int cl_mkostemp_cloexec(char *template_path);

/// Returns freed heap memory to the kernel (glibc `malloc_trim(0)`); 1 if some was released.
static inline int cl_malloc_trim(void) { return malloc_trim(0); }

// ---- The supervisor's channels -----------------------------------------------------------------------------------

/// A connected pair of AF_UNIX SOCK_SEQPACKET sockets (message boundaries kept, end of file when a side closes),
/// both close-on-exec; `fds[0]` non-blocking. Returns 0 or -1 with errno set.
int cl_seqpacket_pair(int fds[2]);

/// Sends one message of `length` bytes on `fd`, with descriptor `attached` (SCM_RIGHTS) unless it is -1. Returns
/// the bytes sent or -1 with errno set.
ssize_t cl_send_message(int fd, const void *bytes, size_t length, int attached);

/// Receives one message into `buffer` without blocking; a descriptor sent with it is stored in `attached`
/// (close-on-exec), else -1. Returns its length, 0 at end of file, or -1 with errno set (EAGAIN: none waiting).
/// A message longer than `capacity` is cut to it.
ssize_t cl_receive_message(int fd, void *buffer, size_t capacity, int *attached);

/// An anonymous memory file (memfd_create), close-on-exec; -1 with errno set.
int cl_memory_file(const char *name);

/// Sends `length` bytes as one datagram to the AF_UNIX socket at `path` (a leading '@' names the abstract
/// namespace), from a fresh socket: the systemd notification protocol. Returns 0 or -1 with errno set.
int cl_unix_datagram_send(const char *path, const void *bytes, size_t length);

/// Stops a listening socket accepting: connections in its queue are reset and new ones refused, while the
/// socket keeps its address; listen(2) on it again resumes. Returns 0 or -1 with errno set.
static inline int cl_stop_listening(int fd) { return shutdown(fd, SHUT_RD); }

#endif
