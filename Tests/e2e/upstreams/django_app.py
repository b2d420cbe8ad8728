"""A single-file Django project whose one view echoes request.POST / request.FILES as JSON.

Under gunicorn: ``gunicorn django_app:application``; under Django's own development server:
``python django_app.py runserver 127.0.0.1:PORT --noreload``. Appends one JSON line per finished
request to ``$UPSTREAM_LOG``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="formwall-e2e-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
    DATABASES={},
    DATA_UPLOAD_MAX_MEMORY_SIZE=None,
    LOGGING_CONFIG=None,
)

from django.http import JsonResponse  # noqa: E402
from django.urls import re_path  # noqa: E402


def echo(request):
    fields = {k: request.POST.getlist(k) for k in request.POST.keys()}
    files = {}
    for name in request.FILES.keys():
        for f in request.FILES.getlist(name):
            data = f.read()
            files.setdefault(name, []).append(
                {"filename": f.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    record = {
        "app": os.environ.get("UPSTREAM_NAME", "django"), "method": request.method,
        "path": request.path, "request_id": request.headers.get("X-Request-Id"),
        "content_type": request.headers.get("Content-Type"),
        "content_length": request.headers.get("Content-Length"),
        "transfer_encoding": request.headers.get("Transfer-Encoding"),
        "fields": fields, "files": files,
    }
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")
    return JsonResponse(record)


urlpatterns = [re_path(r"^.*$", echo)]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
