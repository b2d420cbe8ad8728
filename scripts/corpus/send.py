#!/usr/bin/env python3
"""Posts attack files through Formwall, one upload a request (docs/rules.md, *Against real attack files*).

Every file under CORPUS goes as the file part FIELD, under its own name, or with --names under each name of
that list (one a line: an extension list such as fuzzdb's alt-extensions-php.fuzz.txt is read as `shell.EXT`).
Prints one tab-separated line a request: request id, status, PAYLOAD when the body the upstream received
(scripts/corpus/upstream.py's --bodies) still holds server-side or browser markup, the filename, the file.
A PAYLOAD line is an upload to look at, not a verdict: the markers are a few bytes (`<?php`, `<%`, `<script`…).

    python3 scripts/corpus/send.py --url http://127.0.0.1:8080/api/avatar --field avatar \\
        --bodies /tmp/corpus-run/bodies ~/corpora/fuzzdb/attack/file-upload/malicious-images

requests writes some filename bytes its own way (`"`, CR and LF as %22, %0D, %0A): tricks that need exact bytes
go through scripts/corpus/raw_replay.py.
"""

import argparse
import sys
import uuid
from pathlib import Path

import requests

MARKERS = (b"<?php", b"<?=", b"<%", b"<jsp:", b"<cf", b"<!--#exec", b"<!--#include", b"<script")


def filenames(path: Path | None) -> list[str | None]:
    if path is None:
        return [None]
    names = []
    for line in path.read_text("latin-1").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append("shell" + line if line.startswith(".") else line)
    return names


def carried(bodies: Path, rid: str) -> bool:
    received = bodies / rid
    if not received.is_file():
        return False
    data = received.read_bytes().lower()
    return any(marker in data for marker in MARKERS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the route under test")
    parser.add_argument("--field", required=True, help="the file part's name (the rule's)")
    parser.add_argument("--bodies", type=Path, required=True, help="the recording upstream's --bodies")
    parser.add_argument("--names", type=Path, help="a list of filenames (or extensions) to send each file under")
    parser.add_argument("--type", default="application/octet-stream", help="the part's declared Content-Type")
    parser.add_argument("corpus", type=Path)
    args = parser.parse_args()
    names = filenames(args.names)
    files = sorted(p for p in args.corpus.rglob("*") if p.is_file()) if args.corpus.is_dir() else [args.corpus]
    for path in files:
        data = path.read_bytes()
        for name in names:
            rid = uuid.uuid4().hex
            sent = name or path.name
            try:
                response = requests.post(args.url, headers={"X-Request-Id": rid}, timeout=60,
                                         files={args.field: (sent, data, args.type)})
                status = str(response.status_code)
            except requests.RequestException as error:
                status = f"error:{type(error).__name__}"
            flag = "PAYLOAD" if carried(args.bodies, rid) else "-"
            print(rid, status, flag, sent, path, sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
