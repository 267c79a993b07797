"""A throw-away OpenSSH server on localhost for the target tests.

Each server has its own host key, an unprivileged port, its own TMPDIR for the sessions
(so that the tests can see what a run leaves there) and accepts one user key; it runs
in the foreground (`sshd -D`) and is stopped by its PID. A client HOME holds the user
key, known_hosts and ~/.ssh/config as OpenSSH would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ._skips import need_tool, skip_setup

SSHD = "/usr/sbin/sshd"


def need_sshd() -> None:
    """Skip unless the SSH tests can run here: root, sshd and the OpenSSH client."""
    __tracebackhide__ = True
    if os.geteuid() != 0:
        pytest.skip("needs root (sshd and the real-time policies of the quick preset)")
    if not os.access(SSHD, os.X_OK):
        skip_setup(f"no OpenSSH server ({SSHD}): Debian package openssh-server (make debs)")
    need_tool("ssh-keygen")
    need_tool("ssh")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> str:
    """A new ed25519 key pair at PATH; returns the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rtlab-test", "-f", str(path)],
        check=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone meanwhile
        return []
    for task in tasks:
        with contextlib.suppress(OSError):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(cond, timeout: float = 20.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class Sshd:
    """One server: `url` reaches it as root with the client's key."""

    dir: Path
    port: int
    proc: subprocess.Popen
    host_pub: str

    @property
    def url(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    @property
    def tmpdir(self) -> Path:
        """The TMPDIR of this server's sessions: where rtlab's private directories go."""
        return self.dir / "tmp"

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {' '.join(self.host_pub.split()[:2])}"

    def probes(self) -> list[int]:
        """PIDs of the probes this server's sessions run (descendants by PID, not names)."""
        return [p for p in descendants(self.proc.pid) if _exe(p).endswith("/rtlab-probe")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return ""


def start_sshd(base: Path, user_pub: str) -> Sshd:
    base.mkdir(parents=True)
    (base / "tmp").mkdir()
    host_pub = keygen(base / "host_key")
    (base / "authorized_keys").write_text(user_pub + "\n")
    port = free_port()
    config = base / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {base / 'host_key'}",
                f"PidFile {base / 'sshd.pid'}",
                f"AuthorizedKeysFile {base / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "LogLevel ERROR",
                f"SetEnv TMPDIR={base / 'tmp'}",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = base / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=log.open("wb"))
    server = Sshd(base, port, proc, host_pub)

    def listening() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"sshd exited {proc.returncode}: {log.read_text()}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, what="sshd to listen")
    return server


def client_home(home: Path, servers: list[Sshd]) -> Path:
    """HOME of the client: ~/.ssh/id_ed25519 (made before the servers), known_hosts."""
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, exist_ok=True, mode=0o700)
    (ssh / "known_hosts").write_text("".join(s.known_hosts_line() + "\n" for s in servers))
    return home
