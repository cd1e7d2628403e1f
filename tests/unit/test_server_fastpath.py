"""The server's fast v3 ADD decoder agrees with the protobuf parser or declines."""
from hypothesis import given, settings, strategies as st
from bkctl.bookied.server import _plain_v3_add
from bkctl.wire.codecs import v3
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
@settings(max_examples=400)
@given(st.integers(0, (1 << 64) - 1), i64, i64, st.binary(max_size=140), st.binary(max_size=300), st.booleans(), st.booleans(), st.booleans())
def test_matches_parser(txn, l, e, k, b, r, h, d):
    p = v3.serialize(v3.add_request(txn, l, e, k, b, recovery=r, high_priority=h, deferred_sync=d))
    got = _plain_v3_add(p)
    if r or d or len(k) >= 128:
        assert got is None
        return
    req = v3.parse_request(p)
    assert got == (req.header.txnId, req.addRequest.ledgerId, req.addRequest.entryId, req.addRequest.masterKey, req.addRequest.body, req.header.priority > 0)
def _varint(n: int, pad: int = 0) -> bytes:
    """``n`` as a protobuf varint, up to ``pad`` bytes longer than needed (a varint has at most 10)."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    for _ in range(min(pad, 10 - len(out))):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


@st.composite
def near_adds(draw):
    """Bytes close to a plain v3 ADD: assembled field by field (varints padded now and then,
    an explicit priority, odd keys) and then, often, broken by one edit.  Uniform junk is
    almost never an ADD, so the agreement check below would never run on it."""
    pad = st.integers(0, 2)
    u64 = st.integers(0, (1 << 64) - 1)
    header = b"\x08\x03\x10\x02\x18" + _varint(draw(u64), draw(pad))
    if draw(st.booleans()):
        header += b"\x20" + _varint(draw(st.integers(0, 3)), draw(pad))
    key = draw(st.binary(max_size=130))
    body = draw(st.binary(max_size=60))
    add = (b"\x08" + _varint(draw(u64), draw(pad)) + b"\x10" + _varint(draw(u64), draw(pad))
           + b"\x1a" + _varint(len(key)) + key + b"\x22" + _varint(len(body), draw(pad)) + body)
    b = bytearray(b"\x0a" + _varint(len(header)) + header + v3.ADD_FIELD + _varint(len(add), draw(pad)) + add)
    edit = draw(st.sampled_from(["none", "none", "replace", "insert", "delete", "truncate"]))
    at = draw(st.integers(0, len(b) - 1))
    if edit == "replace":
        b[at] = draw(st.integers(0, 255))
    elif edit == "insert":
        b[at:at] = draw(st.binary(min_size=1, max_size=3))
    elif edit == "delete":
        del b[at]
    elif edit == "truncate":
        del b[at:]
    return bytes(b)


def test_junk():
    """Whatever near-ADD bytes the fast decoder accepts, the parser reads the same way;
    and enough are accepted (and declined) for that to mean something."""
    outcomes = {True: 0, False: 0}

    @settings(max_examples=400, database=None)
    @given(near_adds())
    def check(b):
        got = _plain_v3_add(b)
        outcomes[got is not None] += 1
        if got is not None:
            req = v3.parse_request(b)  # must parse and agree
            assert req.header.operation == 2 and req.header.version == 3
            assert got == (req.header.txnId, req.addRequest.ledgerId, req.addRequest.entryId,
                           req.addRequest.masterKey, req.addRequest.body, req.header.priority > 0)

    check()
    total = outcomes[True] + outcomes[False]
    assert outcomes[True] >= total // 5, outcomes
    assert outcomes[False] >= total // 5, outcomes


@settings(max_examples=400)
@given(st.integers(0, 1 << 20), st.binary(max_size=30), st.data())
def test_mutations(txn, body, data):
    p = bytearray(v3.serialize(v3.add_request(txn, 5, 6, b"k" * 20, body)))
    i = data.draw(st.integers(0, len(p) - 1)); p[i] = data.draw(st.integers(0, 255))
    p = bytes(p)
    got = _plain_v3_add(p)
    if got is not None:
        req = v3.parse_request(p)
        assert got == (req.header.txnId, req.addRequest.ledgerId, req.addRequest.entryId, req.addRequest.masterKey, req.addRequest.body, req.header.priority > 0)
def test_non_minimal_and_requestcontext():
    p = v3.serialize(v3.add_request(1, 2, 3, b"k" * 20, b"x"))
    req = v3.parse_request(p); c = req.requestContext.add(); c.key = "a"; c.value = "b"
    assert _plain_v3_add(v3.serialize(req)) is None


# -- plain v3 READ_ENTRY requests and their EOK answers ------------------------------------

from bkctl.bookied.server import _plain_v3_read  # noqa: E402
from bkctl.wire.codecs.framing import frame  # noqa: E402


def _read_fields(p):
    req = v3.parse_request(p)
    return req.readRequest.ledgerId, req.readRequest.entryId


@settings(max_examples=400)
@given(st.integers(0, (1 << 64) - 1), i64, i64, st.booleans(), st.booleans(), st.booleans())
def test_read_matches_parser(txn, l, e, fence, high, poll):
    p = v3.serialize(v3.read_request(txn, l, e, fence_master_key=b"k" * 20 if fence else None, high_priority=high,
                                     previous_lac=3 if poll else None, timeout_ms=10 if poll else None))
    got = _plain_v3_read(p)
    if fence or high or poll:
        assert got is None
        return
    assert got is not None and got[:2] == _read_fields(p)
    assert p[:got[2]] == p[:2 + p[1]]  # the header field


@settings(max_examples=400)
@given(st.integers(0, 1 << 20), st.data())
def test_read_mutations_and_junk(txn, data):
    p = bytearray(v3.serialize(v3.read_request(txn, 5, 6)))
    i = data.draw(st.integers(0, len(p) - 1)); p[i] = data.draw(st.integers(0, 255))
    for b in (bytes(p), data.draw(st.binary(max_size=40))):
        got = _plain_v3_read(b)
        if got is not None:
            req = v3.parse_request(b)  # must parse and agree
            assert (req.header.version, req.header.operation, req.header.priority) == (3, 1, 0)
            assert not req.readRequest.HasField("flag") and not req.readRequest.HasField("previousLAC")
            assert got[:2] == _read_fields(b)


@settings(max_examples=300)
@given(st.integers(0, (1 << 64) - 1), i64, i64, st.binary(max_size=300), i64)
def test_read_answer_is_what_the_builder_writes(txn, l, e, body, max_lac):
    p = v3.serialize(v3.read_request(txn, l, e))
    head = p[:2 + p[1]]
    want = v3.serialize(v3.read_response(v3.parse_request(p), 0, body, max_lac=max_lac))
    assert v3.read_answer(head, l, e, body, max_lac) == want
    assert v3.ReadAnswers(l, max_lac).framed(head, e, body) == frame(want)
