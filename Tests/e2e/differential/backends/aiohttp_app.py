"""Differential backend: aiohttp's `await request.post()` (its own multipart and urlencoded parser).

Usage: python aiohttp_app.py PORT. Parts in body order (MultiDictProxy items); `form[name]` is the
MultiDict's `__getitem__`.
"""

from __future__ import annotations

import sys

from aiohttp import web

from echo_common import answer, digest, file_entry, log_request


def _data(value) -> bytes:
    if isinstance(value, web.FileField):
        value.file.seek(0)
        return value.file.read()
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogateescape")


async def echo(request: web.Request) -> web.Response:
    if request.method != "POST":
        return web.Response(text="ok")
    post = await request.post()
    parts = []
    for k, v in post.items():
        if isinstance(v, web.FileField):
            parts.append(file_entry(k, v.filename, v.content_type, _data(v)))
        else:
            parts.append({"name": k, "filename": None, "content_type": None, **digest(_data(v)), "kind": "field"})
    form = {}
    for k in post.keys():
        v = post[k]
        form[k] = {**digest(_data(v)), **({"filename": v.filename} if isinstance(v, web.FileField) else {})}
    log_request(request.headers.get("X-Request-Id"))
    return web.Response(body=answer(parts, form), content_type="application/json")


def main() -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", echo)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
