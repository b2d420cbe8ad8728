"""Differential backend: Starlette's `Request.form()` (python-multipart) under uvicorn.

uvicorn --app-dir DIR starlette_app:app. Parts in body order (FormData.multi_items()); `form[name]` is
FormData's `__getitem__`.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from echo_common import answer, digest, file_entry, log_request


async def _view(value):
    if isinstance(value, UploadFile):
        data = await value.read()
        await value.seek(0)
        return data
    return value.encode("utf-8", "surrogateescape")


async def echo(request: Request) -> Response:
    if request.method != "POST":
        return PlainTextResponse("ok")
    async with request.form(max_files=100000, max_fields=100000) as formdata:
        parts = []
        for k, v in formdata.multi_items():
            data = await _view(v)
            if isinstance(v, UploadFile):
                parts.append(file_entry(k, v.filename, v.content_type, data))
            else:
                parts.append({"name": k, "filename": None, "content_type": None, **digest(data), "kind": "field"})
        form = {}
        for k in formdata.keys():
            v = formdata[k]
            entry = digest(await _view(v))
            if isinstance(v, UploadFile):
                entry["filename"] = v.filename
            form[k] = entry
    log_request(request.headers.get("x-request-id"))
    return Response(answer(parts, form), media_type="application/json")


app = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])
