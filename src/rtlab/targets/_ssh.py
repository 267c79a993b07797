"""SSH targets through asyncssh, with the OpenSSH conventions: ~/.ssh/config (host
aliases, User, Port, IdentityFile), keys under ~/.ssh and the agent, host keys checked
against known_hosts. A host not in known_hosts is refused unless --accept-new-host-key
(OpenSSH's StrictHostKeyChecking=accept-new): then its key is recorded there; a key that
differs from the recorded one is always refused. No password is ever asked or taken."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path
from typing import Any

from rtlab.errors import LostError, UnsupportedError
from rtlab.targets._spec import TargetSpec

CONNECT_TIMEOUT_S = 30
KEEPALIVE_S, KEEPALIVE_COUNT = 15, 4  # a silent network is noticed within a minute


def _asyncssh() -> Any:
    try:
        import asyncssh
    except ImportError:
        raise UnsupportedError(
            "SSH targets need the Python package asyncssh (pip install asyncssh)"
        ) from None
    return asyncssh


def known_hosts_file(spec: TargetSpec) -> Path:
    return Path(spec.known_hosts or os.path.join(os.path.expanduser("~"), ".ssh", "known_hosts"))


def _make_client(asyncssh: Any, spec: TargetSpec, accept_new: bool) -> Any:
    class Client(asyncssh.SSHClient):
        """Decides about a host key that known_hosts does not hold."""

        changed = accepted = False

        def validate_host_public_key(self, host: str, addr: str, port: int, key: Any) -> bool:
            if not accept_new:
                return False
            path = known_hosts_file(spec)
            if path.is_file():
                found = asyncssh.read_known_hosts(str(path)).match(host, addr, port)
                if any(found[:3]):  # trusted, CA or revoked keys: this host is known
                    Client.changed = True
                    return False
            name = host if port in (22, None) else f"[{host}]:{port}"
            words = key.export_public_key("openssh").decode().split()[:2]
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(f"{name} {' '.join(words)}\n")
            Client.accepted = True
            return True

    return Client


class SshChannel:
    def __init__(self, proc: Any, label: str, asyncssh: Any) -> None:
        self.proc, self.label, self._errors = proc, label, (asyncssh.Error, OSError)

    def _lost(self, e: BaseException) -> LostError:
        return LostError(f"connection to {self.label} lost ({e})")

    async def readline(self) -> bytes:
        try:
            return await self.proc.stdout.readline()
        except self._errors as e:
            raise self._lost(e) from None

    async def read(self) -> bytes:
        try:
            return await self.proc.stdout.read()
        except self._errors as e:
            raise self._lost(e) from None

    def write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
        except self._errors as e:
            raise self._lost(e) from None

    def write_eof(self) -> None:
        with contextlib.suppress(*self._errors):
            self.proc.stdin.write_eof()

    async def finish(self) -> tuple[int | None, bytes]:
        try:
            err = await self.proc.stderr.read()
            done = await self.proc.wait()
        except self._errors:
            return None, b""
        status = done.exit_status
        if status is not None and status >= 0:
            return status, err
        return _signal_status(done.exit_signal), err


def _signal_status(exit_signal: Any) -> int | None:
    """A command killed by a signal as a shell reports it (128 + its number); None when
    the connection ended without an exit status or a signal (lost)."""
    if not exit_signal:
        return None
    try:
        return 128 + int(signal.Signals["SIG" + str(exit_signal[0])])
    except KeyError:
        return 128


class SshTransport:
    def __init__(self, conn: Any, label: str, asyncssh: Any) -> None:
        self.conn, self.label, self.asyncssh = conn, label, asyncssh

    async def open(self, command: str) -> SshChannel:
        try:
            proc = await self.conn.create_process(command, encoding=None)
        except (self.asyncssh.Error, OSError) as e:
            raise LostError(f"connection to {self.label} lost ({e})") from None
        return SshChannel(proc, self.label, self.asyncssh)

    async def close(self) -> None:
        self.conn.close()
        with contextlib.suppress(self.asyncssh.Error, OSError):
            await self.conn.wait_closed()


async def connect(spec: TargetSpec, accept_new: bool = False) -> SshTransport:
    """An SSH connection to SPEC; UnsupportedError (exit 3) with one line when it cannot."""
    asyncssh = _asyncssh()
    label = spec.name
    kw: dict[str, Any] = {}
    if spec.user:
        kw["username"] = spec.user
    if spec.port:
        kw["port"] = spec.port
    if spec.identity:
        kw["client_keys"] = [spec.identity]
    if spec.known_hosts:  # a file not made yet holds no key
        path = spec.known_hosts
        kw["known_hosts"] = path if os.path.exists(path) else asyncssh.import_known_hosts("")
    client = _make_client(asyncssh, spec, accept_new)
    try:
        conn = await asyncio.wait_for(
            asyncssh.connect(
                spec.host,
                client_factory=client,
                keepalive_interval=KEEPALIVE_S,
                keepalive_count_max=KEEPALIVE_COUNT,
                **kw,
            ),
            CONNECT_TIMEOUT_S,
        )
    except asyncssh.HostKeyNotVerifiable as e:
        raise UnsupportedError(_host_key_message(spec, client, e)) from None
    except asyncssh.PermissionDenied:
        raise UnsupportedError(
            f"{label}: authentication refused: no key of yours is accepted there (add one with "
            f"ssh-copy-id, or set identity = FILE for this target; passwords are not used)"
        ) from None
    except TimeoutError:
        raise UnsupportedError(f"{label}: no answer within {CONNECT_TIMEOUT_S} s") from None
    except socket.gaierror as e:
        raise UnsupportedError(f"{label}: unknown host {spec.host} ({e.strerror})") from None
    except ConnectionRefusedError:
        raise UnsupportedError(f"{label}: connection refused (is sshd running there?)") from None
    except OSError as e:
        raise UnsupportedError(f"{label}: cannot connect ({e.strerror or e})") from None
    except (asyncssh.Error, ValueError) as e:  # a key file that cannot be read, a refused key, ...
        raise UnsupportedError(f"{label}: cannot connect ({e})") from None
    return SshTransport(conn, label, asyncssh)


def _host_key_message(spec: TargetSpec, client: Any, e: Exception) -> str:
    path = known_hosts_file(spec)
    port = f" -p {spec.port}" if spec.port else ""
    if client.changed:
        return (
            f"{spec.name}: the host key differs from the one recorded in {path} (a reinstalled "
            f"board, or someone in between): check it, then remove the old one with "
            f"ssh-keygen -f {path} -R {spec.host}"
        )
    return (
        f"{spec.name}: host key not verified ({e.reason if hasattr(e, 'reason') else e}): "
        f"it is not in {path}; check it and add it (ssh-keyscan{port} {spec.host} >> {path}) "
        f"or pass --accept-new-host-key"
    )
