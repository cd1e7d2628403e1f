"""Pipelined plain reads of one ledger, v3 and v2 (a Pulsar broker reads over v2), served
with one store call, with the C twins or (fast paths off) the Python ones
(bookied/plain_reads.py): every answer and the metrics as each read served on its own
gives them (a connection under an in-progress limit), in the order asked -- entries flushed, cached,
missing, corrupt (EIO), the highest (-1), another ledger's, a request only the general
path takes.  With Twisted's fakes, as test_bookie_server.py."""

from collections import Counter

import pytest

from bkctl.bookied.in_progress import InProgressLimit
from bkctl.bookied.metrics import Metrics
from bkctl.bookied.storage import log_name
from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, Flag
from tests.support.bookie_server import KEY, bookie_env, entry

IDS = [0, 2, 4, 5, 6, 13, 20, -1, 8, 14, 3, 2]
#: what the reads of IDS, with another ledger's read before the ninth, are answered
RCS = [
    RC.EOK,
    RC.EOK,
    RC.EOK,
    RC.EIO,
    RC.EOK,
    RC.EOK,
    RC.ENOENTRY,
    RC.EOK,
    RC.ENOLEDGER,
    RC.EOK,
    RC.EOK,
    RC.EOK,
    RC.EOK,
]


@pytest.fixture
def env(tmp_path):
    with bookie_env(tmp_path / "ledgers") as e:
        yield e


def _stored(env, add):
    """Entries 0-11 of ledger 1 flushed (entry 5's record corrupt), 12-14 in the write
    cache; ``add(c, i)`` sends the add of entry i."""
    c = env.connect()
    for i in range(12):
        add(c, i)
    env.journal.sync()
    env.store.flush()
    loc = env.store.location(1, 5)
    with open(f"{env.store.directory}/{log_name(loc.log_id)}", "r+b") as f:
        f.seek(loc.offset + 30)
        f.write(b"\xff\xee")
    for i in range(12, 15):
        add(c, i)
    env.journal.sync()
    c.replies()


def _both_ways(env, chunk: bytes, runs: list, rcs: list) -> list:
    """The answers to ``chunk`` with fast paths on, off, and one by one (under an in-progress
    limit): the same, and so are the metrics (a read counted under each of ``rcs``); with the
    C twins and the Python ones the store is asked for ``runs``, one call each; one by one,
    never in runs."""
    answers, counts, batches = [], [], []
    read_bodies = env.bookie.read_bodies
    env.bookie.read_bodies = lambda ledger, entries: batches.append(list(entries)) or read_bodies(ledger, entries)
    for fastpaths, one_by_one in ((True, False), (False, False), (True, True)):
        env.factory.twins = fastpath.build(fastpaths)
        env.factory.metrics = Metrics()
        env.factory.reads = InProgressLimit(1 << 30) if one_by_one else None
        c = env.connect()
        c.proto.dataReceived(chunk)
        answers.append(c.replies())
        assert batches == ([] if one_by_one else runs)
        batches.clear()
        m = env.factory.metrics
        counts.append(({k: v.value for k, v in m.requests.items()}, m.latency_count("read")))
    assert answers[0] == answers[1] == answers[2]
    assert counts[0] == counts[1] == counts[2] == (dict(Counter(("read", rc.name) for rc in rcs)), len(rcs))
    return answers[0]


def test_pipelined_plain_v3_reads_are_answered_as_the_general_path_answers(env):
    _stored(env, lambda c, i: c.send(v3.serialize(v3.add_request(i + 1, 1, i, KEY, entry(i, lac=i - 1)))))
    reqs = [v3.read_request(100 + n, 1, e) for n, e in enumerate(IDS)]
    reqs[8:8] = [v3.read_request(99, 7, 0)]  # another ledger splits the run
    got = [
        v3.parse_response(a)
        for a in _both_ways(env, b"".join(frame(v3.serialize(r)) for r in reqs), [IDS[:8], [0], IDS[8:]], RCS)
    ]
    assert [r.header.txnId for r in got] == [r.header.txnId for r in reqs]
    assert [r.status for r in got] == [v3.v3_status(rc) for rc in RCS]
    assert got[7].readResponse.body == entry(14, lac=13) and got[7].readResponse.maxLAC == 13
    assert got[5].readResponse.body == entry(13, lac=12)


def test_pipelined_plain_v2_reads_are_answered_as_the_general_path_answers(env):
    _stored(env, lambda c, i: c.send(v2.AddRequest(2, 0, KEY, entry(i, lac=i - 1), 1, i).encode()))
    reqs = [v2.ReadRequest(2, 0, 1, e) for e in IDS]
    reqs[8:8] = [v2.ReadRequest(2, 0, 7, 0)]  # another ledger splits the run
    reqs[11:11] = [v2.ReadRequest(1, 0, 1, 3)]  # so does a version-1 read: the general path's
    # a connection is v3 until a frame does not parse as v3: its first v2 frame is the general path's
    runs = [IDS[1:8], [0], IDS[8:10], IDS[10:]]
    rcs = RCS[:11] + [RC.EOK] + RCS[11:]
    got = [v2.decode_response(a) for a in _both_ways(env, b"".join(frame(r.encode()) for r in reqs), runs, rcs)]
    assert [(r.version, r.ledger_id, r.entry_id) for r in got] == [
        (q.version, q.ledger_id, q.entry_id) for q in reqs
    ]  # -1 is answered as -1, as the general path answers it
    assert [r.rc for r in got] == rcs
    assert got[7].body == entry(14, lac=13) and got[5].body == entry(13, lac=12)
    assert got[11].body == entry(3, lac=2) and got[3].body == b""


def _batch(start, request_id, count, size=1 << 20, ledger=1, version=2, flags=0, key=None):
    return v2.BatchReadRequest(version, flags, ledger, start, request_id, count, size, key)


def test_plain_v2_batch_reads_are_answered_as_the_general_path_answers(env):
    """A version-2 BATCH_READ_ENTRY (fsck's) is served by the plain path with the answers and
    metrics the general path gives: entries flushed and cached, a corrupt one (EIO first,
    or the end of a batch), absent, another ledger's, the highest (-1), budgets too small,
    none, negative and too large, a fenced ledger, and the requests only the general path
    takes (a connection's first frame, version 1, a fencing read)."""
    _stored(env, lambda c, i: c.send(v2.AddRequest(2, 0, KEY, entry(i, lac=i - 1), 1, i).encode()))
    env.store.set_fenced(1)  # a fenced ledger's entries are read as any others
    one = len(entry(1, lac=0))
    reqs = [
        _batch(0, 1, 3),  # the connection's first frame: the general path's
        _batch(0, 2, 3),
        _batch(3, 3, 0),  # no count: up to entry 5, whose record is corrupt
        _batch(5, 4, 2),  # a corrupt first entry: EIO
        _batch(10, 5, 0),  # flushed, then cached
        _batch(13, 6, 9),  # cached, then none
        _batch(20, 7, 3),  # absent
        _batch(0, 8, 3, ledger=7),  # unknown ledger
        _batch(6, 9, 0, 36 + 2 * (4 + one)),  # a budget of two
        _batch(6, 10, 5, -1),  # a negative budget: the first alone
        _batch(0, 11, 0, 1 << 40),  # past Java's maxBatchReadSize
        _batch(-1, 12, 2),  # the highest, then entry 0
        _batch(1, 13, 2, version=1),  # version 1: the general path's
        _batch(2, 14, 2, flags=int(Flag.DO_FENCING), key=KEY),  # fencing: the general path's
        _batch(8, 15, 2),
    ]
    general = []
    batch_read = env.bookie.batch_read
    env.bookie.batch_read = lambda *a, **kw: general.append(a[1]) or batch_read(*a, **kw)
    store_calls = []
    get_entry = env.store.get_entry
    env.store.get_entry = lambda *a: store_calls.append(a) or get_entry(*a)
    rcs = [RC.EOK] * 3 + [RC.EIO, RC.EOK, RC.EOK, RC.ENOENTRY, RC.ENOLEDGER] + [RC.EOK] * 7
    answers, counts, starts = [], [], []
    for fastpaths, one_by_one in ((True, False), (False, False), (True, True)):
        env.factory.twins = fastpath.build(fastpaths)
        env.factory.metrics = Metrics()
        env.factory.reads = InProgressLimit(1 << 30) if one_by_one else None
        c = env.connect()
        c.proto.dataReceived(b"".join(frame(r.encode()) for r in reqs))
        answers.append(c.replies())
        m = env.factory.metrics
        counts.append(({k: v.value for k, v in m.requests.items()}, m.latency_count("batch_read")))
        starts.append((list(general), len(store_calls)))
        general.clear()
        store_calls.clear()
    assert answers[0] == answers[1] == answers[2]
    assert counts[0] == counts[1] == counts[2] == (dict(Counter(("batch_read", rc.name) for rc in rcs)), len(rcs))
    # the plain path served all but the general path's three (and read -1's one by one)
    assert starts[0] == starts[1] == ([0, 1, 2], 2)
    assert starts[2][0] == [r.start_entry_id for r in reqs]
    got = [v2.decode_response(a) for a in answers[0]]
    assert [(r.version, r.request_id, r.ledger_id, r.start_entry_id) for r in got] == [
        (q.version, q.request_id, q.ledger_id, q.start_entry_id) for q in reqs
    ]
    assert [r.rc for r in got] == rcs
    ids = [[int.from_bytes(e[8:16], "big") for e in r.entries] for r in got]
    assert ids == [
        [0, 1, 2],
        [0, 1, 2],
        [3, 4],
        [],
        [10, 11, 12, 13, 14],
        [13, 14],
        [],
        [],
        [6, 7],
        [6],
        list(range(5)),
        [14, 0],
        [1, 2],
        [2, 3],
        [8, 9],
    ]
    assert got[4].entries[2] == entry(12, lac=11)


def test_the_plain_batch_read_parser_takes_only_plain_version_2_requests():
    assert v2.plain_batch_read_request(_batch(4, 9, 3, 100).encode()) == (1, 4, 9, 3, 100)
    high = _batch(4, 9, 3, flags=int(Flag.HIGH_PRIORITY)).encode()
    assert v2.plain_batch_read_request(high) == (1, 4, 9, 3, 1 << 20)
    for other in (
        _batch(4, 9, 3, version=1),
        _batch(4, 9, 3, flags=int(Flag.DO_FENCING), key=KEY),
        _batch(4, 9, 3, flags=int(Flag.DO_FENCING)),
        v2.ReadRequest(2, 0, 1, 4),
    ):
        assert v2.plain_batch_read_request(other.encode()) is None
    assert v2.plain_batch_read_request(_batch(4, 9, 3).encode() + b"x") is None


def test_the_plain_batch_read_answer_is_the_general_encoders_framed():
    for rc, entries in ((RC.EOK, [b"a", b"", b"xyz" * 100]), (RC.ENOENTRY, [])):
        want = frame(v2.BatchReadResponse(2, rc, 5, 7, 1 << 40, tuple(entries)).encode())
        assert v2.batch_read_answer(rc, 5, 7, 1 << 40, entries) == want
