"""A Starlette app (python-multipart) for uvicorn, a keep-alive server: echoes what it parsed.

``uvicorn starlette_app:app``; appends one JSON line per finished request to ``$UPSTREAM_LOG``.
"""

from __future__ import annotations

import hashlib
import json
import os

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.responses import JSONResponse
from starlette.routing import Route


async def echo(request):
    fields: dict = {}
    files: dict = {}
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        form = await request.form(max_files=10000, max_fields=10000, max_part_size=64 << 20)
        for name, value in form.multi_items():
            if isinstance(value, UploadFile):
                data = await value.read()
                files.setdefault(name, []).append(
                    {"filename": value.filename, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            else:
                fields.setdefault(name, []).append(value)
    else:
        await request.body()
    record = {
        "app": os.environ.get("UPSTREAM_NAME", "starlette"), "method": request.method,
        "path": request.url.path, "request_id": request.headers.get("x-request-id"),
        "content_type": ctype or None,
        "content_length": request.headers.get("content-length"),
        "transfer_encoding": request.headers.get("transfer-encoding"),
        "fields": fields, "files": files,
    }
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")
    return JSONResponse(record)


app = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST", "PUT"])])
