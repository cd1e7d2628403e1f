"""BookieServiceInfo binary serde (wire/metadata/serviceinfo.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.serviceinfo import (
    BookieServiceInfo,
    Endpoint,
    parse_bookie_id_address,
    parse_service_info,
)
from tests.support.golden import VECTORS

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
    Endpoint,
    names,
    st.integers(-(2**31), 2**31 - 1),
    names,
    names,
    st.lists(names, max_size=2).map(tuple),
    st.lists(names, max_size=2).map(tuple),
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


def test_every_bit_flipped_in_the_golden_raises_only_codec_error():
    """Every prefix with each one bit flipped, not a random few: one of them left a host that is
    not UTF-8, which protobuf's upb backend refuses only when the field is read."""
    sample = BookieServiceInfo.for_bookie("10.0.0.1", 3181, 8080, True, {"k": "v"}).serialize()
    for n in range(1, len(sample) + 1):
        for bit in range(n * 8):
            buf = bytearray(sample[:n])
            buf[bit // 8] ^= 1 << (bit % 8)
            _only_codec_error(bytes(buf))


# -- the one host:port rule (bkctl.wire.text.split_host_port) -----------------------


@pytest.mark.parametrize(
    "address, expected",
    [
        ("10.0.0.1:3181", ("10.0.0.1", 3181)),
        ("bk-1.example.com:65535", ("bk-1.example.com", 65535)),
        ("[::1]:3181", ("::1", 3181)),
        # Java's BookieSocketAddress writes hostname + ":" + port, brackets or not
        ("fe80::1:3181", ("fe80::1", 3181)),
    ],
)
def test_host_port(address, expected):
    from bkctl.wire.text import join_host_port, split_host_port

    assert split_host_port(address) == expected
    assert parse_bookie_id_address(address) == expected
    assert split_host_port(join_host_port(*expected)) == expected


@pytest.mark.parametrize(
    "address, problem",
    [
        ("host", "is not host:port"),
        ("host:", "is not host:port"),
        (":3181", "is not host:port"),
        ("host:x", "is not host:port"),
        ("host:+1", "is not host:port"),
        ("host:\u0661", "is not host:port"),
        ("[::1]", "is not host:port"),
        ("[::1]3181", "is not host:port"),
        ("[::1:3181", "is not host:port"),
        ("host:0", "has a port outside 1..65535"),
        ("host:70000", "has a port outside 1..65535"),
    ],
)
def test_host_port_refused(address, problem):
    from bkctl.wire.errors import AddressError
    from bkctl.wire.text import split_host_port

    with pytest.raises(AddressError) as info:
        split_host_port(address)
    assert str(info.value) == f"{address!r} {problem}" and info.value.problem == problem


def test_host_port_default_port():
    from bkctl.wire.text import join_host_port, split_host_port

    assert split_host_port("zk1", default_port=2181) == ("zk1", 2181)
    assert split_host_port("[::1]", default_port=2181) == ("::1", 2181)
    assert split_host_port("zk1:2182", default_port=2181) == ("zk1", 2182)
    assert join_host_port("::1", 2181) == "[::1]:2181" and join_host_port("zk1", 2181) == "zk1:2181"


def test_every_reader_of_bookie_addresses_uses_the_rule():
    from bkctl.wire.client.dialer import default_resolve
    from bkctl.wire.metadata.layout import zk_server_problem
    from bkctl.wire.metadata.racks import host_of

    for text in ("[::1]:3181", "fe80::1:3181", "10.0.0.1:3181"):
        host, port = parse_bookie_id_address(text)
        assert default_resolve(text) == (host, port)
        assert host_of(text) == host
    assert host_of("bookie-7") == "bookie-7"  # a bookie id that is no address
    assert zk_server_problem("[::1]:2181") is None and zk_server_problem("zk1") is None
    assert zk_server_problem("zk1:0") == "has a port outside 1..65535"
    assert zk_server_problem("::1") == zk_server_problem("zk 1") == "is not a host[:port] ZooKeeper server"
