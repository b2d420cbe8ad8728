"""The example upstream of docker/compose.yaml: answers every request with a JSON summary of what arrived.

Standard library only, so the stock python image runs it as is. A POST with a multipart/form-data body gets
its fields (values cut to 200 characters) and files (name, filename, type, size, sha256) listed, which shows
what Formwall forwarded after inspecting and re-encoding the upload. GET /healthz answers 200 for the compose
healthcheck. Not for production: it holds each body in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 64 * 1024 * 1024


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        total = 0
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise ValueError("body too large")
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    if length > MAX_BODY:
        raise ValueError("body too large")
    return handler.rfile.read(length)


def summarize_form(content_type: str, body: bytes) -> dict:
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    fields, files = [], []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        data = part.get_payload(decode=True) or b""
        if filename is None:
            fields.append({"name": name, "value": data.decode("utf-8", "replace")[:200]})
        else:
            files.append({"name": name, "filename": filename, "type": part.get_content_type(),
                          "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return {"fields": fields, "files": files}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status: int, document: dict) -> None:
        payload = json.dumps(document, indent=2).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self.answer(200, {"status": "ok"})
        else:
            self.answer(200, {"method": "GET", "path": self.path})

    def do_POST(self) -> None:
        try:
            body = read_body(self)
        except ValueError as error:
            self.answer(413, {"error": str(error)})
            return
        content_type = self.headers.get("Content-Type", "")
        document = {
            "method": self.command,
            "path": self.path,
            "content_type": content_type,
            "bytes": len(body),
            "x_forwarded_for": self.headers.get("X-Forwarded-For"),
            "x_request_id": self.headers.get("X-Request-Id"),
            "x_formwall_modified": self.headers.get("X-Formwall-Modified"),
        }
        if content_type.lower().startswith("multipart/form-data"):
            document.update(summarize_form(content_type, body))
        self.answer(200, document)

    do_PUT = do_POST


def main() -> None:
    port = int(os.environ.get("PORT", "9000"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    print(f"example upstream listening on 0.0.0.0:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
