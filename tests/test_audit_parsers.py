"""Property tests for the parsers the audit rests on: command line, CPU lists and masks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.system import (
    Cmdline,
    format_cpulist,
    parse_cpulist,
    parse_cpumask,
    parse_isolcpus,
    split_cmdline,
)
from rtlab.system._cpus import MAX_CPULIST_CHARS, MAX_CPUS, CpuNumberError, cpulist_or_none

NAME = st.from_regex(r"[a-z][a-z0-9_.]{0,15}", fullmatch=True)
VALUE = st.from_regex(r"[A-Za-z0-9_,.:/=+-]{0,20}", fullmatch=True)
CPUS = st.sets(st.integers(min_value=0, max_value=511), max_size=40)


@given(st.text())
def test_split_cmdline_never_raises(text):
    for name, value in split_cmdline(text):
        assert isinstance(name, str) and (value is None or isinstance(value, str))


@given(st.lists(st.tuples(NAME, st.one_of(st.none(), VALUE)), max_size=20))
def test_split_cmdline_round_trip(params):
    text = " ".join(n if v is None else f"{n}={v}" for n, v in params)
    assert split_cmdline(text) == params


@given(NAME, st.from_regex(r"[a-z0-9 ]{0,20}", fullmatch=True))
def test_quoted_values_keep_spaces(name, value):
    assert split_cmdline(f'x {name}="{value}" y') == [("x", None), (name, value), ("y", None)]


@given(st.lists(NAME, max_size=5), st.lists(NAME, max_size=5))
def test_double_dash_ends_kernel_parameters(before, after):
    assert [n for n, _ in split_cmdline(" ".join([*before, "--", *after]))] == before


def test_cmdline_lookup_rules():
    c = Cmdline.parse("isolcpus=1 nohz-full=2-3 isolcpus=nohz,managed_irq,3 rcu_nocb_poll")
    assert c.get("isolcpus") == "nohz,managed_irq,3"  # the last one counts
    assert c.cpus("nohz_full") == [2, 3]  # '-' and '_' are the same in names
    assert c.get("rcu_nocb_poll") == "" and c.has("rcu_nocb_poll") and not c.has("nosmt")
    assert c.isolcpus() == (["nohz", "managed_irq"], [3])
    assert Cmdline.parse("nohz_full=x").cpus("nohz_full") is None


@given(st.lists(st.sampled_from(["nohz", "domain", "managed_irq"]), max_size=3), CPUS)
def test_isolcpus_flags_and_list(flags, cpus):
    value = ",".join([*flags, format_cpulist(cpus)]).strip(",")
    assert parse_isolcpus(value) == (flags, sorted(cpus))


@given(CPUS)
def test_cpumask_round_trip(cpus):
    value = sum(1 << c for c in cpus)
    hexdigits = format(value, "x")
    # The kernel prints masks in 32-bit groups separated by commas.
    groups = []
    while hexdigits:
        groups.insert(0, hexdigits[-8:].rjust(8, "0"))
        hexdigits = hexdigits[:-8]
    assert parse_cpumask(",".join(groups) or "0") == sorted(cpus)


@pytest.mark.parametrize("text", ["zz", "0x3", "1 2", "f_f", "-1"])
def test_cpumask_garbage(text):
    assert parse_cpumask(text) is None


@given(CPUS)
def test_cpulist_round_trip_wide(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)


@given(st.text(max_size=30))
def test_cpulist_rejects_only_with_user_error(text):
    try:
        cpus = parse_cpulist(text)
    except UserError as e:  # one printable line, naming the list (escaped, shortened)
        assert str(e).isprintable() and str(e).startswith('"')
    else:
        assert cpus == sorted(set(cpus)) and all(c >= 0 for c in cpus)


@given(CPUS, st.integers(min_value=1, max_value=8))
def test_cpulist_strides(cpus, stride):
    lo = min(cpus, default=0)
    hi = lo + 3 * stride
    assert parse_cpulist(f"{lo}-{hi}:{stride}") == list(range(lo, hi + 1, stride))


# --- limits: one parser, CPU numbers below NR_CPUS's largest value ------------------------

HOSTILE_LIST = st.text(alphabet=st.sampled_from("0123456789-:/, \t\n9_+x٣\x1b"), max_size=60)


def _kernel_region(lo: int, hi: int, used: int, group: int) -> list[int]:
    """lib/bitmap-str.c, bitmap_set_region: the first USED bits of every GROUP in LO-HI."""
    return [
        c for start in range(lo, hi + 1, group) for c in range(start, min(start + used, hi + 1))
    ]


@given(
    st.integers(min_value=0, max_value=MAX_CPUS - 1),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=1, max_value=10**6),
)
def test_cpulist_kernel_groups(lo, width, used, group):
    hi = min(lo + width, MAX_CPUS - 1)
    text = f"{lo}-{hi}:{used}/{group}"
    if used > group:
        with pytest.raises(UserError, match="not a valid range"):
            parse_cpulist(text)
    else:
        assert parse_cpulist(text) == sorted(set(_kernel_region(lo, hi, used, group)))


def test_cpulist_kernel_examples():
    """The examples of Documentation/admin-guide/kernel-parameters.rst and test_bitmap.c."""
    assert parse_cpulist("0-1023:2/256")[:4] == [0, 1, 256, 257]
    assert parse_cpulist("1-10:8/12") == list(range(1, 9))
    assert parse_cpulist("0-31:0/3") == []
    assert parse_cpulist(" 0-3 ,5\n") == [0, 1, 2, 3, 5]


@settings(max_examples=300)
@given(HOSTILE_LIST)
def test_cpulist_any_text_is_bounded_cpus_or_one_user_error(text):
    try:
        cpus = parse_cpulist(text)
    except UserError as e:
        assert str(e).isprintable()
    else:
        assert cpus == sorted(set(cpus)) and all(0 <= c < MAX_CPUS for c in cpus)


@given(st.integers(min_value=MAX_CPUS, max_value=10**400), st.sampled_from(["{}", "0-{}", "{}-{}"]))
def test_cpulist_beyond_the_largest_cpu_is_refused_without_building_it(n, form):
    with pytest.raises(CpuNumberError, match=f"beyond {MAX_CPUS - 1}"):
        parse_cpulist(form.format(n, n))
    assert cpulist_or_none(form.format(n, n)) is None  # a boot parameter the kernel ignores


def test_cpulist_limits():
    assert parse_cpulist(f"0-{MAX_CPUS - 1}") == list(range(MAX_CPUS))
    assert parse_cpulist("00000000000000000000007") == [7]
    assert parse_cpulist("0-7:99999999999999999999") == [0]  # a stride beyond every CPU
    with pytest.raises(UserError, match="characters"):
        parse_cpulist("0," * MAX_CPULIST_CHARS)
    for text in ("1_0", "+3", "٣", "0x3", "1e3"):
        with pytest.raises(UserError, match="not a CPU list entry"):
            parse_cpulist(text)


@given(st.integers(min_value=MAX_CPUS, max_value=1 << 17))
def test_cpumask_beyond_the_largest_cpu_is_refused(bit):
    with pytest.raises(CpuNumberError, match=f"CPU {bit} is beyond"):
        parse_cpumask(format(1 << bit, "x"), "/proc/irq/default_smp_affinity")
    assert parse_cpumask("f" * (MAX_CPULIST_CHARS + 1)) is None
