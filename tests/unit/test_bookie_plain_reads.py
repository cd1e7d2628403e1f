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
from bkctl.wire.codecs.protocol import RC
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
    read_entries = env.bookie.read_entries
    env.bookie.read_entries = lambda ledger, entries: batches.append(list(entries)) or read_entries(ledger, entries)
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
