"""Targets without an SSH server: target syntax and files, quoting, the session's protocol
over a local shell, the farm's store layout and the names of a farm's boards."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.probe import find_probe
from rtlab.probecall import Option, ProbeCall
from rtlab.records import CaseRecord, new_manifest
from rtlab.results import setup_labels
from rtlab.store import Store
from rtlab.targets import TargetSpec, parse_ssh_url, parse_target, quote, read_targets
from rtlab.targets._farm import (
    FarmMember,
    create_farm,
    farm_rows,
    open_experiments,
)
from rtlab.targets._session import Session

from ._sshd import free_port
from .test_ingest_hostile import finishes, open_writer

# --- target syntax ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, user, host, port",
    [
        ("ssh://board", None, "board", None),
        ("ssh://root@10.0.0.5", "root", "10.0.0.5", None),
        ("ssh://pi@rpi4.lab:2222", "pi", "rpi4.lab", 2222),
        ("ssh://root@[fe80::1]:22", "root", "fe80::1", 22),
    ],
)
def test_ssh_urls(text, user, host, port):
    spec = parse_ssh_url(text)
    assert (spec.user, spec.host, spec.port) == (user, host, port)
    assert parse_ssh_url(spec.url) == spec.__class__(spec.url, "ssh", host, user, port)


@pytest.mark.parametrize(
    "text, why",
    [
        ("ssh://root:secret@host", "no passwords"),
        ("ftp://host", "not ssh://"),
        ("ssh://host/path", "no path"),
        ("ssh://host:99999", "not ssh://"),
        ("ssh://host:0", "port 0"),
        ("ssh://ho st", "spaces"),
        ("ssh://$(reboot)", "not a host"),
        ("ssh://us;er@host", "not a user"),
        ("labgrid:", "place name"),
        ("no/such", "not ssh://"),
    ],
)
def test_bad_targets_are_one_line_exit_2(text, why, rtlab, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(UserError, match=why):
        parse_target(text)
    rc, _, err = rtlab("audit", "--target", text)
    assert rc == 2 and why in err and err.count("\n") == 1


def test_unreachable_target_is_one_line_exit_3(rtlab):
    rc, out, err = rtlab("run", "quick", "--target", f"ssh://root@127.0.0.1:{free_port()}")
    assert rc == 3 and out == ""
    assert "connection refused" in err and err.count("\n") == 1


def test_named_targets_come_from_the_targets_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "rtlab").mkdir()
    (tmp_path / "rtlab" / "targets.toml").write_text(
        '[rpi4]\nhost = "10.0.0.5"\nuser = "root"\nport = 2222\nidentity = "~/.ssh/lab"\n'
        'rt_cpus = 3\nprobe = "build/aarch64/src/rtlab-probe"\n\n'
        '[bench-3]\nlabgrid = "bench-3"\n'
    )
    spec = parse_target("rpi4")
    assert spec.url == "ssh://root@10.0.0.5:2222" and spec.rt_cpus == "3"
    assert spec.identity == str(Path.home() / ".ssh" / "lab")
    assert parse_target("bench-3").url == "labgrid:bench-3"
    assert TargetSpec.from_dict(spec.to_dict(), "x") == spec
    with pytest.raises(UserError, match="known: rpi4, bench-3"):
        parse_target("nope")


@pytest.mark.parametrize(
    "text, why",
    [
        ('[a]\nhost = "h"\nport = 70000\n', "out of range"),
        ('[a]\nhost = "h"\npasword = "x"\n', "unknown key 'pasword'"),
        ('[a]\nhost = "h"\nlabgrid = "p"\n', "give one of"),
        ('[a]\nlabgrid = "p"\nport = 22\n', "not for a labgrid target"),
        ('[a]\nuser = "root"\n', "give one of"),
        ('[a]\nhost = "h"\nrt_cpus = "x-y"\n', "rt_cpus"),
        ('["a b"]\nhost = "h"\n', "letters, digits"),
        ('[a]\nhost = "h;reboot"\n', "not a host"),
        ("[a]\nhost = 5\n", "must be a string"),
        ("a = 1\n", "is a table"),
        ("", "no target"),
        ("[a\n", "not a TOML file"),
    ],
)
def test_bad_targets_files(text, why, tmp_path):
    path = tmp_path / "farm.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=why):
        read_targets(path)


@pytest.mark.parametrize(
    "text, why",
    [
        ('[a]\nhost = "h"\nrt_cpus = "0-999999999"\n', "CPU 999999999 is beyond 8191"),
        ('[a]\nhost = "h"\nrt_cpus = 99999999999999999999\n', "is beyond 8191"),
        ('[a]\nhost = "h"\nidentity = "/dev/zero"\n', "identity /dev/zero is not a regular"),
        ('[a]\nhost = "h"\nknown_hosts = "/dev/zero"\n', "known_hosts /dev/zero is not"),
        ('[a]\nhost = "h"\nprobe = "/dev/urandom"\n', "probe /dev/urandom is not a regular"),
        ('[a]\nhost = "h"\nidentity = "/"\n', "identity / is not a regular file"),
        ('[a]\nhost = "h"\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        ('[a]\nhost = "h"\nx = ' + "{y = " * 5000 + "1" + "}" * 5000 + "\n", "nested too"),
        ("[" + ".".join(["t"] * 100_000) + ']\nhost = "h"\n', "unknown key 't'"),
        ("".join(f'[t{i}]\nhost = "h"\n' for i in range(5000)), "more than 4096 targets"),
        ("# " + "x" * (1 << 20) + "\n", "too large: more than 1 MiB"),
    ],
)
def test_hostile_targets_files(text, why, tmp_path):
    path = tmp_path / "targets.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=why) as info:
        read_targets(path)
    assert "\n" not in str(info.value)


def test_fifos_never_block_a_targets_file(tmp_path, monkeypatch, rtlab):
    fifo = tmp_path / "key"
    os.mkfifo(fifo)
    path = tmp_path / "targets.toml"
    path.write_text(f'[a]\nhost = "h"\nidentity = "{fifo}"\n')
    with pytest.raises(UserError, match=r"identity .*key is not a regular file"):
        finishes(lambda: read_targets(path), open_writer(fifo))
    os.mkfifo(tmp_path / "farm.toml")
    with pytest.raises(UserError, match=r"farm\.toml: cannot read \(a FIFO"):
        finishes(lambda: read_targets(tmp_path / "farm.toml"), open_writer(tmp_path / "farm.toml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "rtlab").mkdir()
    os.mkfifo(tmp_path / "rtlab" / "targets.toml")
    rc, _, err = finishes(lambda: rtlab("audit", "--target", "a"), lambda: None)
    assert rc == 2 and "a FIFO" in err and err.count("\n") == 1


TOML_TEXT = st.text(alphabet=st.sampled_from("[]{}=\",.\n #abhost01-:'tru"), max_size=80)


@settings(max_examples=300)
@given(TOML_TEXT)
def test_generated_targets_files_are_targets_or_one_user_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("t") / "targets.toml"
    path.write_text(text)
    try:
        targets = read_targets(path)
    except UserError as e:
        assert "\n" not in str(e)
    else:
        assert targets and all(isinstance(t, TargetSpec) for t in targets.values())


def test_the_probe_copied_is_the_one_for_the_targets_architecture(tmp_path, monkeypatch):
    from rtlab.errors import UnsupportedError
    from rtlab.targets._probes import probe_for

    arm = tmp_path / "aarch64" / "rtlab-probe"
    arm.parent.mkdir()
    arm.write_bytes(b"\x7fELF")
    monkeypatch.setenv("RTLAB_PROBES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert probe_for(TargetSpec("rpi"), "aarch64") == arm
    assert probe_for(TargetSpec("rpi"), "arm64") == arm  # macOS-style spelling
    own = tmp_path / "mine"
    own.write_bytes(b"")
    assert probe_for(TargetSpec("rpi", probe=str(own)), "aarch64") == own
    with pytest.raises(UnsupportedError, match=r"no rtlab-probe for riscv64.*make cross-probe"):
        probe_for(TargetSpec("v"), "riscv64")
    with pytest.raises(UserError, match="no such file"):
        probe_for(TargetSpec("rpi", probe=str(tmp_path / "gone")), "aarch64")


# --- quoting ----------------------------------------------------------------------------

words = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(args=words)
def test_every_word_reaches_the_shell_literally(args):
    """What the target's shell runs: `printf '%s\\0' WORDS` gives the words back."""
    out = subprocess.run(
        ["sh", "-c", "printf '%s\\0' " + quote(args)], capture_output=True, check=True
    ).stdout
    got = out.split(b"\0")[:-1] if args else []
    assert [w.decode("utf-8", "surrogateescape") for w in got] == args


# --- the session over a local shell -------------------------------------------------------


class LocalChannel:
    def __init__(self, proc):
        self.proc = proc

    async def readline(self):
        return await self.proc.stdout.readline()

    async def read(self):
        return await self.proc.stdout.read()

    def write(self, data):
        self.proc.stdin.write(data)

    def write_eof(self):
        if not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def finish(self):
        err = await self.proc.stderr.read()
        return await self.proc.wait(), err


class LocalShell:
    """A transport whose 'target' is a local sh: the session's protocol without sshd."""

    label = "local-shell"

    async def open(self, command):
        p = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", command, stdin=p, stdout=p, stderr=p
        )
        return LocalChannel(proc)

    async def close(self):
        pass


def wakeup(*options: tuple[str, str | None]) -> ProbeCall:
    return ProbeCall("wakeup", tuple(Option(n, v) for n, v in options))


def test_session_runs_cases_brings_documents_and_raw_files_back(tmp_path):
    async def go():
        s = Session(TargetSpec("local", probe=str(find_probe())), LocalShell())
        await s.prepare()
        remote_dir = Path(s.dir)
        assert remote_dir.is_dir() and (remote_dir / "rtlab-probe").is_file()
        catalog = await s.catalog()
        assert "wakeup" in catalog.meter_names
        root = await s.snapshot()
        assert root.read("proc/cmdline") is not None
        call = wakeup(("policy", "other"), ("no-mlock", None), ("loops", "30"), ("threads", "2"))
        lines = []
        doc = tmp_path / "001.json"
        outcome = await s.run_case(call, doc, True, lines.append, asyncio.Event())
        checks = await s.check_all([call, wakeup(("interval", "0"))])
        await s.close()
        return remote_dir, outcome, lines, checks

    remote_dir, outcome, lines, checks = asyncio.run(go())
    assert outcome.returncode == 0 and outcome.document and not outcome.interrupted
    doc = json.loads(outcome.document.read_text())
    assert [t["count"] for t in doc["threads"]] == [30, 30]
    assert sorted(p.name for p in tmp_path.glob("001.raw.*")) == ["001.raw.0", "001.raw.1"]
    assert lines and lines[-1]["phase"] == "done"
    ok, refused = checks.values()
    assert ok is None and refused.option == "interval"
    assert not remote_dir.exists()  # the guard removed the private directory


def test_closing_the_channel_stops_the_probe(tmp_path):
    async def go():
        s = Session(TargetSpec("local", probe=str(find_probe())), LocalShell())
        await s.prepare()
        stop = asyncio.Event()
        call = wakeup(("policy", "other"), ("no-mlock", None), ("duration", "1h"))

        def progress(line):
            if line.get("phase") == "measure":
                stop.set()  # as ^C does: the probe's stdin is closed

        try:
            return await asyncio.wait_for(
                s.run_case(call, tmp_path / "000.json", False, progress, stop), 60
            )
        finally:
            await s.close()

    outcome = asyncio.run(go())
    assert outcome.interrupted
    doc = json.loads(outcome.document.read_text())
    assert doc["complete"] is False and doc["signal"] == "SIGHUP"


# --- farms in the store -------------------------------------------------------------------


def _experiment(store: Store, target: str | None, farm: str | None = None):
    case = CaseRecord(0, "s", "c", {}, {}, ProbeCall("wakeup"))
    m = new_manifest(name="tiny", description="", source="x.toml", series=[], cases=[case])
    if target:
        m.target = {"name": target, "farm": farm}
    return store.create(m, "", {"hostname": "h", "kernel_release": "6.1"})


def test_farm_runs_are_listed_and_stand_for_their_boards(tmp_path):
    store = Store(tmp_path)
    farm = create_farm(store, "tiny", "x.toml", [TargetSpec("a"), TargetSpec("b")])
    recs = [_experiment(store, n, farm.id) for n in ("a", "b")]
    farm.members = [
        FarmMember("a", "ssh://a", "done", recs[0].id),
        FarmMember("b", "ssh://b", "failed", None, 3, None, "b: connection refused"),
    ]
    farm.save()
    [row] = farm_rows(store)
    assert row["id"] == farm.id and row["source"] == "farm:x.toml"
    assert (row["done"], row["cases"], row["complete"]) == (1, 2, False)
    assert [r["id"] for r in store.listing()] == [r.id for r in recs]  # farms are no experiments
    with pytest.raises(UserError, match="no target finished"):
        open_experiments(store, [farm.id])  # a's case has not run


def test_boards_are_named_by_target_and_what_differs(tmp_path):
    store = Store(tmp_path)
    a, b = _experiment(store, "board-a"), _experiment(store, "board-b")
    assert setup_labels([a, b]) == ["board-a", "board-b"]
    here = _experiment(store, None)
    assert setup_labels([a, here]) == [a.id, here.id]
