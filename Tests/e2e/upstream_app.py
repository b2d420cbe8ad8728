#!/usr/bin/env python3
"""A small, real upstream for the Formwall end-to-end tests.

    python upstream_app.py --port P [--mode echo|slow|die-mid-response|close-early]
                           [--delay SECONDS] [--log FILE]

It is built on werkzeug's development server (``BaseWSGIServer`` threaded, ``WSGIRequestHandler``
for request-line and header parsing, ``make_environ``) and werkzeug's multipart parser
(``werkzeug.sansio.multipart.MultipartDecoder``, the engine under ``werkzeug.formparser``).
Two pieces of werkzeug's dev server are replaced because they are not good enough for a test
oracle (checked against werkzeug 3.1):

* ``run_wsgi`` always answers ``Connection: close`` (no keep-alive), so upstream connection reuse
  could never be observed. The handler here writes its own responses and keeps connections open.
* ``DechunkedInput`` is lenient (accepts bare LF, ignores a short read at EOF, does not read
  trailers). The chunked reader here is strict and reports an incomplete body as such.

Every request is answered with JSON describing what was received (method, path, headers, framing,
parsed multipart fields and files with sizes and sha256, or body size and sha256, and
``body_complete``), and recorded as one JSON line in ``--log`` *before* the response is sent, even
when the body was incomplete (the client of the upstream, i.e. the proxy, went away mid-body).
A ``request_start`` line is logged as soon as a request head has been read.

Query parameters on any path shape the response (so tests can drive the upstream through the
proxy): ``status=N``, ``resp=length|chunked|close`` (framing), ``size=N`` (answer N deterministic
bytes instead of JSON), ``delay=S`` (wait S seconds before answering), ``pause=S`` (wait S seconds between the
response head and its body), ``stall=S`` (wait S seconds
after the head before reading the body: an upstream that holds a streaming body up), ``die=1`` (headers and part
of the body, Content-Length or chunked per ``resp``, then close), ``hdr=Name:Value`` (extra response header, repeatable).

On start it prints ``READY <port>`` on stdout (``--port 0`` picks a free port).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import socket
import sys
import threading
import time
import traceback
from urllib.parse import parse_qs

from werkzeug.datastructures import Headers
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import (
    NEED_DATA,
    Data,
    Epilogue,
    Field,
    File,
    MultipartDecoder,
    Preamble,
)
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer, WSGIRequestHandler

READ_SIZE = 1 << 20
MAX_FIELD_VALUE_BYTES = 1 << 20  # field values larger than this are reported by size/sha only


class IncompleteBody(Exception):
    """The body ended (EOF, timeout, framing error) before its declared end."""


# ---------------------------------------------------------------------------------------------
# Body readers


class BodyReader:
    """Reads a request body from a buffered socket file, strictly, counting bytes."""

    def __init__(self, rfile, headers) -> None:
        self.rfile = rfile
        self.wire_bytes = 0  # body bytes after de-chunking
        self.chunks = 0
        self.trailers: list[str] = []
        te = headers.get("Transfer-Encoding")
        cl = headers.get("Content-Length")
        if te is not None:
            self.kind = "chunked" if te.strip().lower() == "chunked" else "unsupported"
            self.remaining = None
        elif cl is not None:
            self.kind = "length"
            self.remaining = int(cl.strip())
        else:
            self.kind = "none"
            self.remaining = 0
        self._chunk_left = 0
        self._done = self.kind == "none" or (self.kind == "length" and self.remaining == 0)
        if self.kind == "unsupported":
            raise IncompleteBody(f"unsupported transfer-encoding {te!r}")

    def read(self) -> bytes:
        """Returns the next piece of the body, b'' at its end; raises IncompleteBody."""
        if self._done:
            return b""
        if self.kind == "length":
            data = self.rfile.read1(min(READ_SIZE, self.remaining)) if self.remaining else b""
            if not data:
                raise IncompleteBody(f"EOF with {self.remaining} Content-Length bytes missing")
            self.remaining -= len(data)
            self.wire_bytes += len(data)
            if self.remaining == 0:
                self._done = True
            return data
        # chunked
        if self._chunk_left == 0:
            line = self._line()
            size_text = line.split(b";", 1)[0].strip(b" \t")
            try:
                if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                    raise ValueError
                size = int(size_text, 16)
            except ValueError:
                raise IncompleteBody(f"invalid chunk-size line {line[:40]!r}") from None
            if size == 0:
                while True:
                    trailer = self._line()
                    if trailer == b"":
                        break
                    self.trailers.append(trailer.decode("latin-1"))
                self._done = True
                return b""
            self.chunks += 1
            self._chunk_left = size
        data = self.rfile.read1(min(READ_SIZE, self._chunk_left))
        if not data:
            raise IncompleteBody(f"EOF inside a chunk ({self._chunk_left} bytes missing)")
        self._chunk_left -= len(data)
        self.wire_bytes += len(data)
        if self._chunk_left == 0:
            if self.rfile.read(2) != b"\r\n":
                raise IncompleteBody("chunk data not followed by CRLF")
        return data

    def _line(self) -> bytes:
        line = self.rfile.readline(4096)
        if not line:
            raise IncompleteBody("EOF where a chunk-size line or trailer was expected")
        if not line.endswith(b"\r\n"):
            raise IncompleteBody(f"chunked line without CRLF: {line[:40]!r}")
        return line[:-2]

    def drain(self) -> None:
        while self.read():
            pass


def describe_body(reader: BodyReader, content_type: str | None) -> dict:
    """Consumes the body; returns what it contained. Never raises for body problems."""
    out: dict = {"body_complete": False}
    mimetype, options = parse_options_header(content_type or "")
    try:
        if mimetype == "multipart/form-data" and options.get("boundary"):
            out["boundary"] = options["boundary"]
            out.update(parse_multipart(reader, options["boundary"].encode("latin-1")))
        else:
            digest = hashlib.sha256()
            size = 0
            while True:
                data = reader.read()
                if not data:
                    break
                digest.update(data)
                size += len(data)
            out["body_size"] = size
            out["body_sha256"] = digest.hexdigest()
            out["body_complete"] = True
    except IncompleteBody as exc:
        out["body_error"] = f"incomplete: {exc}"
    except (socket.timeout, TimeoutError):
        out["body_error"] = "incomplete: read timeout"
    except (ConnectionError, OSError) as exc:
        out["body_error"] = f"incomplete: {exc!r}"
    except Exception as exc:  # a multipart syntax error: framing was complete but body was not valid
        out["body_error"] = f"invalid: {exc!r}"
        try:
            reader.drain()
            out["framing_complete"] = True
        except Exception:
            out["framing_complete"] = False
    out["body_bytes"] = reader.wire_bytes
    out["chunks"] = reader.chunks
    out["trailers"] = reader.trailers
    if "framing_complete" not in out:
        out["framing_complete"] = reader._done
    return out


class AlignedFeed:
    """Feeds werkzeug's MultipartDecoder only at line ends (or well away from any line break).

    werkzeug 3.1's decoder mis-parses when a fed piece ends inside the suffix of a delimiter
    (e.g. between the two dashes of ``--boundary--``, or 1-3 byte pieces around ``\r\n``): it
    emits delimiter bytes as part data. Network reads can end anywhere, so pieces are re-cut here:
    after the last LF, or, with no LF in the last ``HOLD`` bytes, everything but those bytes.
    """

    HOLD = 256  # > 4 + 70 (max boundary) + CRLF + whitespace

    def __init__(self, decoder: MultipartDecoder) -> None:
        self.decoder = decoder
        self.pending = bytearray()

    def feed(self, data: bytes | None) -> None:
        if data is None:
            if self.pending:
                self.decoder.receive_data(bytes(self.pending))
                self.pending.clear()
            self.decoder.receive_data(None)
            return
        self.pending += data
        cut = self.pending.rfind(b"\n") + 1
        if len(self.pending) - cut > self.HOLD:
            cut = len(self.pending) - self.HOLD
        if cut > 0:
            self.decoder.receive_data(bytes(self.pending[:cut]))
            del self.pending[:cut]


def parse_multipart(reader: BodyReader, boundary: bytes) -> dict:
    decoder = MultipartDecoder(boundary)
    feeder = AlignedFeed(decoder)
    fields: dict[str, list[str]] = {}
    files: dict[str, list[dict]] = {}
    parts: list[dict] = []
    current: dict | None = None
    value = bytearray()
    digest = None
    size = 0
    preamble_len = 0
    epilogue_len = 0
    finished = False
    eof = False
    while not finished:
        event = decoder.next_event()
        if event is NEED_DATA:
            if eof:
                raise IncompleteBody("multipart body ended before its close delimiter")
            data = reader.read()
            if data:
                feeder.feed(data)
            else:
                eof = True
                feeder.feed(None)
            continue
        if isinstance(event, Preamble):
            preamble_len = len(event.data)
        elif isinstance(event, (Field, File)):
            headers: Headers = event.headers
            current = {
                "name": event.name,
                "header_names": [k.lower() for k, _ in headers.items()],
                "content_type": headers.get("Content-Type"),
            }
            if isinstance(event, File):
                current["filename"] = event.filename
            value = bytearray()
            digest = hashlib.sha256()
            size = 0
        elif isinstance(event, Data):
            assert current is not None
            digest.update(event.data)
            size += len(event.data)
            if "filename" not in current and len(value) <= MAX_FIELD_VALUE_BYTES:
                value.extend(event.data)
            if not event.more_data:
                current["size"] = size
                current["sha256"] = digest.hexdigest()
                parts.append(current)
                if "filename" in current:
                    files.setdefault(current["name"], []).append(
                        {
                            "filename": current["filename"],
                            "content_type": current["content_type"],
                            "size": size,
                            "sha256": current["sha256"],
                        }
                    )
                else:
                    if size <= MAX_FIELD_VALUE_BYTES:
                        text = bytes(value).decode("utf-8", "replace")
                    else:
                        text = f"<{size} bytes sha256={current['sha256']}>"
                    fields.setdefault(current["name"], []).append(text)
                current = None
        elif isinstance(event, Epilogue):
            epilogue_len = len(event.data)
            finished = True
        # The decoder only reports Epilogue after receive_data(None); keep reading to the end.
    # The body must have ended exactly here (reader at EOF of the framing).
    return {
        "fields": fields,
        "files": files,
        "parts": parts,
        "preamble_len": preamble_len,
        "epilogue_len": epilogue_len,
        "body_complete": True,
    }


# ---------------------------------------------------------------------------------------------
# Server


class Upstream:
    def __init__(self, mode: str, delay: float, log_path: str | None) -> None:
        self.mode = mode
        self.delay = delay
        self.log_path = log_path
        self.lock = threading.Lock()
        self.conn_ids = itertools.count(1)
        self.seq = itertools.count(1)
        self.log_file = open(log_path, "a", buffering=1) if log_path else None

    def log(self, record: dict) -> None:
        record["t"] = time.time()
        line = json.dumps(record, sort_keys=True)
        with self.lock:
            if self.log_file:
                self.log_file.write(line + "\n")
                self.log_file.flush()


def make_handler(upstream: Upstream):
    class Handler(WSGIRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30  # socket timeout: a stuck peer cannot hold a thread forever

        def setup(self) -> None:
            super().setup()
            self.conn_id = next(upstream.conn_ids)
            self.requests_on_conn = 0
            upstream.log(
                {"event": "accept", "conn_id": self.conn_id, "remote_port": self.client_address[1]}
            )

        def handle(self) -> None:
            if upstream.mode == "close-early":
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True
                upstream.log({"event": "closed_on_accept", "conn_id": self.conn_id})
                return
            try:
                super().handle()
            finally:
                upstream.log(
                    {
                        "event": "close",
                        "conn_id": self.conn_id,
                        "requests": self.requests_on_conn,
                    }
                )

        def log_request(self, *args, **kwargs) -> None:  # quiet
            pass

        def run_wsgi(self) -> None:  # called by BaseHTTPRequestHandler for every method
            self.requests_on_conn += 1
            environ = self.make_environ()
            seq = next(upstream.seq)
            headers = {}
            for key, value in self.headers.items():
                k = key.lower()
                headers[k] = f"{headers[k]},{value}" if k in headers else value
            header_list = [[k, v] for k, v in self.headers.items()]
            query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            base = {
                "seq": seq,
                "conn_id": self.conn_id,
                "request_on_conn": self.requests_on_conn,
                "remote_port": self.client_address[1],
                "method": self.command,
                "path": self.path,
                "path_info": environ["PATH_INFO"],
                "query": environ.get("QUERY_STRING", ""),
                "version": self.request_version,
                "headers": headers,
                "header_list": header_list,
                "transfer_encoding": headers.get("transfer-encoding"),
                "content_length": headers.get("content-length"),
                "request_id": headers.get("x-request-id"),
            }
            upstream.log({"event": "request_start", **base})
            stall = float(query.get("stall", [0])[0])
            if stall > 0:
                time.sleep(stall)  # the behaviour under test (an upstream not reading the body), not a test wait

            # http.server's parse_request already answered "100 Continue" (handle_expect_100).
            base["expect_100"] = self.headers.get("Expect", "").lower().strip() == "100-continue"

            try:
                reader = BodyReader(self.rfile, self.headers)
                info = describe_body(reader, self.headers.get("Content-Type"))
            except IncompleteBody as exc:
                info = {"body_complete": False, "body_error": f"incomplete: {exc}", "framing_complete": False}
            except ValueError as exc:
                info = {"body_complete": False, "body_error": f"bad framing: {exc}", "framing_complete": False}
            record = {"event": "request", **base, **info}
            upstream.log(record)

            if not info.get("framing_complete"):
                # The body did not end where its framing said: nothing more can be read safely.
                self.close_connection = True
                if "incomplete" in info.get("body_error", "") or "framing" in info.get("body_error", ""):
                    return

            delay = float(query.get("delay", [upstream.delay if upstream.mode == "slow" else 0])[0])
            if delay > 0:
                time.sleep(delay)  # the behaviour under test (a slow upstream), not a test wait

            status = int(query.get("status", ["200"])[0])
            framing = query.get("resp", ["length"])[0]
            extra_headers = []
            for item in query.get("hdr", []):
                name, _, value = item.partition(":")
                extra_headers.append((name.strip(), value.strip()))
            if "size" in query:
                # Produced while it is sent, after the head: making the bytes costs CPU time, which must not
                # count against the proxy's upstream response timeout however loaded the machine is.
                body = DeterministicBody(int(query["size"][0]))
                ctype = "application/octet-stream"
            else:
                body = (json.dumps(record, sort_keys=True) + "\n").encode()
                ctype = "application/json"
            die = upstream.mode == "die-mid-response" or query.get("die", ["0"])[0] == "1"
            pause = float(query.get("pause", [0])[0])
            self.respond(status, ctype, body, framing, extra_headers, die, pause)

        def respond(self, status, ctype, body, framing, extra_headers, die, pause=0.0) -> None:
            no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
            reason = {200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified",
                      404: "Not Found", 500: "Internal Server Error"}.get(status, "Status")
            head = [f"HTTP/1.1 {status} {reason}"]
            if status not in (204, 304):
                head.append(f"Content-Type: {ctype}")
            for name, value in extra_headers:
                head.append(f"{name}: {value}")
            if die:
                half = body[: max(1, len(body) // 2)] if isinstance(body, bytes) \
                    else deterministic_bytes(max(1, len(body) // 2))
                if framing == "chunked":
                    head.append("Transfer-Encoding: chunked")
                    self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))  # no last chunk
                else:
                    head.append(f"Content-Length: {len(body) + 100000}")
                    self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                    self.wfile.write(half)
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if framing == "close":
                head.append("Connection: close")
                self.close_connection = True
            elif framing == "chunked" and not no_body:
                head.append("Transfer-Encoding: chunked")
            elif status not in (204, 304):
                head.append(f"Content-Length: {len(body)}")
            if self.close_connection and framing != "close":
                head.append("Connection: close")
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            if pause > 0:
                self.wfile.flush()
                time.sleep(pause)  # the behaviour under test (a slow response body), not a test wait
            if not no_body:
                pieces = body.pieces() if isinstance(body, DeterministicBody) else [body]
                if framing == "chunked":
                    step = 7919  # odd chunk sizes
                    for piece in pieces:
                        for i in range(0, len(piece), step):
                            part = piece[i : i + step]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    for piece in pieces:
                        self.wfile.write(piece)
            self.wfile.flush()
            if framing == "close":
                try:
                    self.connection.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    return Handler


DETERMINISTIC_PIECE = 1 << 16


def deterministic_pieces(n: int):
    """The n bytes of `deterministic_bytes(n)` in pieces of 64 KiB (the last may be shorter), each made when it
    is asked for: piece i is SHAKE-256 of `formwall-i`, so any prefix is the same whatever n is."""
    for i, start in enumerate(range(0, n, DETERMINISTIC_PIECE)):
        yield hashlib.shake_256(b"formwall-%d" % i).digest(min(DETERMINISTIC_PIECE, n - start))


def deterministic_bytes(n: int) -> bytes:
    """n bytes that tests can recompute (30 MB in about 0.1 s): a SHAKE-256 stream, 64 KiB per counter value."""
    return b"".join(deterministic_pieces(n))


class DeterministicBody:
    """`deterministic_bytes(n)` as a response body that is produced while it is written: the head goes out
    first, whatever the body's size and the machine's speed."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def pieces(self):
        return deterministic_pieces(self.n)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mode", choices=["echo", "slow", "die-mid-response", "close-early"], default="echo")
    parser.add_argument("--delay", type=float, default=5.0, help="seconds, for --mode slow")
    parser.add_argument("--log", default=None, help="JSON-lines file recording every request")
    parser.add_argument("--tls-cert", default=None, help="serve HTTPS with this PEM certificate chain")
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--tls-client-ca", default=None, help="require client certificates from this CA")
    args = parser.parse_args(argv)

    upstream = Upstream(args.mode, args.delay, args.log)
    context = None
    if args.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            context.load_verify_locations(args.tls_client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadedWSGIServer(args.host, args.port, app=None, handler=make_handler(upstream),
                                ssl_context=context)
    server.daemon_threads = True
    port = server.socket.getsockname()[1]
    print(f"READY {port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
