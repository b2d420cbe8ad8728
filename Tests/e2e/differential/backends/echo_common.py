"""Shared JSON shape of the Python differential backends (see Tests/e2e/differential/README.md).

`parts`: every part as the framework exposes it: name, filename (None for fields), content_type (None for
fields: most frameworks do not expose a field's type), size, sha256, kind. `form`: the single value the
idiomatic `form[name]` access returns, as {size, sha256} plus `filename` for files.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

_lock = threading.Lock()


def digest(data: bytes) -> dict:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def file_entry(name: str, filename, content_type, data: bytes) -> dict:
    return {"name": name, "filename": filename, "content_type": content_type, **digest(data), "kind": "file"}


def answer(parts: list[dict], form: dict, order: str = "body") -> bytes:
    """`order`: `body` when parts are in body order, else how the framework groups them."""
    return json.dumps({"parts": parts, "form": form, "order": order}).encode()


def log_request(request_id: str | None) -> None:
    """Appends the request id to $UPSTREAM_LOG: proof that a body reached and was parsed by the app."""
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with _lock, open(path, "a") as f:
            f.write(f"{request_id}\n")
