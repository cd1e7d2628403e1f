"""Per-connection v2/v3 detection (BookKeeper's proto/BookieProtoEncoding.java) against the
Java captures."""

from collections import defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs import v3
from bkctl.wire.codecs.detect import ProtocolDetector
from bkctl.wire.errors import CodecError
from tests.support.golden import frames


def client_requests(proto):
    """Request payloads per client connection, in capture order."""
    conns = defaultdict(list)
    for f in frames():
        if f["proto"] == proto and f["kind"] == "request":
            conns[(f["flow"], f["conn"])].append(f["raw"][4:])
    return dict(conns)


V3_CONNS = client_requests("v3")
V2_CONNS = client_requests("v2")
V3_PAYLOADS = [p for ps in V3_CONNS.values() for p in ps]
V2_PAYLOADS = [p for ps in V2_CONNS.values() for p in ps]


def test_vectors_present():
    assert len(V3_CONNS) >= 5 and len(V2_CONNS) >= 5


@pytest.mark.parametrize("conn", sorted(V3_CONNS), ids=lambda c: f"{c[0]}:{c[1]}")
def test_java_v3_connection_stays_v3(conn):
    det = ProtocolDetector()
    assert det.protocol == "v3" and det.is_v3
    for payload in V3_CONNS[conn]:
        assert payload[:1] == b"\x0a"  # the practical first-byte rule holds for Java
        proto, msg = det.classify(payload)
        assert proto == "v3"
        assert msg == v3.parse_request(payload)
    assert det.protocol == "v3"


@pytest.mark.parametrize("conn", sorted(V2_CONNS), ids=lambda c: f"{c[0]}:{c[1]}")
def test_java_v2_connection_switches_and_stays_v2(conn):
    det = ProtocolDetector()
    payloads = V2_CONNS[conn]
    for payload in payloads:
        proto, out = det.classify(payload)
        assert proto == "v2"
        assert out is payload  # handed back untouched, no copy
        assert det.protocol == "v2" and not det.is_v3
    # a v3 frame arriving later on the same connection is no longer parsed as v3
    assert det.classify(V3_PAYLOADS[0]) == ("v2", V3_PAYLOADS[0])


def test_switch_is_per_connection():
    a, b = ProtocolDetector(), ProtocolDetector()
    assert a.classify(V2_PAYLOADS[0])[0] == "v2"
    assert b.classify(V3_PAYLOADS[0])[0] == "v3"
    assert a.protocol == "v2" and b.protocol == "v3"


def test_memoryview_payloads():
    det = ProtocolDetector()
    proto, msg = det.classify(memoryview(V3_PAYLOADS[0]))
    assert proto == "v3" and msg == v3.parse_request(V3_PAYLOADS[0])
    view = memoryview(V2_PAYLOADS[0])
    assert det.classify(view) == ("v2", view)


@pytest.mark.parametrize("payload", [b"", b"\x0a", b"\x0a\x06\x08\x03\x10\x02"])
def test_incomplete_v3_switches_to_v2(payload):
    # as in Java: a frame that is not a complete Request flips the connection
    det = ProtocolDetector()
    assert det.classify(payload) == ("v2", payload)
    assert det.protocol == "v2"


def test_repr():
    det = ProtocolDetector()
    assert "v3" in repr(det)
    det.classify(b"")
    assert "v2" in repr(det)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), max_size=30))
def test_sticky_model(picks):
    """Against a model: v3 while every frame so far parsed, v2 from the first failure on."""
    det = ProtocolDetector()
    still_v3 = True
    for is_v3, i in picks:
        payload = V3_PAYLOADS[i % len(V3_PAYLOADS)] if is_v3 else V2_PAYLOADS[i % len(V2_PAYLOADS)]
        still_v3 = still_v3 and is_v3
        proto, out = det.classify(payload)
        assert proto == ("v3" if still_v3 else "v2")
        assert det.protocol == proto
        if proto == "v2":
            assert out is payload


@given(st.integers(0, 7), st.binary(max_size=64))
def test_v2_first_byte_never_parses_as_v3(first, rest):
    """Bytes 0x00-0x07 are tags of field number 0, which protobuf rejects (so RequestDecoder falls back to v2)."""
    payload = bytes([first]) + rest
    with pytest.raises(CodecError):
        v3.parse_request(payload)
    assert ProtocolDetector().classify(payload) == ("v2", payload)


@given(st.binary(max_size=100))
def test_classify_never_raises(payload):
    det = ProtocolDetector()
    proto, out = det.classify(payload)
    assert proto in ("v2", "v3")
    assert det.protocol == proto
