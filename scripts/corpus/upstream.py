#!/usr/bin/env python3
"""A recording upstream for testing a policy against attack files (docs/rules.md, *Against real attack files*).

Answers 200 to every request and keeps the body it received (chunked or not) as BODIES/<X-Request-Id>, so that
what reached the application can be searched afterwards. Listens on 127.0.0.1 only.

    python3 scripts/corpus/upstream.py --port 9000 --bodies /tmp/corpus-run/bodies
"""

import argparse
import http.server
import os
import re
import uuid
from pathlib import Path

SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class Recorder(http.server.BaseHTTPRequestHandler):
    bodies: Path

    def log_message(self, format, *args):  # one line per request is noise here
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while size := int(self.rfile.readline().split(b";")[0], 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):   # trailer fields (X-Formwall-Modified)
                pass
            return bytes(data)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self):
        data = self._body()
        rid = self.headers.get("X-Request-Id", "")
        name = rid if SAFE_ID.match(rid) else "unnamed-" + uuid.uuid4().hex
        fd = os.open(self.bodies / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST
    do_PATCH = do_POST

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bodies", type=Path, required=True, help="directory for the received bodies (0700)")
    args = parser.parse_args()
    args.bodies.mkdir(mode=0o700, parents=True, exist_ok=True)
    Recorder.bodies = args.bodies
    http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Recorder).serve_forever()


if __name__ == "__main__":
    main()
