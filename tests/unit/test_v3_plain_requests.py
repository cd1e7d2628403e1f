"""The bookie's fast v3 request parsers (:func:`v3_fast.plain_add_request`,
:func:`v3_fast.plain_read_request`) against the general one (:func:`v3.parse_request`):
whatever a fast parser accepts, the general parser reads the same way, and it
accepts the requests Java clients write in the layout it is meant for.

These call the parsers directly, so they hold with ``BKCTL_FASTPATHS=0`` too;
the server's behaviour both ways is covered by test_bookie_server.py.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs import v3, v3_fast
from bkctl.wire.codecs.framing import frame
from tests.support.golden import frames

i64 = st.integers(-(1 << 63), (1 << 63) - 1)
u64 = st.integers(0, (1 << 64) - 1)


def _general_add(payload: bytes) -> tuple:
    """What the general parser reads, in :func:`v3_fast.plain_add_request`'s shape."""
    req = v3.parse_request(payload)
    add = req.addRequest
    recovery = add.HasField("flag") and add.flag == v3.ADD_FLAG_RECOVERY_ADD
    return (req.header.txnId, add.ledgerId, add.entryId, add.masterKey, add.body, req.header.priority > 0, recovery)


def _general_read(payload: bytes) -> tuple:
    """What the general parser reads, in :func:`v3_fast.plain_read_request`'s shape."""
    req = v3.parse_request(payload)
    assert (req.header.version, req.header.operation, req.header.priority) == (3, 1, 0)
    assert not req.readRequest.HasField("flag") and not req.readRequest.HasField("masterKey")
    assert not req.readRequest.HasField("previousLAC") and not req.readRequest.HasField("timeOut")
    return req.readRequest.ledgerId, req.readRequest.entryId, 2 + payload[1], payload


def _agree(payload: bytes) -> tuple:
    """Both fast parsers on ``payload``; each result not None is what the general parser reads."""
    add, read = v3_fast.plain_add_request(payload), v3_fast.plain_read_request(payload)
    if add is not None:
        assert add == _general_add(payload)
    if read is not None:
        assert read == _general_read(payload)
    assert add is None or read is None
    return add, read


# -- the captured frames of a Java 4.17 cluster ----------------------------------------------

JAVA_FRAMES = list(frames())


def test_every_captured_frame_is_read_the_same_or_left_to_the_general_parser():
    """v2 frames, answers and other operations are declined; accepted requests agree."""
    for f in JAVA_FRAMES:
        add, read = _agree(f["raw"][4:])
        if not (f["proto"] == "v3" and f["kind"] == "request"):
            assert add is None and read is None, (f["flow"], f["index"])


def test_the_java_requests_the_fast_parsers_are_for_are_taken():
    """Every Java ADD but DEFERRED_SYNC ones (recovery ones too), and every Java READ
    without a flag or priority, goes the fast way: the fast path serves real traffic."""
    taken = {"ADD_ENTRY": 0, "READ_ENTRY": 0}
    for f in JAVA_FRAMES:
        if f["proto"] != "v3" or f["kind"] != "request" or f["op"] not in taken:
            continue
        payload = f["raw"][4:]
        req = v3.parse_request(payload)
        if f["op"] == "ADD_ENTRY":
            meant = not req.addRequest.HasField("writeFlags")
            got = v3_fast.plain_add_request(payload)
        else:
            read = req.readRequest
            meant = not (
                read.HasField("flag")
                or read.HasField("masterKey")
                or read.HasField("previousLAC")
                or req.header.priority
            )
            got = v3_fast.plain_read_request(payload)
        assert (got is not None) == meant, (f["flow"], f["index"], req)
        taken[f["op"]] += got is not None
    assert taken["ADD_ENTRY"] >= 10 and taken["READ_ENTRY"] >= 5, taken


# -- requests made by the builders -----------------------------------------------------------


@settings(max_examples=400)
@given(u64, i64, i64, st.binary(max_size=140), st.binary(max_size=300), st.booleans(), st.booleans(), st.booleans())
def test_built_adds_are_read_as_the_parser_reads_them(txn, ledger, entry, key, body, recovery, high, deferred):
    payload = v3.serialize(
        v3.add_request(txn, ledger, entry, key, body, recovery=recovery, high_priority=high, deferred_sync=deferred)
    )
    got = v3_fast.plain_add_request(payload)
    if deferred or len(key) >= 128:
        assert got is None
    else:
        assert got == _general_add(payload)


@settings(max_examples=400)
@given(u64, i64, i64, st.booleans(), st.booleans(), st.booleans())
def test_built_reads_are_read_as_the_parser_reads_them(txn, ledger, entry, fence, high, poll):
    payload = v3.serialize(
        v3.read_request(
            txn,
            ledger,
            entry,
            fence_master_key=b"k" * 20 if fence else None,
            high_priority=high,
            previous_lac=3 if poll else None,
            timeout_ms=10 if poll else None,
        )
    )
    got = v3_fast.plain_read_request(payload)
    if fence or high or poll:
        assert got is None
    else:
        assert got == _general_read(payload)


def test_a_request_context_leaves_an_add_to_the_parser():
    req = v3.parse_request(v3.serialize(v3.add_request(1, 2, 3, b"k" * 20, b"x")))
    context = req.requestContext.add()
    context.key, context.value = "a", "b"
    assert v3_fast.plain_add_request(v3.serialize(req)) is None


# -- bytes near a request, and junk ----------------------------------------------------------


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
    almost never an ADD, so the agreement check would never run on it."""
    pad = st.integers(0, 2)
    header = b"\x08\x03\x10\x02\x18" + _varint(draw(u64), draw(pad))
    if draw(st.booleans()):
        header += b"\x20" + _varint(draw(st.integers(0, 3)), draw(pad))
    key = draw(st.binary(max_size=130))
    body = draw(st.binary(max_size=60))
    add = (
        b"\x08"
        + _varint(draw(u64), draw(pad))
        + b"\x10"
        + _varint(draw(u64), draw(pad))
        + b"\x1a"
        + _varint(len(key))
        + key
        + b"\x22"
        + _varint(len(body), draw(pad))
        + body
    )
    return often_broken(
        draw, b"\x0a" + _varint(len(header)) + header + v3_fast.ADD_FIELD + _varint(len(add), draw(pad)) + add
    )


def often_broken(draw, data: bytes) -> bytes:
    """``data``, or (two times in three) ``data`` with one byte replaced, bytes inserted,
    one deleted, or the tail cut."""
    b = bytearray(data)
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


def test_near_adds_accepted_are_read_as_the_parser_reads_them():
    """Whatever near-ADD bytes the fast parser accepts, the general parser reads the
    same way; and enough are accepted (and declined) for that to mean something."""
    outcomes = {True: 0, False: 0}

    @settings(max_examples=400, database=None)
    @given(near_adds())
    def check(b):
        add, _read = _agree(b)
        outcomes[add is not None] += 1

    check()
    total = outcomes[True] + outcomes[False]
    assert outcomes[True] >= total // 5, outcomes
    assert outcomes[False] >= total // 5, outcomes


@settings(max_examples=400)
@given(st.integers(0, 1 << 20), st.binary(max_size=30), st.data())
def test_an_add_with_one_byte_changed_is_read_the_same_or_declined(txn, body, data):
    p = bytearray(v3.serialize(v3.add_request(txn, 5, 6, b"k" * 20, body)))
    p[data.draw(st.integers(0, len(p) - 1))] = data.draw(st.integers(0, 255))
    _agree(bytes(p))


@settings(max_examples=400)
@given(st.integers(0, 1 << 20), st.data())
def test_a_read_with_one_byte_changed_and_junk_are_read_the_same_or_declined(txn, data):
    p = bytearray(v3.serialize(v3.read_request(txn, 5, 6)))
    p[data.draw(st.integers(0, len(p) - 1))] = data.draw(st.integers(0, 255))
    _agree(bytes(p))
    _agree(data.draw(st.binary(max_size=40)))


# -- the hand-built answer to a plain read -----------------------------------------------------


@settings(max_examples=300)
@given(u64, i64, i64, st.binary(max_size=300), i64)
def test_read_answer_is_what_the_builder_writes(txn, ledger, entry, body, max_lac):
    p = v3.serialize(v3.read_request(txn, ledger, entry))
    head = p[: 2 + p[1]]
    want = v3.serialize(v3.read_response(v3.parse_request(p), 0, body, max_lac=max_lac))
    assert v3_fast.read_answer(head, ledger, entry, body, max_lac) == want
    assert v3_fast.ReadAnswers(ledger, max_lac).framed(head, entry, body) == frame(want)
