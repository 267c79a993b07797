"""The version is written once, in the file VERSION: the package, rtlab and rtlab-probe
all report it, and no build file carries a copy."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib.metadata import version
from pathlib import Path

from rtlab import __version__
from rtlab.probe import find_probe

ROOT = Path(__file__).resolve().parents[1]
VERSION = (ROOT / "VERSION").read_text()


def test_version_file_is_one_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", VERSION), VERSION


def test_installed_package_and_commands_report_it(rtlab):
    want = VERSION.strip()
    assert version("rtlab") == want
    assert __version__ == want
    rc, out, _ = rtlab("--version")
    assert rc == 0 and out.split() == ["rtlab,", "version", want]
    probe = subprocess.run(
        [str(find_probe()), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert probe.returncode == 0 and probe.stdout.split() == ["rtlab-probe", want]


def test_no_build_file_carries_a_copy():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    for build, path in (("meson.build", "'VERSION'"), ("probe/meson.build", "'../VERSION'")):
        text = (ROOT / build).read_text()
        head = text[text.index("project(") : text.index(")", text.index("default_options"))]
        assert f"version : files({path})" in head, build
        assert not re.search(r"\bversion : '", head), build
