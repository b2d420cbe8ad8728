#define _GNU_SOURCE 1
#include "CLinux.h"

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
