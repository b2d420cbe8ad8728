#!/usr/bin/env python3
"""Sends whole requests byte for byte through Formwall (docs/rules.md, *Against real attack files*).

FILE holds one request a line as a Python bytes literal (`b'''POST / HTTP/1.1\\r\\n…'''`), the form of the WAFFLED
study's bypass-database/*.raw files; lines that are not one are skipped. Each request's target is replaced by
--path (its Host, Content-Length and body stay as written) and its answer's status line printed, one
tab-separated line a request: line number, status line.

    python3 scripts/corpus/raw_replay.py --target 127.0.0.1:8080 --path /api/form \\
        ~/corpora/waffled/bypass-database/multipart_requests.raw
"""

import argparse
import ast
import socket
import sys


def retarget(request: bytes, path: bytes) -> bytes:
    method, _, rest = request.partition(b" ")
    return method + b" " + path + b" " + rest.partition(b" ")[2]


def status_line(connection: socket.socket) -> str:
    answer = b""
    while b"\r\n" not in answer:
        chunk = connection.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\r\n", 1)[0].decode("latin-1") or "no answer"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="Formwall's HOST:PORT")
    parser.add_argument("--path", required=True, help="the route under test")
    parser.add_argument("file")
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    with open(args.file, encoding="latin-1") as handle:
        for number, line in enumerate(handle, 1):
            try:
                request = ast.literal_eval(line.strip())
            except (ValueError, SyntaxError):
                continue
            if not isinstance(request, bytes):
                continue
            with socket.create_connection((host, int(port)), timeout=30) as connection:
                connection.sendall(retarget(request, args.path.encode()))
                try:
                    status = status_line(connection)
                except OSError as error:
                    status = f"error:{type(error).__name__}"
            print(number, status, sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
