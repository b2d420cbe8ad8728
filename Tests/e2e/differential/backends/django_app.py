"""Differential backend: Django's `request.POST` / `request.FILES` (single-file project, runserver).

python django_app.py runserver 127.0.0.1:PORT --noreload --skip-checks. Django keeps no order between
POST and FILES: parts are fields first, then files. `form[name]` is `request.POST[name]` (a QueryDict:
the last value) or `request.FILES[name]`.
"""

from __future__ import annotations

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
    DATA_UPLOAD_MAX_NUMBER_FIELDS=None,
    DATA_UPLOAD_MAX_NUMBER_FILES=None,
    LOGGING_CONFIG=None,
)

from django.http import HttpResponse  # noqa: E402
from django.urls import re_path  # noqa: E402

from echo_common import answer, digest, file_entry, log_request  # noqa: E402


def _read(f) -> bytes:
    f.seek(0)
    return f.read()


def echo(request):
    if request.method != "POST":
        return HttpResponse("ok")
    parts = [{"name": k, "filename": None, "content_type": None,
              **digest(v.encode("utf-8", "surrogateescape")), "kind": "field"}
             for k, values in request.POST.lists() for v in values]
    parts += [file_entry(k, f.name, f.content_type, _read(f))
              for k, files in request.FILES.lists() for f in files]
    form = {k: digest(request.POST[k].encode("utf-8", "surrogateescape")) for k in request.POST.keys()}
    for k in request.FILES.keys():
        f = request.FILES[k]
        form.setdefault(k, {**digest(_read(f)), "filename": f.name})
    log_request(request.headers.get("X-Request-Id"))
    return HttpResponse(answer(parts, form, order="fields-then-files"), content_type="application/json")


urlpatterns = [re_path(r"^.*$", echo)]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
