"""The framework table: which real servers accept a chunked multipart request body.

EXPECTED below is the one place the table is kept. Upstreams/measure_chunked.py measures it (a
chunked multipart POST sent directly to each server, no Formwall), this test asserts the
measurement equals EXPECTED, and that docs/configuration.md ("Which frameworks accept chunked
request bodies") contains EXPECTED rendered as Markdown, i.e. the doc mirrors this dict.
To regenerate the doc table: `.venv/bin/python Tests/e2e/upstreams/measure_chunked.py`.
"""

from __future__ import annotations

import pytest

from e2e_helpers import REPO
from upstreams.measure_chunked import markdown, measure_all

EXPECTED = {
    "werkzeug": "intact",
    "gunicorn": "intact",
    "uvicorn": "intact",
    "django-gunicorn": "empty form",
    "django-runserver": "empty form",
    "php": "intact",
    "node": "intact",
}


def test_doc_mirrors_expected_table():
    doc = (REPO / "docs" / "configuration.md").read_text()
    assert "Which frameworks accept chunked request bodies" in doc
    assert markdown(EXPECTED) in doc, "docs/configuration.md's table differs from EXPECTED:\n" + markdown(EXPECTED)


@pytest.mark.timeout(120)
def test_measured_chunked_support_matches_table(tmp_path):
    assert measure_all(tmp_path) == EXPECTED
