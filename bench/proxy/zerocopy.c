/*
 * zerocopy: do MSG_ZEROCOPY sends or TCP_ZEROCOPY_RECEIVE help a relay on this machine's loopback?
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
 * watermark suffices).
 *
 * The second experiment ("receive") is the other side of the relay: TCP_ZEROCOPY_RECEIVE maps the pages the
 * kernel received into the relay's address space (getsockopt on a region mmap'ed from the socket) instead of
 * copying them out, and says how many bytes at the head of the queue it could not map (recv_skip_hint); those are
 * read with recv. In this experiment the relay scans every byte it forwards (memchr for a byte that never occurs),
 * as formwall must, and sends plainly. Its modes: the plain relay; the mapping relay behind the same plain client
 * (curl's way of sending); the mapping relay behind a client that sends page-aligned buffers with MSG_ZEROCOPY.
 *
 * Rounds rotate which mode goes first; each round moves MIB MiB. Per round it prints the relay's throughput, the
 * CPU seconds of the three processes (getrusage / wait4), with MSG_ZEROCOPY sends how many notifications came and
 * how many said SO_EE_CODE_ZEROCOPY_COPIED (the kernel copied after all), and with TCP_ZEROCOPY_RECEIVE the share
 * of the bytes that were mapped; at the end, the medians.
 *
 * Usage: gcc -O2 -Wall -o /tmp/zerocopy bench/proxy/zerocopy.c && /tmp/zerocopy [ROUNDS (6)] [MIB (2048)] [send|receive]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>  /* before linux/errqueue.h, which uses struct timespec */
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/tcp.h>  /* TCP_ZEROCOPY_RECEIVE and its struct; not in glibc's netinet/tcp.h */
#include <sys/mman.h>
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

/* One way of running the three processes. */
struct mode {
    const char *name;
    int client_zerocopy;  /* the client sends page-aligned buffers with MSG_ZEROCOPY */
    int relay_map;        /* the relay receives with TCP_ZEROCOPY_RECEIVE */
    int relay_zerocopy;   /* the relay sends with MSG_ZEROCOPY */
    int relay_scans;      /* the relay reads every byte it forwards */
};

static const struct mode send_modes[] = {
    {"plain", 0, 0, 0, 0},
    {"zerocopy", 0, 0, 1, 0},
};
static const struct mode receive_modes[] = {
    {"plain", 0, 0, 0, 1},
    {"mapped", 0, 1, 0, 1},
    {"mapped, client MSG_ZEROCOPY", 1, 1, 0, 1},
};

struct result { double gbps, relay_cpu, client_cpu, sink_cpu, mapped_share; long notes, copied; };

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

/* Completion bookkeeping for zerocopy sends: sends [0, done) have completed. */
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

/* Sends bytes[0..<n] on fd, with MSG_ZEROCOPY if c is not NULL (waiting for completions when option memory runs
 * out). Returns 0, or -1 if the socket refused. */
static int send_all(int fd, const char *bytes, size_t n, struct completions *c) {
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, bytes + off, n - off, c ? MSG_ZEROCOPY : 0);
        if (w < 0) {
            if (c && errno == ENOBUFS) {  /* out of optmem: wait for a completion rather than spin */
                if (c->done < c->issued) wait_and_reap(fd, c);
                continue;
            }
            return -1;
        }
        if (c) c->issued++;
        off += w;
    }
    return 0;
}

/* What the relay does with each byte it forwards when it scans: looks for one that never occurs. */
static void scan(const char *bytes, size_t n) {
    if (memchr(bytes, '\r', n)) die("scan found a byte the client never sends");
}

static struct result one_round(const struct mode *m, long long total) {
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
        int one = 1;
        if (m->client_zerocopy && setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) die("SO_ZEROCOPY");
        /* Never changed, so a send may reuse it while an earlier zerocopy send of it is still in flight. */
        char *buf = aligned_alloc(4096, CLIENT_WRITE);
        memset(buf, 'x', CLIENT_WRITE);
        struct completions c = {0};
        for (long long sent = 0; sent < total;) {
            long long left = total - sent;
            size_t n = left < CLIENT_WRITE ? (size_t)left : CLIENT_WRITE;
            if (send_all(fd, buf, n, m->client_zerocopy ? &c : NULL)) die("client send");
            sent += n;
            if (m->client_zerocopy) reap(fd, &c);
        }
        _exit(0);
    }
    close(sink_listener);
    int in = accept(relay_listener, NULL, NULL);
    close(relay_listener);
    int out = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(out, (struct sockaddr *)&sink_addr, sizeof sink_addr)) die("connect sink");
    int one = 1;
    if (m->relay_zerocopy && setsockopt(out, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) die("SO_ZEROCOPY");
    char *map = NULL;
    if (m->relay_map) {
        map = mmap(NULL, SLOT, PROT_READ, MAP_SHARED, in, 0);
        if (map == MAP_FAILED) die("mmap of the socket");
    }

    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    char *ring = aligned_alloc(4096, (size_t)RING * SLOT);
    unsigned last_send[RING] = {0};
    struct completions c = {0};
    struct completions *sends = m->relay_zerocopy ? &c : NULL;
    long long moved = 0, mapped = 0;
    double start = now();
    for (int k = 0;; k = (k + 1) % RING) {
        char *slot = ring + (size_t)k * SLOT;
        if (m->relay_zerocopy) {
            reap(out, &c);
            while (c.done < last_send[k]) wait_and_reap(out, &c);  /* the slot's pages may still be in flight */
        }
        size_t want = SLOT;
        if (m->relay_map) {
            /* Maps what it can (replacing the previous mapping); recv_skip_hint says how many bytes at the head
             * of the queue must be read instead. Both zero: nothing queued, so recv below waits. */
            struct tcp_zerocopy_receive zc;
            memset(&zc, 0, sizeof zc);
            zc.address = (uint64_t)(uintptr_t)map;
            zc.length = SLOT;
            socklen_t zc_len = sizeof zc;
            /* At the end of the stream this kernel fails with EIO (and leaves zc as it was) instead of mapping
             * nothing; recv then sees the end (or the error). */
            if (getsockopt(in, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &zc, &zc_len)) {
                if (errno != EIO) die("TCP_ZEROCOPY_RECEIVE");
                zc.length = 0;
                zc.recv_skip_hint = 0;
            }
            if (zc.length) {
                scan(map, zc.length);
                if (send_all(out, map, zc.length, sends)) die("relay send");
                moved += zc.length;
                mapped += zc.length;
                continue;
            }
            if (zc.recv_skip_hint) want = zc.recv_skip_hint < SLOT ? zc.recv_skip_hint : SLOT;
        }
        ssize_t r = recv(in, slot, want, 0);
        if (r < 0) die("relay recv");
        if (r == 0) break;
        moved += r;
        if (m->relay_scans) scan(slot, r);
        if (send_all(out, slot, r, sends)) die("relay send");
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
    res.mapped_share = moved ? (double)mapped / moved : 0;
    res.notes = c.notes;
    res.copied = c.copied;
    if (moved != total) fprintf(stderr, "moved %lld of %lld bytes\n", moved, total);
    if (map) munmap(map, SLOT);
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

#define MAX_MODES 3

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    long long mib = argc > 2 ? atoll(argv[2]) : 2048;
    const char *experiment = argc > 3 ? argv[3] : "send";
    const struct mode *modes;
    int count;
    if (!strcmp(experiment, "send")) {
        modes = send_modes;
        count = sizeof send_modes / sizeof send_modes[0];
    } else if (!strcmp(experiment, "receive")) {
        modes = receive_modes;
        count = sizeof receive_modes / sizeof receive_modes[0];
    } else {
        count = 0;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || mib < 1 || count == 0) {
        fprintf(stderr, "usage: zerocopy [ROUNDS 1-%d] [MIB] [send|receive]\n", MAX_ROUNDS);
        return 2;
    }
    static struct result results[MAX_MODES][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < count; i++) {
            int index = (i + r) % count;  /* rotate which mode goes first */
            const struct mode *m = &modes[index];
            struct result x = one_round(m, mib << 20);
            results[index][r] = x;
            printf("round %d %-28s %5.2f GB/s  CPU s relay %.3f client %.3f sink %.3f", r + 1, m->name, x.gbps,
                   x.relay_cpu, x.client_cpu, x.sink_cpu);
            if (m->relay_zerocopy) printf("  notifications %ld copied %ld", x.notes, x.copied);
            if (m->relay_map) printf("  mapped %.1f%%", 100 * x.mapped_share);
            printf("\n");
            fflush(stdout);
        }
    }
    for (int i = 0; i < count; i++) {
        printf("median %-28s %5.2f GB/s  CPU s per GiB: relay %.3f client %.3f sink %.3f", modes[i].name,
               median(results[i], rounds, offsetof(struct result, gbps)),
               median(results[i], rounds, offsetof(struct result, relay_cpu)) * 1024 / mib,
               median(results[i], rounds, offsetof(struct result, client_cpu)) * 1024 / mib,
               median(results[i], rounds, offsetof(struct result, sink_cpu)) * 1024 / mib);
        if (modes[i].relay_map)
            printf("  mapped %.1f%%", 100 * median(results[i], rounds, offsetof(struct result, mapped_share)));
        printf("\n");
    }
    return 0;
}
