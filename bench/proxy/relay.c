/*
 * relay: the least a proxy can do on this machine, as a peer for bench/proxy/run.py.
 *
 * The proxy issue's floors compare formwall with nginx and HAProxy. Each of them does more than relay bytes, and
 * so does formwall (it parses and re-encodes every form). This program does only that: for every client
 * connection it opens one upstream connection and copies bytes both ways, unread, until either side closes. No
 * HTTP parsing, no headers added, no pooling: wrk's and curl's keep-alive requests pass through the pair of
 * connections as they are. Whatever a real proxy does on top of this costs time, so this relay's throughput is an
 * upper bound for any proxy that reads the bytes into user space and writes them out again (`splice` aside: the
 * proxy issue's MSG_ZEROCOPY and splice measurements are in docs/performance.md).
 *
 * Each of THREADS threads owns a SO_REUSEPORT listener and a level-triggered epoll loop. A pair has one buffer
 * per direction of BUFFER_KIB KiB. A readable side is read once per event, at most a buffer's worth, and the bytes
 * are sent at once; what the peer's socket does not take waits in the buffer, and the readable side is not read
 * again until it has gone (backpressure), so memory stays at two buffers per pair. Either side ending (a read of
 * 0 bytes, a hang-up or an error) closes both.
 *
 * Usage: relay LISTEN_PORT UPSTREAM_PORT [THREADS (1)] [BUFFER_KIB (128)]    (127.0.0.1 only)
 * Built by run.py with: gcc -O2 -Wall -pthread -o relay relay.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_port, upstream_port;
static size_t buffer_size = 128 * 1024;

/* One direction of a pair: bytes read from one socket, not yet all sent to the other. */
struct flow {
    char *bytes;
    size_t start, end; /* bytes[start..<end] wait to be sent */
};

struct pair;

/* What an epoll event points at: one of the pair's two sockets. */
struct end {
    struct pair *pair;
    int fd;
    uint32_t interest;
};

struct pair {
    struct end client, upstream;
    struct flow up, down; /* up: client -> upstream; down: upstream -> client */
    int closed;
    struct pair *next_closed;
};

/* Pairs closed during the current batch of events, freed after it (a later event of the batch may point at them). */
static __thread struct pair *closed_pairs;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void no_delay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static int connect_upstream(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(upstream_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* A blocking connect: on loopback it completes at once. */
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 || nonblocking(fd) < 0) {
        close(fd);
        return -1;
    }
    no_delay(fd);
    return fd;
}

static void close_pair(int ep, struct pair *p) {
    epoll_ctl(ep, EPOLL_CTL_DEL, p->client.fd, NULL);
    epoll_ctl(ep, EPOLL_CTL_DEL, p->upstream.fd, NULL);
    close(p->client.fd);
    close(p->upstream.fd);
    p->closed = 1;
    p->next_closed = closed_pairs;
    closed_pairs = p;
}

static void free_closed_pairs(void) {
    while (closed_pairs) {
        struct pair *p = closed_pairs;
        closed_pairs = p->next_closed;
        free(p->up.bytes);
        free(p->down.bytes);
        free(p);
    }
}

/* A socket is read while nothing it sent waits for its peer, and watched for writing while something waits for it. */
static int update_interest(int ep, struct end *e, const struct flow *outgoing, const struct flow *incoming) {
    uint32_t want = (outgoing->start == outgoing->end ? EPOLLIN : 0) | (incoming->start != incoming->end ? EPOLLOUT : 0);
    if (want == e->interest) return 0;
    struct epoll_event ev = {.events = want, .data.ptr = e};
    e->interest = want;
    return epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev);
}

/* Sends what waits in `f` to `fd`. Returns -1 when the connection failed. */
static int drain(struct flow *f, int fd) {
    while (f->start < f->end) {
        ssize_t n = send(fd, f->bytes + f->start, f->end - f->start, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            return -1;
        }
        f->start += (size_t)n;
    }
    f->start = f->end = 0;
    return 0;
}

/* Reads once from `fd` into the empty flow `f`, then sends it on to `to`. Returns -1 at the end or on failure. */
static int pump(struct flow *f, int fd, int to) {
    ssize_t n = recv(fd, f->bytes, buffer_size, MSG_DONTWAIT);
    if (n == 0) return -1;
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    f->start = 0;
    f->end = (size_t)n;
    return drain(f, to);
}

static void handle(int ep, struct end *e, uint32_t events) {
    struct pair *p = e->pair;
    if (p->closed) return;
    int is_client = e == &p->client;
    struct end *other = is_client ? &p->upstream : &p->client;
    struct flow *outgoing = is_client ? &p->up : &p->down;  /* read from e, sent to other */
    struct flow *incoming = is_client ? &p->down : &p->up;  /* read from other, sent to e */
    if (events & (EPOLLERR | EPOLLHUP)) { close_pair(ep, p); return; }
    if ((events & EPOLLOUT) && drain(incoming, e->fd) < 0) { close_pair(ep, p); return; }
    if ((events & EPOLLIN) && outgoing->start == outgoing->end
        && pump(outgoing, e->fd, other->fd) < 0) {
        close_pair(ep, p);
        return;
    }
    if (update_interest(ep, e, outgoing, incoming) < 0
        || update_interest(ep, other, incoming, outgoing) < 0) close_pair(ep, p);
}

static void accept_one(int ep, int lfd) {
    int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    no_delay(cfd);
    int ufd = connect_upstream();
    struct pair *p = ufd < 0 ? NULL : calloc(1, sizeof *p);
    char *up = p ? malloc(buffer_size) : NULL, *down = p ? malloc(buffer_size) : NULL;
    if (!p || !up || !down) {
        free(up);
        free(down);
        free(p);
        if (ufd >= 0) close(ufd);
        close(cfd);
        return;
    }
    p->up.bytes = up;
    p->down.bytes = down;
    p->client = (struct end){.pair = p, .fd = cfd, .interest = EPOLLIN};
    p->upstream = (struct end){.pair = p, .fd = ufd, .interest = EPOLLIN};
    struct epoll_event ce = {.events = p->client.interest, .data.ptr = &p->client};
    struct epoll_event ue = {.events = p->upstream.interest, .data.ptr = &p->upstream};
    /* close_pair's EPOLL_CTL_DEL of a descriptor never added fails harmlessly. */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ce) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ufd, &ue) < 0) close_pair(ep, p);
}

static void *loop(void *unused) {
    (void)unused;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    static char listener_tag; /* data.ptr of the listener's event */
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = &listener_tag};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &le) < 0) die("epoll_ctl");
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == &listener_tag) {
                for (int k = 0; k < 64; k++) accept_one(ep, lfd);
                continue;
            }
            handle(ep, events[i].data.ptr, events[i].events);
        }
        free_closed_pairs();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: relay LISTEN_PORT UPSTREAM_PORT [THREADS] [BUFFER_KIB]\n");
        return 2;
    }
    listen_port = atoi(argv[1]);
    upstream_port = atoi(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (argc > 4) buffer_size = (size_t)atoi(argv[4]) * 1024;
    if (threads < 1 || threads > 64 || buffer_size < 1024) {
        fprintf(stderr, "relay: 1-64 threads and at least 1 KiB buffers\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    pthread_t ids[64];
    for (int i = 1; i < threads; i++)
        if (pthread_create(&ids[i], NULL, loop, NULL) != 0) die("pthread_create");
    loop(NULL);
    return 0;
}
