"""The decoders as fuzz targets: one function of bytes per target, and the
errors each may raise (its declared ones); anything else it raises is a
finding.  Twins are compared (a hand-written fast parser against the
general one, the C batch splitter against the Python one): a disagreement
raises AssertionError, a finding too.

Used by ``bench/fuzz.py`` (coverage-guided, atheris) and by
tests/unit/test_fuzz_corpus.py, which replays the seeds (:func:`seeds`, made
from the captured vectors) and the corpus kept in ``tests/fuzz_corpus/<target>/``
(small inputs fuzzing found interesting, and every finding's input) through
every target, without atheris.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bkctl.wire import fastpath
from bkctl.wire.errors import CodecError, DigestError

CORPUS = Path(__file__).resolve().parents[1] / "fuzz_corpus"


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    declared: tuple[type[BaseException], ...]
    seeds: Callable[[], list[bytes]]
    doc: str


TARGETS: dict[str, Target] = {}


def target(declared: tuple = (CodecError,), seeds: Callable[[], list[bytes]] = lambda: []):
    def register(fn):
        TARGETS[fn.__name__] = Target(fn.__name__, fn, declared, seeds, (fn.__doc__ or "").strip())
        return fn

    return register


def run(name: str, data: bytes) -> None:
    """Run ``data`` through target ``name``; its declared errors are swallowed."""
    t = TARGETS[name]
    try:
        t.run(data)
    except t.declared:
        pass


def corpus(name: str) -> list[bytes]:
    """The inputs kept for ``name`` in tests/fuzz_corpus/."""
    folder = CORPUS / name
    if not folder.is_dir():
        return []
    return [p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()]


def keep(name: str, data: bytes) -> Path:
    """Store ``data`` in ``name``'s corpus (named by its hash); its path."""
    folder = CORPUS / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(data).hexdigest()[:16]
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ seeds


def _frames(kind: str | None = None, proto: str | None = None) -> list[bytes]:
    from tests.support.golden import frames

    seen, out = set(), []
    for f in frames():
        if (kind and f["kind"] != kind) or (proto and f["proto"] != proto):
            continue
        payload = f["raw"][4:]
        if payload not in seen:
            seen.add(payload)
            out.append(payload)
    return out


def _vector_files(folder: str, pattern: str, limit: int | None = None) -> list[bytes]:
    from tests.support.golden import VECTORS

    return [p.read_bytes()[:limit] for p in sorted((VECTORS / folder).glob(pattern))]


# ------------------------------------------------------------------ frames


def _framing_seeds() -> list[bytes]:
    from tests.support.golden import frames

    raw = [f["raw"] for f in frames("v3-flow")][:6]
    return [b"\x03" + b"".join(raw), b"\x01" + raw[0], b"\x02\x00\x00\x00\x05abc"]


@target(seeds=_framing_seeds)
def framing(data: bytes) -> None:
    """The length-prefixed framing: the stream cut into chunks (the first byte
    says where) gives the frames it gives whole, or fails the same way."""
    from bkctl.wire.codecs.framing import FrameDecoder

    if not data:
        return
    stream = data[1:]
    step = max(data[0] + 1, len(stream) // 64)  # at most 64 chunks
    whole = FrameDecoder(1 << 12)
    try:
        expected, error = whole.feed(stream), whole.failed
    except CodecError as exc:
        expected, error = [], exc
    pieces = FrameDecoder(1 << 12)
    got = []
    failed = None
    for i in range(0, len(stream), step):
        try:
            got += pieces.feed(stream[i : i + step])
        except CodecError as exc:
            failed = exc
            break
    failed = failed or pieces.failed
    assert (error is None) == (failed is None), (error, failed)
    if error is None:
        assert got == expected
        assert pieces.buffered == whole.buffered
    else:
        assert got == expected[: len(got)] and str(failed) == str(error)


@target(seeds=lambda: _frames("request", "v2"))
def v2_request(data: bytes) -> None:
    """A v2 request as the bookie decodes it."""
    from bkctl.wire.codecs import v2

    req = v2.decode_request(data)
    if isinstance(req, v2.AddRequest):
        assert req.body == data[24:]


@target(seeds=lambda: _frames("response", "v2"))
def v2_response(data: bytes) -> None:
    """A v2 response as the client decodes it, and what each answer decoder takes from it."""
    from bkctl.wire.codecs import answers, v2

    msg = v2.decode_response(data)
    if isinstance(msg, v2.AddResponse):
        answers.v2_add(msg)
    elif isinstance(msg, v2.ReadResponse):
        answers.v2_read(msg)
    elif isinstance(msg, v2.BatchReadResponse):
        answers.v2_batch_read(msg)
        # written back the same, but for a header the tuple does not keep (flags, a version-0 form)
        assert msg.encode() == data or data[:4] != msg.encode()[:4]


@target(seeds=lambda: _frames("request", "v3"))
def v3_request(data: bytes) -> None:
    """A v3 Request as the bookie parses it (what parses is written back)."""
    from bkctl.wire.codecs import v3

    msg = v3.parse_request(data)
    v3.parse_request(v3.serialize(msg))


@target(seeds=lambda: _frames("response", "v3"))
def v3_response(data: bytes) -> None:
    """A v3 Response as the client parses it, and what every answer decoder takes from it."""
    from bkctl.wire.codecs import answers, v3

    msg = v3.parse_response(data)
    for decode in (
        answers.v3_add,
        answers.v3_read,
        answers.v3_long_poll,
        answers.v3_read_lac,
        answers.v3_bookie_info,
        answers.v3_entry_list,
        answers.v3_expect("writeLacResponse"),
    ):
        try:
            decode(msg)
        except CodecError:
            pass


@target(declared=(), seeds=lambda: _frames("request", "v3"))
def v3_plain_requests(data: bytes) -> None:
    """The bookie's hand-made parsers of plain ADD and READ requests against the general
    parser: whatever they take, the parser reads the same way (a CodecError is a finding here)."""
    from bkctl.wire.codecs import v3, v3_fast

    add = v3_fast.plain_add_request(data)
    read = v3_fast.plain_read_request(data)
    if add is None and read is None:
        return
    assert add is None or read is None
    msg = v3.parse_request(data)
    header = msg.header
    assert header.version == 3
    if add is not None:
        txn, ledger_id, entry_id, key, body, high_priority, recovery = add
        inner = msg.addRequest
        assert header.operation == 2 and msg.HasField("addRequest")
        assert (header.txnId, inner.ledgerId, inner.entryId, inner.masterKey, inner.body) == (
            txn,
            ledger_id,
            entry_id,
            key,
            body,
        )
        assert v3.is_high_priority(msg) == high_priority, (header.priority, high_priority)
        assert inner.HasField("flag") == recovery and (not recovery or inner.flag == v3.ADD_FLAG_RECOVERY_ADD)
        assert not inner.HasField("writeFlags")
        assert list(msg.ListFields()) == [
            (msg.DESCRIPTOR.fields_by_name["header"], header),
            (msg.DESCRIPTOR.fields_by_name["addRequest"], inner),
        ]
    else:
        ledger_id, entry_id, header_len, _ = read
        inner = msg.readRequest
        assert header.operation == 1 and msg.HasField("readRequest")
        assert (inner.ledgerId, inner.entryId) == (ledger_id, entry_id)
        assert [f.name for f, _ in inner.ListFields()] == ["ledgerId", "entryId"]
        assert not header.HasField("priority") and data[2:header_len] == header.SerializeToString()


def _plain_c_seeds() -> list[bytes]:
    out = _frames("request", "v3") + _frames("request", "v2")
    # the answer half: the first byte picks a status, the rest are the txnId and ids
    out.append(b"\x00" + bytes(range(24)))
    out.append(b"\x07" + b"\xff" * 24)
    return out


@target(declared=(), seeds=_plain_c_seeds)
def plain_c_twins(data: bytes) -> None:
    """The bookie's C parsers of plain requests (``_plain.c``) against their Python
    twins: the same value, or both None, for every input, alone and in a run with
    copies of it and a cut one; and the C ADD and READ answers (one, and a run's) are
    the Python ones for the numbers and bytes the input spells (skipped where it is not
    built)."""
    from bkctl.wire import fastpath
    from bkctl.wire.codecs import plain, v2, v3_fast
    from bkctl.wire.codecs.plain import py_add_answer, py_read_answer, py_read_answers
    from bkctl.wire.codecs.protocol import RC
    from bkctl.wire.proto import bookkeeper_pb2 as pb

    _plain = fastpath.build(True).plain.c
    if _plain is None:
        return
    assert _plain.plain_add_request(data) == v3_fast.plain_add_request(data)
    assert _plain.plain_read_request(data) == v3_fast.plain_read_request(data)
    assert _plain.v2_add_request(data) == v2.plain_add_request(data)
    run = [data, data, data[:-1], data]
    add, v2_add = v3_fast.plain_add_request(data), v2.plain_add_request(data)
    if add is not None:
        args = (run, len(data) % 2, 9, add[1], add[3], add[5], add[6])
        assert tuple(_plain.add_run(*args)) == tuple(plain.py_add_run(*args))
    if v2_add is not None:
        args2 = (run, len(data) % 2, 9, v2_add[1], v2_add[3], v2_add[0])
        assert tuple(_plain.v2_add_run(*args2)) == tuple(plain.py_v2_add_run(*args2))
    if len(data) >= 25:
        statuses = sorted(pb.StatusCode.values())
        status = statuses[data[0] % len(statuses)]
        txn = int.from_bytes(data[1:9], "big")
        ledger, entry = (int.from_bytes(data[i : i + 8], "big", signed=True) for i in (9, 17))
        assert _plain.add_answer(txn, status, ledger, entry) == py_add_answer(txn, status, ledger, entry)
        txns, entries = [txn, txn >> 7, 0], [entry, entry >> 9, -1]
        assert _plain.add_answers(txns, status, ledger, entries) == plain.py_add_answers(txns, status, ledger, entries)
        rc = int.from_bytes(data[1:5], "big", signed=True)
        assert _plain.v2_add_answers(rc, ledger, entries) == plain.py_v2_add_answers(rc, ledger, entries)
        head, body = data[25 : 25 + data[0] % 16], data[25 + data[0] % 16 :]
        assert _plain.read_answer(head, ledger, entry, body, txn - (1 << 63)) == py_read_answer(
            head, ledger, entry, body, txn - (1 << 63)
        )
    read = v3_fast.plain_read_request(data)
    if read is not None:
        # a run of copies of the read (one cut short ends it), every fourth one failed, answered
        # up to a limit the input gives
        reads = [data] * (1 + len(data) % 5) + [data[:-1], data]
        run_args = (reads, len(data) % 2, 9, read[0])
        read_run = _plain.read_run(*run_args)
        assert tuple(read_run) == tuple(plain.py_read_run(*run_args))
        bodies = [data[k:] if k % 4 else RC.ENOENTRY for k in range(len(read_run.entry_ids))]
        args = (reads, read_run, bodies, data[1] % 3, data[2] - 128, 1 + data[3] * 4)
        assert _plain.read_answers(*args) == py_read_answers(*args)
    v2_read = v2.plain_read_request(data)
    if v2_read is not None:  # the same of version-2 READs
        reads = [data] * (1 + data[19] % 5) + [data[:-1], data]
        run_args = (reads, data[19] % 2, 9, v2_read[0])
        v2_run = _plain.v2_read_run(*run_args)
        assert tuple(v2_run) == tuple(plain.py_v2_read_run(*run_args))
        bodies = [data[k:] if k % 4 else RC.ENOENTRY for k in range(len(v2_run.entry_ids))]
        v2_args = (v2_run, bodies, data[1] % 3, 1 + data[3] * 4)
        assert _plain.v2_read_answers(*v2_args) == plain.py_v2_read_answers(*v2_args)


@target(seeds=lambda: _frames("response", "v3"))
def v3_plain_read_answer(data: bytes) -> None:
    """The client's hand-made reader of EOK read answers against the general parser:
    whatever it takes is what the parser reads as the body."""
    from bkctl.wire.codecs import v3, v3_fast

    if len(data) < 2:
        return
    n = 2 + data[1]
    got = v3_fast.plain_read_body(data, n)
    if got is None:
        return
    msg = v3.parse_response(data)  # a CodecError here is a finding: the hand parser took junk
    assert msg.status == 0 and msg.readResponse.status == 0
    assert msg.readResponse.HasField("body") and msg.readResponse.body == got


# ------------------------------------------------------------------ the bookie's side of a connection


class _InstantJournal:
    """A journal that is durable at once and keeps nothing (every call the bookie makes
    of a journal: a missing one was a finding of this target's own)."""

    failed = None
    max_queue_bytes = 1 << 20
    pending_bytes = 0

    def append(self, record, callback, *, sync=True, patient=False):
        callback(None)

    def append_entries(self, ledger_id, entry_ids, bodies, callback, patient=False):
        callback(None)

    def force(self, callback):
        callback(None)

    def replay(self):
        return iter(())


_BOOKIE = None


def _bookie():
    global _BOOKIE
    if _BOOKIE is None:
        from twisted.internet import task

        from bkctl.bookied.bookie import Bookie
        from bkctl.bookied.metrics import Metrics
        from bkctl.bookied.storage import EntryStore

        clock = task.Clock()
        folder = _scratch()
        store = EntryStore(folder, write_cache_max_bytes=1 << 20, twins=fastpath.selected())
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        atexit.register(store.close)
        _BOOKIE = (Bookie([_InstantJournal()], [store], clock=clock), clock, Metrics())
    return _BOOKIE


def _server_seeds() -> list[bytes]:
    from bkctl.wire.codecs.framing import frame

    out = []
    for proto in ("v3", "v2"):
        reqs = _frames("request", proto)
        for opts in (0, 1, 2):
            out.append(bytes((opts,)) + b"".join(frame(p) for p in reqs[:8]))
    return out


@target(declared=(), seeds=_server_seeds)
def bookie_connection(data: bytes) -> None:
    """A connection to a bookie fed this stream (the first byte: fast paths off
    (bit 0), in-progress limits (bit 1), where the stream is cut): nothing
    escapes the protocol, and every byte it answers is frames a client decodes."""
    from twisted.internet.testing import StringTransport

    from bkctl.bookied.server import BookieServerFactory
    from bkctl.wire import fastpath
    from bkctl.wire.codecs import v2, v3
    from bkctl.wire.codecs.framing import FrameDecoder

    if not data:
        return
    bookie, clock, metrics = _bookie()
    opts, stream = data[0], data[1:]
    factory = BookieServerFactory(
        bookie,
        metrics,
        1 << 16,
        twins=fastpath.build(not opts & 1),
        max_adds_in_progress=2 if opts & 2 else 0,
        max_reads_in_progress=2 if opts & 2 else 0,
    )
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    cut = (opts >> 2) * 7 % (len(stream) + 1)
    for chunk in (stream[:cut], stream[cut:]):
        if chunk and not proto.closed:
            proto.dataReceived(chunk)
    clock.advance(3600)
    proto.connectionLost(None)
    for payload in FrameDecoder(1 << 24).feed(transport.value()):
        # v3 answers, then v2 ones once the connection fell back; a long poll's
        # v3 answer can come after them
        try:
            v3.parse_response(payload)
        except CodecError:
            v2.decode_response(payload)


# ------------------------------------------------------------------ the client's side of a connection


def _client_requests(conn, use_v3: bool) -> list:
    """The requests a client connection has in flight when the fuzzed answers come."""
    key = b"k" * 20
    body = (1).to_bytes(8, "big") * 2 + b"\0" * 16 + b"data"  # ledger 1, entry 1, as packaged
    out = [conn.add(1, 1, key, body), conn.read(1, 1), conn.read(1, 2)]
    if use_v3:
        out += [conn.read_lac(1), conn.read_long_poll(1, 0, 1000), conn.bookie_info()]
    else:
        out.append(conn.batch_read(1, 0, 4, 1 << 20))
    return out


def _client_seeds() -> list[bytes]:
    from bkctl.wire.codecs import v2
    from bkctl.wire.codecs.framing import frame
    from tests.support.connection import Harness, v2_requests, v3_reply, v3_requests

    seeds = []
    for use_v3 in (True, False):
        h = Harness("v3" if use_v3 else "v2")
        pending = _client_requests(h.conn, use_v3)
        _proto, transport = h.accept()
        if use_v3:
            answers = b"".join(
                v3_reply(r, body=b"\0" * 32) if r.header.operation == 1 else v3_reply(r) for r in v3_requests(transport)
            )
        else:
            answers = b""
            for r in v2_requests(transport):
                if isinstance(r, v2.AddRequest):
                    answers += frame(v2.AddResponse(2, 0, r.ledger_id, r.entry_id).encode())
                elif isinstance(r, v2.ReadRequest):
                    answers += frame(v2.ReadResponse(2, 0, r.ledger_id, r.entry_id, b"\0" * 40).encode())
                else:
                    answers += frame(
                        v2.BatchReadResponse(2, 0, r.ledger_id, r.start_entry_id, r.request_id, (b"\0" * 40,)).encode()
                    )
        for d in pending:
            d.addErrback(lambda f: None)
        seeds.append(bytes((0 if use_v3 else 1,)) + answers)
    return seeds


@target(declared=(), seeds=_client_seeds)
def client_connection(data: bytes) -> None:
    """A client connection (v3 or v2: the first byte's bit 0) with requests in flight,
    fed this stream as the bookie's answers: nothing escapes the protocol, and each
    request ends in its answer or in one of the library's errors."""
    from twisted.python.failure import Failure

    from bkctl.wire.errors import BKError
    from tests.support.connection import Harness

    if not data:
        return
    use_v3 = not data[0] & 1
    h = Harness("v3" if use_v3 else "v2")
    outcomes = []
    for d in _client_requests(h.conn, use_v3):
        d.addBoth(outcomes.append)
    proto, _transport = h.accept()
    stream = data[1:]
    cut = (data[0] >> 1) * 5 % (len(stream) + 1)
    for chunk in (stream[:cut], stream[cut:]):
        if chunk:
            proto.dataReceived(chunk)
    h.conn.close()
    h.reactor.advance(3600)
    for outcome in outcomes:
        if isinstance(outcome, Failure) and not outcome.check(BKError):
            outcome.raiseException()


# ------------------------------------------------------------------ metadata


def _zk(prefix: str) -> list[bytes]:
    return _vector_files("zk/raw", prefix + "*")


def _metadata_seeds() -> list[bytes]:
    from bkctl.wire.metadata.ledger import parse_ledger_metadata, serialize_ledger_metadata

    out = _zk("ledgers__00__")
    md = parse_ledger_metadata(out[0])
    for version in (1, 2):
        out.append(serialize_ledger_metadata(md.with_format_version(version), version))
    return out


@target(seeds=_metadata_seeds)
def ledger_metadata(data: bytes) -> None:
    """Ledger metadata of format 1, 2 or 3; what parses is written back in its format and reads the same."""
    from bkctl.wire.metadata.ledger import parse_ledger_metadata, serialize_ledger_metadata

    md = parse_ledger_metadata(data)
    again = parse_ledger_metadata(serialize_ledger_metadata(md, md.format_version))
    assert again == md, (again, md)


def _cookie_seeds() -> list[bytes]:
    return (
        _zk("ledgers__cookies__")
        + _vector_files("disk", "bk1__*VERSION.bin")
        + [b"3\n127.0.0.1:3181\n/data/j\n/data/l\n"]
    )


@target(seeds=_cookie_seeds)
def cookie(data: bytes) -> None:
    """A cookie (ZooKeeper or a VERSION file) of layout 3, 4 or 5; what parses is written back and reads the same."""
    from bkctl.wire.metadata.cookie import parse_cookie

    c = parse_cookie(data)
    assert parse_cookie(c.serialize()) == c


@target(seeds=lambda: _zk("ledgers__LAYOUT") + _zk("ledgers__available__"))
def cluster_znodes(data: bytes) -> None:
    """LAYOUT, a bookie's service info, an entry availability list."""
    from bkctl.wire.codecs.availability import decode_availability
    from bkctl.wire.metadata.layout import parse_layout
    from bkctl.wire.metadata.serviceinfo import parse_service_info

    for parse in (parse_layout, parse_service_info, decode_availability):
        try:
            parse(data)
        except CodecError:
            pass


def _digest_seeds() -> list[bytes]:
    from bkctl.wire.codecs.digest import DigestManager, DigestType

    out = []
    for t in DigestType:
        dm = DigestManager(1, t, b"pw")
        out.append(bytes((t,)) + dm.package(3, 2, 40, b"payload"))
    return out


@target(declared=(DigestError,), seeds=_digest_seeds)
def entry_digest(data: bytes) -> None:
    """A packaged entry's digest checked (the first byte: the digest type)."""
    from bkctl.wire.codecs.digest import DigestManager, DigestType

    if not data:
        return
    types = list(DigestType)
    dm = DigestManager(1, types[data[0] % len(types)], b"pw")
    body = data[1:]
    dm.verify(body)
    dm.verify_lac(body)


# ------------------------------------------------------------------ bookied's files


def _scratch() -> str:
    """A folder for the targets' files: $BKCTL_FUZZ_SCRATCH (bench/fuzz.py's work folder), else in memory."""
    base = os.environ.get("BKCTL_FUZZ_SCRATCH")
    if base is None and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        base = "/dev/shm"
    return tempfile.mkdtemp(prefix="bkctl-fuzz-", dir=base)


_DIR = None


def _file(name: str, data: bytes) -> str:
    global _DIR
    if _DIR is None:
        _DIR = _scratch()
        atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
    path = os.path.join(_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _journal_seeds() -> list[bytes]:
    from bkctl.bookied import journal as j

    recs = [
        j.MasterKeyRecord(1, b"k" * 20),
        j.EntryRecord(1, 0, b"e" * 40),
        j.FenceRecord(1),
        j.ExplicitLacRecord(1, b"l" * 16),
        j.EntryRecord(2, 5, b""),
    ]
    body = b"".join(j.encode_record(r) for r in recs)
    head = j.encode_header(1)
    return [head + body, head + body + bytes(64), head + body[:-3]]


@target(declared=(), seeds=_journal_seeds)
def bookied_journal(data: bytes) -> None:
    """One of bookied's journal files, scanned as replay scans it: never an error, records up to the damage."""
    from bkctl.bookied import journal as j

    path = _file(j.file_name(1), data)
    scan = j.FileScan(path)
    last = j.HEADER_SIZE - 1
    for offset, rec in j.scan_file(path, 0, scan):
        assert offset > last
        last = offset
        assert isinstance(rec, (j.EntryRecord, j.MasterKeyRecord, j.FenceRecord, j.ExplicitLacRecord))
    assert scan.end <= len(data)


def _entry_log_seeds() -> list[bytes]:
    from bkctl.bookied.storage import entry_log as el

    recs = b"".join(el.encode_log_record(1, i, b"x" * (10 + i)) for i in range(3))
    return [el.encode_log_header(1) + recs, el.encode_log_header(1) + recs[:-1]]


@target(declared=(), seeds=_entry_log_seeds)
def bookied_entry_log(data: bytes) -> None:
    """One of bookied's entry logs, scanned (for compaction and ``bookie check``), and each
    record read back by its location as a read does: what the scan gives checks out."""
    from bkctl.bookied.storage import entry_log as el

    path = _file(el.log_name(1), data)
    for offset, length, ledger_id, entry_id, body in el.scan_log(path):
        record = data[offset : offset + length]
        assert el.check_record(record, ledger_id, entry_id, 1, offset, length) == body
    for at in range(el.LOG_HEADER_SIZE, min(len(data), el.LOG_HEADER_SIZE + 64), 8):
        record = data[at : at + 48]
        try:
            el.check_record(record, 1, 0, 1, at, 48)
        except OSError:  # EntryCorrupted: the read answers EIO
            pass


# ------------------------------------------------------------------ Java's files


@target(seeds=lambda: _vector_files("disk", "*.txn.head.bin", 2048))
def java_journal(data: bytes) -> None:
    """A Java journal (.txn) as ``bkctl bookie inspect`` reads it."""
    from bkctl.wire.codecs.javadisk import scan_journal

    _version, records = scan_journal(data)
    for n, _rec in enumerate(records):
        assert n <= len(data)


@target(seeds=lambda: _vector_files("disk", "*.log.bin"))
def java_entry_log(data: bytes) -> None:
    """A Java entry log (.log): header, scan, and reads at the offsets the scan gives."""
    from bkctl.wire.codecs.digest import entry_header
    from bkctl.wire.codecs.javadisk import entry_log_header, read_entry_at, scan_entry_log

    entry_log_header(data)
    for e in scan_entry_log(data):
        assert read_entry_at(data, e.offset) == e.data
        try:
            entry_header(e.data)
        except CodecError:
            pass


def _index_seeds() -> list[bytes]:
    return (
        _vector_files("disk", "*.idx.bin", 1024 + 64)
        + _vector_files("disk", "*lastMark.bin")
        + _vector_files("disk", "*lastId.bin")
    )


@target(seeds=_index_seeds)
def java_index(data: bytes) -> None:
    """A Java index file (.idx: header and location pages), lastMark, lastId and DbLedgerStorage's rows."""
    from bkctl.wire.codecs import javadisk as jd

    for parse in (
        jd.parse_index,
        jd.parse_last_mark,
        jd.parse_last_id,
        jd.parse_db_ledger_data,
        jd.parse_db_location,
        jd.parse_db_location_key,
    ):
        try:
            parse(data)
        except CodecError:
            pass


# ------------------------------------------------------------------ a backup's archive


def _archive_c():
    """``_archive`` (C) as the twin selector loads it, None where it is not built."""
    return fastpath.build(True).archive_reader.c


def _data_object(ledger_id: int, sizes: list[int], first_byte: int = 0) -> bytes:
    """A data object as a backup writes it (DataWriter): ledger ``ledger_id``'s entries of ``sizes``."""
    import io

    from bkctl.wire.backup.archive import DataWriter

    out = io.BytesIO()
    w = DataWriter(out, ledger_id)
    w.add_batch([(i, bytes((first_byte + i + k) % 256 for k in range(n))) for i, n in enumerate(sizes)])
    return out.getvalue()


def _entry_run_seeds() -> list[bytes]:
    body = _data_object(7, [0, 1, 5, 100, 300])[16:]
    later = _data_object(7, [3, 0, 40])[16:]  # entries 0..2, read from entry 0 or (flag 1) from the id the input says
    return [
        b"\x00" + body,
        b"\x00" + body[:-3],
        b"\x00" + body[:40] + bytes([body[40] ^ 4]) + body[41:],
        b"\x80" + body,
        b"\x01" + (2**64 - 1).to_bytes(8, "big") + later,
        b"\x01" + (5).to_bytes(8, "big") + later,
    ]


@target(declared=(), seeds=_entry_run_seeds)
def archive_entry_run(data: bytes) -> None:
    """A data object's entries decoded a run at a time (data_read.DecodeRun): ``_archive.c``'s
    entry_run against its Python twin py_entry_run on the same bytes, position and expected id
    -- the same run, fields alike -- and the run what its fields say (skipped where the C one is
    not built).  The first byte: bit 0, the expected id in the next 8 bytes (else 0); bits 1-6
    the position; bit 7, 64 KiB of zeros after the bytes (the walk without the GIL)."""
    from bkctl.wire.backup.data_read import RUN_BAD_CRC, RUN_BAD_ID, RUN_NEEDS_BYTES, py_entry_run

    c = _archive_c()
    if c is None or not data:
        return
    flags, buf = data[0], data[1:]
    expected = 0
    if flags & 1:
        expected, buf = int.from_bytes(buf[:8], "big"), buf[8:]
    if flags & 0x80:
        buf += bytes(64 << 10)
    pos = (flags >> 1) & 0x3F
    want = py_entry_run(buf, pos, expected)
    got = c.entry_run(py_entry_run, buf, pos, expected)
    assert tuple(got) == tuple(want), (got, want)
    assert got.next_id == expected + len(got.payloads) and got.size == sum(map(len, got.payloads))
    assert len(got.heads) == 16 * len(got.payloads) and got.end >= pos
    assert got.stop in (RUN_NEEDS_BYTES, RUN_BAD_ID, RUN_BAD_CRC)
    if pos <= len(buf):
        assert got.end == pos + len(got.heads) + got.size
    if got.stop == RUN_NEEDS_BYTES:
        assert got.need >= 16 and got.end + got.need > len(buf) and not got.found
    else:
        assert got.end + 16 <= len(buf) and not got.need


def _read_seeds() -> list[bytes]:
    whole = _data_object(7, [0, 1, 5, 100, 300, 2])
    return [
        b"\x00" + whole,
        b"\x05" + whole,
        b"\x00" + whole[:-1],
        b"\x00" + whole[:50] + b"\xff" + whole[51:],
        b"\x00" + whole[: 16 + 8] + b"\x7f" + whole[16 + 9 :],  # entry 0's length field
        b"\x00" + _data_object(8, [1]),
        b"\x00" + whole[:10],
    ]


class _Pieces:
    """A data object read at most ``most`` bytes a call (a stream that answers short)."""

    def __init__(self, data: bytes, most: int):
        self.data, self.at, self.most = data, 0, most
        self.asked = 0  # the most bytes a read asked for

    def read(self, n: int = -1) -> bytes:
        n = len(self.data) - self.at if n < 0 else n
        self.asked = max(self.asked, n)
        piece = self.data[self.at : self.at + min(n, self.most)]
        self.at += len(piece)
        return piece

    def close(self) -> None:
        pass


def _read_all(
    data: bytes, most: int, reader, sha: str | None, size: int | None = None
) -> tuple[list[tuple[int, bytes]], str | None]:
    """What read_data gives of ledger 7's object ``data``: its entries, and the ArchiveDamaged it
    ends with (told its ``size``: having asked no read for more than a block or the object)."""
    from bkctl.wire.backup.data_read import READ_BLOCK, read_data
    from bkctl.wire.errors import ArchiveDamaged

    got: list[tuple[int, bytes]] = []
    stream = _Pieces(data, most)
    try:
        got.extend(read_data(stream, 7, sha, reader, size))
    except ArchiveDamaged as exc:
        assert str(exc).startswith("ledger 7"), exc
        return got, str(exc)
    finally:
        assert size is None or stream.asked <= max(READ_BLOCK, size), (stream.asked, size)
    return got, None


@target(declared=(), seeds=_read_seeds)
def archive_read(data: bytes) -> None:
    """A data object (ledger 7's) read as a restore reads it (read_data): its entries and then
    an ArchiveDamaged naming the ledger, or all of them -- nothing else escapes; the C and the
    Python readers give the same entries and the same error; a wrong index SHA-256 is always
    an error, and the object's own one only where it was read whole; told the object's size,
    the reader says the same, having read no block past it.  The first byte: the most bytes
    the stream gives a read (0: all it is asked for)."""
    import hashlib
    import struct

    from bkctl.wire.backup.data_read import PY_READER, reader_of
    from bkctl.wire.codecs.checksums import crc32c

    if not data:
        return
    most = data[0] * 3 or len(data)
    obj = data[1:]
    entries, error = _read_all(obj, most, PY_READER, None)
    c = _archive_c()
    if c is not None:
        assert _read_all(obj, most, reader_of(c), None) == (entries, error)
    assert _read_all(obj, most, PY_READER, None, len(obj)) == (entries, error)
    _, wrong = _read_all(obj, most, PY_READER, "0" * 64)
    assert wrong is not None
    if error is None:  # the index: the header and every entry's head
        index = obj[:16] + b"".join(struct.pack(">QII", n, len(p), crc32c(p)) for n, p in entries)
        assert _read_all(obj, most, PY_READER, hashlib.sha256(index).hexdigest()) == (entries, None)


def _batch_of(data: bytes) -> tuple[list, int]:
    """A batch and the expected id the input spells: the first byte's bit 0, the expected id in
    the next 8 bytes (signed; else 0), bits 1-3 an entry of another shape (a list, a bytearray,
    a float id); then for each entry a byte (its id: 0 the next, 1 the last one's again, 2 in the
    next 8 bytes, signed, 3 one past the next; its payload's length: the byte's upper 6 bits),
    and its payload."""
    flags, rest = data[0], data[1:]
    expected = 0
    if flags & 1:
        expected, rest = int.from_bytes(rest[:8], "big", signed=True), rest[8:]
    batch: list = []
    at, entry = 0, expected - 1
    while at < len(rest):
        b = rest[at]
        at += 1
        how, n = b & 3, b >> 2
        if how == 0:
            entry += 1
        elif how == 2:
            entry, at = int.from_bytes(rest[at : at + 8], "big", signed=True), at + 8
        elif how == 3:
            entry += 2
        batch.append((entry, rest[at : at + n]))
        at += n
    if batch:
        odd = batch[len(batch) // 2]
        if flags & 2:
            batch[len(batch) // 2] = list(odd)
        if flags & 4:
            batch[len(batch) // 2] = (odd[0], bytearray(odd[1]))
        if flags & 8:
            batch[len(batch) // 2] = (float(odd[0]), odd[1])
    return batch, expected


def _parts_outcome(parts, batch: list, expected: int):
    try:
        return parts(batch, expected)
    except Exception as exc:  # what the Python twin raises, the C one must raise alike
        return type(exc), str(exc)


def _parts_seeds() -> list[bytes]:
    plain = b"".join(bytes((n << 2,)) + bytes(range(n)) for n in (0, 1, 5, 63, 2))
    return [
        b"\x00" + plain,
        b"\x01" + (41).to_bytes(8, "big") + plain,
        b"\x01" + (2**63 - 2).to_bytes(8, "big") + plain,
        b"\x00" + plain + b"\x01\x07" + plain,
        b"\x00"
        + b"\x02"
        + (2**63 - 1).to_bytes(8, "big", signed=True)
        + b"\x02"
        + (-(2**63)).to_bytes(8, "big", signed=True),
        b"\x0e" + plain,
    ]


@target(declared=(), seeds=_parts_seeds)
def archive_parts_twins(data: bytes) -> None:
    """A batch's entries as a backup writes them (archive.ArchiveParts): ``_archive.c``'s
    archive_parts against its Python twin py_archive_parts on the same batch and expected id
    -- the same parts and size, or the same error -- and what the parts hold reads back as the
    entries taken (py_entry_run) (skipped where the C one is not built)."""
    from bkctl.wire.backup.archive import py_archive_parts
    from bkctl.wire.backup.data_read import RUN_NEEDS_BYTES, py_entry_run

    c = _archive_c()
    if c is None or not data:
        return
    batch, expected = _batch_of(data)
    want = _parts_outcome(py_archive_parts, batch, expected)
    got = _parts_outcome(functools.partial(c.archive_parts, py_archive_parts), batch, expected)
    assert got == want, (got, want)
    if isinstance(want[0], list) and expected >= 0:
        parts, size = want
        taken = len(parts) // 2
        run = py_entry_run(b"".join(parts), 0, expected)
        assert run.payloads == [bytes(p) for _, p in batch[:taken]] and run.size == size
        assert (run.next_id, run.stop, run.need) == (expected + taken, RUN_NEEDS_BYTES, 16)
        assert taken == len(batch) or batch[taken][0] != expected + taken


def _manifest_seeds() -> list[bytes]:
    from bkctl.wire.backup import archive as a

    record = a.LedgerRecord(
        5, "none", 1, 0, 0, "CLOSED", 3, 2, 2, "CRC32C", a.b64(b"pw"), {"k": a.b64(b"v")}, a.b64(b"md"), "", "", 0, 9
    )
    stored: dict[str, bytes] = {}
    lines = a.ChunkWriter("b1", stored.__setitem__)
    lines.add(a.ManifestLedger(5, record.name, 0, 0, True, record))
    lines.add(a.ManifestLedger(9, "ledgers/9/none-1-3.json", 3, 30, False))
    notes = a.NoteWriter("b1", stored.__setitem__)
    notes.add(a.LedgerNote(11, "missing"))
    notes.add(a.LedgerNote(12, "unreadable", "no bookie"))
    head = dict(
        id="b1",
        started=1,
        finished=2,
        source={"zk": "x"},
        selection={"all": True},
        ledgers=[],
        topics=[a.TopicRecord("t/n/x", a.b64(b"ml"), {"c": a.b64(b"cur")})],
        schemas=[a.ValueRecord("s", a.b64(b"v"))],
        partitioned=[],
        missing=[],
        deleted={"topics": []},
    )
    v3 = a.Manifest(**head, chunks=lines.finish(), counts=dict(lines.counts, missing=1), notes=notes.finish())
    v1 = a.Manifest(
        **dict(
            head,
            ledgers=[a.ManifestLedger(9, "ledgers/9/none-1-3.json", 3, 30, True)],
            missing=[4],
            deleted={"ledgers": [2], "topics": []},
        ),
        format=a.MANIFEST_FORMAT_V1,
        unreadable=[a.UnreadableLedger(6, "gone")],
    )
    v2 = a.Manifest(**head, format=a.MANIFEST_FORMAT_V2, chunks=v3.chunks, counts=v3.counts)
    return [v3.encode(), v1.encode(), v2.encode(), record.encode(), a.encode_marker(5), *stored.values()]


def _ref_of(data: bytes):
    """A chunk's entry in its manifest that fits ``data``: its SHA-256, its lines, the ids of its
    first and last lines where they are JSON objects with one (so that the fuzzer reaches the lines)."""
    import json

    from bkctl.wire.backup.archive import ChunkRef

    lines = data.splitlines()

    def first_id(line: bytes) -> int:
        try:
            doc = json.loads(line)
        except ValueError:
            return -1
        return doc.get("ledger_id", -1) if isinstance(doc, dict) else -1

    ends = (first_id(lines[0]), first_id(lines[-1])) if lines else (-1, -1)
    return ChunkRef("chunks/b1/000000.jsonl", *ends, len(lines), hashlib.sha256(data).hexdigest())


def _declared_archive() -> tuple[type[BaseException], ...]:
    from bkctl.wire.errors import ArchiveDamaged

    return (ArchiveDamaged,)


@target(declared=(), seeds=_manifest_seeds)
def archive_manifest(data: bytes) -> None:
    """An archive's marker, a backup's manifest, a chunk of its ledger lines and one of its
    notes, a ledger's record, as a restore decodes them (check_marker, Manifest.decode,
    decode_chunk, decode_notes, LedgerRecord.decode): ArchiveDamaged or what the readers use
    -- a manifest's totals and counts, a record's password and custom metadata, a ledger
    line's inline record -- of the types its fields say; a manifest written again reads the
    same."""
    from bkctl.wire.backup import archive as a

    damaged = _declared_archive()
    for check in (
        a.check_marker,
        lambda d: _used_manifest(a.Manifest.decode(d, "m")),
        lambda d: _used_record(a.LedgerRecord.decode(d, "r")),
        lambda d: [_used_line(x) for x in a.decode_chunk(d, _ref_of(d))],
        lambda d: [_used_note(x) for x in a.decode_notes(d, _ref_of(d))],
    ):
        try:
            check(data)
        except damaged:
            pass


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _used_manifest(m) -> None:
    from bkctl.wire.backup.archive import Manifest

    assert isinstance(m.id, str) and _is_int(m.started) and _is_int(m.finished)
    assert all(_is_int(v) for v in m.totals().values()) and all(_is_int(v) for v in m.note_counts().values())
    for x in m.ledgers:
        _used_line(x)
    for t in m.topics:
        assert isinstance(t.managed_ledger, str) and isinstance(t.value_b64, str) and isinstance(t.cursors_b64, dict)
    for ref in m.chunks + m.notes:
        assert isinstance(ref.name, str) and isinstance(ref.sha256, str) and _is_int(ref.ledgers)
    assert all(_is_int(x) for x in m.missing) and all(_is_int(x.ledger_id) for x in m.unreadable)
    assert Manifest.decode(m.encode(), "again") == m


def _used_record(r) -> None:
    assert _is_int(r.ledger_id) and _is_int(r.entries) and _is_int(r.ctoken) and _is_int(r.data_size)
    assert isinstance(r.data_object, str) and isinstance(r.index_sha256, str) and isinstance(r.name, str)
    assert isinstance(r.password, bytes) and all(isinstance(v, bytes) for v in r.custom_metadata.values())
    assert _is_int(r.ensemble_size) and _is_int(r.write_quorum) and _is_int(r.ack_quorum)
    assert isinstance(r.digest_type, str) and isinstance(r.state, str) and isinstance(r.metadata_b64, str)


def _used_line(x) -> None:
    assert _is_int(x.ledger_id) and isinstance(x.record, str) and _is_int(x.entries) and _is_int(x.payload_bytes)
    assert isinstance(x.copied, bool) and isinstance(x.to_json(), dict)
    if x.inline is not None:
        _used_record(x.inline)


def _used_note(x) -> None:
    from bkctl.wire.backup.archive import NOTE_KINDS

    assert _is_int(x.ledger_id) and x.kind in NOTE_KINDS and isinstance(x.error, str)


# ------------------------------------------------------------------ Pulsar


def _pulsar_seeds() -> list[bytes]:
    from tests.support import pulsar_entries as pe

    out = []
    for case in pe.cases():
        out += pe.case_entries(case)[:2]
    out += pe.case_entries("a_plain", "entries_with_broker_entry_metadata")[:1]
    return out


@target(seeds=_pulsar_seeds)
def pulsar_entry(data: bytes) -> None:
    """A stored Pulsar entry: decoded (CorruptEntry is declared), and fed to a topic
    decoder, which never raises (a bad entry is an error row)."""
    from bkctl.wire.pulsar.entry import decode_entry
    from bkctl.wire.pulsar.errors import CorruptEntry
    from bkctl.wire.pulsar.messages import TopicDecoder

    dec = TopicDecoder("persistent://t/n/x", splitter=fastpath.selected().batch_rows)
    dec.add(1, 0, data)
    dec.finish()
    dec.take_parts()
    try:
        decode_entry(data, verify=False)  # past a wrong checksum too (``bkctl pulsar`` reads metadata so)
    except CorruptEntry:
        pass
    decode_entry(data)


def _batch_table(data: bytes, splitter):
    import pyarrow as pa

    from bkctl.export.columns import arrow_schema
    from bkctl.export.topic_source import record_batch
    from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
    from bkctl.wire.pulsar.messages import TopicDecoder

    schema = arrow_schema(MESSAGE_COLUMNS)  # the decoder's parts: schema_version as stored
    dec = TopicDecoder("persistent://t/n/x", 0, splitter=splitter)
    dec.add(1, 0, data)
    dec.finish()
    parts = dec.take_parts()
    table = pa.Table.from_batches([record_batch(p, schema) for p in parts], schema=schema)
    return table.combine_chunks(), [str(p) for p in dec.problems], (dec.messages, dec.payload_bytes)


def _batch_seeds() -> list[bytes]:
    from bkctl.wire.proto import pulsar_api_pb2 as pb
    from tests.support import pulsar_entries as pe

    out = [e for case in pe.cases() if "batch" in case for e in pe.case_entries(case)[:1]]
    msgs = [
        (pb.SingleMessageMetadata(partition_key="k", event_time=5), b"one"),
        (pb.SingleMessageMetadata(null_value=True), b""),
        (pb.SingleMessageMetadata(properties=[pb.KeyValue(key="a", value="b")], sequence_id=9), b"three"),
    ]
    md = pe.metadata("p", 1, 1000, num_messages_in_batch=len(msgs))
    out.append(pe.encode_entry(md, pe.batch_payload(msgs)))
    return out


@target(declared=(), seeds=_batch_seeds)
def pulsar_batch_twins(data: bytes) -> None:
    """A batch entry split by the C splitter and by its Python twin: the same rows and problems
    (skipped, i.e. nothing checked, where the C one is not built or fast paths are off)."""
    from bkctl.wire import fastpath
    from bkctl.wire.pulsar.rows import PyMessageRows

    BatchRows = fastpath.selected().batch_rows
    if BatchRows is PyMessageRows:
        return
    fast, fast_problems, fast_counts = _batch_table(data, BatchRows)
    general, general_problems, general_counts = _batch_table(data, PyMessageRows)
    assert fast_problems == general_problems, (fast_problems, general_problems)
    assert fast_counts == general_counts
    assert fast.equals(general), (fast.to_pylist(), general.to_pylist())


def _managed_ledger_seeds() -> list[bytes]:
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    out = _vector_files("pulsar/zk", "*.bin")
    out.append(ml.PositionInfo(ledgerId=3, entryId=4).SerializeToString())
    out.append(b'{"partitions": 3}')
    return out


@target(seeds=_managed_ledger_seeds)
def managed_ledger(data: bytes) -> None:
    """ManagedLedgerInfo, ManagedCursorInfo, PositionInfo and partitioned-topic metadata."""
    from bkctl.wire.pulsar import managed_ledger as m
    from bkctl.wire.pulsar.errors import PulsarFormatError

    for parse in (
        m.parse_managed_ledger_info,
        m.parse_cursor_info,
        m.parse_position_info,
        m.parse_partitioned_topic_metadata,
    ):
        try:
            parse(data)
        except PulsarFormatError:
            pass
    try:
        info = m.parse_cursor_info(data)
        m.CursorState.of(info).to_json()
    except PulsarFormatError:
        pass


def seeds(name: str) -> list[bytes]:
    return TARGETS[name].seeds()


__all__ = ["CORPUS", "TARGETS", "Target", "corpus", "keep", "run", "seeds"]
