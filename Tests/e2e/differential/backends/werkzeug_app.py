"""Differential backend: werkzeug's own form parser (`Request.form` / `Request.files`) under its dev server.

Usage: python werkzeug_app.py PORT LOG. Answers every POST with the JSON of echo_common.py and appends the
request's X-Request-Id to LOG once the body was parsed.
"""

from __future__ import annotations

import sys

from werkzeug.serving import run_simple
from werkzeug.wrappers import Request, Response

from echo_common import answer, digest, file_entry, log_request


@Request.application
def app(request: Request) -> Response:
    if request.method != "POST":
        return Response("ok")
    # request.form and request.files are MultiDicts in body order per kind; werkzeug keeps no order
    # between fields and files, so parts are listed fields first, then files.
    parts = [{"name": k, "filename": None, "content_type": None, **digest(v.encode("utf-8", "surrogateescape")),
              "kind": "field"} for k, v in request.form.items(multi=True)]
    parts += [file_entry(k, f.filename, f.content_type, f.read()) for k, f in request.files.items(multi=True)]
    form = {}
    for k in request.form.keys():
        form[k] = digest(request.form[k].encode("utf-8", "surrogateescape"))  # request.form[k]: the first value
    for k in request.files.keys():
        f = request.files[k]
        f.stream.seek(0)
        form.setdefault(k, {**digest(f.read()), "filename": f.filename})
    log_request(request.headers.get("X-Request-Id"))
    return Response(answer(parts, form, order="fields-then-files"), content_type="application/json")


if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True)
