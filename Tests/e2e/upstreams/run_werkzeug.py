"""werkzeug's real development server (``run_simple``, threaded) serving wsgi_app.app.

Unlike Tests/e2e/upstream_app.py, nothing is patched: this server answers every request with
``Connection: close``, as werkzeug 3 does.  Usage: run_werkzeug.py PORT
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from werkzeug.serving import run_simple  # noqa: E402

from wsgi_app import app  # noqa: E402

if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True, use_reloader=False)
