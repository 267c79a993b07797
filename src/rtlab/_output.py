"""What rtlab prints for people and programs: names and values literally, control
characters as escapes, in every format.

* Text (tables, messages, plain lines): `visible` writes every character that is not
  printable (C0 and C1 controls, DEL, bidirectional overrides and isolates, zero-width
  and other format characters, line and paragraph separators) as a Python escape
  (`\\x1b`, `\\u202e`), so no name or value from a file can move the cursor, recolour the
  terminal, make a hyperlink or reorder what is shown.
* CSV (`csv_text`): every cell goes through `visible`, so a row is one line and a cell
  holds no control character; quoting is the csv module's.
* JSON (`json_text`): ASCII only, so every control, bidi and non-ASCII character is a
  `\\uXXXX` escape of the serializer (the text is unchanged once parsed); a number that
  is not finite is null: the output is always valid JSON (RFC 8259 has no NaN).
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rtlab.probe import one_line


def visible(text: Any) -> str:
    """TEXT on one line with every control or unprintable character as an escape."""
    return one_line(str(text))


def _finite(value: Any) -> Any:
    """VALUE with every float that is not finite, however deep, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(data: Any, indent: int | None = None) -> str:
    """DATA as JSON text: ASCII, non-finite numbers as null; compact without INDENT."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(
        _finite(data), indent=indent, separators=separators, ensure_ascii=True, allow_nan=False
    )


def csv_text(rows: list[dict[str, Any]], columns: list[str], lineterminator: str = "\r\n") -> str:
    """ROWS as CSV with a header of COLUMNS (other keys ignored, None as an empty cell),
    every cell made visible."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=lineterminator)
    writer.writerow([visible(c) for c in columns])
    for row in rows:
        writer.writerow(["" if row.get(k) is None else visible(row.get(k)) for k in columns])
    return buf.getvalue()
