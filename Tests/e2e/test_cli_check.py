"""End-to-end tests for `formwall check`: runs the built binary ($FORMWALL_BIN, default .build/debug/formwall)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build/debug/formwall"))
RULES = ROOT / "rules"


def check(*args):
    return subprocess.run([BIN, "check", *map(str, args)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("path", sorted(RULES.glob("*.rules")), ids=lambda p: p.name)
def test_every_shipped_rule_file_passes(path):
    result = check(path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == "formwall check: 1 file, 0 errors, 0 warnings\n"


def test_directory_argument_checks_its_rule_files_as_one_policy():
    result = check(RULES)
    assert result.returncode == 0, result.stderr
    count = len(list(RULES.glob("*.rules")))
    assert result.stdout == f"formwall check: {count} files, 0 errors, 0 warnings\n"


def test_directory_ignores_other_files_and_reports_errors_inside(tmp_path):
    (tmp_path / "a.rules").write_text("mode monitor;\n")
    (tmp_path / "b.rules").write_text("route /b {\n    bogus 1;\n}\n")
    (tmp_path / "notes.txt").write_text("not rules at all {\n")
    result = check(tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"{tmp_path}/b.rules:2:5: error: unknown directive 'bogus'\n"
    assert result.stdout == "formwall check: 2 files, 1 error, 0 warnings\n"


def test_broken_file_gives_exact_diagnostics_and_exit_1(tmp_path):
    bad = tmp_path / "bad.rules"
    bad.write_text("route /a {\n  bogus 1;\n  body-max 12QB;\n}\n")
    result = check(bad)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{bad}:2:3: error: unknown directive 'bogus'",
        f"{bad}:3:12: error: bad size '12QB' for 'body-max': expected a whole number with an optional unit "
        "B, k/KiB, m/MiB, g/GiB or t/TiB (binary, any case), at most 1 TiB",
    ]
    assert result.stdout == "formwall check: 1 file, 2 errors, 0 warnings\n"


def test_warnings_are_printed_but_do_not_fail(tmp_path):
    rules = tmp_path / "w.rules"
    rules.write_text("route /w {\n    body-max 1KiB;\n    file f {\n        max 2KiB;\n    }\n}\n")
    result = check(rules)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{rules}:3:5: warning: file 'f' max 2 KiB can never be reached")
    assert result.stdout == "formwall check: 1 file, 0 errors, 1 warning\n"


def test_include_cycle_is_reported_at_the_include(tmp_path):
    a = tmp_path / "a.rules"
    b = tmp_path / "b.rules"
    a.write_text('mode enforce;\ninclude "b.rules";\n')
    b.write_text('\n\n  include "a.rules";\n')
    result = check(a)
    assert result.returncode == 1
    assert result.stderr == f"{b}:3:11: error: include cycle: {a} -> {b} -> {a}\n"
    assert result.stdout == "formwall check: 1 file, 1 error, 0 warnings\n"


def test_missing_file_is_an_error_diagnostic(tmp_path):
    gone = tmp_path / "gone.rules"
    result = check(gone)
    assert result.returncode == 1
    assert result.stderr == f"{gone}:1:1: error: cannot read '{gone}': no such file or directory\n"
    assert result.stdout == "formwall check: 0 files, 1 error, 0 warnings\n"


@pytest.mark.parametrize("args", [[], ["--strict", "x.rules"]], ids=["no-paths", "unknown-option"])
def test_usage_errors_exit_2_with_one_line(args):
    result = check(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("formwall: ")


def test_help_lists_the_exit_codes():
    result = check("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: formwall check FILE|DIR...")


def test_part_charsets_and_character_references_are_validated(tmp_path):
    """docs/rules.md: `part-charsets` takes charset names (a charset that writes ASCII as other bytes is a warning),
    `character-references` allow or reject."""
    rules = tmp_path / "charsets.rules"
    rules.write_text("part-charsets utf-8 \"utf 8\";\n"
                     "route /a {\n    part-charsets UTF-8 utf-7;\n    character-references maybe;\n}\n")
    result = check(rules)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{rules}:1:21: error: invalid charset name 'utf 8' for 'part-charsets': expected 1 to 40 letters, digits "
        "or ! # $ % & ' + - ^ _ ` { } ~ (utf-8, iso-8859-1)",
        f"{rules}:3:25: warning: 'part-charsets' allows utf-7, which writes ASCII characters as other bytes: a value "
        "in it can carry markup or quotes that no check reading ASCII sees",
        f"{rules}:4:26: error: unknown character-references setting 'maybe': expected allow or reject",
    ]
    assert result.stdout == "formwall check: 1 file, 2 errors, 1 warning\n"
    rules.write_text("part-charsets utf-8 iso-8859-1;\nroute /a { character-references reject; file f; }\n")
    assert check(rules).returncode == 0
