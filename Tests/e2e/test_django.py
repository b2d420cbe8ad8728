"""Django behind Formwall: request.POST / request.FILES, with spool and with chunked upstream bodies.

Django's WSGIRequest reads exactly CONTENT_LENGTH bytes of the body; a request without a
Content-Length (Transfer-Encoding: chunked) has an empty body as far as Django is concerned, under
gunicorn and under runserver alike (see test_framework_chunked_table.py). That is why
`--upstream-body spool` exists: Formwall stages the re-encoded body and sends a Content-Length.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e_helpers import new_session, sha256

HERE = Path(__file__).resolve().parent
PERMISSIVE_RULES = HERE / "rules" / "permissive.rules"
TIMEOUT = 10.0

FIELDS = {"title": ["Grüße aus Köln — ça va? 日本語 ✓"], "tag": ["α", "β", "γ"], "empty": [""]}
FILE_DATA = bytes(range(256)) * 1024 + "ünïcödé\r\n--not-a-boundary\r\n".encode()  # 256 KiB + a bit
FILE_NAME = "report-2024.bin"

RULES = {"no-rules": [], "rules": ["--rules", str(PERMISSIVE_RULES)]}


def _fields_as_pairs(fields: dict) -> list[tuple[str, str]]:
    return [(k, v) for k, values in fields.items() for v in values]


@pytest.mark.parametrize("rules", list(RULES))
@pytest.mark.parametrize("kind", ["django-gunicorn", "django-runserver"])
def test_django_multipart_with_spool(kind, rules, real_upstream_factory, formwall_factory):
    up = real_upstream_factory(kind)
    fw = formwall_factory(up.url, "--upstream-body", "spool", *RULES[rules])
    with new_session() as s:
        resp = s.post(f"{fw.url}/upload", data=_fields_as_pairs(FIELDS),
                      files={"doc": (FILE_NAME, FILE_DATA, "application/octet-stream")},
                      headers={"X-Request-Id": "django-multipart"}, timeout=TIMEOUT)
    assert resp.status_code == 200, resp.text[:500]
    doc = resp.json()
    assert doc["fields"] == FIELDS
    assert doc["files"] == {"doc": [{"filename": FILE_NAME, "size": len(FILE_DATA), "sha256": sha256(FILE_DATA)}]}
    assert doc["transfer_encoding"] is None and doc["content_length"] is not None, doc


@pytest.mark.parametrize("rules", list(RULES))
@pytest.mark.parametrize("kind", ["django-gunicorn", "django-runserver"])
def test_django_urlencoded_with_spool(kind, rules, real_upstream_factory, formwall_factory):
    up = real_upstream_factory(kind)
    fw = formwall_factory(up.url, "--upstream-body", "spool", *RULES[rules])
    with new_session() as s:
        resp = s.post(f"{fw.url}/form", data=_fields_as_pairs(FIELDS) + [("amp", "a&b=c+d %")],
                      headers={"X-Request-Id": "django-urlencoded"}, timeout=TIMEOUT)
    assert resp.status_code == 200, resp.text[:500]
    doc = resp.json()
    assert doc["fields"] == {**FIELDS, "amp": ["a&b=c+d %"]}
    assert doc["files"] == {}
    assert doc["content_type"].startswith("application/x-www-form-urlencoded"), doc


@pytest.mark.parametrize("kind", ["django-gunicorn", "django-runserver"])
def test_django_with_chunked_upstream_body_sees_an_empty_form(kind, real_upstream_factory, formwall_factory):
    """Measured behaviour, asserted so that a change is noticed: with `--upstream-body chunked`
    (the default), Django answers 200 with an EMPTY request.POST and request.FILES. No error, the
    form is silently lost. This is the reason `--upstream-body spool` exists."""
    up = real_upstream_factory(kind)
    fw = formwall_factory(up.url, "--upstream-body", "chunked")
    with new_session() as s:
        resp = s.post(f"{fw.url}/upload", data=_fields_as_pairs(FIELDS),
                      files={"doc": (FILE_NAME, FILE_DATA, "application/octet-stream")},
                      headers={"X-Request-Id": "django-chunked"}, timeout=TIMEOUT)
    assert resp.status_code == 200, resp.text[:500]
    doc = resp.json()
    assert (doc["transfer_encoding"] or "").lower() == "chunked" and not doc["content_length"], doc
    assert doc["fields"] == {} and doc["files"] == {}, doc
