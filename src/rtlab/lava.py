"""A LAVA test definition (Lava-Test Test Definition 1.0) that runs an experiment's cases
with the static probe on the device under test and reports each as `lava-test-case`
measurements.

LAVA turns `run.steps` into one shell script (run with `set -e` and `set -x`) on the
device, writing
each step as it is followed by a newline. The script here:

1. makes the directory for the documents and fetches the probe (a URL, with wget or
   curl) or takes it from a path on the device, and prints its version;
2. defines `rtlab_case ID DEADLINE_NS ARGS...` (run with the shell's trace off: LAVA runs
   the steps under `set -x`, which would print every line of the helpers and the
   probe's progress line several times per case): runs `rtlab-probe ARGS... --json
   DIR/ID.json --progress DIR/ID.progress --quiet` and reads the per-thread `max_ns` and
   `p99_ns` of the probe's final progress line (one line of flat JSON, no parser needed),
   then reports `ID-max` and `ID-p99` in µs: pass when within the deadline (or without
   one), fail above it; a probe that wrote no result reports `ID` as fail;
3. calls it once per case.

Every value that comes from the experiment is quoted for the shell (shlex.quote), and
the YAML is written by the small emitter below: strings double-quoted with every
character outside YAML's printable set escaped, so no experiment value can end a
string, start a new key or run a command. LAVA escapes `$N` in a step containing
`--cmd` or `--shell`; a `$` before a digit is therefore written `$''N` (the same
characters to the shell), so that rewrite never touches an argument.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from urllib.parse import urlsplit

from rtlab import __version__
from rtlab.errors import UserError
from rtlab.experiment import Experiment
from rtlab.probecall import probe_argv
from rtlab.records import CaseRecord

FORMAT = "Lava-Test Test Definition 1.0"
DEFAULT_DUT_DIR = "/tmp/rtlab-lava"
URL_SCHEMES = ("http", "https", "ftp")

# The helper functions of the script (constant text: no experiment value in it; no
# "--cmd"/"--shell" either, so LAVA leaves its $1 and $2 alone).
FUNCTIONS = r"""rtlab_key() {
  printf '%s\n' "$2" | tr ',{}' '\n\n\n' |
    sed -n "s/^ *\"$1\" *: *\\(-\\{0,1\\}[0-9][0-9]*\\).*/\\1/p" | sort -n | tail -n 1
}
rtlab_report() {
  rtlab_result=pass
  if [ -n "$3" ] && [ "$2" -gt "$3" ]; then rtlab_result=fail; fi
  rtlab_us=$(awk -v ns="$2" 'BEGIN { printf "%.3f", ns / 1000 }')
  lava-test-case "$1" --result "$rtlab_result" --measurement "$rtlab_us" --units us
}
rtlab_case() {
  rtlab_x=
  case $- in *x*) rtlab_x=x; set +x ;; esac
  rtlab_measure "$@"
  if [ -n "$rtlab_x" ]; then set -x; fi
}
rtlab_measure() {
  rtlab_id=$1
  rtlab_dl=$2
  shift 2
  rtlab_out=$RTLAB_DIR/$rtlab_id
  rtlab_rc=0
  rm -f "$rtlab_out.json" "$rtlab_out.progress"
  "$RTLAB_PROBE" "$@" --json "$rtlab_out.json" --progress "$rtlab_out.progress" --quiet ||
    rtlab_rc=$?
  rtlab_last=
  if [ -s "$rtlab_out.progress" ]; then rtlab_last=$(tail -n 1 "$rtlab_out.progress"); fi
  rtlab_max=$(rtlab_key max_ns "$rtlab_last")
  rtlab_p99=$(rtlab_key p99_ns "$rtlab_last")
  if [ "$rtlab_rc" -gt 1 ] || [ -z "$rtlab_max" ] || [ -z "$rtlab_p99" ]; then
    echo "rtlab: $rtlab_id: rtlab-probe exited $rtlab_rc without a result"
    lava-test-case "$rtlab_id" --result fail
    return 0
  fi
  echo "rtlab: $rtlab_id: max $rtlab_max ns, p99 $rtlab_p99 ns, document $rtlab_out.json"
  rtlab_report "$rtlab_id-max" "$rtlab_max" "$rtlab_dl"
  rtlab_report "$rtlab_id-p99" "$rtlab_p99" "$rtlab_dl"
}
"""


def shell_quote(value: str) -> str:
    """VALUE as one literal shell word that LAVA's `$N` rewrite cannot alter."""
    if "\0" in value:
        raise UserError(f"{value!r}: a NUL character cannot be passed to a command")
    return re.sub(r"\$(?=\d)", "$''", shlex.quote(value))


def case_id(case: CaseRecord) -> str:
    """A LAVA test case name (no white space; letters, digits, '.', '_', '-')."""
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", f"{case.series}-{case.name}").strip("-.")
    return f"{case.index:03d}-{slug[:60].rstrip('-.')}" if slug else f"{case.index:03d}"


def definition_name(name: str) -> str:
    """The test definition's name: ASCII, none of LAVA's special characters, no space."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60]
    return f"rtlab-{slug}" if slug else "rtlab"


def _probe_steps(probe: str, dut_dir: str) -> list[str]:
    d = shell_quote(dut_dir)
    steps = [f"RTLAB_DIR={d}", 'mkdir -p "$RTLAB_DIR"']
    if urlsplit(probe).scheme in URL_SCHEMES:
        url = shell_quote(probe)
        steps += [
            'RTLAB_PROBE="$RTLAB_DIR/rtlab-probe"',
            f'wget -q -O "$RTLAB_PROBE" {url} || curl -fsSL -o "$RTLAB_PROBE" {url}',
            'chmod +x "$RTLAB_PROBE"',
        ]
    else:
        steps.append(f"RTLAB_PROBE={shell_quote(probe)}")
    steps.append('"$RTLAB_PROBE" --version')
    return steps


def make_testdef(exp: Experiment, probe: str, deadline_ns: int | None, dut_dir: str) -> str:
    """The test definition of EXP's cases as YAML text."""
    if not probe:
        raise UserError("--probe: give a URL or a path on the device")
    dl = "" if deadline_ns is None else str(deadline_ns)
    steps = _probe_steps(probe, dut_dir)
    steps.append(FUNCTIONS)
    seen: set[str] = set()
    for case in exp.cases:
        cid = case_id(case)
        if cid in seen:  # two names that differ only in characters LAVA refuses
            cid = f"{case.index:03d}"
        seen.add(cid)
        argv = probe_argv(case.call) if case.call is not None else []
        words = ["rtlab_case", cid, shell_quote(dl), *(shell_quote(a) for a in argv)]
        steps.append(" ".join(words))
    described = exp.name + (f": {exp.description}" if exp.description else "")
    expected = sum(c.expected_s for c in exp.cases)
    doc = {
        "metadata": {
            "format": FORMAT,
            "name": definition_name(exp.name),
            "description": f"rtlab experiment {described}"[:500],
            "version": __version__,
        },
        "run": {"steps": steps},
    }
    head = (
        f"# rtlab lava testdef: {len(exp.cases)} case(s), about {expected:.0f} s of "
        "measuring; give the test action a timeout above that\n"
    )
    return head + emit(doc)


# --- a small YAML emitter: mappings, sequences, strings and numbers --------------------

# YAML 1.1/1.2 printable characters that may stand literally in a double-quoted scalar
# (C0 and C1 controls, U+2028/U+2029 line breaks and the BOM are escaped).
_LITERAL = re.compile(
    r"[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(text: str) -> str:
    """TEXT as a YAML double-quoted scalar."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _LITERAL.match(ch):
            out.append(ch)
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate cannot be written as UTF-8
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _block(text: str, indent: str) -> str | None:
    """TEXT as a literal block scalar, when it can be one exactly (else None)."""
    lines = text.split("\n")
    if not text.endswith("\n") or text.endswith("\n\n") or not lines[0].strip():
        return None
    if any(not _LITERAL.match(c) for c in text.replace("\n", "") if c != "\t"):
        return None
    if any(ln != ln.rstrip() for ln in lines) or lines[0][0] in " \t":
        return None
    return "|\n" + "".join(f"{indent}{ln}\n" if ln else "\n" for ln in lines[:-1])


def _scalar(value: Any, indent: str) -> str:
    if isinstance(value, list | dict) and not value:
        return "[]" if isinstance(value, list) else "{}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if "\n" in value:
            block = _block(value, indent)
            if block is not None:
                return block
        return quote(value)
    raise TypeError(f"no YAML for {type(value).__name__}")


def _key(k: str) -> str:
    return k if re.fullmatch(r"[a-z][a-z_]*", k) else quote(k)


def emit(value: Any, indent: str = "") -> str:
    """VALUE (dicts with string keys, lists, strings, ints, bools) as block YAML."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{indent}{_key(k)}:\n{emit(v, indent + '  ')}")
            else:
                s = _scalar(v, indent + "  ")
                out.append(f"{indent}{_key(k)}: {s}" + ("" if s.endswith("\n") else "\n"))
        return "".join(out)
    if isinstance(value, list):
        for v in value:
            if isinstance(v, dict | list) and v:
                body = emit(v, indent + "  ")
                out.append(f"{indent}- {body[len(indent) + 2 :]}")
            else:
                s = _scalar(v, indent + "  ")
                out.append(f"{indent}- {s}" + ("" if s.endswith("\n") else "\n"))
        return "".join(out)
    raise TypeError(f"emit() takes a dict or a list, not {type(value).__name__}")
