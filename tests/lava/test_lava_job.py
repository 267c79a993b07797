"""`rtlab lava testdef` run by a real LAVA dispatcher (`make test-lava`, not `make test`).

Debian's lava-dispatcher runs a job (`lava-run`) on the QEMU device of device.yaml: it
boots one of Debian's 6.1 kernels from /boot with the busybox root file system of
mkramdisk.sh as its initramfs, into which LAVA appends its test overlay and a tar with
the static rtlab-probe at /usr/local/bin; the test action runs the test definition that
`rtlab lava testdef experiment.toml` wrote, inline: once with the probe given by URL
(the guest downloads it with busybox wget from an HTTP server of this test, over QEMU's
user network), once with its path from the tar. The test reads the results lava-run
logs and checks them against the experiment: every case reports CASE-max and CASE-p99
in µs, pass exactly when within the deadline, and the case whose load tool the device
lacks reports CASE as fail.

Needs root (lava-run refuses otherwise), lava-run, qemu-system-x86_64 and the inputs
`make test-lava` builds (RTLAB_LAVA_RAMDISK, RTLAB_LAVA_PROBE); boots one TCG guest.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import tarfile
import threading
from decimal import Decimal
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from rtlab.experiment import load_experiment
from rtlab.lava import case_id

HERE = Path(__file__).parent
EXPERIMENT = HERE / "experiment.toml"
PROBE_ON_DUT = "/usr/local/bin/rtlab-probe"
DUT_DIR = "/tmp/rtlab lava/$1 --shell"
KERNEL = os.environ.get("RTLAB_LAVA_KERNEL", "/boot/vmlinuz-6.1.0-56-rt-amd64")
LAVA_RUN_TIMEOUT_S = 30 * 60
# The case of experiment.toml whose load (stress-ng) the device does not have.
NO_RESULT_SERIES = "no stress-ng"

pytestmark = pytest.mark.skipif(
    not os.environ.get("RTLAB_LAVA_RAMDISK"), reason="make test-lava (lava-run, QEMU, root)"
)


def _probe_tar(probe: Path, out: Path) -> None:
    """A tar that LAVA appends to the initramfs: the probe at PROBE_ON_DUT, mode 0755."""
    data = probe.read_bytes()
    with tarfile.open(out, "w") as tar:
        for d in ("usr", "usr/local", "usr/local/bin"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        info = tarfile.TarInfo(PROBE_ON_DUT.lstrip("/"))
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))


class _Handler(SimpleHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Handler.requests.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(directory: Path) -> ThreadingHTTPServer:
    """An HTTP server of DIRECTORY on the host's loopback (10.0.2.2 in the guest)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _job(definitions: dict[str, dict], ramdisk: Path, probe_tar: Path) -> dict:
    """A LAVA job: deploy to tmpfs, boot with qemu, the DEFINITIONS (name: test
    definition) inline in one test action."""
    return {
        "device_type": "qemu",
        "job_name": "rtlab lava testdef",
        "visibility": "public",
        "priority": "medium",
        "timeouts": {
            "job": {"minutes": 25},
            "action": {"minutes": 10},
            "connection": {"minutes": 5},
        },
        "context": {"arch": "x86_64"},
        "actions": [
            {
                "deploy": {
                    "to": "tmpfs",
                    "timeout": {"minutes": 5},
                    "images": {
                        "kernel": {
                            "url": f"file://{KERNEL}",
                            "image_arg": '-kernel {kernel} -append "console=ttyS0,115200 panic=-1"',
                        },
                        "ramdisk": {
                            "url": f"file://{ramdisk}",
                            "image_arg": "-initrd {ramdisk}",
                            "compression": "gz",
                            "format": "cpio.newc",
                            "overlays": {
                                "lava": True,
                                "probe": {
                                    "url": f"file://{probe_tar}",
                                    "format": "tar",
                                    "path": "/",
                                },
                            },
                        },
                    },
                }
            },
            {
                "boot": {
                    "method": "qemu",
                    "media": "tmpfs",
                    "timeout": {"minutes": 5},
                    "prompts": ["rtlab-lava# "],
                }
            },
            {
                "test": {
                    "timeout": {"minutes": 15},
                    "definitions": [
                        {"repository": d, "from": "inline", "path": f"inline/{n}.yaml", "name": n}
                        for n, d in definitions.items()
                    ],
                }
            },
        ],
    }


def _lava_run(job: Path, out_dir: Path, log: Path) -> int:
    """lava-run JOB; on a timeout it is asked to cancel (it stops its QEMU), then its
    process group (started here) is killed."""
    argv = [
        "lava-run", "--job-id", "1", "--output-dir", str(out_dir),
        "--device", str(HERE / "device.yaml"), str(job),
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=LAVA_RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise


def _log(path: Path) -> list[dict]:
    """lava-run's log: one YAML flow mapping a line (dt, lvl, msg)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = yaml.load(line, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            continue
        if isinstance(rec, dict) and "lvl" in rec:
            out.append(rec)
    return out


def _check_cases(cases: dict[str, dict], deadline_ns: int) -> None:
    """CASES (name: result) are those of experiment.toml, CASE-max and CASE-p99 in µs,
    pass exactly when within DEADLINE_NS; the case without its load tool fails."""
    expected: set[str] = set()
    for case in load_experiment(str(EXPERIMENT)).cases:
        cid = case_id(case)
        if case.series == NO_RESULT_SERIES:
            expected.add(cid)
            assert cases[cid]["result"] == "fail" and "measurement" not in cases[cid]
            continue
        for stat in ("max", "p99"):
            r = cases[f"{cid}-{stat}"]
            expected.add(f"{cid}-{stat}")
            assert r["units"] == "us", r
            value_ns = Decimal(r["measurement"]) * 1000  # exact: µs with 3 decimals
            assert value_ns >= 0, r
            assert r["result"] == ("pass" if value_ns <= deadline_ns else "fail"), r
        p99, worst = (Decimal(cases[f"{cid}-{s}"]["measurement"]) for s in ("p99", "max"))
        assert p99 <= worst
    assert set(cases) == expected


def test_lava_runs_the_testdef_and_reports_every_case(rtlab, tmp_path):
    if os.geteuid() != 0 or shutil.which("lava-run") is None:
        pytest.fail("make test-lava needs root and lava-run (apt-get install lava-dispatcher)")
    ramdisk = Path(os.environ["RTLAB_LAVA_RAMDISK"]).resolve()
    probe = Path(os.environ["RTLAB_LAVA_PROBE"]).resolve()
    # "rtlab": the probe by URL, the experiment's deadline, documents in a directory
    # whose name LAVA's `$N` rewrite would alter (the step holds "--shell");
    # "rtlab-1ns": the probe's path, --deadline 1ns, which every measured latency
    # exceeds, so each of its cases fails with its value.
    served = tmp_path / "www"
    served.mkdir()
    shutil.copy(probe, served / "rtlab-probe")
    server = _serve(served)
    url = f"http://10.0.2.2:{server.server_address[1]}/rtlab-probe"
    variants = {
        "rtlab": ["--probe", url, "--dut-dir", DUT_DIR],
        "rtlab-1ns": ["--probe", PROBE_ON_DUT, "--deadline", "1ns"],
    }
    definitions = {}
    for name, extra in variants.items():
        out = tmp_path / f"{name}.yaml"
        rc, _, err = rtlab("lava", "testdef", str(EXPERIMENT), "-o", str(out), *extra)
        assert rc == 0, err
        definitions[name] = yaml.safe_load(out.read_text())
    _probe_tar(probe, tmp_path / "probe.tar")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job(definitions, ramdisk, tmp_path / "probe.tar")))
    log_path = tmp_path / "lava-run.log"
    try:
        rc = _lava_run(job, tmp_path / "out", log_path)
    finally:
        server.shutdown()
        server.server_close()
    shutil.copy(log_path, os.environ.get("RTLAB_LAVA_LOG", tmp_path / "kept.log"))
    log = _log(log_path)
    results = [r["msg"] for r in log if r["lvl"] == "results"]
    lava = {r["case"]: r for r in results if r.get("definition") == "lava"}
    assert rc == 0 and lava["job"]["result"] == "pass", lava.get("job")
    assert lava["0_rtlab"]["result"] == "pass" and lava["1_rtlab-1ns"]["result"] == "pass"

    exp = load_experiment(str(EXPERIMENT))
    first = case_id(exp.cases[0])
    _check_cases({r["case"]: r for r in results if r["definition"] == "0_rtlab"}, exp.deadline_ns)
    one_ns = {r["case"]: r for r in results if r["definition"] == "1_rtlab-1ns"}
    _check_cases(one_ns, 1)
    assert all(r["result"] == "fail" for r in one_ns.values())
    console = [r["msg"] for r in log if r["lvl"] == "target" and isinstance(r["msg"], str)]
    said = f"rtlab: {first}: max "
    lines = [ln for ln in console if ln.startswith(said)]
    assert len(lines) == 2 and lines[0].endswith(f"document {DUT_DIR}/{first}.json"), lines
    assert _Handler.requests == ["/rtlab-probe"]  # the URL definition downloaded it once
    # the shell's trace shows the case calls, not the helpers' lines
    assert not [ln for ln in console if ln.startswith("+ rtlab_key")]
