"""The fast v3 encoders produce exactly the bytes of the reference builders (which match Java)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs import v3, v3_fast
from bkctl.wire.codecs.protocol import RC, V3_STATUS

i64 = st.integers(-(1 << 63), (1 << 63) - 1)
ENC = v3_fast.RequestEncoder()


@settings(max_examples=400)
@given(
    st.integers(0, (1 << 64) - 1),
    i64,
    i64,
    st.binary(max_size=40),
    st.binary(max_size=300),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_add(txn, l, e, k, b, r, h, d):
    assert ENC.add(txn, l, e, k, b, recovery=r, high_priority=h, deferred_sync=d) == v3.serialize(
        v3.add_request(txn, l, e, k, b, recovery=r, high_priority=h, deferred_sync=d)
    )


@settings(max_examples=400)
@given(st.integers(0, (1 << 64) - 1), i64, i64)
def test_read(txn, l, e):
    assert ENC.read(txn, l, e) == v3.serialize(v3.read_request(txn, l, e))


def test_errors_same():
    for args in [
        ((1 << 64), 1, 1, b"k", b"b"),
        (-1, 1, 1, b"k", b"b"),
        (1, 1 << 63, 1, b"k", b"b"),
        (1, "x", 1, b"k", b"b"),
        (1, 1, 1, "k", b"b"),
    ]:
        with pytest.raises(Exception) as a:
            ENC.add(*args)
        with pytest.raises(Exception) as b:
            v3.add_request(*args)
        assert type(a.value) is type(b.value), (args, a.value, b.value)
    assert ENC.add(1, 2, 3, bytearray(b"k"), memoryview(b"b")) == v3.serialize(v3.add_request(1, 2, 3, b"k", b"b"))
    assert ENC.add(5, 6, 7, b"k" * 20, b"") == v3.serialize(v3.add_request(5, 6, 7, b"k" * 20, b""))


RENC = v3_fast.AddResponseEncoder()


@settings(max_examples=400)
@given(st.integers(0, (1 << 64) - 1), i64, i64, st.sampled_from(list(RC) + list(V3_STATUS.values())), st.booleans())
def test_add_response(txn, l, e, status, hp):
    req = v3.add_request(txn, l, e, b"k" * 20, b"body", high_priority=hp)
    req = v3.parse_request(v3.serialize(req))
    assert RENC.encode(txn, status, l, e) == v3.serialize(v3.add_response(req, status))


def test_add_response_bad_status():
    with pytest.raises(ValueError):
        RENC.encode(1, 12345, 1, 1)


@settings(max_examples=400)
@given(st.integers(0, (1 << 64) - 1), i64, i64, st.binary(min_size=0, max_size=40), st.binary(max_size=300))
def test_add_and_reply(txn, l, e, k, b):
    p, ok = ENC.add_and_reply(txn, l, e, k, b)
    assert p == v3.serialize(v3.add_request(txn, l, e, k, b))
    req = v3.parse_request(p)
    assert ok == v3.serialize(v3.add_response(req, RC.EOK))
    # cache hit with another txn, and a second encoder
    p2, ok2 = v3_fast.RequestEncoder().add_and_reply(txn ^ 1, l, e, k, b)
    assert p2 == v3.serialize(v3.add_request(txn ^ 1, l, e, k, b))
    assert ok2 == v3.serialize(v3.add_response(v3.parse_request(p2), RC.EOK))


def test_cache_interleaving():
    k, b1, b2 = b"k" * 20, b"one" * 10, b"two" * 10
    for txn in range(1, 50):
        for l, e, b in ((1, 2, b1), (1, 3, b2), (1, 2, b1), (2, 2, b1)):
            assert ENC.add(txn, l, e, k, b) == v3.serialize(v3.add_request(txn, l, e, k, b))
