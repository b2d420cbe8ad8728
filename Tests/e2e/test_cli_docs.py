"""docs/cli.md and `--help` list the same options.

`formwall --help` names the commands; for each, the options `formwall <command> --help` prints (every `--name`
in it) must appear in that command's section of docs/cli.md (`## \\`formwall <command>…\\``), and every option the
section documents (in an option table's first column, or a `formwall <command> …` usage line) must be one
`--help` prints. The top-level options (`formwall --help` itself, `--version`) belong to the part above the first
section. A command `formwall --help` lists gets a section: a new command is checked as soon as it exists.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from e2e_helpers import REPO, formwall_binary

CLI_MD = REPO / "docs" / "cli.md"
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def formwall(*args: str) -> subprocess.CompletedProcess:
    binary = formwall_binary()
    if not binary.exists():
        pytest.skip(f"no formwall binary at {binary} (set FORMWALL_BIN)")
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30)


def commands() -> list[str]:
    top = formwall("--help")
    assert top.returncode == 0, top.stderr
    listed = top.stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    assert {"serve", "check", "tail"} <= set(names), names
    return names


def help_options(*command: str) -> set[str]:
    result = formwall(*command, "--help")
    assert result.returncode == 0, result.stderr
    return set(OPTION.findall(result.stdout))


def sections() -> dict[str, str]:
    """docs/cli.md by command: the text under `## \\`formwall NAME…\\``; "" is the part above the first section."""
    text = CLI_MD.read_text()
    parts = re.split(r"^## ", text, flags=re.M)
    found = {"": parts[0]}
    for part in parts[1:]:
        heading = re.match(r"`formwall ([a-z]+)", part)
        if heading:
            assert heading.group(1) not in found, f"two sections for {heading.group(1)}"
            found[heading.group(1)] = part
    return found


def documented(name: str, section: str) -> set[str]:
    """The options a section documents: the first column of its tables, and its `formwall NAME …` usage lines."""
    options = set()
    for line in section.splitlines():
        stripped = line.strip()
        if stripped.startswith("| `--") or stripped.startswith("| `-"):
            options |= set(OPTION.findall(stripped.split("|")[1]))
        elif stripped.startswith(f"formwall {name}" if name else "formwall --"):
            options |= set(OPTION.findall(stripped))
    return options


def test_every_command_has_a_section():
    missing = [name for name in commands() if name not in sections()]
    assert not missing, f"docs/cli.md has no `## \\`formwall NAME\\`` section for {missing}"


@pytest.mark.parametrize("name", [""] + ["serve", "demo", "inspect", "check", "tail", "quarantine"])
def test_help_and_cli_md_list_the_same_options(name):
    if name and name not in commands():
        pytest.skip(f"`formwall --help` does not list {name}")
    section = sections().get(name)
    assert section is not None, f"docs/cli.md has no section for `formwall {name}`"
    printed = help_options(name) if name else help_options()
    if name:
        printed.discard("--help")  # every command's; the top section says so once
    mentioned = set(OPTION.findall(section))
    assert printed <= mentioned, f"`formwall {name} --help` prints {sorted(printed - mentioned)}, docs/cli.md not"
    extra = documented(name, section) - printed - {"--help"}
    assert not extra, f"docs/cli.md documents {sorted(extra)} for `formwall {name}`, which `--help` does not print"


def test_commands_added_later_are_checked_too():
    """A command `formwall --help` lists beyond the ones named above (e.g. `reload`) is held to the same rule."""
    for name in commands():
        section = sections().get(name)
        assert section is not None, f"docs/cli.md has no section for `formwall {name}`"
        printed = help_options(name) - {"--help"}
        assert printed <= set(OPTION.findall(section)), (name, sorted(printed - set(OPTION.findall(section))))
        assert not (documented(name, section) - printed - {"--help"}), name


def test_help_lists_version_and_help():
    """`formwall --version` works, so the top-level help lists it (before: it did not)."""
    version = formwall("--version")
    assert version.returncode == 0 and version.stdout.startswith("formwall "), version
    assert {"--help", "--version"} <= help_options()


CONFIGURATION_MD = REPO / "docs" / "configuration.md"
TLS_MD = REPO / "docs" / "tls.md"


def test_every_choice_serve_accepts_is_in_the_configuration_tables():
    """An option whose `--help` line lists its values (`--upstream-body chunked|hold|spool`) lists the same ones
    wherever docs/configuration.md's tables spell them out (before: the `--upstream-body` row lacked `hold`)."""
    help_text = formwall("serve", "--help").stdout
    choices = {name: set(values.split("|")) for name, values in
               re.findall(r"^\s+--([a-z][a-z0-9-]*) ([a-z0-9.]+(?:\|[a-z0-9.]+)+)\s", help_text, re.M)}
    assert {"upstream-body", "log-level", "underscore-headers"} <= set(choices), choices
    rows = [line for line in CONFIGURATION_MD.read_text().splitlines() if line.startswith("| `--")]
    for name, values in choices.items():
        spelled = [set(m.replace("\\|", "|").split("|"))
                   for row in rows for m in re.findall(rf"`--{name} ([a-z0-9.]+(?:\\\|[a-z0-9.]+)+)`", row)]
        for documented_values in spelled:
            assert documented_values == values, f"--{name}: docs/configuration.md {documented_values}, --help {values}"
    upstream_body = [row for row in rows if row.startswith("| `--upstream-body ")]
    assert upstream_body and all("`hold`" in row for row in upstream_body), upstream_body


def test_configuration_and_tls_docs_agree_on_x_forwarded_proto():
    """docs/configuration.md's header table says what docs/tls.md says and the proxy sends (test_tls checks the
    values): `https` over TLS, `http` otherwise (before: `http` only, "Formwall does not terminate TLS")."""
    (row,) = [line for line in CONFIGURATION_MD.read_text().splitlines() if line.startswith("| `X-Forwarded-Proto`")]
    assert "`https`" in row and "`http`" in row and "does not terminate TLS" not in row, row
    assert "`X-Forwarded-Proto: https`" in TLS_MD.read_text()


def test_cli_md_says_what_check_does_with_a_directory_without_rules(tmp_path):
    """`check DIR` with no *.rules in DIR is an error (exit 1); docs/cli.md said so and also the opposite."""
    result = formwall("check", str(tmp_path))
    assert result.returncode == 1 and "has no *.rules files" in result.stderr, result
    check = sections()["check"]
    assert "is not an error: it checks as 0 files" not in check
    assert re.search(r"directory with no `\*\.rules` files is an error", check), check
