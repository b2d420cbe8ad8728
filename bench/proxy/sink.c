/*
 * sink: a fast HTTP/1.1 upstream that discards request bodies.
 *
 * Used by bench/proxy/run.py as the upstream behind nginx and formwall, and as the
 * "direct" target. It must never be the bottleneck, so it does as little as possible:
 *
 *   - N threads (default 2), each with its own epoll instance and its own SO_REUSEPORT
 *     listener, so the kernel spreads connections across threads without locking.
 *   - Request heads are accumulated (bounded to 64 KiB) until CRLFCRLF; only the
 *     Content-Length, Transfer-Encoding, Connection and Expect headers are looked at.
 *   - Bodies are read into one 512 KiB per-thread buffer and discarded; the bytes are
 *     counted. Chunked framing is decoded by a byte-level state machine (chunk size in
 *     hex, extensions ignored, CRLF after the data checked, trailers skipped), so the
 *     count is the decoded body length, not the wire length.
 *   - Each request is answered with `200 OK` and a body holding the decoded byte count
 *     in decimal followed by a newline. Keep-alive is the default; `Connection: close`
 *     closes after the response. Pipelined requests are handled in order.
 *   - `Expect: 100-continue` gets an interim `100 Continue`.
 *   - With SINK_LOG_TIMES=1 in the environment, one line per completed request goes to stdout
 *     (used by bench/proxy/spool.py to time when the upstream starts receiving):
 *       request head=<t> first_body=<t> done=<t> bytes=<decoded count> framing=cl|chunked|none cl=<n>
 *     times are CLOCK_MONOTONIC seconds (Python's time.monotonic()); first_body is 0 without a body.
 *     Off by default, so bench/proxy/run.py measures the same sink as before.
 *
 * Malformed input (bad chunk size, head too large, conflicting framing) gets a 400 and
 * the connection is closed. This is a benchmark tool, not a general server: no request
 * smuggling defences beyond rejecting what it does not understand.
 *
 * Usage: sink PORT [THREADS]     (listens on 127.0.0.1:PORT)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)
#define READ_BUF (512 * 1024)
#define OUT_MAX (64 * 1024)

enum state {
    S_HEAD,        /* accumulating the request head */
    S_CL_BODY,     /* Content-Length body: `remaining` bytes left */
    S_CHUNK_SIZE,  /* hex digits of a chunk size */
    S_CHUNK_EXT,   /* chunk extension: skip to CR */
    S_CHUNK_SIZE_LF, /* LF after the chunk size line */
    S_CHUNK_DATA,  /* chunk data: `remaining` bytes left */
    S_CHUNK_DATA_CR, /* CR after chunk data */
    S_CHUNK_DATA_LF, /* LF after chunk data */
    S_TRAILER_START, /* start of a trailer line (or the final CRLF) */
    S_TRAILER_LINE,  /* inside a trailer line: skip to LF */
    S_FINAL_LF,      /* LF of the final empty line */
};

struct conn {
    int fd;
    enum state st;
    int close_after;     /* Connection: close seen on the current request */
    int closing;         /* stop reading, close once output is flushed */
    uint32_t mask;       /* epoll events currently registered */
    uint64_t remaining;  /* bytes left in CL body or current chunk */
    uint64_t chunk_size; /* chunk size being parsed */
    int size_digits;
    uint64_t count;      /* decoded body bytes of the current request */
    uint64_t cl;         /* Content-Length of the current request (SINK_LOG_TIMES only) */
    int framing;         /* 0 none, 1 Content-Length, 2 chunked (SINK_LOG_TIMES only) */
    double t_head;       /* when the head was complete (SINK_LOG_TIMES only) */
    double t_first;      /* when the first body byte arrived, 0 before (SINK_LOG_TIMES only) */
    size_t head_len;
    size_t out_len, out_off;
    char head[HEAD_MAX];
    char out[OUT_MAX];
};

static int g_port;
static int g_log_times;

static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static int set_nonblock_sock(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

static void out_append(struct conn *c, const char *p, size_t n) {
    if (c->out_len + n > OUT_MAX) {
        /* Only possible with a client that pipelines thousands of requests without
         * reading responses. Drop the connection rather than grow without bound. */
        c->closing = 1;
        c->out_len = c->out_off = 0;
        return;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void respond(struct conn *c, int status) {
    char body[32], buf[256];
    int bl = snprintf(body, sizeof body, "%llu\n", (unsigned long long)c->count);
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s",
                     status == 200 ? "200 OK" : "400 Bad Request", bl,
                     (c->close_after || status != 200) ? "Connection: close\r\n" : "", body);
    out_append(c, buf, (size_t)n);
    if (c->close_after || status != 200) c->closing = 1;
}

static void request_done(struct conn *c) {
    if (g_log_times) {
        static const char *fr[] = {"none", "cl", "chunked"};
        printf("request head=%.6f first_body=%.6f done=%.6f bytes=%llu framing=%s cl=%llu\n", c->t_head,
               c->t_first, now_mono(), (unsigned long long)c->count, fr[c->framing],
               (unsigned long long)c->cl);
        fflush(stdout);
    }
    respond(c, 200);
    c->st = S_HEAD;
    c->head_len = 0;
    c->count = 0;
    c->close_after = 0;
}

static void bad_request(struct conn *c) {
    respond(c, 400);
}

/* Case-insensitive search for `tok` as a comma/space separated token in [v, v+n). */
static int has_token(const char *v, size_t n, const char *tok) {
    size_t tl = strlen(tok);
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e - s == tl && strncasecmp(v + s, tok, tl) == 0) return 1;
    }
    return 0;
}

/* Parses the complete head in c->head (ending in CRLFCRLF). Returns 0 on success. */
static int parse_head(struct conn *c) {
    char *p = c->head, *end = c->head + c->head_len;
    char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) return -1;
    /* HTTP/1.0 requests default to close. */
    if (eol - p >= 9 && memcmp(eol - 9, "HTTP/1.0", 8) == 0) c->close_after = 1;
    p = eol + 1;
    int have_cl = 0, chunked = 0, expect_continue = 0;
    uint64_t cl = 0;
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) return -1;
        char *le = eol;
        if (le > p && le[-1] == '\r') le--;
        if (le == p) break; /* empty line: end of head */
        char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon) return -1;
        size_t nl = (size_t)(colon - p);
        char *v = colon + 1;
        while (v < le && (*v == ' ' || *v == '\t')) v++;
        size_t vl = (size_t)(le - v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
        if (nl == 14 && strncasecmp(p, "content-length", 14) == 0) {
            if (vl == 0 || vl > 19) return -1;
            uint64_t x = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9') return -1;
                x = x * 10 + (uint64_t)(v[i] - '0');
            }
            if (have_cl && x != cl) return -1;
            have_cl = 1;
            cl = x;
        } else if (nl == 17 && strncasecmp(p, "transfer-encoding", 17) == 0) {
            if (has_token(v, vl, "chunked")) chunked = 1;
            else return -1; /* other codings are not supported */
        } else if (nl == 10 && strncasecmp(p, "connection", 10) == 0) {
            if (has_token(v, vl, "close")) c->close_after = 1;
        } else if (nl == 6 && strncasecmp(p, "expect", 6) == 0) {
            if (has_token(v, vl, "100-continue")) expect_continue = 1;
        }
        p = eol + 1;
    }
    if (chunked && have_cl) return -1;
    if (expect_continue && (chunked || cl > 0)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        out_append(c, cont, sizeof cont - 1);
    }
    c->count = 0;
    if (g_log_times) {
        c->t_head = now_mono();
        c->t_first = 0;
        c->cl = cl;
        c->framing = chunked ? 2 : have_cl ? 1 : 0;
    }
    if (chunked) {
        c->st = S_CHUNK_SIZE;
        c->chunk_size = 0;
        c->size_digits = 0;
    } else if (cl > 0) {
        c->st = S_CL_BODY;
        c->remaining = cl;
    } else {
        request_done(c);
    }
    return 0;
}

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Feeds n bytes from the socket into the connection's state machine. */
static void feed(struct conn *c, const char *p, size_t n) {
    const char *end = p + n;
    while (p < end && !c->closing) {
        switch (c->st) {
        case S_HEAD: {
            /* Copy bytes into the head buffer until CRLFCRLF. Search only the new region
             * (plus 3 bytes of overlap) so a slowly arriving head stays linear. */
            size_t room = HEAD_MAX - c->head_len;
            size_t take = (size_t)(end - p);
            if (take > room) take = room;
            size_t from = c->head_len >= 3 ? c->head_len - 3 : 0;
            memcpy(c->head + c->head_len, p, take);
            c->head_len += take;
            char *hit = memmem(c->head + from, c->head_len - from, "\r\n\r\n", 4);
            if (!hit) {
                if (c->head_len == HEAD_MAX) { bad_request(c); return; }
                p += take;
                break;
            }
            size_t head_end = (size_t)(hit + 4 - c->head);
            /* Give back the bytes copied past the head. */
            p += take - (c->head_len - head_end);
            c->head_len = head_end;
            if (parse_head(c) != 0) { bad_request(c); return; }
            break;
        }
        case S_CL_BODY: {
            size_t avail = (size_t)(end - p);
            size_t take = avail < c->remaining ? avail : (size_t)c->remaining;
            if (g_log_times && c->t_first == 0 && take > 0) c->t_first = now_mono();
            c->count += take;
            c->remaining -= take;
            p += take;
            if (c->remaining == 0) request_done(c);
            break;
        }
        case S_CHUNK_SIZE: {
            unsigned char ch = (unsigned char)*p;
            int h = hexval(ch);
            if (h >= 0) {
                if (++c->size_digits > 15) { bad_request(c); return; }
                c->chunk_size = c->chunk_size * 16 + (uint64_t)h;
                p++;
            } else if (c->size_digits == 0) {
                bad_request(c);
                return;
            } else if (ch == '\r') {
                c->st = S_CHUNK_SIZE_LF;
                p++;
            } else if (ch == ';' || ch == ' ' || ch == '\t') {
                c->st = S_CHUNK_EXT;
                p++;
            } else {
                bad_request(c);
                return;
            }
            break;
        }
        case S_CHUNK_EXT: {
            const char *cr = memchr(p, '\r', (size_t)(end - p));
            if (!cr) { p = end; break; }
            p = cr + 1;
            c->st = S_CHUNK_SIZE_LF;
            break;
        }
        case S_CHUNK_SIZE_LF:
            if (*p != '\n') { bad_request(c); return; }
            p++;
            if (c->chunk_size == 0) {
                c->st = S_TRAILER_START;
            } else {
                c->remaining = c->chunk_size;
                c->st = S_CHUNK_DATA;
            }
            break;
        case S_CHUNK_DATA: {
            size_t avail = (size_t)(end - p);
            size_t take = avail < c->remaining ? avail : (size_t)c->remaining;
            if (g_log_times && c->t_first == 0 && take > 0) c->t_first = now_mono();
            c->count += take;
            c->remaining -= take;
            p += take;
            if (c->remaining == 0) c->st = S_CHUNK_DATA_CR;
            break;
        }
        case S_CHUNK_DATA_CR:
            if (*p != '\r') { bad_request(c); return; }
            p++;
            c->st = S_CHUNK_DATA_LF;
            break;
        case S_CHUNK_DATA_LF:
            if (*p != '\n') { bad_request(c); return; }
            p++;
            c->st = S_CHUNK_SIZE;
            c->chunk_size = 0;
            c->size_digits = 0;
            break;
        case S_TRAILER_START:
            if (*p == '\r') { c->st = S_FINAL_LF; p++; }
            else c->st = S_TRAILER_LINE;
            break;
        case S_TRAILER_LINE: {
            const char *lf = memchr(p, '\n', (size_t)(end - p));
            if (!lf) { p = end; break; }
            p = lf + 1;
            c->st = S_TRAILER_START;
            break;
        }
        case S_FINAL_LF:
            if (*p != '\n') { bad_request(c); return; }
            p++;
            request_done(c);
            break;
        }
    }
}

static void conn_close(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* Writes pending output. Returns -1 if the connection should be closed now. */
static int flush_out(int ep, struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return -1;
        }
        c->out_off += (size_t)w;
    }
    int pending = c->out_off < c->out_len;
    if (!pending) {
        c->out_off = c->out_len = 0;
        if (c->closing) return -1;
    }
    uint32_t want = (c->closing ? 0 : (uint32_t)EPOLLIN) | (pending ? (uint32_t)EPOLLOUT : 0);
    if (want != c->mask) {
        struct epoll_event ev = {.events = want, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->mask = want;
    }
    return 0;
}

static int make_listener(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(fd, 4096) < 0) die("listen");
    return fd;
}

static void *worker(void *arg) {
    int lfd = (int)(intptr_t)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) die("epoll_ctl listener");
    char *buf = malloc(READ_BUF);
    if (!buf) die("malloc");
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c == NULL) {
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    set_nonblock_sock(fd);
                    struct conn *nc = calloc(1, sizeof *nc);
                    if (!nc) { close(fd); continue; }
                    nc->fd = fd;
                    nc->st = S_HEAD;
                    nc->mask = EPOLLIN;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = nc};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) < 0) { close(fd); free(nc); }
                }
                continue;
            }
            uint32_t e = evs[i].events;
            if (e & EPOLLOUT) {
                if (flush_out(ep, c) < 0) { conn_close(ep, c); continue; }
            }
            if ((e & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing) {
                /* Level-triggered: one read per wakeup keeps connections fair. */
                ssize_t r = recv(c->fd, buf, READ_BUF, 0);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    conn_close(ep, c);
                    continue;
                }
                if (r > 0) {
                    feed(c, buf, (size_t)r);
                    if (c->out_len > c->out_off || c->closing) {
                        if (flush_out(ep, c) < 0) { conn_close(ep, c); continue; }
                    }
                }
            } else if ((e & (EPOLLHUP | EPOLLERR)) && c->closing) {
                conn_close(ep, c);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]);
        return 2;
    }
    g_port = atoi(argv[1]);
    const char *lt = getenv("SINK_LOG_TIMES");
    g_log_times = lt != NULL && strcmp(lt, "1") == 0;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    if (threads < 1) threads = 1;
    signal(SIGPIPE, SIG_IGN);
    pthread_t t[64];
    if (threads > 64) threads = 64;
    /* Bind every listener before serving, so the port accepts on all threads at once. */
    int lfds[64];
    for (int i = 0; i < threads; i++) lfds[i] = make_listener();
    for (int i = 1; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)lfds[i]);
    worker((void *)(intptr_t)lfds[0]);
    return 0;
}
