"""BookieServiceInfo binary serde (wire/metadata/serviceinfo.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.golden import VECTORS
from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.serviceinfo import (
    BookieServiceInfo,
    Endpoint,
    parse_bookie_id_address,
    parse_service_info,
)

RAW = VECTORS / "zk" / "raw"
SPEC_10_0_0_1 = bytes.fromhex("32210a06626f6f6b696510ed181a0831302e302e302e31220a626f6f6b69652d727063")


@pytest.mark.parametrize("port", [3181, 3182, 3183])
def test_golden_available_nodes(port):
    data = (RAW / f"ledgers__available__127.0.0.1:{port}.bin").read_bytes()
    info = parse_service_info(data)
    assert info.endpoints == (Endpoint("bookie", port, "127.0.0.1", "bookie-rpc"),)
    assert info.properties == ()
    assert info.rpc_address() == ("127.0.0.1", port)
    assert not info.is_legacy
    assert info.serialize() == data
    assert BookieServiceInfo.for_bookie("127.0.0.1", port).serialize() == data
    assert bytes(BookieServiceInfo.parse(data)) == data


def test_spec_example():
    assert BookieServiceInfo.for_bookie("10.0.0.1", 3181).serialize() == SPEC_10_0_0_1
    assert parse_service_info(SPEC_10_0_0_1).rpc_address() == ("10.0.0.1", 3181)


def test_tls_and_http_endpoints():
    info = BookieServiceInfo.for_bookie("10.0.0.1", 3181, http_port=8000, tls=True)
    assert info.endpoints == (
        Endpoint("bookie", 3181, "10.0.0.1", "bookie-rpc", (), ("tls",)),
        Endpoint("httpserver", 8000, "0.0.0.0", "http"),
    )
    data = info.serialize()
    assert b"bookie-rpc\x32\x03tls" in data  # extensions = field 6 inside the endpoint
    assert parse_service_info(data) == info
    assert info.endpoint("http").port == 8000
    assert info.rpc_address() == ("10.0.0.1", 3181)


def test_properties_roundtrip_in_sorted_order():
    info = BookieServiceInfo.for_bookie("h", 1, properties={"z": "1", "a": "2"})
    assert info.properties == (("a", "2"), ("z", "1"))
    assert info.property_map == {"a": "2", "z": "1"}
    data = info.serialize()
    assert data.index(b"\x0a\x01a") < data.index(b"\x0a\x01z")
    assert parse_service_info(data) == info


def test_legacy_empty_value():
    info = parse_service_info(b"")
    assert info.is_legacy and info == BookieServiceInfo.legacy()
    assert info.serialize() == b""
    assert info.rpc_address("10.0.0.7:3181") == ("10.0.0.7", 3181)
    with pytest.raises(ValueError, match="no bookie-rpc endpoint"):
        info.rpc_address()
    with pytest.raises(ValueError, match="not host:port"):
        info.rpc_address("my-bookie")


def test_info_without_rpc_endpoint_falls_back_to_id():
    info = BookieServiceInfo((Endpoint("httpserver", 8000, "0.0.0.0", "http"),))
    assert info.rpc_address("h:3181") == ("h", 3181)


def test_bookie_id_address():
    assert parse_bookie_id_address("10.0.0.1:3181") == ("10.0.0.1", 3181)
    assert parse_bookie_id_address("[::1]:3181") == ("::1", 3181)
    for bad in ("host", "host:", ":3181", "host:0", "host:70000", "host:x"):
        with pytest.raises(ValueError):
            parse_bookie_id_address(bad)


def test_malformed():
    with pytest.raises(CodecError):
        parse_service_info(b"\x32\x22\x0a")
    with pytest.raises(CodecError):
        parse_service_info("text")  # type: ignore[arg-type]


names = st.text(max_size=10)
endpoints = st.builds(
    Endpoint, names, st.integers(-(2**31), 2**31 - 1), names, names,
    st.lists(names, max_size=2).map(tuple), st.lists(names, max_size=2).map(tuple),
)


@settings(max_examples=300)
@given(st.lists(endpoints, max_size=3), st.dictionaries(names, names, max_size=3))
def test_roundtrip(eps, props):
    info = BookieServiceInfo(tuple(eps), props)
    data = info.serialize()
    assert parse_service_info(data) == info
    assert parse_service_info(data).serialize() == data


def _only_codec_error(data: bytes) -> None:
    try:
        parse_service_info(data)
    except CodecError:
        pass


@settings(max_examples=500)
@given(st.binary(max_size=120))
def test_random_bytes_raise_only_codec_error(data):
    _only_codec_error(data)


@settings(max_examples=500)
@given(st.data())
def test_truncated_or_bit_flipped_golden_raises_only_codec_error(data):
    sample = BookieServiceInfo.for_bookie("10.0.0.1", 3181, 8080, True, {"k": "v"}).serialize()
    buf = bytearray(sample[: data.draw(st.integers(0, len(sample)))])
    if buf and data.draw(st.booleans()):
        bit = data.draw(st.integers(0, len(buf) * 8 - 1))
        buf[bit // 8] ^= 1 << (bit % 8)
    _only_codec_error(bytes(buf))
