"""Which board a result came from: its identity, read through one root and kept in the
fingerprint (system.json `board`), and `board_identity`, the one function that names the
board of a stored fingerprint, experiment or monitor.

Files (every one collected by `rtlab-probe sysinfo` too, so a remote target's are read
there): /etc/machine-id (machine-id(5): 32 lowercase hex digits; "uninitialized" or
anything else is no ID), the DMI strings of drivers/firmware/dmi-id.c that anyone may
read (sys_vendor, product_name, board_vendor, board_name; the serials and UUID are
root-only and not read), and the device tree's `model` (/proc/device-tree, the stable
ABI of Documentation/ABI/testing/sysfs-firmware-ofw, else /sys/firmware/devicetree/base).

The machine ID is never stored: machine-id(5) asks that it be kept confidential and that
an application use a keyed hash of it. rtlab stores the application-specific ID that
systemd's sd_id128_get_machine_app_specific() derives (HMAC-SHA256 keyed by the machine
ID over APP_ID, made a v4 UUID): `systemd-id128 machine-id --app-specific=APP_ID` prints
the same value.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import asdict, dataclass
from typing import Any

from rtlab.system._root import Root

#: rtlab's application ID for the machine-ID hash (a fixed random 128-bit value).
APP_ID = "5f0c3d6e9a2b4c71b8e4a1d2c3f40719"
DMI = "sys/class/dmi/id"
DMI_FIELDS = ("sys_vendor", "product_name", "board_vendor", "board_name")
DT_MODELS = ("proc/device-tree/model", "sys/firmware/devicetree/base/model")
#: Characters kept of one DMI string or model (firmware strings are short; a forged
#: document's are cut).
MAX_TEXT = 128
_MACHINE_ID = re.compile(r"[0-9a-f]{32}")
#: DMI strings firmware writes when it knows nothing: not a model.
PLACEHOLDERS = {
    "", "to be filled by o.e.m.", "default string", "system product name",
    "system manufacturer", "not applicable", "none", "unknown", "o.e.m.", "oem",
}  # fmt: skip


def app_specific_id(machine_id: str) -> str | None:
    """rtlab's application-specific ID of MACHINE_ID (32 hex digits), None when it is not
    a machine ID (machine-id(5): lowercase hex, not all zeros)."""
    text = machine_id.strip()
    if not _MACHINE_ID.fullmatch(text) or not int(text, 16):
        return None
    digest = bytearray(
        hmac.new(bytes.fromhex(text), bytes.fromhex(APP_ID), hashlib.sha256).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x40  # a v4 UUID, as systemd makes it
    digest[8] = (digest[8] & 0x3F) | 0x80
    return digest.hex()


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    text = " ".join(value.replace("\0", " ").split())[:MAX_TEXT]
    return None if text.lower() in PLACEHOLDERS or not text.isprintable() else text


def read_board(root: Root) -> dict[str, Any]:
    """The board's identity facts: {"machine_id" (the application-specific hash),
    "dmi": {field: text}, "dt_model"}; None (or no field) where a file is absent."""
    raw = root.read("etc/machine-id")
    dmi = {f: t for f in DMI_FIELDS if (t := _text(root.read(f"{DMI}/{f}"))) is not None}
    model = next((t for p in DT_MODELS if (t := _text(root.read(p))) is not None), None)
    return {
        "machine_id": None if raw is None else app_specific_id(raw),
        "dmi": dmi,
        "dt_model": model,
    }


#: A fingerprint from before the board was recorded (schema 2 and older).
UNKNOWN_BOARD: dict[str, Any] = {"machine_id": None, "dmi": {}, "dt_model": None, "target": None}


@dataclass(frozen=True)
class BoardId:
    """One board. `key` is what results are grouped by: "target:NAME" for a run through a
    named target (the name a targets file or farm gives it; it survives a new image, which
    gets a new machine ID), else "machine:ID" (the application-specific machine ID), else
    "host:HOSTNAME", else "unknown". `name` is what outputs call it."""

    key: str
    name: str
    target: str | None  # the target's name; None for this machine (or not recorded)
    machine_id: str | None
    model: str | None  # "Vendor Product (Board vendor Board)" or the device tree's model
    hostname: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def model_text(dmi: Any, dt_model: Any) -> str | None:
    """What the board is: the device tree's model, else the DMI product and board."""
    if _str(dt_model):
        return _text(dt_model)
    if not isinstance(dmi, dict):
        return None
    product = " ".join(t for k in ("sys_vendor", "product_name") if (t := _str(dmi.get(k))))
    board = " ".join(t for k in ("board_vendor", "board_name") if (t := _str(dmi.get(k))))
    if product and board and board != product:
        return _text(f"{product} ({board})")
    return _text(product or board) if (product or board) else None


def _fingerprint_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint inside DOC: DOC itself, or its `system` (a monitor's document)."""
    inner = doc.get("system")
    return inner if isinstance(inner, dict) and "board" not in doc else doc


def board_identity(fingerprint_or_doc: dict[str, Any], target: str | None = None) -> BoardId:
    """The board of a fingerprint (system.json), of the audit's facts, or of a document
    holding one under `system`; TARGET (the target's name, "local" for this machine)
    overrides what the fingerprint recorded. Works on every stored schema: what an older
    fingerprint lacks (the machine ID, the model, the target) is left out of the key."""
    fp = _fingerprint_of(fingerprint_or_doc) if isinstance(fingerprint_or_doc, dict) else {}
    found = fp.get("board")
    board: dict[str, Any] = found if isinstance(found, dict) else {}
    machine_id = _str(board.get("machine_id"))
    if machine_id is None and isinstance(fp.get("machine_id"), str):  # the audit's facts
        machine_id = _str(fp["machine_id"])
    hostname = _str(fp.get("hostname"))
    model = model_text(board.get("dmi", fp.get("dmi")), board.get("dt_model", fp.get("dt_model")))
    where = _str(target) or _str(board.get("target"))
    remote = where if where and where != "local" else None
    if remote:
        key, name = f"target:{remote}", remote
    elif machine_id:
        key, name = f"machine:{machine_id}", hostname or model or machine_id[:12]
    elif hostname:
        key, name = f"host:{hostname}", hostname
    else:
        key, name = "unknown", "unknown"
    return BoardId(key, name, remote, machine_id, model, hostname)
