"""End-to-end tests for `formwall quarantine`: runs the built binary ($FORMWALL_BIN, default .build/debug/formwall).

Items are created with `formwall quarantine add`, which stores a file through the same `QuarantineStore`
begin/write/commit path the proxy uses, so the tests see the real on-disk layout.
"""

import hashlib
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build/debug/formwall"))
ID = re.compile(r"^[0-9a-f]{32}$")


def quarantine(*args):
    return subprocess.run([BIN, "quarantine", *map(str, args)], capture_output=True, timeout=30)


def ok(*args):
    result = quarantine(*args)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr == b""
    return result.stdout.decode()


def add(store, tmp_path, content, name, filename=None, violations=()):
    source = tmp_path / f"src-{len(list(tmp_path.iterdir()))}"
    source.write_bytes(content)
    args = ["add", "--dir", store, "--file", source, "--name", name]
    if filename is not None:
        args += ["--filename", filename]
    for v in violations:
        args += ["--violation", v]
    item = ok(*args).strip()
    assert ID.match(item)
    return item


@pytest.fixture
def store(tmp_path):
    return tmp_path / "quarantine"


@pytest.fixture
def items(store, tmp_path):
    """Three items, oldest first, with their bytes."""
    data = [os.urandom(3000), b"", b"<?php system($_GET['c']); ?>"]
    ids = [
        add(store, tmp_path, data[0], "avatar", "me.png", ["file_too_large:7.2 MiB > 5 MiB", "type_not_allowed"]),
        add(store, tmp_path, data[1], "notes"),
        add(store, tmp_path, data[2], "upload", "shell.php", ["file_type_mismatch:declared image/png, content is php"]),
    ]
    return list(zip(ids, data))


def item_dir(store, item):
    (found,) = store.glob(f"[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]/{item}")
    return found


def test_add_writes_the_documented_layout(store, items):
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    for item, data in items:
        directory = item_dir(store, item)
        assert sorted(p.name for p in directory.iterdir()) == [f"{item}.bin", f"{item}.json"]
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert (directory / f"{item}.bin").read_bytes() == data
        assert stat.S_IMODE((directory / f"{item}.bin").stat().st_mode) == 0o600
        sidecar = json.loads((directory / f"{item}.json").read_text())
        assert sidecar["id"] == item and sidecar["size"] == len(data)
        assert sidecar["sha256"] == hashlib.sha256(data).hexdigest()


def test_list_table(store, items):
    lines = ok("list", "--dir", store).splitlines()
    assert lines[0].split() == ["ID", "TIME", "SIZE", "SHA256", "PART", "FILENAME", "VIOLATION"]
    rows = [line.split() for line in lines[1:]]
    assert [r[0] for r in rows] == [item for item, _ in items]  # oldest first
    for row, (item, data) in zip(rows, items):
        assert re.match(r"^\d{4}-\d\d-\d\d$", row[1]) and re.match(r"^\d\d:\d\d:\d\dZ$", row[2])
        assert row[3] == str(len(data))
        assert row[4] == hashlib.sha256(data).hexdigest()[:12]
    assert rows[0][5:] == ["avatar", "me.png", "file_too_large"]
    assert rows[1][5:] == ["notes", "-", "-"]
    assert rows[2][5:] == ["upload", "shell.php", "file_type_mismatch"]
    # Columns line up: every row's SHA256 column starts where the header's does.
    column = lines[0].index("SHA256")
    assert all(line[column:column + 12] == row[4] for line, row in zip(lines[1:], rows))


def test_list_json_is_one_sidecar_object_per_line(store, items):
    lines = ok("list", "--dir", store, "--json").splitlines()
    assert len(lines) == len(items)
    for line, (item, data) in zip(lines, items):
        obj = json.loads(line)
        sidecar = json.loads((item_dir(store, item) / f"{item}.json").read_text())
        assert obj == sidecar
    first = json.loads(lines[0])
    assert first["part_name"] == "avatar" and first["filename"] == "me.png"
    assert first["violations"] == [
        {"kind": "file_too_large", "detail": "7.2 MiB > 5 MiB", "rule": None},
        {"kind": "type_not_allowed", "detail": "", "rule": None},
    ]


def test_list_empty_store_prints_only_the_header(store):
    store.mkdir()
    assert ok("list", "--dir", store).split() == ["ID", "TIME", "SIZE", "SHA256", "PART", "FILENAME", "VIOLATION"]
    assert ok("list", "--dir", store, "--json") == ""


def test_hostile_names_cannot_reach_the_terminal_or_break_the_table(store, tmp_path):
    add(store, tmp_path, b"x", "a b", "\x1b[2Jevil\tname.png")
    lines = ok("list", "--dir", store).splitlines()
    assert "\x1b" not in "".join(lines)
    row = lines[1].split()
    assert row[5:] == ["a\\x20b", "\\x1b[2Jevil\\x09name.png", "-"]


def test_show_prints_the_sidecar_as_stored(store, items):
    item, _ = items[2]
    shown = ok("show", item, "--dir", store)
    assert shown == (item_dir(store, item) / f"{item}.json").read_text()
    assert json.loads(shown)["filename_sanitized"] == "shell.php"


def test_release_copies_bytes_0600_and_never_overwrites(store, items, tmp_path):
    item, data = items[0]
    target = tmp_path / "out.png"
    out = ok("release", item, "--to", target, "--dir", store)
    digest = hashlib.sha256(data).hexdigest()
    assert out == f"released {item} to {target} ({len(data)} bytes, sha256 {digest} verified)\n"
    assert target.read_bytes() == data
    assert stat.S_IMODE(target.stat().st_mode) == 0o600

    target.write_bytes(b"keep me")
    again = quarantine("release", item, "--to", target, "--dir", store)
    assert again.returncode == 1
    assert again.stderr.decode() == f"formwall: {target} already exists; release never overwrites\n"
    assert target.read_bytes() == b"keep me"

    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    assert quarantine("release", item, "--to", link, "--dir", store).returncode == 1
    assert not (tmp_path / "elsewhere").exists()


def test_release_of_tampered_bytes_fails_and_leaves_no_copy(store, items, tmp_path):
    item, data = items[0]
    (item_dir(store, item) / f"{item}.bin").write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # never equal
    target = tmp_path / "out.bin"
    result = quarantine("release", item, "--to", target, "--dir", store)
    assert result.returncode == 1
    assert result.stderr.decode().startswith("formwall: quarantine release: corrupt: ")
    assert not target.exists()


def test_release_into_a_missing_directory(store, items, tmp_path):
    item, _ = items[0]
    target = tmp_path / "nope" / "out.bin"
    result = quarantine("release", item, "--to", target, "--dir", store)
    assert result.returncode == 1
    assert result.stderr.decode() == f"formwall: cannot create {target}: No such file or directory\n"


def test_delete_removes_the_item(store, items):
    item, _ = items[1]
    assert ok("delete", item, "--dir", store) == f"deleted {item}\n"
    assert not item_dir_exists(store, item)
    assert [r.split()[0] for r in ok("list", "--dir", store).splitlines()[1:]] == [items[0][0], items[2][0]]
    again = quarantine("delete", item, "--dir", store)
    assert again.returncode == 1
    assert again.stderr.decode() == f"formwall: no quarantined item {item} in {store}\n"


def item_dir_exists(store, item):
    return bool(list(store.glob(f"*/*/*/{item}")))


@pytest.mark.parametrize("action", ["show", "release", "delete"])
def test_unknown_and_invalid_ids(store, items, tmp_path, action):
    extra = ["--to", tmp_path / "x"] if action == "release" else []
    unknown = "0" * 32
    result = quarantine(action, unknown, "--dir", store, *extra)
    assert result.returncode == 1
    assert result.stderr.decode() == f"formwall: no quarantined item {unknown} in {store}\n"
    for bad in ["../../etc/passwd", "ABCDEF" + "0" * 26, "abc"]:
        result = quarantine(action, bad, "--dir", store, *extra)
        assert result.returncode == 1
        assert result.stderr.decode() == f"formwall: '{bad}' is not a quarantine ID (32 lowercase hex digits)\n"
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args", [["list"], ["show", "0" * 32], ["delete", "0" * 32]])
def test_missing_store_is_an_error_and_is_not_created(tmp_path, args):
    missing = tmp_path / "missing"
    result = quarantine(*args, "--dir", missing)
    assert result.returncode == 1
    assert result.stderr.decode() == f"formwall: quarantine directory {missing}: No such file or directory\n"
    assert not missing.exists()


def test_store_that_is_a_file(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    result = quarantine("list", "--dir", file)
    assert result.returncode == 1
    assert result.stderr.decode() == f"formwall: quarantine directory {file}: not a directory\n"


@pytest.mark.parametrize("args", [
    [], ["purge"], ["show"], ["list", "extra"], ["release", "0" * 32], ["list", "--to", "x"],
    ["show", "0" * 32, "--json"], ["add", "--name", "x"], ["list", "--dir"],
])
def test_usage_errors_exit_2(store, args):
    result = quarantine(*args) if args[-1:] == ["--dir"] else quarantine(*args, "--dir", store)
    assert result.returncode == 2
    assert result.stdout == b""
    err = result.stderr.decode()
    assert len(err.splitlines()) == 1 and err.startswith("formwall: ")


def test_help_documents_every_action():
    result = quarantine("--help")
    assert result.returncode == 0
    for action in ["list", "show", "release", "delete", "add"]:
        assert f"formwall quarantine {action}" in result.stdout.decode()


def test_damaged_sidecar_is_unlisted_but_can_be_shown_and_deleted(store, items, tmp_path):
    item, _ = items[0]
    (item_dir(store, item) / f"{item}.json").write_text("garbage\n")
    assert item not in ok("list", "--dir", store)
    assert ok("show", item, "--dir", store) == "garbage\n"
    result = quarantine("release", item, "--to", tmp_path / "out", "--dir", store)
    assert result.returncode == 1
    assert result.stderr.decode().startswith("formwall: quarantine release: corrupt: parse sidecar ")
    assert ok("delete", item, "--dir", store) == f"deleted {item}\n"
    assert not item_dir_exists(store, item)
