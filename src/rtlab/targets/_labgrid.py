"""labgrid targets (`labgrid:NAME`): labgrid's own Python API brings the board up and
holds the SSH connection; rtlab runs its commands through that connection.

NAME is a target of the labgrid environment file in $LG_ENV (its resources, e.g. a
RemotePlace or a NetworkService, and its drivers: SSHDriver, a power driver or a
strategy), else a place of the coordinator ($LG_COORDINATOR) with the SSHDriver only
(its key: the target's `identity`, else OpenSSH's defaults). labgrid's warnings (it logs
each failed connection attempt) are kept and the last one ends the error message.
Before connecting, a strategy is moved to its "shell" state, or else a power driver
switches the board on. Each command is an OpenSSH client run over the SSHDriver's own
ControlMaster connection (labgrid's host key and proxy handling apply).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from rtlab.errors import LostError, UnsupportedError, UserError
from rtlab.targets._spec import TargetSpec

SSH_ERROR = 255  # the OpenSSH client's own failure: connection refused or lost


class ProcChannel:
    """A command run by a local `ssh` process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        if proc.stdin is None or proc.stdout is None or proc.stderr is None:
            raise ValueError("ProcChannel needs a process with three pipes")
        self.proc = proc
        self.stdin, self.stdout, self.stderr = proc.stdin, proc.stdout, proc.stderr

    async def readline(self) -> bytes:
        return await self.stdout.readline()

    async def read(self) -> bytes:
        return await self.stdout.read()

    def write(self, data: bytes) -> None:
        self.stdin.write(data)

    def write_eof(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.stdin.close()

    async def finish(self) -> tuple[int | None, bytes]:
        err = await self.stderr.read()
        rc = await self.proc.wait()
        return (None if rc == SSH_ERROR or rc < 0 else rc), err


class LabgridTransport:
    def __init__(self, target: Any, ssh: Any, label: str) -> None:
        self.target, self.ssh, self.label = target, ssh, label

    def argv(self, command: str) -> list[str]:
        d = self.ssh
        service = d.networkservice
        return [
            d._ssh,  # the driver's ssh tool, prefix and ControlPath: its connection
            "-x",
            "-T",
            *d.ssh_prefix,
            "-p",
            str(service.port),
            "-l",
            d._get_username(),
            service.address,
            command,
        ]

    async def open(self, command: str) -> ProcChannel:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a terminal's ^C reaches rtlab, which stops the case
                limit=1 << 22,
            )
        except OSError as e:
            raise LostError(f"{self.label}: cannot run ssh ({e.strerror})") from None
        return ProcChannel(proc)

    async def close(self) -> None:
        await asyncio.to_thread(self.target.cleanup)


class _Said(logging.Handler):
    """labgrid's log messages, kept instead of printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().strip()
        if text:
            self.lines.append(f"{record.name}: {text}")


def _open(name: str, identity: str | None) -> tuple[Any, Any]:
    """labgrid's target NAME with its SSHDriver active (blocking: labgrid is synchronous)."""
    import labgrid
    from labgrid.driver import SSHDriver
    from labgrid.exceptions import NoDriverFoundError, NoStrategyFoundError
    from labgrid.protocol import PowerProtocol

    env_file = os.environ.get("LG_ENV")
    if env_file:
        env = labgrid.Environment(config_file=env_file)
        target = env.get_target(name)
        if target is None:
            known = ", ".join(env.config.get_targets()) or "none"
            raise UserError(f"labgrid:{name}: no target {name!r} in $LG_ENV {env_file} ({known})")
    else:
        from labgrid.resource import RemotePlace

        target = labgrid.Target(name)
        RemotePlace(target, name=name)
        SSHDriver(target, name=None, keyfile=identity or "")
    try:
        target.get_strategy().transition("shell")
    except NoStrategyFoundError:
        with contextlib.suppress(NoDriverFoundError):
            target.get_driver(PowerProtocol).on()
    return target, target.get_driver(SSHDriver)


async def connect(spec: TargetSpec) -> LabgridTransport:
    try:
        import labgrid  # noqa: F401
    except ImportError:
        raise UnsupportedError(
            f"{spec.name}: labgrid targets need labgrid: pip install 'rtlab[labgrid]'"
        ) from None
    said = _Said()
    logging.getLogger().addHandler(said)
    try:
        target, ssh = await asyncio.to_thread(_open, spec.place or "", spec.identity)
    except UserError:
        raise
    except Exception as e:  # labgrid's own errors have no common base: each is one line here
        last = f" ({said.lines[-1]})" if said.lines else ""
        raise UnsupportedError(f"{spec.name}: labgrid: {type(e).__name__}: {e}{last}") from None
    finally:
        logging.getLogger().removeHandler(said)
    return LabgridTransport(target, ssh, spec.name)
