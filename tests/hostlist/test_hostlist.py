"""Tests for hpcdist.hostlist: Slurm node lists and count lists."""

from __future__ import annotations

import pickle
import random
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hpcdist.hostlist import (
    MAX_HOSTS,
    MAX_RANGE,
    HostlistError,
    compress,
    expand,
    expand_counts,
)

# --------------------------------------------------------------------------
# expand: valid lists
# --------------------------------------------------------------------------

EXPAND_CASES = [
    # plain names and separators
    ("n1", ["n1"]),
    ("a,b", ["a", "b"]),
    ("a,,b", ["a", "b"]),
    (",a,b,", ["a", "b"]),
    ("a b\tc\nd", ["a", "b", "c", "d"]),
    (" \t\n,a , ,\n b ,", ["a", "b"]),
    ("tux0-5", ["tux0-5"]),  # '-' outside brackets is literal
    ("n1,n1", ["n1", "n1"]),  # duplicates kept
    ("a}b", ["a}b"]),
    ("n%d", ["n%d"]),
    # ranges and padding
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("n[3]", ["n3"]),
    ("n[0]", ["n0"]),
    ("n[1,3,5]", ["n1", "n3", "n5"]),
    ("n[3,1-2]", ["n3", "n1", "n2"]),
    ("n[1-2,1]", ["n1", "n2", "n1"]),
    ("n[009-011]", ["n009", "n010", "n011"]),
    ("n[009-11]", ["n009", "n010", "n011"]),
    ("n[1-04]", ["n1", "n2", "n3", "n4"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[9,09]", ["n9", "n09"]),
    ("n[0,00-01]", ["n0", "n00", "n01"]),
    ("n[98-101]", ["n98", "n99", "n100", "n101"]),
    ("n[0998-1001]", ["n0998", "n0999", "n1000", "n1001"]),
    ("n[00-02]", ["n00", "n01", "n02"]),
    ("n1[0-2]", ["n10", "n11", "n12"]),  # digits before '[' are literal
    ("[1-3]", ["1", "2", "3"]),
    ("[1-2]x", ["1x", "2x"]),
    # text after ']'
    ("cn[1-2]-ib", ["cn1-ib", "cn2-ib"]),
    ("n[1-2].cluster.local", ["n1.cluster.local", "n2.cluster.local"]),
    # several items, brackets keep their commas
    ("n[1-2],login,m[5,7]", ["n1", "n2", "login", "m5", "m7"]),
    ("n[1-2] m[1,2]\tx", ["n1", "n2", "m1", "m2", "x"]),
    # several bracket groups: Slurm's order
    (
        "rack[1-2]-node[01-02]",
        ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"],
    ),
    ("[1-2][1-2][1-2]", ["111", "112", "211", "212", "121", "122", "221", "222"]),
    (
        "a[1-2]b[1-2]c[1-2]d[1-2]",
        # scontrol show hostnames (22.05.8): d fastest, then a, then b, c slowest
        [
            "a1b1c1d1", "a1b1c1d2", "a2b1c1d1", "a2b1c1d2",
            "a1b2c1d1", "a1b2c1d2", "a2b2c1d1", "a2b2c1d2",
            "a1b1c2d1", "a1b1c2d2", "a2b1c2d1", "a2b1c2d2",
            "a1b2c2d1", "a1b2c2d2", "a2b2c2d1", "a2b2c2d2",
        ],
    ),
    ("x[1-2]y[3]", ["x1y3", "x2y3"]),
    ("x[1-2]}[3]", ["x1}3", "x2}3"]),
]


@pytest.mark.parametrize("text,expected", EXPAND_CASES)
def test_expand(text, expected):
    assert expand(text) == expected


def test_expand_zero_padding_up_to_three_digits():
    names = expand("n[01-100]")
    assert names == [f"n{i:02d}" for i in range(1, 100)] + ["n100"]


def test_expand_big_ranges():
    names = expand("n[000001-050000,050001-100000]")
    assert names == [f"n{i:06d}" for i in range(1, 100001)]
    names = expand("n[995-60000]-ib")
    assert names == [f"n{i}-ib" for i in range(995, 60001)]


def test_expand_range_limit():
    assert len(expand("n[1-65536]")) == MAX_RANGE == 65536
    assert len(expand("n[0-65535]")) == 65536
    with pytest.raises(HostlistError, match="65537 hosts"):
        expand("n[1-65537]")
    # the limit is per range, not per bracket
    assert len(expand("n[1-65536,65537-100000]")) == 100000


def test_expand_max_hosts():
    assert MAX_HOSTS == 1_048_576
    assert len(expand("n[1-10]", max_hosts=10)) == 10
    with pytest.raises(HostlistError, match="max_hosts=9"):
        expand("n[1-10]", max_hosts=9)
    with pytest.raises(HostlistError) as info:
        expand("a,b,c", max_hosts=2)
    assert info.value.position is None  # fast path for plain names
    with pytest.raises(HostlistError) as info:
        expand("n[1-2],m[1-2]", max_hosts=3)
    assert info.value.position == 7
    assert len(expand("n[1-1024][1-1024]")) == MAX_HOSTS


def test_expand_total_is_checked_before_building_names():
    start = time.perf_counter()
    with pytest.raises(HostlistError, match="max_hosts"):
        expand("n[1-60000][1-60000]")
    with pytest.raises(HostlistError, match="max_hosts"):
        expand("n[1-60000]" * 50)
    assert time.perf_counter() - start < 0.5


def test_expand_many_groups():
    text = ",".join(f"r{i}n[0-9]" for i in range(2000))
    assert expand(text) == [f"r{i}n{j}" for i in range(2000) for j in range(10)]
    text = "n[" + ",".join(f"{i * 20}-{i * 20 + 9}" for i in range(2000)) + "]"
    assert expand(text) == [f"n{i * 20 + j}" for i in range(2000) for j in range(10)]


def test_expand_rejects_non_str():
    with pytest.raises(TypeError):
        expand(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        expand(b"n[1-2]")  # type: ignore[arg-type]


# Lightning's table for the first host of SLURM_NODELIST
# (tests_fabric/plugins/environments/test_slurm.py, and the cases of its
# issues #1943, #5160, #14896 / PR #14912), checked here on the whole list.
LIGHTNING_CASES = [
    ("127.0.0.1", ["127.0.0.1"]),
    ("alpha", ["alpha"]),
    ("alpha,beta,gamma", ["alpha", "beta", "gamma"]),
    ("alpha beta gamma", ["alpha", "beta", "gamma"]),
    ("1.1.1.1, 1.1.1.2", ["1.1.1.1", "1.1.1.2"]),
    ("1.2.3.[100-110]", [f"1.2.3.{i}" for i in range(100, 111)]),
    ("host[22]", ["host22"]),
    ("host[1,5-9]", ["host1", "host5", "host6", "host7", "host8", "host9"]),
    ("host[5-9,1]", ["host5", "host6", "host7", "host8", "host9", "host1"]),
    ("alpha, host[5-9], gamma", ["alpha"] + [f"host{i}" for i in range(5, 10)] + ["gamma"]),
    ("alpha[3,1], beta", ["alpha3", "alpha1", "beta"]),
    ("linux[1,2]", ["linux1", "linux2"]),
    ("linux[1-2]", ["linux1", "linux2"]),
    ("linux[1,2],other", ["linux1", "linux2", "other"]),
    ("linux[1-2],other", ["linux1", "linux2", "other"]),
    ("host-prefix[1-2]", ["host-prefix1", "host-prefix2"]),
    ("node[001-004]", ["node001", "node002", "node003", "node004"]),
    ("gpu-a100-[01-03]", ["gpu-a100-01", "gpu-a100-02", "gpu-a100-03"]),
    ("d-001-node[1-2]", ["d-001-node1", "d-001-node2"]),
    ("node-12,node-13", ["node-12", "node-13"]),
    ("nodeA,nodeB[001,003],nodeC", ["nodeA", "nodeB001", "nodeB003", "nodeC"]),
    ("host-[001-002]", ["host-001", "host-002"]),
    ("host[001,003-004,006]", ["host001", "host003", "host004", "host006"]),
]


@pytest.mark.parametrize("text,expected", LIGHTNING_CASES)
def test_expand_lightning_table(text, expected):
    assert expand(text) == expected


def test_expand_lightning_space_inside_brackets_is_rejected():
    # Lightning expects 1.2.3.089 first; Slurm pads " 100-110" to width 4
    # (1.2.3.0100).  A space inside brackets is an error here.
    with pytest.raises(HostlistError) as info:
        expand("1.2.3.[089, 100-110]")
    assert info.value.position == 11


# --------------------------------------------------------------------------
# expand: errors
# --------------------------------------------------------------------------

# (text, position, words in the message)
EXPAND_ERRORS = [
    ("", None, "empty node list"),
    (" , \t\n", None, "empty node list"),
    (",", None, "empty node list"),
    ("n]", 1, "unmatched ']'"),
    ("]", 0, "unmatched ']'"),
    ("n[1-2]]", 6, "unmatched ']'"),
    ("nova6]", 5, "unmatched ']'"),
    ("xazer][1-30]p[4-9]", 5, "unmatched ']'"),
    ("n[2", 1, "unclosed '['"),
    ("a,n[2", 3, "unclosed '['"),
    ("n[1-2", 1, "unclosed '['"),
    ("n[1[2]]", 3, "nested '['"),
    ("n[1-2,m[3]", 7, "nested '['"),
    ("n[]", 1, "empty brackets"),
    ("a,n[]x", 3, "empty brackets"),
    ("n[1,,2]", 4, "empty range element"),
    ("n[1-2,]", 6, "empty range element"),
    ("n[,1]", 2, "empty range element"),
    ("n[1-]", 2, "range '1-' has no upper bound"),
    ("n[-3]", 2, "range '-3' has no lower bound"),
    ("n[1-2-3]", 5, "more than one '-'"),
    ("n[1--3]", 4, "more than one '-'"),
    ("n[a-b]", 2, "invalid character 'a'"),
    ("n[1-2/2]", 5, "invalid character '/'"),
    ("n[1x2]", 3, "invalid character 'x'"),
    ("n[1 -2]", 3, "whitespace inside brackets"),
    ("n[ 1]", 2, "whitespace inside brackets"),
    ("n[1,\t2]", 4, "whitespace inside brackets"),
    ("n[+1]", 2, "invalid character '+'"),
    ("n[1.5]", 3, "invalid character '.'"),
    ("n[\u0661-\u0663]", 2, "invalid character"),  # Arabic-Indic digits
    ("n[3-1]", 2, "low bound above its high bound"),
    ("a,n[1,5-4]", 6, "low bound above its high bound"),
    ("n[1-65537]", 2, "more than 65536 in one range"),
    ("n[0-65536]", 2, "more than 65536 in one range"),
    ("x,n[1-60000][1-60000]", 2, "max_hosts=1048576"),
    ("n{1}", 1, "'{' is not supported"),
    ("n[1-2],{a,b}", 7, "'{' is not supported"),
    ("n[" + "1" * 65 + "]", 2, "more than 64 digits"),
]


@pytest.mark.parametrize("text,position,words", EXPAND_ERRORS)
def test_expand_errors(text, position, words):
    with pytest.raises(HostlistError) as info:
        expand(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.text == text
    assert error.position == position
    assert words in str(error)
    assert repr(text) in str(error)
    if position is not None:
        assert f"(at position {position})" in str(error)


def test_error_message_format():
    with pytest.raises(HostlistError) as info:
        expand("n[1-]")
    assert str(info.value) == (
        "invalid node list 'n[1-]': range '1-' has no upper bound (at position 2)"
    )


def test_error_message_is_short_for_long_input():
    text = ",".join(f"r{i}n[0-9]" for i in range(5000)) + ",n[1-]"
    with pytest.raises(HostlistError) as info:
        expand(text)
    assert info.value.text == text
    assert info.value.position == len(text) - 3
    assert len(str(info.value)) < 300
    assert "n[1-]" in str(info.value)


def test_error_pickles():
    with pytest.raises(HostlistError) as info:
        expand("n[1-]")
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, HostlistError)
    assert (copy.text, copy.position, str(copy)) == ("n[1-]", 2, str(info.value))


def test_error_without_text():
    error = HostlistError("something is wrong")
    assert str(error) == "something is wrong"
    assert error.text is None and error.position is None


# --------------------------------------------------------------------------
# compress
# --------------------------------------------------------------------------

COMPRESS_CASES = [
    ([], ""),
    (["n1"], "n1"),
    (["n1", "n2", "n3"], "n[1-3]"),
    (["n3", "n1", "n2"], "n[3,1-2]"),
    (["n1", "n2", "n1"], "n[1-2,1]"),
    (["n1", "n1"], "n[1,1]"),
    (["n9", "n09"], "n[9,09]"),
    (["n8", "n9", "n10"], "n[8-10]"),
    (["n09", "n10"], "n[09-10]"),
    (["n1", "n02", "n3"], "n[1,02,3]"),
    (["n0", "n00", "n01"], "n[0,00-01]"),
    (["n99", "n100", "n0099"], "n[99-100,0099]"),
    ([f"n{i:02d}" for i in range(1, 100)] + ["n100"], "n[01-100]"),
    (["cn1-ib", "cn2-ib"], "cn[1-2]-ib"),
    (["login", "n1", "n2"], "login,n[1-2]"),
    (["login", "gateway"], "login,gateway"),
    (["n1", "m1", "n2"], "n1,m1,n2"),  # order kept: no merge across m1
    (["1", "2", "3"], "[1-3]"),
    (["rack1-node01", "rack1-node02", "rack2-node01"], "rack1-node[01-02],rack2-node01"),
    (["1.2.3.4", "1.2.3.5"], "1.2.3.[4-5]"),
    (["a}1", "a}2"], "a}[1-2]"),
]


@pytest.mark.parametrize("hosts,expected", COMPRESS_CASES)
def test_compress(hosts, expected):
    assert compress(hosts) == expected
    assert compress(iter(hosts)) == expected
    if hosts:
        assert expand(expected) == hosts


def test_compress_splits_long_runs():
    hosts = [f"n{i}" for i in range(1, 70001)]
    assert compress(hosts) == "n[1-65536,65537-70000]"
    assert expand(compress(hosts)) == hosts


def test_compress_long_digit_runs_stay_literal():
    long_a = "n" + "1" * 70
    long_b = "n" + "1" * 69 + "2"
    assert compress([long_a, long_b]) == f"{long_a},{long_b}"
    assert expand(compress([long_a, long_b])) == [long_a, long_b]


def test_compress_big():
    hosts = [f"n{i:06d}" for i in range(1, 100001)]
    assert compress(hosts) == "n[000001-065536,065537-100000]"
    shuffled = hosts[:]
    random.Random(0).shuffle(shuffled)
    assert expand(compress(shuffled)) == shuffled


# (hosts, bad name, position in it)
COMPRESS_ERRORS = [
    (["n1", ""], "", None),
    (["a b"], "a b", 1),
    (["a\tb"], "a\tb", 1),
    (["ok", "n[1]"], "n[1]", 1),
    (["n]"], "n]", 1),
    (["n1,n2"], "n1,n2", 2),
    (["n{1}"], "n{1}", 1),
    (["n1\n"], "n1\n", 2),
]


@pytest.mark.parametrize("hosts,name,position", COMPRESS_ERRORS)
def test_compress_errors(hosts, name, position):
    with pytest.raises(HostlistError) as info:
        compress(hosts)
    assert info.value.text == name
    assert info.value.position == position
    assert "host name" in str(info.value)


def test_compress_rejects_a_bare_string():
    with pytest.raises(TypeError):
        compress("n1")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# expand_counts
# --------------------------------------------------------------------------

COUNT_CASES = [
    ("1", [1]),
    ("0", [0]),
    ("2(x3),1", [2, 2, 2, 1]),
    ("72(x2),36", [72, 72, 36]),
    ("1,2,1(x3),3,2", [1, 2, 1, 1, 1, 3, 2]),
    ("4(x1)", [4]),
    ("2(x2)", [2, 2]),
    ("16", [16]),
    ("007", [7]),
]


@pytest.mark.parametrize("text,expected", COUNT_CASES)
def test_expand_counts(text, expected):
    assert expand_counts(text) == expected


def test_expand_counts_max_hosts():
    assert expand_counts("1(x1048576)") == [1] * MAX_HOSTS
    with pytest.raises(HostlistError, match="max_hosts"):
        expand_counts("1(x1048577)")
    with pytest.raises(HostlistError) as info:
        expand_counts("1(x5),2(x5)", max_hosts=9)
    assert info.value.position == 6
    assert expand_counts("1(x5),2(x4)", max_hosts=9) == [1] * 5 + [2] * 4


COUNT_ERRORS = [
    ("", None),
    (",", 0),
    (",1", 0),
    ("1,", 1),
    ("1,,2", 2),
    (" 1", 0),
    ("1 ", 1),
    ("1, 2", 2),
    ("1 ,2", 1),
    ("1\t", 1),
    ("2(x0)", 3),
    ("-1", 0),
    ("1,-2", 2),
    ("1.5", 1),
    ("a", 0),
    ("2a", 1),
    ("2(3)", 1),
    ("2x3", 1),
    ("2(x)", 3),
    ("2(x3", 4),
    ("2(x3))", 5),
    ("2(x-3)", 3),
    ("(x3)", 0),
    ("1" * 21, 0),
]


@pytest.mark.parametrize("text,position", COUNT_ERRORS)
def test_expand_counts_errors(text, position):
    with pytest.raises(HostlistError) as info:
        expand_counts(text)
    assert isinstance(info.value, ValueError)
    assert info.value.text == text
    assert info.value.position == position
    assert "count list" in str(info.value)


def test_expand_counts_rejects_non_str():
    with pytest.raises(TypeError):
        expand_counts(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------

# database=None: no .hypothesis/ folder in the work tree.
PROPERTY = settings(
    max_examples=1500,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# the same for the tests with costly examples (keeps the file near 15 s)
PROPERTY_HEAVY = settings(PROPERTY, max_examples=1000)

_prefix = st.text(alphabet="abcxyz-.0123456789_", min_size=0, max_size=6)
_number = st.one_of(
    st.integers(0, 130).map(str),
    st.tuples(st.integers(0, 1200), st.integers(1, 5)).map(lambda p: str(p[0]).zfill(p[1])),
)
_suffix = st.sampled_from(["", "", "", "-ib", ".local", "-ipmi", "x"])


@st.composite
def host_names(draw):
    name = draw(_prefix)
    if draw(st.booleans()) or not name:
        name += draw(_number)
    name += draw(_suffix)
    return name


@st.composite
def host_lists(draw):
    """Lists with runs (consecutive numbers), duplicates and shuffles."""
    pool = draw(st.lists(host_names(), min_size=1, max_size=8))
    hosts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["run", "pick", "run"]))
        if kind == "pick":
            hosts.extend(draw(st.lists(st.sampled_from(pool), max_size=6)))
            continue
        prefix = draw(_prefix).rstrip("0123456789")
        suffix = draw(_suffix)
        width = draw(st.integers(1, 4))
        start = draw(st.integers(0, 1100))
        length = draw(st.integers(1, 30))
        hosts.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(start, start + length))
    assume(hosts)  # compress([]) is "", and "" is not a node list
    if draw(st.booleans()):
        draw(st.randoms(use_true_random=False)).shuffle(hosts)
    return hosts


@PROPERTY_HEAVY
@given(host_lists())
def test_property_compress_round_trip(hosts):
    text = compress(hosts)
    assert expand(text) == hosts


@PROPERTY_HEAVY
@given(st.lists(host_names(), min_size=1, max_size=30))
def test_property_compress_round_trip_any_names(hosts):
    assert expand(compress(hosts)) == hosts


# compress(x) is not always shorter than ",".join(x): ["n1", "n3"] gives
# "n[1,3]", one character longer than "n1,n3".  So no such property.


def _slurm_order(texts: list[str], numbers: list[list[str]]) -> list[str]:
    """Names of texts[0] numbers[0] texts[1] ... in Slurm's order, written
    out as nested loops: G(k-1) outermost, then G(k-2), ..., G1, then Gk
    fastest."""
    k = len(numbers)
    if k == 0:
        return [texts[0]]
    loop_order = list(range(k - 2, -1, -1)) + [k - 1]
    names = []
    chosen = [""] * k

    def walk(level: int) -> None:
        if level == k:
            name = texts[0]
            for j in range(k):
                name += chosen[j] + texts[j + 1]
            names.append(name)
            return
        group = loop_order[level]
        for value in numbers[group]:
            chosen[group] = value
            walk(level + 1)

    walk(0)
    return names


@st.composite
def node_lists(draw):
    """A node list written from a structure, and the names Slurm makes."""
    items = []
    expected = []
    for _ in range(draw(st.integers(1, 4))):
        texts = [draw(st.text(alphabet="abn-.0123456789", max_size=4))]
        groups = []
        for _ in range(draw(st.integers(0, 3))):
            ranges = []
            for _ in range(draw(st.integers(1, 3))):
                lo = draw(st.integers(0, 120))
                hi = lo + draw(st.integers(0, 4))
                width = draw(st.integers(1, 4))
                lo_text = str(lo).zfill(width)
                hi_text = str(hi).zfill(draw(st.integers(1, 4)))
                single = draw(st.booleans()) and lo == hi
                written = lo_text if single else f"{lo_text}-{hi_text}"
                ranges.append((written, lo, hi, len(lo_text)))
            groups.append(ranges)
            texts.append(draw(st.text(alphabet="abn-.0123456789", max_size=3)))
        if not groups and not texts[0]:
            texts[0] = "h"
        item = texts[0]
        for ranges, text in zip(groups, texts[1:], strict=True):
            item += "[" + ",".join(r[0] for r in ranges) + "]" + text
        items.append(item)
        numbers = [
            [str(i).zfill(width) for _, lo, hi, width in ranges for i in range(lo, hi + 1)]
            for ranges in groups
        ]
        expected.extend(_slurm_order(texts, numbers))
    seps = [draw(st.sampled_from([",", " ", ", ", "\n", ",,", "\t"])) for _ in items]
    text = "".join(sep + item for sep, item in zip(seps, items, strict=True))
    if draw(st.booleans()):
        text += ","
    return text, expected


@PROPERTY_HEAVY
@given(node_lists())
def test_property_expand_matches_model(case):
    text, expected = case
    assert expand(text) == expected


_NOISE = "[]-,0123456789abnx {}()\t\n"


@PROPERTY
@given(st.text(alphabet=_NOISE, max_size=40))
def test_property_expand_only_raises_hostlist_error(text):
    try:
        names = expand(text)
    except HostlistError as error:
        assert error.text == text
        assert error.position is None or 0 <= error.position <= len(text)
    else:
        assert isinstance(names, list) and names
        for name in names:
            assert isinstance(name, str) and name
            assert not any(c in name for c in "[]{, \t\n")


@PROPERTY
@given(st.text(alphabet="0123456789(x),-. \t", max_size=30))
def test_property_expand_counts_only_raises_hostlist_error(text):
    try:
        counts = expand_counts(text, max_hosts=10_000)
    except HostlistError as error:
        assert error.text == text
        assert error.position is None or 0 <= error.position <= len(text)
    else:
        assert all(isinstance(c, int) and c >= 0 for c in counts)


@PROPERTY
@given(st.lists(st.integers(1, 512), min_size=1, max_size=60))
def test_property_expand_counts_round_trip(values):
    # run-length encode the way Slurm does: "v(xN)" for N > 1
    items = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        items.append(str(values[i]) if j - i == 1 else f"{values[i]}(x{j - i})")
        i = j
    assert expand_counts(",".join(items)) == values
    # and without merging, (x1) included
    assert expand_counts(",".join(f"{v}(x1)" for v in values)) == values


def test_expand_one_bracket_items_as_the_general_way_reads_them():
    """Items with one bracket group are read on their own path (issue 38): the same names as the
    path for several groups gives them, whatever the groups' sizes and the order they come in."""
    from hpcdist.hostlist.nodelists import _item_names, _parse_ranges

    items = ["a[1-3]b", "c[1-3]", "c[1-3]x", "d[1-100]e", "d[1-100]f", "x[07-11]", "y[07-11]-ib", "z[5]",
             "w[1-70]", "w[1-70]", "v[1-2][3-4]", "v[1-2]w"]
    for item in items + items[::-1]:
        head, _, rest = item.partition("[")
        body, _, tail = rest.partition("]")
        if "[" in tail:
            continue
        ranges, count = _parse_ranges(body, len(head) + 1)
        general = _item_names([head, tail], [[ranges, count, None]]).split(",")
        assert expand(item) == general
    text = ",".join(items)
    assert expand(text) == [name for item in items for name in expand(item)]
    assert expand(",".join(items[::-1])) == [name for item in items[::-1] for name in expand(item)]


@pytest.mark.parametrize("text,position", [("abc,r1n[1-0]", 8), ("r1n[0-9],r2n[0-9],r3n[2-1]x", 22),
                                           ("a[1-2]b[0-0],pre[9-8]", 17)])
def test_expand_one_bracket_errors_point_into_the_item(text, position):
    with pytest.raises(HostlistError) as info:
        expand(text)
    assert info.value.position == position
