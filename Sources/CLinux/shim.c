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
