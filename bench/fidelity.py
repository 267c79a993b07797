#!/usr/bin/env python3
"""Fidelity benchmark driver: rtlab-probe wakeup against cyclictest.

Runs, interleaved ROUNDS times,
  A  rtlab-probe wakeup
  B  cyclictest
  C  rtlab-probe wakeup --raw (to a temporary file)
with the same parameters (SCHED_FIFO 99, one thread pinned per CPU, 1 ms
absolute-time period, LOOPS cycles per thread, memory locked), collects each
child's CPU time (user+sys, from os.wait4) and latency histograms, and
compares pooled p50/p90/p99 and CPU time per measuring cycle.

Normally started by bench/fidelity.sh, which checks the prerequisites.
Never kills anything but the child it started itself.
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))

# Targets: (ratio key, low, high, description).
TARGETS = (
    ("p50", 0.9, 1.1),
    ("p90", 0.9, 1.1),
    ("cpu", None, 1.0),
    ("raw_vs_cyclictest", None, 1.1),
    ("raw_vs_probe", None, 1.1),
)


# Warn when the rest of the system kept this share of the CPUs busy during a run.
BG_WARN_PCT = 5.0


class Stop(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/fidelity.sh",
        description="Compare rtlab-probe wakeup with cyclictest: "
        "latency percentiles and CPU time per cycle.",
    )
    p.add_argument(
        "--probe",
        default="build/probe/rtlab-probe",
        help="rtlab-probe binary (default: %(default)s)",
    )
    p.add_argument(
        "--cyclictest",
        default=shutil.which("cyclictest") or "cyclictest",
        help="cyclictest binary (default: from PATH)",
    )
    p.add_argument(
        "--loops",
        type=int,
        default=int(os.environ.get("LOOPS", 20000)),
        help="cycles per thread and run (env LOOPS, default 20000)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=int(os.environ.get("ROUNDS", 3)),
        help="interleaved rounds A B C (env ROUNDS, default 3)",
    )
    p.add_argument(
        "--cpus",
        default=os.environ.get("CPUS"),
        help="CPU list, one thread each (env CPUS, default: all online CPUs)",
    )
    p.add_argument(
        "--interval-us",
        type=int,
        default=int(os.environ.get("INTERVAL_US", 1000)),
        help="period in us (env INTERVAL_US, default 1000)",
    )
    p.add_argument(
        "--histmax-us",
        type=int,
        default=int(os.environ.get("HISTMAX_US", 2000)),
        help="cyclictest -h histogram range in us (env HISTMAX_US, default 2000)",
    )
    p.add_argument("--no-raw", action="store_true", help="skip variant C (probe with --raw)")
    p.add_argument("--json", metavar="OUT", help="also write the figures to OUT")
    p.add_argument("--strict", action="store_true", help="exit 3 when any target is missed")
    p.add_argument("--verbose", action="store_true", help="show the command lines")
    a = p.parse_args(argv)
    if a.loops < 1 or a.rounds < 1 or a.interval_us < 1 or a.histmax_us < 1:
        p.error("--loops, --rounds, --interval-us and --histmax-us must be positive")
    if a.cpus is None:
        with open("/sys/devices/system/cpu/online") as f:
            a.cpus = f.read().strip()
    return a


def cpulist_count(s):
    n = 0
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            n += int(hi) - int(lo) + 1
        else:
            n += 1
    return n


# ---------------------------------------------------------------- histograms


def probe_hist(doc):
    """[(representative ns, count)], cycles, overflow from an rtlab-probe document."""
    pts, cycles, over = [], 0, 0
    for t in doc["threads"]:
        cycles += int(t["count"])
        h = t["histogram"]
        over += int(h.get("overflow", 0))
        for lo, hi, c in h["buckets"]:
            pts.append(((lo + hi) / 2.0, int(c)))
    return pts, cycles, over


def cyclictest_hist(doc):
    """Same from cyclictest's --json file (1-us buckets, values truncated to whole us)."""
    pts, cycles, over = [], 0, 0
    for _, t in sorted(doc["thread"].items(), key=lambda kv: int(kv[0])):
        n = int(t["cycles"])
        cycles += n
        binned = 0
        for us, c in t.get("histogram", {}).items():
            pts.append(((int(us) + 0.5) * 1000.0, int(c)))
            binned += int(c)
        over += max(0, n - binned)  # beyond -h: counted in cycles, not in the histogram
    return pts, cycles, over


def quantile(pts, over, q):
    """Nearest-rank quantile of pooled (value, count) points; overflow counts as +inf."""
    total = sum(c for _, c in pts) + over
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    cum = 0
    for v, c in sorted(pts):
        cum += c
        if cum >= rank:
            return v
    return math.inf


# ---------------------------------------------------------------- runs


def cpu_busy_s():
    """System-wide non-idle CPU seconds from /proc/stat (None if unreadable)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is in user)
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


class Runner:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.child = None
        self.nthreads = cpulist_count(args.cpus)

    def command(self, variant, seq):
        a = self.a
        out = os.path.join(self.tmp, "%s%d.json" % (variant, seq))
        if variant in ("probe", "probe+raw"):
            cmd = [
                a.probe,
                "wakeup",
                "--cpus",
                a.cpus,
                "--interval",
                "%dus" % a.interval_us,
                "--loops",
                str(a.loops),
                "--policy",
                "fifo:99",
                "--json",
                out,
                "--quiet",
            ]
            if variant == "probe+raw":
                cmd += ["--raw", os.path.join(self.tmp, "raw%d" % seq)]
        else:
            cmd = [
                a.cyclictest,
                "-m",
                "-p",
                "99",
                "-t",
                str(self.nthreads),
                "-a",
                a.cpus,
                "-i",
                str(a.interval_us),
                "-d",
                "0",
                "-l",
                str(a.loops),
                "--default-system",
                "-q",
                "--json=" + out,
                "-h",
                str(a.histmax_us),
            ]
        return cmd, out

    def run(self, variant, seq):
        cmd, out = self.command(variant, seq)
        if self.a.verbose:
            print("  $ " + " ".join(cmd), flush=True)
        base = os.path.join(self.tmp, "%s%d" % (variant, seq))
        with open(base + ".stdout", "w+") as so, open(base + ".stderr", "w+") as se:
            t0 = time.monotonic()
            busy0 = cpu_busy_s()
            self.child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=so, stderr=se)
            # wait4 on our own child gives exactly its (and its threads') CPU time.
            while True:
                try:
                    _, status, ru = os.wait4(self.child.pid, 0)
                    break
                except InterruptedError:
                    continue
            self.child.returncode = os.waitstatus_to_exitcode(status)
            rc = self.child.returncode
            self.child = None
            wall = time.monotonic() - t0
            busy1 = cpu_busy_s()
            if rc != 0:
                se.seek(0)
                raise RuntimeError(
                    "%s exited with %d: %s\n%s" % (variant, rc, " ".join(cmd), se.read()[-2000:])
                )
        with open(out) as f:
            doc = json.load(f)
        if variant == "cyclictest":
            pts, cycles, over = cyclictest_hist(doc)
        else:
            pts, cycles, over = probe_hist(doc)
            lost = sum(int(t.get("raw_lost", 0)) for t in doc["threads"])
            if lost:
                print("  warning: %s lost %d raw samples" % (variant, lost), file=sys.stderr)
        expect = self.a.loops * self.nthreads
        if cycles != expect:
            print(
                "  warning: %s made %d cycles, expected %d" % (variant, cycles, expect),
                file=sys.stderr,
            )
        cpu_s = ru.ru_utime + ru.ru_stime
        # CPU the rest of the system used meanwhile, as a share of all CPUs:
        # other jobs disturb both the latency and the CPU figures.
        bg = None
        if busy0 is not None and busy1 is not None and wall > 0:
            bg = max(0.0, (busy1 - busy0 - cpu_s) / (wall * (os.cpu_count() or 1)) * 100.0)
        r = {
            "tool": variant,
            "seq": seq,
            "cycles": cycles,
            "overflow": over,
            "user_s": ru.ru_utime,
            "sys_s": ru.ru_stime,
            "cpu_ns_per_cycle": cpu_s * 1e9 / cycles if cycles else None,
            "wall_s": wall,
            "background_cpu_pct": bg,
            "nvcsw": ru.ru_nvcsw,
            "nivcsw": ru.ru_nivcsw,
            "minflt": ru.ru_minflt,
            "maxrss_kib": ru.ru_maxrss,
        }
        for name, q in QUANTILES:
            v = quantile(pts, over, q)
            r[name + "_us"] = None if v is None else v / 1000.0
        # Remove bulky files as we go; keep only the figures.
        for f in os.listdir(self.tmp):
            if f.startswith("raw%d" % seq) or f == os.path.basename(out):
                os.unlink(os.path.join(self.tmp, f))
        return r, pts, over

    def stop_child(self):
        c = self.child
        if c is not None and c.returncode is None:
            try:
                c.send_signal(signal.SIGINT)  # our own child, by pid
                for _ in range(50):
                    pid, _ = os.waitpid(c.pid, os.WNOHANG)
                    if pid:
                        c.returncode = -1
                        return
                    time.sleep(0.1)
                c.kill()
                os.waitpid(c.pid, 0)
                c.returncode = -1
            except (ProcessLookupError, ChildProcessError):
                c.returncode = -1


# ---------------------------------------------------------------- report


def fmt(v, spec="%.2f"):
    if v is None:
        return "-"
    if v == math.inf:
        return "overflow"
    return spec % v


def ratio(x, y):
    if x is None or y is None or y == 0 or math.isinf(x) or math.isinf(y):
        return None
    return x / y


def verdict(v, lo, hi):
    if v is None:
        return "n/a"
    ok = (lo is None or v >= lo) and (hi is None or v <= hi)
    return "PASS" if ok else "MISS"


def target_text(lo, hi):
    if lo is not None and hi is not None:
        return "%.2f-%.2f" % (lo, hi)
    if hi is not None:
        return "<= %.2f" % hi
    if lo is not None:
        return ">= %.2f" % lo
    return "(info)"


def main(argv):
    a = parse_args(argv)
    variants = ["probe", "cyclictest"] + ([] if a.no_raw else ["probe+raw"])
    tmp = tempfile.mkdtemp(prefix="rtlab-fidelity.")
    runner = Runner(a, tmp)

    def on_term(signum, frame):
        raise Stop("signal %d" % signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    runs = []
    pooled = {v: ([], 0) for v in variants}
    try:
        print(
            "fidelity: %d thread(s) on CPUs %s, %d us period, %d loops, %d round(s): %s"
            % (
                runner.nthreads,
                a.cpus,
                a.interval_us,
                a.loops,
                a.rounds,
                " ".join("ABC"[i] + "=" + v for i, v in enumerate(variants)),
            ),
            flush=True,
        )
        print(
            "%-6s %-11s %9s %9s %9s %10s %8s %8s %8s %6s"
            % (
                "round",
                "tool",
                "cycles",
                "user s",
                "sys s",
                "CPU ns/cy",
                "p50 us",
                "p90 us",
                "p99 us",
                "bg %",
            )
        )
        seq = 0
        for rnd in range(1, a.rounds + 1):
            for v in variants:
                seq += 1
                r, pts, over = runner.run(v, seq)
                r["round"] = rnd
                runs.append(r)
                pooled[v] = (pooled[v][0] + pts, pooled[v][1] + over)
                print(
                    "%-6d %-11s %9d %9.3f %9.3f %10.0f %8s %8s %8s %6s%s"
                    % (
                        rnd,
                        v,
                        r["cycles"],
                        r["user_s"],
                        r["sys_s"],
                        r["cpu_ns_per_cycle"],
                        fmt(r["p50_us"]),
                        fmt(r["p90_us"]),
                        fmt(r["p99_us"]),
                        fmt(r["background_cpu_pct"], "%.1f"),
                        ("  (%d beyond histogram)" % r["overflow"]) if r["overflow"] else "",
                    ),
                    flush=True,
                )
    except (KeyboardInterrupt, Stop) as e:
        runner.stop_child()
        print("fidelity: interrupted (%s)" % (e or "SIGINT"), file=sys.stderr)
        return 130
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        runner.stop_child()
        print("fidelity: %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    summary = {}
    for v in variants:
        rs = [r for r in runs if r["tool"] == v]
        cycles = sum(r["cycles"] for r in rs)
        cpu = sum(r["user_s"] + r["sys_s"] for r in rs)
        pts, over = pooled[v]
        per_round = [r["cpu_ns_per_cycle"] for r in rs]
        s = {
            "runs": len(rs),
            "cycles": cycles,
            "overflow": over,
            "cpu_s": cpu,
            "cpu_ns_per_cycle": cpu * 1e9 / cycles if cycles else None,
            "cpu_ns_per_cycle_min": min(per_round),
            "cpu_ns_per_cycle_max": max(per_round),
        }
        for name, q in QUANTILES:
            x = quantile(pts, over, q)
            s[name + "_us"] = None if x is None else (None if math.isinf(x) else x / 1000.0)
        summary[v] = s

    P, C = summary["probe"], summary["cyclictest"]
    R = summary.get("probe+raw")
    ratios = {
        "p50": ratio(P["p50_us"], C["p50_us"]),
        "p90": ratio(P["p90_us"], C["p90_us"]),
        "p99": ratio(P["p99_us"], C["p99_us"]),
        "cpu": ratio(P["cpu_ns_per_cycle"], C["cpu_ns_per_cycle"]),
    }
    if R:
        ratios["raw_vs_cyclictest"] = ratio(R["cpu_ns_per_cycle"], C["cpu_ns_per_cycle"])
        ratios["raw_vs_probe"] = ratio(R["cpu_ns_per_cycle"], P["cpu_ns_per_cycle"])
    targets = {k: (lo, hi) for k, lo, hi in TARGETS}

    # The same ratios per round (runs of one round are adjacent in time): their
    # spread shows how much of a pooled ratio is run-to-run noise.
    def per_round(key_a, key_b, field):
        out = []
        for rnd in range(1, a.rounds + 1):
            x = [r for r in runs if r["round"] == rnd and r["tool"] == key_a]
            y = [r for r in runs if r["round"] == rnd and r["tool"] == key_b]
            if x and y:
                q = ratio(x[0][field], y[0][field])
                if q is not None:
                    out.append(q)
        return out

    round_ratios = {
        "p50": per_round("probe", "cyclictest", "p50_us"),
        "p90": per_round("probe", "cyclictest", "p90_us"),
        "p99": per_round("probe", "cyclictest", "p99_us"),
        "cpu": per_round("probe", "cyclictest", "cpu_ns_per_cycle"),
    }
    if R:
        round_ratios["raw_vs_cyclictest"] = per_round("probe+raw", "cyclictest", "cpu_ns_per_cycle")
        round_ratios["raw_vs_probe"] = per_round("probe+raw", "probe", "cpu_ns_per_cycle")

    print()
    print(
        "Pooled over %d round(s), all threads (p from histograms: probe bucket midpoints,"
        % a.rounds
    )
    print("cyclictest whole us + 0.5; CPU = child user+sys from wait4 / total cycles)")
    print()
    print(
        "%-11s %9s %8s %8s %8s %11s %19s"
        % ("tool", "cycles", "p50 us", "p90 us", "p99 us", "CPU ns/cy", "(min-max per run)")
    )
    for v in variants:
        s = summary[v]
        print(
            "%-11s %9d %8s %8s %8s %11.0f %19s"
            % (
                v,
                s["cycles"],
                fmt(s["p50_us"]),
                fmt(s["p90_us"]),
                fmt(s["p99_us"]),
                s["cpu_ns_per_cycle"],
                "%.0f-%.0f" % (s["cpu_ns_per_cycle_min"], s["cpu_ns_per_cycle_max"]),
            )
        )
    print()
    labels = {
        "p50": "p50        probe / cyclictest",
        "p90": "p90        probe / cyclictest",
        "p99": "p99        probe / cyclictest",
        "cpu": "CPU/cycle  probe / cyclictest",
        "raw_vs_cyclictest": "CPU/cycle  probe+raw / cyclictest",
        "raw_vs_probe": "CPU/cycle  probe+raw / probe",
    }
    print(
        "%-35s %7s  %-10s %-6s %s"
        % ("ratio (pooled)", "value", "target", "result", "per round min-max")
    )
    verdicts = {}
    for k, label in labels.items():
        if k not in ratios:
            continue
        lo, hi = targets.get(k, (None, None))
        res = verdict(ratios[k], lo, hi) if k in targets else "info"
        verdicts[k] = res
        rr = round_ratios.get(k) or []
        spread = "%.3f-%.3f" % (min(rr), max(rr)) if rr else "-"
        print(
            "%-35s %7s  %-10s %-6s %s"
            % (label, fmt(ratios[k], "%.3f"), target_text(lo, hi), res, spread)
        )

    bgs = [r["background_cpu_pct"] for r in runs if r["background_cpu_pct"] is not None]
    if bgs and max(bgs) > BG_WARN_PCT:
        print(
            "\nwarning: other jobs kept up to %.0f %% of the CPUs busy during the runs (bg %%);"
            " the figures are disturbed, rerun on a quiet machine" % max(bgs)
        )

    if a.json:
        doc = {
            "schema": 1,
            "params": {
                "cpus": a.cpus,
                "threads": runner.nthreads,
                "interval_us": a.interval_us,
                "loops": a.loops,
                "rounds": a.rounds,
                "histmax_us": a.histmax_us,
                "policy": "fifo:99",
                "probe": a.probe,
                "cyclictest": a.cyclictest,
                "uname": " ".join(os.uname()),
            },
            "runs": runs,
            "summary": summary,
            "ratios": {
                k: {
                    "value": ratios[k],
                    "target": {
                        "min": targets.get(k, (None, None))[0],
                        "max": targets.get(k, (None, None))[1],
                    },
                    "result": verdicts[k],
                    "per_round": round_ratios.get(k, []),
                }
                for k in verdicts
            },
        }
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print("\nfigures written to %s" % a.json)
    if a.strict and any(x == "MISS" for x in verdicts.values()):
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
