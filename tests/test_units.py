"""rtlab.units: duration parsing and formatting."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.units import format_ns, parse_duration_ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("0s", 0),
        ("100us", 100_000),
        ("100µs", 100_000),
        ("100μs", 100_000),
        ("1ms", 1_000_000),
        ("1.5s", 1_500_000_000),
        ("250ns", 250),
        ("2m", 120_000_000_000),
        ("1h", 3_600_000_000_000),
        (" 20 us ", 20_000),
        (".5ms", 500_000),
        ("1.ms", 1_000_000),
        ("0.001us", 1),
    ],
)
def test_parse_duration_good(text: str, ns: int) -> None:
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        "",
        "us",
        "100",
        "1.5",
        "-1ms",
        "1 ms s",
        "10 parsecs",
        "1e3us",
        "0.5ns",
        "1,5ms",
        "ms1",
        "nan",
    ],
)
def test_parse_duration_bad(text: str) -> None:
    with pytest.raises(UserError) as e:
        parse_duration_ns(text)
    msg = str(e.value)
    assert "\n" not in msg
    assert repr(text) in msg


@given(st.integers(min_value=0, max_value=10**15), st.sampled_from(["ns", "us", "ms", "s"]))
def test_parse_duration_integer_roundtrip(n: int, unit: str) -> None:
    scale = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}[unit]
    assert parse_duration_ns(f"{n}{unit}") == n * scale


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (7, "7 ns"),
        (950, "950 ns"),
        (12.5, "12.5 ns"),
        (999, "999 ns"),
        (999.7, "1.00 µs"),
        (12_300, "12.3 µs"),
        (12_345, "12.3 µs"),
        (123_456, "123 µs"),
        (1_250_000, "1.25 ms"),
        (2_000_000_000, "2.00 s"),
        (-12_300, "-12.3 µs"),
        (3_600_000_000_000, "3600 s"),
        (math.nan, "n/a"),
        (None, "n/a"),
    ],
)
def test_format_ns(ns: float | None, text: str) -> None:
    assert format_ns(ns) == text


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_format_ns_never_fails(x: float) -> None:
    out = format_ns(x)
    assert isinstance(out, str)
    assert out


@given(st.integers(min_value=1000, max_value=10**12))
def test_format_ns_three_significant_digits(n: int) -> None:
    number, unit = format_ns(n).split(" ")
    assert unit in {"µs", "ms", "s"}
    assert len(number.replace(".", "").lstrip("0")) == 3 or unit == "s"
