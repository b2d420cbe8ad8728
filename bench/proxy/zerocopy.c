/*
 * zerocopy: does MSG_ZEROCOPY help a relay on this machine's loopback?
 *
 * The proxy issue asks to try MSG_ZEROCOPY for the upstream writes of a large upload and to keep it only if it
 * helps. Formwall's upstream writes lend the client's input buffer to a gathering sendmsg; with MSG_ZEROCOPY the
 * kernel would pin those pages instead of copying them, and the buffer could be read into again only after the
 * completion notification. Before building that into the output queue, this program measures the pattern alone:
 *
 *   client --(plain send, 256 KiB)--> relay --(send, plain or MSG_ZEROCOPY)--> sink
 *
 * all three on 127.0.0.1, each its own process. The relay reads up to 512 KiB at a time into a ring of eight
 * 512 KiB buffers and sends each read on before the next; with MSG_ZEROCOPY it reuses a buffer only after the
 * notifications (recvmsg MSG_ERRQUEUE) have covered every send made from it (TCP completes in order, so one
 * watermark suffices). Rounds alternate the two modes; each round moves MIB MiB. Per round it prints the relay's
 * throughput, the CPU seconds of the three processes (getrusage / wait4) and, with MSG_ZEROCOPY, how many
 * notifications came and how many said SO_EE_CODE_ZEROCOPY_COPIED (the kernel copied after all); at the end,
 * the medians.
 *
 * Usage: gcc -O2 -Wall -o /tmp/zerocopy bench/proxy/zerocopy.c && /tmp/zerocopy [ROUNDS (6)] [MIB (2048)]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>  /* before linux/errqueue.h, which uses struct timespec */
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define RING 8
#define SLOT (512 * 1024)
#define CLIENT_WRITE (256 * 1024)
#define MAX_ROUNDS 64

struct result { double gbps, relay_cpu, client_cpu, sink_cpu; long notes, copied; };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double seconds(const struct rusage *u) {
    return u->ru_utime.tv_sec + u->ru_stime.tv_sec + (u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e6;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* A listening socket on 127.0.0.1 and an ephemeral port, written to *addr. */
static int listen_any(struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) || getsockname(fd, (struct sockaddr *)addr, &len) ||
        listen(fd, 1))
        die("listen");
    return fd;
}

/* Completion bookkeeping for the relay's zerocopy sends: sends [0, done) have completed. */
struct completions { unsigned issued, done; long notes, copied; };

static void reap(int fd, struct completions *c);

/* Sleeps until the error queue holds a notification (POLLERR), then reads it. */
static void wait_and_reap(int fd, struct completions *c) {
    struct pollfd p = {.fd = fd, .events = 0};
    poll(&p, 1, -1);
    reap(fd, c);
}

static void reap(int fd, struct completions *c) {
    char control[128];
    for (;;) {
        struct msghdr msg = {0};
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            struct sock_extended_err *e = (struct sock_extended_err *)CMSG_DATA(cm);
            if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
            c->notes++;
            if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED) c->copied++;
            if (e->ee_data + 1 > c->done) c->done = e->ee_data + 1;
        }
    }
}

static struct result one_round(int zerocopy, long long total) {
    struct sockaddr_in sink_addr, relay_addr;
    int sink_listener = listen_any(&sink_addr), relay_listener = listen_any(&relay_addr);
    pid_t sink = fork();
    if (sink == 0) {
        int fd = accept(sink_listener, NULL, NULL);
        char *buf = malloc(SLOT);
        while (recv(fd, buf, SLOT, 0) > 0) {}
        _exit(0);
    }
    pid_t client = fork();
    if (client == 0) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&relay_addr, sizeof relay_addr)) die("connect relay");
        char *buf = malloc(CLIENT_WRITE);
        memset(buf, 'x', CLIENT_WRITE);
        for (long long sent = 0; sent < total;) {
            long long left = total - sent;
            ssize_t n = send(fd, buf, left < CLIENT_WRITE ? (size_t)left : CLIENT_WRITE, 0);
            if (n <= 0) die("client send");
            sent += n;
        }
        _exit(0);
    }
    close(sink_listener);
    int in = accept(relay_listener, NULL, NULL);
    close(relay_listener);
    int out = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(out, (struct sockaddr *)&sink_addr, sizeof sink_addr)) die("connect sink");
    int one = 1;
    if (zerocopy && setsockopt(out, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) die("SO_ZEROCOPY");

    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    char *ring = aligned_alloc(4096, (size_t)RING * SLOT);
    unsigned last_send[RING] = {0};
    struct completions c = {0};
    long long moved = 0;
    double start = now();
    for (int k = 0;; k = (k + 1) % RING) {
        char *slot = ring + (size_t)k * SLOT;
        if (zerocopy) {
            reap(out, &c);
            while (c.done < last_send[k]) wait_and_reap(out, &c);  /* the slot's pages may still be in flight */
        }
        ssize_t r = recv(in, slot, SLOT, 0);
        if (r < 0) die("relay recv");
        if (r == 0) break;
        moved += r;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = send(out, slot + off, r - off, zerocopy ? MSG_ZEROCOPY : 0);
            if (w < 0) {
                if (errno == ENOBUFS) {  /* out of optmem: wait for a completion rather than spin */
                    if (c.done < c.issued) wait_and_reap(out, &c);
                    continue;
                }
                die("relay send");
            }
            if (zerocopy) c.issued++;
            off += w;
        }
        last_send[k] = c.issued;
    }
    shutdown(out, SHUT_WR);
    struct result res = {0};
    struct rusage child;
    int status;
    if (wait4(client, &status, 0, &child) < 0) die("wait client");
    res.client_cpu = seconds(&child);
    if (wait4(sink, &status, 0, &child) < 0) die("wait sink");
    res.sink_cpu = seconds(&child);
    double end = now();
    reap(out, &c);
    getrusage(RUSAGE_SELF, &after);
    res.gbps = moved / (end - start) / 1e9;
    res.relay_cpu = seconds(&after) - seconds(&before);
    res.notes = c.notes;
    res.copied = c.copied;
    if (moved != total) fprintf(stderr, "moved %lld of %lld bytes\n", moved, total);
    close(in);
    close(out);
    free(ring);
    return res;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(struct result *r, int n, size_t field) {
    double v[MAX_ROUNDS];
    for (int i = 0; i < n; i++) v[i] = *(double *)((char *)&r[i] + field);
    qsort(v, n, sizeof v[0], by_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    long long mib = argc > 2 ? atoll(argv[2]) : 2048;
    if (rounds < 1 || rounds > MAX_ROUNDS || mib < 1) {
        fprintf(stderr, "usage: zerocopy [ROUNDS 1-%d] [MIB]\n", MAX_ROUNDS);
        return 2;
    }
    struct result results[2][MAX_ROUNDS];
    const char *names[2] = {"plain", "zerocopy"};
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 2; i++) {
            int mode = r % 2 ? 1 - i : i;  /* alternate which mode goes first */
            struct result x = one_round(mode, mib << 20);
            results[mode][r] = x;
            printf("round %d %-8s %5.2f GB/s  CPU s relay %.3f client %.3f sink %.3f  notifications %ld copied %ld\n",
                   r + 1, names[mode], x.gbps, x.relay_cpu, x.client_cpu, x.sink_cpu, x.notes, x.copied);
            fflush(stdout);
        }
    }
    for (int mode = 0; mode < 2; mode++)
        printf("median %-8s %5.2f GB/s  CPU s per GiB: relay %.3f client %.3f sink %.3f\n", names[mode],
               median(results[mode], rounds, offsetof(struct result, gbps)),
               median(results[mode], rounds, offsetof(struct result, relay_cpu)) * 1024 / mib,
               median(results[mode], rounds, offsetof(struct result, client_cpu)) * 1024 / mib,
               median(results[mode], rounds, offsetof(struct result, sink_cpu)) * 1024 / mib);
    return 0;
}
