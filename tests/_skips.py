"""Two kinds of skip. `pytest.skip` for what the machine lacks and the project cannot
change (not root, not Linux, no such hardware, a kernel without the feature);
`skip_setup` for what the project's own files set up (a Debian package of `make debs`,
the probe of `make install`, a Python package of the test extra, tracefs mounted by the
`tracefs` fixture). With $RTLAB_CI_STRICT=1 as root on Linux (`.ci/run`), a `skip_setup`
is a failure: there the project could have set it up, so the skip would hide a test."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

STRICT_ENV = "RTLAB_CI_STRICT"
TAG = "not set up: "  # starts the reason of every setup-class skip
MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"

# The external commands the tests run, by the Debian package that has them. Each is in
# TEST_DEBS of the Makefile (tests/test_skips.py checks), so `make debs` installs it.
DEBS = {
    "cyclictest": "rt-tests",
    "hackbench": "rt-tests",
    "stress-ng": "stress-ng",
    "iperf3": "iperf3",
    "chromium": "chromium",
    "sshd": "openssh-server",
    "ssh-keygen": "openssh-client",
    "ssh": "openssh-client",
    "setpriv": "util-linux",
    "unshare": "util-linux",
    "mount": "mount",
    "qemu-system-x86_64": "qemu-system-x86",
    "depmod": "kmod",
    "rtla": "rtla",
    # The kernel tree tests/test_kconfig_merge.py merges fragments into, and what its
    # scripts/kconfig needs besides gcc and make.
    "/usr/src/linux-source-6.1.tar.xz": "linux-source-6.1",
    "xz": "xz-utils",
    "flex": "flex",
    "bison": "bison",
}


class SetupSkipped(pytest.skip.Exception):
    """A skip for something the project's own files set up."""


def skip_setup(reason: str) -> NoReturn:
    """Skip for REASON, something `make debs`, `make install` or a fixture sets up."""
    __tracebackhide__ = True  # the summary names the caller's line, not this one
    raise SetupSkipped(TAG + reason)


def need_tool(name: str) -> str:
    """The path of the command NAME; a setup-class skip naming its Debian package."""
    __tracebackhide__ = True
    path = shutil.which(name)
    if path is None:
        skip_setup(f"{name} is not installed (Debian package {DEBS[name]}: make debs)")
    return path


def makefile_debs() -> list[str]:
    """TEST_DEBS of the Makefile: the packages `make debs` installs."""
    text = re.sub(r"\\\n", " ", MAKEFILE.read_text())  # continued lines joined
    m = re.search(r"^TEST_DEBS\s*:=(.*)$", text, re.M)
    return m.group(1).split() if m else []


def strict() -> bool:
    """Whether a setup-class skip fails: $RTLAB_CI_STRICT=1, root, Linux."""
    return os.environ.get(STRICT_ENV) == "1" and sys.platform == "linux" and os.geteuid() == 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    if rep.skipped and call.excinfo is not None and call.excinfo.errisinstance(SetupSkipped):
        rep.user_properties.append(("skip", "setup"))
        if strict():
            rep.outcome = "failed"
            rep.longrepr = (
                f"{call.excinfo.value.msg}\n"
                f"{STRICT_ENV}=1 as root: the project sets this up itself, so this skip fails"
            )
    return rep


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """How many skips were for the machine and how many for what the project sets up."""
    stats = terminalreporter.stats
    setup = [
        r
        for key in ("skipped", "failed", "error")
        for r in stats.get(key, [])
        if ("skip", "setup") in getattr(r, "user_properties", ())
    ]
    machine = len(stats.get("skipped", [])) - sum(r.skipped for r in setup)
    if not setup and not machine:
        return
    terminalreporter.write_sep("=", "skips by class")
    terminalreporter.write_line(f"{machine} skipped for what this machine lacks or forbids")
    failed = sum(not r.skipped for r in setup)
    how = f"failed ({STRICT_ENV}=1 as root)" if failed else "skipped"
    terminalreporter.write_line(
        f"{len(setup)} {how} for what the project sets up (make debs, make install, tracefs)"
    )
