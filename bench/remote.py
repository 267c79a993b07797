"""The cost of an SSH target: the same case run here and on the target, side by side.

Each round runs one case locally, as `rtlab run` does (rtlab.probe.run_probe), and on the
target, as `rtlab run --target` does (rtlab.targets.Remote: the probe in its private
directory, progress streamed back, the document pulled), interleaved, and times both.
Prints the median wall time of each and their difference, the per-case overhead (target
<= 0.3 s on localhost), and the once-per-experiment cost: connecting, copying the probe,
reading its catalog and the target's sysinfo.

Without --target, a throw-away OpenSSH server is started on localhost (as the tests do:
root and the Debian package openssh-server), so the target is this machine.

Usage: python bench/remote.py [--target TARGET] [--rounds N] [--loops N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from rtlab.probe import run_probe  # noqa: E402
from rtlab.targets import Remote, parse_target  # noqa: E402


@contextlib.contextmanager
def local_sshd(tmp: Path) -> Iterator[str]:
    """A throw-away sshd on localhost and a HOME that reaches it: its ssh:// URL."""
    from tests._sshd import client_home, keygen, sshd_unavailable, start_sshd

    why = sshd_unavailable()
    if why:
        sys.exit(f"remote.sh: {why} (or give --target)")
    home = tmp / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    server = start_sshd(tmp / "sshd", keygen(home / ".ssh" / "id_ed25519"))
    try:
        client_home(home, [server])
        os.environ["HOME"] = str(home)
        os.environ.pop("SSH_AUTH_SOCK", None)
        yield server.url
    finally:
        server.stop()


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s ({min(xs):.3f}..{max(xs):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", help="ssh://..., labgrid:PLACE or a named target")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--loops", type=int, default=100, help="wake-ups per case, 1 ms apart")
    a = ap.parse_args()
    args = ["wakeup", "--policy", "other", "--no-mlock", "--loops", str(a.loops)]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        url = a.target or stack.enter_context(local_sshd(Path(tmp)))
        t0 = time.monotonic()
        remote = Remote(parse_target(url))
        setup = time.monotonic() - t0
        stack.callback(remote.close)
        local_s, remote_s = [], []
        for i in range(a.rounds):
            doc = Path(tmp) / f"{i:03d}.json"
            t = time.monotonic()
            run_probe(args, doc)
            local_s.append(time.monotonic() - t)
            t = time.monotonic()
            outcome = remote(args, doc)
            remote_s.append(time.monotonic() - t)
            assert outcome.document is not None, outcome.stderr
    overhead = [r - lo for r, lo in zip(remote_s, local_s, strict=True)]
    ok = statistics.median(overhead) <= 0.3
    print(f"remote.sh: {url}, case: rtlab-probe {' '.join(args)}, {a.rounds} rounds")
    print(f"  per case, here      {spread(local_s)}")
    print(f"  per case, target    {spread(remote_s)}")
    print(f"  overhead per case   {spread(overhead)}: {'OK' if ok else 'ABOVE'} (target <= 0.3 s)")
    print(f"  once per experiment {setup:.3f} s (connect, copy the probe, catalog, sysinfo)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
