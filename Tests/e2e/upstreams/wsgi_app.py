"""A Flask app (werkzeug's form parser) that echoes what it parsed as JSON.

Served by werkzeug's real development server (``run_werkzeug.py``) and by gunicorn
(``gunicorn wsgi_app:app``). Every request it finished handling is appended as one JSON line to
``$UPSTREAM_LOG`` (if set) before the response is returned.
"""

from __future__ import annotations

import hashlib
import json
import os

from flask import Flask, request

app = Flask(__name__)
app.config["MAX_CONTENT_LENGTH"] = None
app.config["MAX_FORM_MEMORY_SIZE"] = None
APP_NAME = os.environ.get("UPSTREAM_NAME", "wsgi")


def log(record: dict) -> None:
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


@app.route("/", defaults={"path": ""}, methods=["GET", "POST", "PUT"])
@app.route("/<path:path>", methods=["GET", "POST", "PUT"])
def echo(path):
    fields = {k: request.form.getlist(k) for k in request.form.keys()}
    files = {}
    for name in request.files.keys():
        for f in request.files.getlist(name):
            data = f.read()
            files.setdefault(name, []).append(
                {"filename": f.filename, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    record = {
        "app": APP_NAME, "method": request.method, "path": "/" + path,
        "request_id": request.headers.get("X-Request-Id"),
        "content_type": request.headers.get("Content-Type"),
        "content_length": request.headers.get("Content-Length"),
        "transfer_encoding": request.headers.get("Transfer-Encoding"),
        "fields": fields, "files": files,
    }
    log(record)
    return app.response_class(json.dumps(record), mimetype="application/json")
