"""SSH targets and farms against real OpenSSH servers on localhost (see _sshd.py).

Each server has a throw-away host key and accepts a throw-away user key; the client's
HOME holds that key and known_hosts, as ~/.ssh would. Two servers are a two-board farm.
"""

from __future__ import annotations

import json
import os
import signal
import site
import subprocess
import sys
from pathlib import Path

import pytest

import rtlab
from rtlab.probe import find_probe, run_probe
from rtlab.probecall import Option, Outputs, ProbeCall, probe_argv
from rtlab.store import Store
from rtlab.system import audit_system

from ._skips import skip_setup
from ._sshd import (
    alive,
    client_home,
    descendants,
    free_port,
    keygen,
    need_sshd,
    parent,
    start_sshd,
    wait_until,
)

SRC = Path(rtlab.__file__).resolve().parents[1]  # the rtlab under test, for its processes
SRC_TREE = str(SRC) not in site.getsitepackages()  # run from the source tree (PYTHONPATH)
TINY = """
[experiment]
name = "tiny"
[defaults]
policy = "other"
mlock = false
interval = "1ms"
loops = 20
[[series]]
name = "idle"
[[series]]
name = "loaded"
sweep = { forkcopy = [1] }
settle = "100ms"
"""

# a short case, then one of a minute with two fork-copy loads: the connection dies in it
LONG = """
[experiment]
name = "long"
[defaults]
policy = "other"
mlock = false
[[series]]
name = "idle"
loops = 20
[[series]]
name = "loaded"
duration = "60s"
settle = "100ms"
sweep = { forkcopy = [2] }
"""


@pytest.fixture(scope="session", autouse=True)  # session: before the module's servers start
def _sshd_here() -> None:
    need_sshd()


def need_labgrid() -> None:
    __tracebackhide__ = True
    try:
        import labgrid  # noqa: F401
    except ImportError:
        skip_setup("labgrid is not installed (the test extra of `make install` has it)")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    base = tmp_path_factory.mktemp("ssh")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    pub = keygen(home / ".ssh" / "id_ed25519")
    started = []
    try:
        for name in ("a", "b"):
            started.append(start_sshd(base / f"sshd-{name}", pub))
        client_home(home, started)
        yield home, started
    finally:
        for s in started:
            s.stop()


@pytest.fixture
def env(servers, monkeypatch, tmp_path):
    """HOME with the user key and known_hosts; no agent; results in tmp_path."""
    home, started = servers
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    monkeypatch.setenv("RTLAB_RESULTS", str(results))
    return home, started, results


def left_behind(server) -> list[int]:
    """Processes the server's sessions still run (the guard, a probe, a load)."""
    return [p for p in descendants(server.proc.pid) if alive(p)]


def test_quick_preset_through_ssh_matches_a_local_run(env, rtlab):
    _home, (a, _), results = env
    rc, out, err = rtlab("run", "quick", "--scale", "0.01", "--target", a.url, "--json")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["complete"] and summary["done"] == summary["cases"] == 27
    rec = Store(results).open(summary["id"])
    target = rec.manifest.target
    assert target["url"] == a.url and target["arch"] == os.uname().machine
    assert target["name"] == f"127.0.0.1:{a.port}" and rec.id.endswith(f"-quick-127-0-0-1-{a.port}")
    assert "rtlab-probe" in target["probe_version"]
    # the same structure as here: one document of the same meter, the fingerprint, the audit
    local_doc = tmp_doc = rec.path.parent / "local.json"
    call = ProbeCall("wakeup", (Option("policy", "other"), Option("loops", "20")))
    run_probe(call.adding(Option("no-mlock")), Outputs(str(tmp_doc)))
    local = json.loads(local_doc.read_text())
    for case in rec.cases:
        doc = json.loads((rec.path / case.document).read_text())
        assert set(doc) == set(local), case.name
        argv = probe_argv(case.call)
        assert doc["argv"][1:][: len(argv)] == argv
    system, audit = audit_system()
    assert set(rec.system()) == set(system)
    stored = json.loads((rec.path / "audit.json").read_text())
    assert set(stored["facts"]) == set(audit["facts"])
    assert [f["id"] for f in stored["findings"]] == [f["id"] for f in audit["findings"]]
    assert not list(a.tmpdir.iterdir()), "the private directory stays on the target"
    wait_until(lambda: not left_behind(a), what="the sessions to end")


def _farm_file(tmp_path: Path, a, b, more: str = "") -> Path:
    """tiny.toml, and a farm of board-a and board-b on servers A and B (MORE: after b)."""
    (tmp_path / "tiny.toml").write_text(TINY)
    farm = tmp_path / "farm.toml"
    farm.write_text(
        f'[board-a]\nhost = "127.0.0.1"\nport = {a.port}\nuser = "root"\n\n'
        f'[board-b]\nhost = "127.0.0.1"\nport = {b.port}\nuser = "root"\n' + more
    )
    return farm


def test_two_servers_are_a_two_board_farm_and_one_down_fails_alone(env, rtlab, tmp_path):
    _home, (a, b), results = env
    down = '[down]\nhost = "127.0.0.1"\nport = 1\nuser = "root"\n'
    farm = _farm_file(tmp_path, a, b, 'rt_cpus = "0"\n\n' + down)
    rc, out, err = rtlab(
        "farm", "run", "tiny.toml", "--targets", str(farm), "--jobs", "2", "--json"
    )
    assert rc == 3, err  # the worst target: unreachable
    summary = json.loads(out)
    by_name = {t["name"]: t for t in summary["targets"]}
    assert by_name["board-a"]["status"] == by_name["board-b"]["status"] == "done", err
    assert by_name["down"]["status"] == "failed"
    assert "connection refused" in by_name["down"]["error"]
    assert "[board-a]" in err and "[board-b]" in err
    store = Store(results)
    recs = [store.open(by_name[n]["experiment"]) for n in ("board-a", "board-b")]
    assert [r.manifest.target["name"] for r in recs] == ["board-a", "board-b"]
    assert {r.manifest.target["farm"] for r in recs} == {summary["id"]}
    assert all(r.complete for r in recs)
    audit_b = json.loads((recs[1].path / "audit.json").read_text())
    assert audit_b["facts"]["rt_cpus"] == [0]  # board-b's rt_cpus
    rc, out, _ = rtlab("list", "--json")
    farms = [r for r in json.loads(out) if r["id"] == summary["id"]]
    assert farms and farms[0]["source"] == "farm:tiny.toml" and farms[0]["done"] == 2
    rc, out, err = rtlab("report", summary["id"][:-2], "--json")
    assert rc == 0, err
    html = Path(json.loads(out)["html"])
    assert html == results / summary["id"] / "report.html"
    text = html.read_text()
    assert "board-a" in text and "board-b" in text


def test_two_ssh_boards_have_their_history_and_baselines(env, rtlab, tmp_path):
    """Each board of a farm is its target; its identity is read there (sysinfo); the farm
    compares each board that has a baseline with it, and a threshold every live run
    exceeds (a fixed max above 1 ns) names the one board with a baseline as regressed."""
    _home, (a, b), _results = env
    farm = _farm_file(tmp_path, a, b)
    run = ("farm", "run", "tiny.toml", "--targets", str(farm), "--json")
    rc, out, err = rtlab(*run)
    assert rc == 0, err
    first = {t["name"]: t["experiment"] for t in json.loads(out)["targets"]}
    assert json.loads(out)["baselines"] == {"boards": [], "regressed": []}
    rc, out, err = rtlab("history", "--json")
    boards = {x["name"]: x for x in json.loads(out)}
    assert set(boards) == {"board-a", "board-b"}, boards
    here = audit_system()[0]["board"]["machine_id"]
    for name, board in boards.items():
        assert board["board"] == f"target:{name}" and board["target"] == name
        assert board["machine_id"] == here  # read on the target: the same machine here
    assert rtlab("baseline", "set", "board-a", first["board-a"])[0] == 0
    rc, out, err = rtlab(*run, "--fail-if", "max>1ns")
    assert rc == 1, err
    data = json.loads(out)
    assert data["baselines"]["regressed"] == ["board-a"]
    status = {x["board_name"]: x["status"] for x in data["baselines"]["boards"]}
    assert status == {"board-a": "regressed", "board-b": "no baseline"}
    second = {t["name"]: t["experiment"] for t in data["targets"]}
    rc, out, err = rtlab("history", "board-a", "--json")
    assert [e["id"] for e in json.loads(out)["experiments"]] == [
        first["board-a"],
        second["board-a"],
    ]
    rc, out, err = rtlab("compare", "--baseline", data["id"], "--fail-if", "max>1h")
    assert rc == 0 and "board-a" in out and "NO BASELINE" in out, err


def _session_chain(server, probe: int) -> list[int]:
    """The server's processes between its listener and PROBE: the connection's sessions."""
    chain, p = [], parent(probe)
    while p is not None and p != server.proc.pid:
        chain.append(p)
        p = parent(p)
    return chain


def _run_long_case(server, exp: Path, then) -> tuple[int, str]:
    """`rtlab run EXP --target SERVER` in a process of its own; once its loaded case runs
    there, THEN(probe PID); the probe and its loads must then end long before the minute
    the case measures, and the server's sessions with them. (exit status, stderr)"""
    run = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "run", str(exp), "--target", server.url],
        env={**os.environ, "PYTHONPATH": str(SRC)} if SRC_TREE else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def loaded_probe() -> int | None:
            assert run.poll() is None, run.communicate()
            found = [p for p in server.probes() if len(descendants(p)) >= 2]
            return found[0] if found else None

        wait_until(lambda: loaded_probe() is not None, what="the loaded case to run")
        probe = loaded_probe()
        doomed = [probe, *descendants(probe)]
        then(run, probe)
        wait_until(lambda: not any(alive(p) for p in doomed), what="the probe and loads to end")
        wait_until(lambda: not left_behind(server), what="every session process to end")
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    return run.returncode, err


def test_killed_connection_leaves_nothing_behind_and_resume_continues(env, rtlab, tmp_path):
    _home, (a, _), results = env
    exp = tmp_path / "long.toml"
    exp.write_text(LONG)

    def kill_connection(run, probe):
        for pid in _session_chain(a, probe):
            if os.readlink(f"/proc/{pid}/exe").endswith("/sshd"):
                os.kill(pid, signal.SIGKILL)  # the connection dies, the shells are left

    rc, err = _run_long_case(a, exp, kill_connection)
    assert rc == 3, err
    assert "lost" in err and "rtlab run --resume" in err
    [rec] = Store(results).experiments()
    assert [c.status for c in rec.cases] == ["done", "failed"]
    assert "lost" in rec.cases[1].reason
    assert not list(a.tmpdir.iterdir())
    # --resume reconnects to the recorded target; the minute is shortened to keep this quick
    manifest = json.loads((rec.path / "experiment.json").read_text())
    options = manifest["cases"][1]["call"]["options"]
    next(o for o in options if o["name"] == "duration")["value"] = "200ms"
    (rec.path / "experiment.json").write_text(json.dumps(manifest))
    rc, _, err = rtlab("run", "--resume", rec.id)
    assert rc == 0, err
    assert Store(results).open(rec.id).complete


def test_interrupted_run_stops_the_probe_there_and_keeps_what_finished(env, tmp_path):
    _home, (a, _), results = env
    exp = tmp_path / "long.toml"
    exp.write_text(LONG)
    rc, err = _run_long_case(a, exp, lambda run, probe: run.send_signal(signal.SIGINT))
    assert rc == 130, err
    assert "rtlab run --resume" in err
    [rec] = Store(results).experiments()
    assert [c.status for c in rec.cases] == ["done", "interrupted"]
    assert not list(a.tmpdir.iterdir())


HOSTILE = "d $(touch PWNED) ; `touch PWNED2` 'sq' \"dq\" \\ \n nl & | > <"


def test_hostile_strings_reach_the_probe_as_literal_arguments(env, rtlab, tmp_path):
    _home, (a, _), results = env
    hostile_dir = tmp_path / HOSTILE
    hostile_dir.mkdir()
    exp = tmp_path / "hostile.toml"
    exp.write_text(
        "[experiment]\n"
        f"name = {json.dumps('x $(touch PWNED3); `id`')}\n"
        "[[series]]\n"
        f"name = {json.dumps('s; $(touch PWNED4)')}\n"
        'meter = "pagefault"\nregion = "file"\nsize = "64K"\npolicy = "other"\nmlock = false\n'
        f"dir = {json.dumps(str(hostile_dir))}\n"
    )
    rc, out, err = rtlab("run", str(exp), "--target", a.url, "--json")
    assert rc == 0, err
    rec = Store(results).open(json.loads(out)["id"])
    doc = json.loads((rec.path / rec.cases[0].document).read_text())
    assert str(hostile_dir) in doc["argv"]
    refused = tmp_path / "refused.toml"
    spec = "spin:50%$(touch PWNED5);`touch PWNED6`"
    refused.write_text(f'[[series]]\nname = "r"\npolicy = "other"\nload = {json.dumps(spec)}\n')
    rc, _, err = rtlab("run", str(refused), "--target", a.url, "--check")
    assert rc == 2 and spec in err and "key 'load'" in err
    for root in (tmp_path, hostile_dir, Path.home(), a.tmpdir, Path.cwd()):
        assert not list(root.glob("PWNED*"))


def test_host_keys_are_checked_and_accepted_only_when_new(env, rtlab, tmp_path):
    _home, (a, b), _results = env
    known = tmp_path / "known_hosts"
    targets = tmp_path / "targets.toml"
    targets.write_text(
        f'[a]\nhost = "127.0.0.1"\nport = {a.port}\nuser = "root"\nknown_hosts = "{known}"\n'
    )
    rc, _, err = rtlab("audit", "--target", "a", "--targets", str(targets))
    assert rc == 3 and "not verified" in err and "--accept-new-host-key" in err
    rc, _, err = rtlab(
        "audit", "--target", "a", "--targets", str(targets), "--json", "--accept-new-host-key"
    )
    assert rc in (0, 1), err
    assert known.read_text().startswith(f"[127.0.0.1]:{a.port} ssh-ed25519 ")
    rc, out, err = rtlab("audit", "--target", "a", "--targets", str(targets), "--json")
    assert rc in (0, 1), err
    assert json.loads(out)["findings"]
    # the recorded key is not this server's: refused, even with --accept-new-host-key
    known.write_text(b.known_hosts_line().replace(str(b.port), str(a.port)) + "\n")
    rc, _, err = rtlab("audit", "--target", "a", "--targets", str(targets), "--accept-new-host-key")
    assert rc == 3 and "differs" in err


def test_labgrid_ssh_driver_and_power(env, rtlab, tmp_path, monkeypatch):
    need_labgrid()
    home, (a, _), results = env
    power = tmp_path / "power"
    config = tmp_path / "lg.yaml"
    config.write_text(
        "targets:\n"
        "  board:\n"
        "    resources:\n"
        "      NetworkService:\n"
        "        address: 127.0.0.1\n"
        f"        port: {a.port}\n"
        "        username: root\n"
        "    drivers:\n"
        "      ExternalPowerDriver:\n"
        f"        cmd_on: 'touch {power}'\n"
        f"        cmd_off: 'rm -f {power}'\n"
        "      SSHDriver:\n"
        f"        keyfile: {home / '.ssh' / 'id_ed25519'}\n"
    )
    monkeypatch.setenv("LG_ENV", str(config))
    (tmp_path / "tiny.toml").write_text(TINY)
    rc, out, err = rtlab("run", "tiny.toml", "--target", "labgrid:board", "--json")
    assert rc == 0, err
    assert power.exists()  # labgrid's power driver switched the board on
    rec = Store(results).open(json.loads(out)["id"])
    assert rec.complete and rec.manifest.target["url"] == "labgrid:board"
    wait_until(lambda: not left_behind(a), what="the sessions to end")


def test_local_probe_is_the_native_choice():
    from rtlab.targets import TargetSpec
    from rtlab.targets._probes import probe_for

    assert probe_for(TargetSpec("x"), os.uname().machine) == find_probe()


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        skip_setup(f"no {name} beside this Python (labgrid, the test extra of `make install`)")
    return str(path)


def test_labgrid_place_of_a_coordinator(env, rtlab, tmp_path, monkeypatch):
    """labgrid:PLACE without $LG_ENV: the coordinator's place, its exported NetworkService
    (this server), reached through labgrid's SSHDriver with the target's identity."""
    need_labgrid()
    home, (a, _), _results = env
    coordinator = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("LG_COORDINATOR", coordinator)
    monkeypatch.delenv("LG_ENV", raising=False)
    (tmp_path / "exported.yaml").write_text(
        f"lab:\n  NetworkService:\n    address: 127.0.0.1\n    port: {a.port}\n    username: root\n"
    )
    logs = (tmp_path / "labgrid.log").open("wb")
    procs = [subprocess.Popen([_tool("labgrid-coordinator"), "-l", coordinator], stdout=logs,
                              stderr=logs)]  # fmt: skip
    try:
        host, port = coordinator.split(":")
        wait_until(lambda: _listening(host, int(port)), what="the coordinator")
        procs.append(subprocess.Popen(
            [_tool("labgrid-exporter"), "-c", coordinator, "-n", "exp", "exported.yaml"],
            stdout=logs, stderr=logs,
        ))  # fmt: skip
        client = _tool("labgrid-client")

        def exported() -> bool:
            out = subprocess.run([client, "resources"], capture_output=True, text=True).stdout
            return "exp/lab/NetworkService" in out

        wait_until(exported, what="the exporter's resource")
        for step in (["create"], ["add-match", "exp/lab/*"], ["acquire"]):
            subprocess.run([client, "-p", "bench", *step], check=True, capture_output=True)
        targets = tmp_path / "targets.toml"
        key = home / ".ssh" / "id_ed25519"
        targets.write_text(f'[bench]\nlabgrid = "bench"\nidentity = "{key}"\n')
        rc, out, err = rtlab("audit", "--target", "bench", "--targets", str(targets), "--json")
        assert rc in (0, 1), err
        assert json.loads(out)["findings"]
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=10)
    wait_until(lambda: not left_behind(a), what="the sessions to end")


def _listening(host: str, port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex((host, port)) == 0


def test_a_command_killed_there_reports_the_shells_status(env):
    """A command that dies of a signal on the target is 128 + the signal, not a lost
    connection: the session goes on."""
    from rtlab.targets import open_target

    _, started, _ = env
    with open_target(started[0].url) as target:
        killed = target.shell("kill -KILL $$")  # type: ignore[attr-defined]
        assert killed.status == 128 + signal.SIGKILL
        assert target.shell("echo still").stdout == b"still\n"  # type: ignore[attr-defined]


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO and mlockall need root")
def test_application_audit_over_ssh_matches_the_local_one(env, rtlab, tmp_path):
    """`rtlab audit --pid --target`: the board's probe reads the process's files twice
    (`sysinfo --pid`); the planted misconfiguration is found as it is here."""
    from .test_audit_app import _live, _planted

    _home, (a, _), _ = env
    named = tmp_path / "rtlab-app-x"  # a name no other process has
    named.write_bytes(Path("/bin/sleep").read_bytes())
    named.chmod(0o755)
    p = _planted(10, "nolock", "fault")
    q = subprocess.Popen([str(named), "60"])
    try:
        here = _live(rtlab, p)
        rc, out, err = rtlab(
            "audit", "--pid", str(p.pid), "--json", "--window", "1s", "--target", a.url
        )
        rc_comm, out_comm, err_comm = rtlab(
            "audit", "--comm", named.name, "--window", "0.2s", "--target", a.url
        )
    finally:
        for x in (p, q):
            x.kill()
            x.wait()
    assert rc in (0, 1), err
    doc = json.loads(out)
    there = {x["id"]: (x["status"], x["evidence"], x["fix"]) for x in doc["findings"]}
    assert set(there) == set(here)
    for check in ("app.memlock", "app.affinity", "app.priority"):  # settings, not counts
        assert there[check][0] == here[check][0], check
    assert there["app.memlock"][0] == "WARN"
    assert there["app.faults"][0] in ("WARN", "FAIL")  # it faults all the time
    assert [t["tid"] for t in doc["facts"]["threads"]] == [p.pid]
    assert rc_comm in (0, 1) and f"{named.name} ({q.pid}, 1 thread)" in out_comm, err_comm
    wait_until(lambda: not left_behind(a), what="the sessions to end")


def test_app_case_runs_its_command_there_with_its_application_audit(env, rtlab, tmp_path):
    """`app =` on an SSH target: the command runs there (the probe starts it), the case is
    measured like any, and the application audit reads the program there (through the
    target's probe: sysinfo, then sysinfo --pid before and after the window)."""
    _home, (a, _), results = env
    exp = tmp_path / "app.toml"
    exp.write_text(
        '[[series]]\nname = "app"\nduration = "2s"\nmlock = false\n'
        "app = \"sh -c 'while :; do sleep 0.01; done'\"\n"
    )
    rc, out, err = rtlab("run", str(exp), "--target", a.url, "--check")
    assert rc == 0 and "-- sh -c" in out, err
    rc, out, err = rtlab("run", str(exp), "--target", a.url, "--json")
    assert rc == 0, err
    rec = Store(results).open(json.loads(out)["id"])
    doc = json.loads((rec.path / rec.cases[0].document).read_text())
    assert doc["sched"]["command"]["stopped_by_probe"]
    assert sum(t["count"] for t in doc["threads"]) > 0
    audit = json.loads((rec.path / "cases" / "000.app-audit.json").read_text())
    assert audit["status"] == "done", audit
    assert audit["pids"] == [doc["sched"]["command"]["pid"]]
    assert [p["comm"] for p in audit["facts"]["processes"]] == ["sh"]
    by_id = {x["id"]: x["status"] for x in audit["findings"]}
    assert by_id["app.priority"] == "WARN"  # SCHED_OTHER: no real-time thread
    assert by_id["app.memlock"] == "WARN"  # nothing locked
    assert not left_behind(a)
