"""The documentation keeps up with the code: a short README, every command and meter documented.

A new `rtlab` subcommand or `rtlab-probe` meter fails these tests until docs/*.md
mentions it as `rtlab <cmd>` or `rtlab-probe <meter>`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from click.testing import CliRunner

from rtlab.cli import cli
from rtlab.errors import UserError
from rtlab.probe import find_probe

from ._skips import skip_setup

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_LIMIT = 12_000
README_HEAD = 1_500


def docs_text() -> str:
    pages = sorted(DOCS.glob("*.md"))
    assert pages, f"no pages in {DOCS}"
    return "\n".join(p.read_text(encoding="utf-8") for p in pages)


def section_names(help_text: str, heading: str) -> list[str]:
    """First word of each entry under HEADING, up to the next blank line.

    Entries are indented by two spaces; deeper-indented lines continue a wrapped entry.
    """
    lines = help_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().lower() == heading.lower()]
    assert starts, f"no {heading!r} section in:\n{help_text}"
    names = []
    for line in lines[starts[0] + 1 :]:
        if not line.strip() or not line.startswith(" "):
            break
        if not line.startswith("   "):
            names.append(line.split()[0])
    assert names, f"{heading!r} section is empty in:\n{help_text}"
    return names


def rtlab_help(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="rtlab")
    assert result.exit_code == 0, result.output
    return result.output


def test_readme_is_short_and_starts_with_make_run_and_make_test():
    data = README.read_bytes()
    assert len(data) < README_LIMIT, f"README.md is {len(data)} bytes (limit {README_LIMIT})"
    head = data[:README_HEAD].decode("utf-8", errors="ignore")
    assert "make run" in head
    assert "make test" in head


def test_every_rtlab_subcommand_is_documented():
    text = docs_text()
    commands = section_names(rtlab_help(), "Commands:")
    missing = [c for c in commands if f"rtlab {c}" not in text]
    assert not missing, f"not documented in docs/*.md as `rtlab <cmd>`: {missing}"


def test_every_nested_rtlab_subcommand_is_documented():
    """Groups such as `rtlab import`: each of their commands as `rtlab import <cmd>`."""
    text = docs_text()
    missing = []
    for command in section_names(rtlab_help(), "Commands:"):
        sub_help = rtlab_help(command)
        if "Commands:" not in sub_help.splitlines():
            continue
        for sub in section_names(sub_help, "Commands:"):
            if f"rtlab {command} {sub}" not in text:
                missing.append(f"{command} {sub}")
    assert not missing, f"not documented in docs/*.md as `rtlab <cmd> <sub>`: {missing}"


def test_every_probe_meter_is_documented():
    try:
        probe = find_probe()
    except UserError as e:
        skip_setup(f"rtlab-probe not found: {e}")
    cp = subprocess.run([str(probe), "--help"], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    text = docs_text()
    meters = section_names(cp.stdout, "meters:")
    missing = [m for m in meters if f"rtlab-probe {m}" not in text]
    assert not missing, f"not documented in docs/*.md as `rtlab-probe <meter>`: {missing}"


# [text](target) links; targets with a scheme (https:, mailto:) are not relative.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def test_readme_links_into_docs_exist():
    text = README.read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", t)]
    to_docs = [t for t in targets if t.split("#")[0].removeprefix("./").startswith("docs/")]
    assert to_docs, "README.md links to no page in docs/"
    broken = [t for t in to_docs if not (ROOT / t.split("#")[0]).is_file()]
    assert not broken, f"README.md links to missing files: {broken}"
