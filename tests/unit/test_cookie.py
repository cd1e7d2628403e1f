"""Cookie text (wire/metadata/cookie.py) against the Java vectors and the match rules of BookKeeper's bookie/Cookie.java."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.errors import BKError, CodecError
from bkctl.wire.metadata.cookie import Cookie, CookieMismatch, decode_dirs, encode_dirs, parse_cookie
from tests.support.golden import VECTORS

INSTANCE = "f2102f9c-59f2-47c2-8e7f-f85b6701affc"
ZK_COOKIES = sorted((VECTORS / "zk" / "raw").glob("ledgers__cookies__*.bin"))
DISK_COOKIES = sorted((VECTORS / "disk").glob("*VERSION.bin"))


def test_vector_files_exist():
    assert len(ZK_COOKIES) == 3 and len(DISK_COOKIES) == 6


@pytest.mark.parametrize("path", ZK_COOKIES + DISK_COOKIES, ids=lambda p: p.name)
def test_golden_cookie_parse_and_reserialize(path):
    data = path.read_bytes()
    cookie = parse_cookie(data)
    # disk/bkN__...VERSION.bin or zk/raw/ledgers__cookies__127.0.0.1:318N.bin
    n = path.name[2] if path.parent.name == "disk" else path.name[-5]
    assert cookie.layout_version == 5
    assert cookie.bookie_id == f"127.0.0.1:318{n}"
    assert cookie.journal_dirs == (f"/data/bk{n}/journal",)
    assert cookie.ledger_dirs == (f"/data/bk{n}/ledgers",)
    assert cookie.index_dirs is None
    assert cookie.instance_id == INSTANCE
    assert cookie.serialize() == data
    assert Cookie.parse(data) == cookie


def test_zk_cookie_equals_every_version_file_of_that_bookie():
    for n in (1, 2, 3):
        zk = (VECTORS / "zk" / "raw" / f"ledgers__cookies__127.0.0.1:318{n}.bin").read_bytes()
        for kind in ("journal", "ledgers"):
            assert (VECTORS / "disk" / f"bk{n}__{kind}__current__VERSION.bin").read_bytes() == zk


def test_jsonl_text_matches_raw_cookie_bytes():
    # The jsonl "hex" of cookies still holds the original /tmp/peer-bkN paths; raw/*.bin and
    # the jsonl "text" hold the renamed /data/bkN paths. raw/*.bin is the truth.
    for line in (VECTORS / "zk" / "znodes.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["path"].startswith("/ledgers/cookies/"):
            raw = (VECTORS / "zk" / "raw" / (item["path"].lstrip("/").replace("/", "__") + ".bin")).read_bytes()
            assert item["text"].encode() == raw
            assert parse_cookie(bytes.fromhex(item["hex"])).journal_dirs[0].startswith("/tmp/peer-bk")


def test_build_golden_cookie():
    cookie = Cookie("127.0.0.1:3181", ("/data/bk1/journal",), ("/data/bk1/ledgers",), INSTANCE)
    assert cookie.serialize() == (VECTORS / "zk" / "raw" / "ledgers__cookies__127.0.0.1:3181.bin").read_bytes()


def test_spec_example_and_multiple_dirs():
    cookie = Cookie("10.0.0.1:3181", "/data/bk/journal", "/data/bk/ledgers", "6d1c2f0e-1111-2222-3333-444455556666")
    assert cookie.serialize() == (
        b'5\nbookieHost: "10.0.0.1:3181"\njournalDir: "/data/bk/journal"\n'
        b'ledgerDirs: "1\\t/data/bk/ledgers"\ninstanceId: "6d1c2f0e-1111-2222-3333-444455556666"\n'
    )
    multi = Cookie("b:1", ("/j1", "/j2"), ("/l1", "/l2"), None, ("/i1",))
    text = multi.serialize()
    assert text == (b'5\nbookieHost: "b:1"\njournalDir: "/j1,/j2"\nledgerDirs: "2\\t/l1\\t/l2"\nindexDirs: "1\\t/i1"\n')
    assert parse_cookie(text) == multi


def test_layout_3_and_4():
    v3 = b"3\n10.0.0.1:3181\n/j\n2\t/l1\t/l2\n"
    cookie = parse_cookie(v3)
    assert (cookie.layout_version, cookie.bookie_id, cookie.journal_dirs, cookie.ledger_dirs) == (
        3,
        "10.0.0.1:3181",
        ("/j",),
        ("/l1", "/l2"),
    )
    assert cookie.instance_id is None
    assert cookie.serialize() == v3
    v4 = b'4\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\ninstanceId: "abc"\n'
    cookie = parse_cookie(v4)
    assert cookie.layout_version == 4 and cookie.instance_id == "abc"
    assert cookie.serialize() == v4


def test_empty_instance_id_reads_as_absent():
    cookie = parse_cookie(b'5\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\ninstanceId: ""\n')
    assert cookie.instance_id is None


def test_dir_encoding():
    assert encode_dirs(("/a", "/b")) == "2\t/a\t/b"
    assert decode_dirs("2\t/a\t/b") == ("/a", "/b")
    assert decode_dirs("0") == ()
    with pytest.raises(CodecError, match="count 3 but 2"):
        decode_dirs("3\t/a\t/b")
    with pytest.raises(CodecError, match="no leading count"):
        decode_dirs("/a\t/b")


@pytest.mark.parametrize(
    "data,pattern",
    [
        (b"", "empty cookie"),
        (b"x\n", "layout version"),
        (b"2\n", "unsupported cookie layout version 2"),
        (b"6\n", "unsupported cookie layout version 6"),
        (b"3\nh:1\n", "truncated"),
        (b'5\nbookieHost: "h:1"\n', "required"),
        (b'5\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\nfoo: 1\n', "layout-5 cookie"),
        (b"\xff\n", "not UTF-8"),
    ],
)
def test_malformed_cookies(data, pattern):
    with pytest.raises(CodecError, match=pattern):
        parse_cookie(data)


# ---------------------------------------------------------------------------
# verify_against
# ---------------------------------------------------------------------------
BASE = Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst")


def test_identical_cookies_match():
    BASE.verify_against(Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", layout_version=4))
    Cookie("h:1", "/j", "/l").verify_against(Cookie("h:1", "/j", "/l", layout_version=3))


@pytest.mark.parametrize(
    "stored,field",
    [
        (Cookie("other:3181", ("/j",), ("/l1", "/l2"), "inst"), "bookie_id"),
        (Cookie("h:3181", ("/j2",), ("/l1", "/l2"), "inst"), "journal_dirs"),
        (Cookie("h:3181", ("/j",), ("/l2", "/l1"), "inst"), "ledger_dirs"),
        (Cookie("h:3181", ("/j",), ("/l1",), "inst"), "ledger_dirs"),
        (Cookie("h:3181", ("/j",), ("/l1", "/l2"), "other"), "instance_id"),
        (Cookie("h:3181", ("/j",), ("/l1", "/l2"), None), "instance_id"),
        (Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", ("/i",)), "index_dirs"),
    ],
)
def test_mismatch_names_the_field(stored, field):
    with pytest.raises(CookieMismatch) as info:
        BASE.verify_against(stored)
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, BKError)


def test_instance_id_both_absent_is_equal():
    Cookie("h:1", "/j", "/l").verify_against(Cookie("h:1", "/j", "/l"))
    with pytest.raises(CookieMismatch, match="instance_id"):
        Cookie("h:1", "/j", "/l").verify_against(Cookie("h:1", "/j", "/l", "x"))


def test_index_dirs_default_to_ledger_dirs():
    explicit = Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", ("/l1", "/l2"))
    BASE.verify_against(explicit)
    explicit.verify_against(BASE)


def test_storage_expansion():
    grown = Cookie("h:3181", ("/j",), ("/l1", "/l2", "/l3"), "inst")
    with pytest.raises(CookieMismatch, match="ledger_dirs"):
        grown.verify_against(BASE)
    grown.verify_against(BASE, allow_expansion=True)
    with pytest.raises(CookieMismatch, match=r"ledger_dirs.*missing \['/l2'\]"):
        Cookie("h:3181", ("/j",), ("/l1", "/l3"), "inst").verify_against(BASE, allow_expansion=True)
    # journal dirs must still be equal
    with pytest.raises(CookieMismatch, match="journal_dirs"):
        Cookie("h:3181", ("/j", "/j2"), ("/l1", "/l2"), "inst").verify_against(BASE, allow_expansion=True)
    # index dirs follow the same rule
    with_index = Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", ("/i1",))
    Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", ("/i1", "/i2")).verify_against(with_index, allow_expansion=True)
    with pytest.raises(CookieMismatch, match="index_dirs"):
        Cookie("h:3181", ("/j",), ("/l1", "/l2"), "inst", ("/i2",)).verify_against(with_index, allow_expansion=True)


def test_constructor_rejects_bad_layouts():
    with pytest.raises(ValueError, match="unsupported cookie layout"):
        Cookie("h:1", "/j", "/l", layout_version=2)
    with pytest.raises(ValueError, match="layout-3"):
        Cookie("h:1", "/j", "/l", "inst", layout_version=3)


# ---------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------
dir_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\t,\n\r"),
    min_size=1,
    max_size=10,
)
text_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\n\r"),
    min_size=1,
    max_size=12,
)


@st.composite
def cookies(draw):
    layout = draw(st.sampled_from([3, 4, 5]))
    bookie = draw(text_values)
    journal = tuple(draw(st.lists(dir_names, min_size=1, max_size=3)))
    ledgers = tuple(draw(st.lists(dir_names, min_size=1, max_size=3)))
    if layout == 3:
        return Cookie(bookie, journal, ledgers, layout_version=3)
    instance = draw(st.none() | text_values)
    index = draw(st.none() | st.lists(dir_names, min_size=1, max_size=2).map(tuple)) if layout == 5 else None
    return Cookie(bookie, journal, ledgers, instance, index, layout)


@settings(max_examples=300)
@given(cookies())
def test_cookie_roundtrip(cookie):
    data = cookie.serialize()
    assert parse_cookie(data) == cookie
    cookie.verify_against(parse_cookie(data))


def _only_codec_error(data: bytes) -> None:
    try:
        parse_cookie(data)
    except CodecError:
        pass


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(data):
    _only_codec_error(data)


@settings(max_examples=300)
@given(st.sampled_from([b"3\n", b"4\n", b"5\n"]), st.text(max_size=150))
def test_random_text_raises_only_codec_error(head, body):
    _only_codec_error(head + body.encode("utf-8", "surrogatepass"))


GOLDEN = [p.read_bytes() for p in ZK_COOKIES] + [b"3\n10.0.0.1:3181\n/j\n2\t/l1\t/l2\n"]


@settings(max_examples=500)
@given(st.sampled_from(GOLDEN), st.data())
def test_truncated_or_bit_flipped_golden_raises_only_codec_error(sample, data):
    buf = bytearray(sample[: data.draw(st.integers(0, len(sample)))])
    if buf and data.draw(st.booleans()):
        bit = data.draw(st.integers(0, len(buf) * 8 - 1))
        buf[bit // 8] ^= 1 << (bit % 8)
    _only_codec_error(bytes(buf))
