import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.digest import DIGEST_LENGTH, DigestManager, DigestType, entry_ids, mac_key, master_key
from bkctl.wire.errors import DigestError
from tests.support.golden import frames

HELLO_HEADER = bytes.fromhex("00000000000000010000000000000000ffffffffffffffff0000000000000005")


@pytest.mark.parametrize(
    "dtype, digest",
    [
        (DigestType.DUMMY, ""),
        (DigestType.CRC32, "0000000030a56872"),
        (DigestType.CRC32C, "e3a5f74d"),
        (DigestType.MAC, "bb1bc463f54a191d7400fc5e73c5f72ff206f8fe"),
    ],
)
def test_spec_entry_examples(dtype, digest):
    dm = DigestManager(1, dtype, b"password")
    entry = dm.package(0, -1, 5, b"hello")
    assert entry == HELLO_HEADER + bytes.fromhex(digest) + b"hello"
    checked = dm.verify(entry, 0)
    assert (checked.ledger_id, checked.entry_id, checked.lac, checked.length, checked.payload) == (
        1,
        0,
        -1,
        5,
        b"hello",
    )


@pytest.mark.parametrize(
    "dtype, tail",
    [
        (DigestType.DUMMY, ""),
        (DigestType.CRC32, "00000000fbc05f16"),
        (DigestType.CRC32C, "b64e4ca2"),
        (DigestType.MAC, "0fc490223169f1eadafeaf7d3fd8b27b9e0f83a9"),
    ],
)
def test_spec_lac_examples(dtype, tail):
    dm = DigestManager(1, dtype, b"password")
    body = dm.package_lac(0)
    assert body == bytes.fromhex("00000000000000010000000000000000" + tail)
    assert dm.verify_lac(body) == 0


def test_keys():
    assert master_key(b"").hex() == "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
    assert master_key(b"password").hex() == "776734ff34b8278465ec6051092ee57a434bb849"
    assert mac_key(b"").hex() == "347ead6348e936507920c15d2ae8266ac6ce9b49"
    assert mac_key(b"password").hex() == "d976f34efbf3c679a117416021db66013dcccf1c"


PASSWORDS = {0: b"password", 3: b"password", 5: b"password", 2: b"password"}
LEDGER_DIGEST = {
    0: DigestType.CRC32C,
    2: DigestType.CRC32C,
    3: DigestType.CRC32C,
    5: DigestType.CRC32C,
    6: DigestType.CRC32,
    7: DigestType.CRC32,
    8: DigestType.CRC32C,
    9: DigestType.CRC32C,
    10: DigestType.MAC,
    11: DigestType.MAC,
    12: DigestType.DUMMY,
    13: DigestType.DUMMY,
}


def _java_entries():
    """Every packaged entry the Java client sent in the vectors, with its ledger id."""
    for f in frames():
        if f["kind"] != "request" or f["op"] not in ("ADD", "ADD_ENTRY"):
            continue
        payload = f["raw"][4:]
        if f["proto"] == "v2":
            yield v2.decode_request(payload).body
        else:
            yield v3.parse_request(payload).addRequest.body


def test_every_java_entry_verifies_and_rebuilds_byte_identically():
    seen = set()
    for entry in _java_entries():
        ledger_id, entry_id, lac = entry_ids(entry)
        dtype = LEDGER_DIGEST[ledger_id]
        dm = DigestManager(ledger_id, dtype, PASSWORDS.get(ledger_id, b"secret"))
        checked = dm.verify(entry, entry_id)
        assert dm.package(entry_id, lac, checked.length, checked.payload) == entry
        assert dm.payload(entry, entry_id) == dm.payload(memoryview(entry), entry_id) == checked.payload
        seen.add(dtype)
    assert seen == set(DigestType)


def test_wrong_password_fails_mac_but_not_crc():
    entry = DigestManager(1, DigestType.MAC, b"a").package(0, -1, 1, b"x")
    with pytest.raises(DigestError):
        DigestManager(1, DigestType.MAC, b"b").verify(entry, 0)
    entry = DigestManager(1, DigestType.CRC32C, b"a").package(0, -1, 1, b"x")
    DigestManager(1, DigestType.CRC32C, b"b").verify(entry, 0)


def test_wrong_ids_and_short_bodies():
    dm = DigestManager(7, DigestType.CRC32C)
    entry = dm.package(3, 2, 10, b"payload")
    with pytest.raises(DigestError, match="expected 4"):
        dm.verify(entry, 4)
    dm.verify(entry, None)  # LAC reads skip the entry id check
    with pytest.raises(DigestError, match="ledger 7"):
        DigestManager(8, DigestType.CRC32C).verify(entry, 3)
    with pytest.raises(DigestError):
        dm.verify(entry[:35], 3)
    with pytest.raises(DigestError):
        dm.verify_lac(b"\x00" * 19)


@given(
    st.sampled_from(list(DigestType)), st.binary(max_size=200), st.integers(0, 2**62), st.integers(-1, 2**62), st.data()
)
def test_any_single_bit_flip_is_caught(dtype, payload, entry_id, lac, data):
    dm = DigestManager(42, dtype, b"pw")
    entry = bytearray(dm.package(entry_id, lac, len(payload), payload))
    dm.verify(bytes(entry), entry_id)
    if dtype is DigestType.DUMMY:
        return
    bit = data.draw(st.integers(0, len(entry) * 8 - 1))
    entry[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(DigestError):
        dm.verify(bytes(entry), entry_id)
    with pytest.raises(DigestError):
        dm.payload(bytes(entry), entry_id)


def test_digest_type_names():
    assert DigestType.parse("hmac") is DigestType.MAC
    assert DigestType.parse("crc32c") is DigestType.CRC32C
    assert DigestType.MAC.metadata_name == "HMAC"
    assert DIGEST_LENGTH[DigestType.CRC32] == 8
    with pytest.raises(ValueError, match="unknown digest"):
        DigestType.parse("sha256")
