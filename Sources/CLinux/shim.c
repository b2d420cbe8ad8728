#define _GNU_SOURCE 1
#include "CLinux.h"

#include <spawn.h>
#include <stddef.h>
#include <sys/un.h>
#include <sys/prctl.h>
#include <sys/wait.h>

int cl_block_signals(const int *signals, int count, sigset_t *out) {
    sigemptyset(out);
    for (int i = 0; i < count; i++) {
        sigaddset(out, signals[i]);
    }
    return pthread_sigmask(SIG_BLOCK, out, NULL) == 0 ? 0 : -1;
}

int cl_signalfd(const sigset_t *set) {
    return signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int cl_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n == (ssize_t)sizeof info) {
        return (int)info.ssi_signo;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    return -1;
}

int cl_signalfd_update(int fd, const int *signals, int count) {
    sigset_t set;
    if (cl_block_signals(signals, count, &set) != 0) {
        return -1;
    }
    return signalfd(fd, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int cl_accept(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int cl_pipe(int fds[2]) {
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
}

int cl_set_thread_name(const char *name) {
    char truncated[16];
    size_t i = 0;
    for (; i < 15 && name[i] != 0; i++) {
        truncated[i] = name[i];
    }
    truncated[i] = 0;
    return pthread_setname_np(pthread_self(), truncated);
}

int cl_spawn(const char *path, char *const argv[], char *const envp[], const int *blocked, int count, pid_t *pid) {
    posix_spawnattr_t attr;
    int rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        return rc;
    }
    sigset_t mask;
    sigemptyset(&mask);
    for (int i = 0; i < count; i++) {
        sigaddset(&mask, blocked[i]);
    }
    sigset_t defaults;
    sigfillset(&defaults);
    sigdelset(&defaults, SIGKILL);
    sigdelset(&defaults, SIGSTOP);
    rc = posix_spawnattr_setsigmask(&attr, &mask);
    if (rc == 0) {
        rc = posix_spawnattr_setsigdefault(&attr, &defaults);
    }
    if (rc == 0) {
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    }
    if (rc == 0) {
        rc = posix_spawn(pid, path, NULL, &attr, argv, envp);
    }
    posix_spawnattr_destroy(&attr);
    return rc;
}

int cl_reap_child(int *exit_status, int *term_signal) {
    int status = 0;
    pid_t pid;
    do {
        pid = waitpid(-1, &status, WNOHANG);
    } while (pid < 0 && errno == EINTR);
    if (pid <= 0) {
        return (int)pid;
    }
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    *term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return (int)pid;
}

int cl_set_cloexec(int fd, int on) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) {
        return -1;
    }
    flags = on ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC);
    return fcntl(fd, F_SETFD, flags);
}

int cl_set_parent_death_signal(int signal) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0, 0, 0);
}

const char *cl_signal_abbreviation(int signal) {
    return sigabbrev_np(signal);
}

int cl_open_tmpfile(const char *directory) {
#ifdef O_TMPFILE
    return open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    errno = EOPNOTSUPP;
    return -1;
#endif
}

int cl_mkostemp_cloexec(char *template_path) {
    return mkostemp(template_path, O_CLOEXEC);
}

int cl_seqpacket_pair(int fds[2]) {
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    int flags = fcntl(fds[0], F_GETFL);
    if (flags < 0 || fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) != 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return -1;
    }
    return 0;
}

ssize_t cl_send_message(int fd, const void *bytes, size_t length, int attached) {
    struct iovec iov = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    if (attached >= 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof control.buffer;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &attached, sizeof(int));
    }
    ssize_t sent;
    do {
        sent = sendmsg(fd, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent;
}

ssize_t cl_receive_message(int fd, void *buffer, size_t capacity, int *attached) {
    *attached = -1;
    struct iovec iov = {.iov_base = buffer, .iov_len = capacity};
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof control.buffer;
    ssize_t received;
    do {
        received = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return -1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int descriptor;
            memcpy(&descriptor, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            // The first is kept; any other is closed, so a confused sender cannot leak descriptors here.
            if (*attached < 0) {
                *attached = descriptor;
            } else {
                close(descriptor);
            }
        }
    }
    return received;
}

int cl_memory_file(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}

/* Fills `address` with the socket path `path`; 0 on success, -1 (errno set to `error`) when it is empty or does
 * not fit. */
static int unix_address(const char *path, struct sockaddr_un *address, int error) {
    size_t size = strlen(path);
    if (size == 0 || size >= sizeof address->sun_path) {
        errno = error;
        return -1;
    }
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path, path, size);
    return 0;
}

int cl_unix_datagram_send(const char *path, const void *bytes, size_t length) {
    struct sockaddr_un address;
    if (unix_address(path, &address, EINVAL) != 0) return -1;
    size_t size = strlen(path);
    if (path[0] == '@') address.sun_path[0] = 0;
    socklen_t addressLength = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + size + (path[0] == '@' ? 0 : 1));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t sent;
    do {
        sent = sendto(fd, bytes, length, MSG_NOSIGNAL, (struct sockaddr *)&address, addressLength);
    } while (sent < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)length ? 0 : -1;
}

int cl_unix_connect(const char *path, int *in_progress) {
    struct sockaddr_un address;
    *in_progress = 0;
    if (unix_address(path, &address, ENAMETOOLONG) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) return fd;
    if (errno == EINPROGRESS || errno == EAGAIN) {
        *in_progress = 1;
        return fd;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

#if defined(__x86_64__)
#include <immintrin.h>

// Muła's "generic SIMD" substring search: a position can start the needle only if its byte equals the needle's
// first byte and the byte n-1 further equals its last; both compares run on a whole vector of positions, and
// only the positions passing both are checked with memcmp. On data that rarely holds the delimiter's first and
// last bytes n-1 apart (file contents), that check almost never runs.
__attribute__((target("avx2")))
static const unsigned char *find_avx2(const unsigned char *h, size_t len, const unsigned char *n, size_t m,
                                      size_t *resume) {
    const __m256i first = _mm256_set1_epi8((char)n[0]);
    const __m256i last = _mm256_set1_epi8((char)n[m - 1]);
    size_t i = 0;
    // 64 positions per step: the two halves' candidates are tested together (one branch), and only a step
    // with a candidate builds the 64-bit mask. About twice the 32-position loop's speed on data in cache.
    for (; i + m + 63 <= len; i += 64) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(h + i));
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(h + i + m - 1));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(h + i + 32));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(h + i + 32 + m - 1));
        __m256i e0 = _mm256_and_si256(_mm256_cmpeq_epi8(a0, first), _mm256_cmpeq_epi8(b0, last));
        __m256i e1 = _mm256_and_si256(_mm256_cmpeq_epi8(a1, first), _mm256_cmpeq_epi8(b1, last));
        __m256i any = _mm256_or_si256(e0, e1);
        if (_mm256_testz_si256(any, any)) continue;
        unsigned long long mask = (unsigned long long)(unsigned)_mm256_movemask_epi8(e0)
                                | ((unsigned long long)(unsigned)_mm256_movemask_epi8(e1) << 32);
        while (mask != 0) {
            unsigned bit = (unsigned)__builtin_ctzll(mask);
            if (memcmp(h + i + bit + 1, n + 1, m - 2) == 0) return h + i + bit;
            mask &= mask - 1;
        }
    }
    for (; i + m + 31 <= len; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(h + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(h + i + m - 1));
        unsigned mask = (unsigned)_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(a, first),
                                                                        _mm256_cmpeq_epi8(b, last)));
        while (mask != 0) {
            unsigned bit = (unsigned)__builtin_ctz(mask);
            if (memcmp(h + i + bit + 1, n + 1, m - 2) == 0) return h + i + bit;
            mask &= mask - 1;
        }
    }
    *resume = i;
    return NULL;
}
#endif

void *cl_find_delimiter(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len) {
    const unsigned char *h = haystack;
    size_t start = 0;
#if defined(__x86_64__)
    if (needle_len >= 2 && haystack_len >= needle_len + 31 && __builtin_cpu_supports("avx2")) {
        const unsigned char *found = find_avx2(h, haystack_len, needle, needle_len, &start);
        if (found != NULL) return (void *)found;
    }
#endif
    // Every position before `start` was ruled out; the first occurrence, if any, starts at or after it. After the
    // SIMD loop, or in a haystack too short for it (the bound above), fewer than 32 positions are left: a scalar
    // first/last-byte check with memcmp costs less than memmem's set-up (about 450 instructions, once per request
    // in the proxy: the closing delimiter's short search). Without AVX2 a long haystack is searched by memmem.
    if (needle_len >= 2 && (start > 0 || haystack_len < needle_len + 31)) {
        const unsigned char *n = needle;
        for (size_t i = start; i + needle_len <= haystack_len; i++) {
            if (h[i] == n[0] && h[i + needle_len - 1] == n[needle_len - 1]
                && memcmp(h + i + 1, n + 1, needle_len - 2) == 0) {
                return (void *)(h + i);
            }
        }
        return NULL;
    }
    return memmem(h + start, haystack_len - start, needle, needle_len);
}

/* Bytes that may follow `<` in a form MarkupScanner matches: ? % ! and, either case, the first letters of `jsp:`,
   `cf` and the HTML tags it knows (script html body iframe img object embed svg). */
static const unsigned char markup_follow[256] = {
    ['?'] = 1, ['%'] = 1, ['!'] = 1,
    ['j'] = 1, ['c'] = 1, ['s'] = 1, ['h'] = 1, ['b'] = 1, ['i'] = 1, ['o'] = 1, ['e'] = 1,
    ['J'] = 1, ['C'] = 1, ['S'] = 1, ['H'] = 1, ['B'] = 1, ['I'] = 1, ['O'] = 1, ['E'] = 1,
};

#if defined(__x86_64__)
// 64 positions per step, no branch per `<`: a position is a candidate if its byte is `<` and the next byte is in
// `markup_follow`, tested for 32 bytes at once by two 16-entry nibble tables (pshufb): `follow_high[b >> 4]` has
// a bit for each group of the set with that high nibble, `follow_low[b & 15]` the groups holding that low nibble,
// and a byte is in the set exactly when the two share a bit. Groups: 1 = 0x2_ {1 !, 5 %}; 2 = 0x3_ {F ?};
// 4 = 0x4_/0x6_ {2 b, 3 c, 5 e, 8 h, 9 i, A j, F o}; 8 = 0x5_/0x7_ {3 s}.
__attribute__((target("avx2")))
static inline __m256i markup_candidates(const unsigned char *p) {
    const __m256i high = _mm256_setr_epi8(0, 0, 1, 2, 4, 8, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0, 0, 1, 2, 4, 8, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i low = _mm256_setr_epi8(0, 1, 4, 12, 0, 5, 0, 0, 4, 4, 4, 0, 0, 0, 0, 6,
                                         0, 1, 4, 12, 0, 5, 0, 0, 4, 4, 4, 0, 0, 0, 0, 6);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    __m256i next = _mm256_loadu_si256((const __m256i *)(p + 1));
    __m256i groups = _mm256_and_si256(
        _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16(next, 4), nibble)),
        _mm256_shuffle_epi8(low, _mm256_and_si256(next, nibble)));
    __m256i open = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8('<'));
    return _mm256_andnot_si256(_mm256_cmpeq_epi8(groups, _mm256_setzero_si256()), open);
}

__attribute__((target("avx2")))
static const unsigned char *markup_open_avx2(const unsigned char *p, size_t len, size_t *resume) {
    size_t i = 0;
    // Reads up to p[i + 64]: the byte after the step's last position.
    for (; i + 65 <= len; i += 64) {
        __m256i c0 = markup_candidates(p + i);
        __m256i c1 = markup_candidates(p + i + 32);
        __m256i any = _mm256_or_si256(c0, c1);
        if (_mm256_testz_si256(any, any)) continue;
        unsigned long long mask = (unsigned long long)(unsigned)_mm256_movemask_epi8(c0)
                                | ((unsigned long long)(unsigned)_mm256_movemask_epi8(c1) << 32);
        return p + i + (unsigned)__builtin_ctzll(mask);
    }
    *resume = i;
    return NULL;
}
#endif

void *cl_find_markup_open(const void *haystack, size_t len) {
    const unsigned char *p = haystack;
    size_t i = 0;
#if defined(__x86_64__)
    if (len > 64 && __builtin_cpu_supports("avx2")) {
        const unsigned char *found = markup_open_avx2(p, len, &i);
        if (found != NULL) return (void *)found;
    }
#endif
    while (i < len) {
        const unsigned char *hit = memchr(p + i, '<', len - i);
        if (hit == NULL) return NULL;
        size_t at = (size_t)(hit - p);
        if (at + 1 >= len || markup_follow[p[at + 1]]) return (void *)hit;
        i = at + 1;
    }
    return NULL;
}

/* RFC 2046 §5.1.1 bchars: 1 for DIGIT, ALPHA, '()+_,-./:=? and space. */
static const unsigned char bchar_table[256] = {
    ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
    ['\''] = 1, ['('] = 1, [')'] = 1, ['+'] = 1, ['_'] = 1, [','] = 1, ['-'] = 1, ['.'] = 1, ['/'] = 1,
    [':'] = 1, ['='] = 1, ['?'] = 1, [' '] = 1,
};

int cl_all_bchars(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    unsigned all = 1;
    for (size_t i = 0; i < n; i++) all &= bchar_table[s[i]];
    return (int)all;
}

/* RFC 9110 tchar: ALPHA, DIGIT and !#$%&'*+-.^_`|~ (HTTPSyntaxTests checks cl_tchar_span against the grammar). */
static const unsigned char tchar_table[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
    ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1,
    ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
    ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

size_t cl_tchar_span(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i + 4 <= n) {
        if (!tchar_table[s[i]]) return i;
        if (!tchar_table[s[i + 1]]) return i + 1;
        if (!tchar_table[s[i + 2]]) return i + 2;
        if (!tchar_table[s[i + 3]]) return i + 3;
        i += 4;
    }
    while (i < n && tchar_table[s[i]]) i++;
    return i;
}

size_t cl_lower_tchar_span(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n && tchar_table[s[i]] && !(s[i] >= 'A' && s[i] <= 'Z')) i++;
    return i;
}
