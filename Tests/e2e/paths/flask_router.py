"""Path-routing backend: a Flask app under werkzeug's dev server (PATH_INFO, every escape decoded).

Usage: python flask_router.py PORT. `/api` and everything below it is the "api" handler, every other path
"other"; each answers `{"handler": ..., "path": PATH_INFO}`. Flask's own redirects (merged slashes) answer
as Flask does.
"""

from __future__ import annotations

import sys

from flask import Flask, jsonify, request

app = Flask(__name__, static_folder=None)


def answer(handler: str):
    return jsonify(handler=handler, path=request.environ.get("PATH_INFO"))


@app.route("/api", defaults={"rest": ""}, methods=["GET", "POST"])
@app.route("/api/<path:rest>", methods=["GET", "POST"])
def api(rest: str):
    return answer("api")


@app.route("/", defaults={"rest": ""}, methods=["GET", "POST"])
@app.route("/<path:rest>", methods=["GET", "POST"])
def other(rest: str):
    return answer("other")


if __name__ == "__main__":
    from werkzeug.serving import run_simple

    run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True)
