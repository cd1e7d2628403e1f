"""A chunk's consecutive adds (v3, or version 2) of one ledger are served as one run, with the C
twins or (fast paths off) the Python ones (Adds.run, Bookie.add_entries, Journal.append_entries):
one store lock, one journal item, one answer object.  Every outcome must be the one-by-one path's
(a connection under an in-progress limit serves each request on its own): the answers' bytes and
order, the journal's records, the store, the LAC and the metrics."""

import pytest

from bkctl.bookied.adds import Adds
from bkctl.bookied.in_progress import InProgressLimit
from bkctl.bookied.journal import EntryRecord, Journal, encode_record
from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, Flag
from tests.support.bookie_server import KEY, OTHER_KEY, bookie_env, entry


def v3_add(txn, ledger, entry_id, key=KEY, lac=None, recovery=False):
    body = entry(entry_id, lac=entry_id - 1 if lac is None else lac, ledger=ledger)
    return frame(v3.serialize(v3.add_request(txn, ledger, entry_id, key, body, recovery=recovery)))


def durable(env, c, data: bytes) -> None:
    """``data`` sent and its adds made durable: the ledgers' keys stored, as a run needs first."""
    c.proto.dataReceived(data)
    env.journal.sync()


def served(
    tmp_path,
    chunk: bytes,
    fastpaths: bool,
    prepare=None,
    sync=True,
    store_options=None,
    one_by_one=False,
    **options,
):
    """Answers, journal records, metrics and the bookie of one connection sent ``chunk`` at once
    (``one_by_one``: under in-progress limits no chunk reaches, which serve each request apart)."""
    folder = tmp_path / ("one-by-one" if one_by_one else "fast" if fastpaths else "python")
    with bookie_env(folder, store_options, **options) as env:
        env.factory.twins = fastpath.build(fastpaths)
        if one_by_one:
            env.factory.adds, env.factory.reads = InProgressLimit(1 << 30), InProgressLimit(1 << 30)
        c = env.connect()
        if prepare is not None:
            prepare(env, c)
            c.replies()
            env.journal.records.clear()
        runs = []
        add_entries = env.bookie.add_entries
        env.bookie.add_entries = lambda lid, key, run, reply, **kw: (
            runs.append((lid, list(run.entry_ids))),
            add_entries(lid, key, run, reply, **kw),
        )

        def snapshot():
            return {k: v.value for k, v in env.factory.metrics.requests.items()}

        before = snapshot()
        c.proto.dataReceived(chunk)
        if sync:
            env.journal.sync()
        counts = {k: n - before.get(k, 0) for k, n in snapshot().items() if n != before.get(k, 0)}
        stored = {(lid, e): env.store.get_entry(lid, e) for lid in (1, 2) for e in range(8)}
        return (
            c.replies(),
            list(env.journal.records),
            counts,
            stored,
            {lid: env.bookie.lac(lid) for lid in (1, 2)},
            runs,
        )


def both(tmp_path, chunk, **kw):
    """``chunk`` served with the C twins, the Python twins (fast paths off) and one by one: the
    same outcomes; the same runs with either twin, none one by one."""
    fast, python = served(tmp_path, chunk, True, **kw), served(tmp_path, chunk, False, **kw)
    one_by_one = served(tmp_path, chunk, True, one_by_one=True, **kw)
    assert fast[:5] == python[:5] == one_by_one[:5]
    assert python[5] == fast[5]
    assert one_by_one[5] == []
    return fast


def test_runs_of_adds_are_answered_stored_and_journaled_as_one_by_one_adds(tmp_path):
    chunk = (
        b"".join(v3_add(10 + e, 1, e) for e in range(5))
        + v3_add(20, 2, 0)
        + v3_add(21, 2, 1)
        + frame(v3.serialize(v3.read_request(30, 1, 2)))
        + v3_add(22, 1, 5)
    )

    def ledger1_key(env, c):
        durable(env, c, v3_add(1, 1, 7))

    answers, records, counts, stored, lacs, runs = both(tmp_path, chunk, prepare=ledger1_key)
    # ledger 2 is new: its first add stores the key one by one; ledger 1's run is one item
    assert runs == [(1, [0, 1, 2, 3, 4]), (2, [0, 1])]
    got = [v3.parse_response(a) for a in answers]
    # the read is answered at once, the adds once their journal group is durable
    assert [r.header.txnId for r in got] == [30, 10, 11, 12, 13, 14, 20, 21, 22]
    assert all(r.status == v3.v3_status(RC.EOK) for r in got)
    assert [(r.ledger_id, r.entry_id) for r in records if isinstance(r, EntryRecord)] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (1, 3),
        (1, 4),
        (2, 0),
        (2, 1),
        (1, 5),
    ]
    assert counts == {("add", "EOK"): 8, ("read", "EOK"): 1}
    assert stored[(1, 3)] == entry(3, lac=2) and stored[(2, 1)] == entry(1, lac=0, ledger=2)
    assert lacs == {1: 6, 2: 0}  # the highest LAC the entries carried (entry 7's: 6)


@pytest.mark.parametrize("case", ["fenced", "wrong key", "journal full", "journal failed", "read-only"])
def test_a_run_that_meets_an_error_answers_each_add_as_the_one_by_one_path(tmp_path, case):
    def prepare(env, c):
        durable(env, c, v3_add(1, 1, 7))
        if case == "fenced":
            env.store.set_fenced(1)
        elif case == "journal full":
            env.journal.full = True
        elif case == "journal failed":
            env.journal.failed = OSError(5, "EIO")
        elif case == "read-only":
            env.bookie.mark_readonly("disk", "full")

    key = OTHER_KEY if case == "wrong key" else KEY
    chunk = b"".join(v3_add(10 + e, 1, e, key=key) for e in range(4))
    # a full journal is waited for (next test) unless dbStorage_maxThrottleTimeMs is 0
    answers, records, *_ = both(tmp_path, chunk, prepare=prepare, max_throttle_time=0)
    want = {
        "fenced": RC.EFENCED,
        "wrong key": RC.EUA,
        "journal full": RC.ETOOMANYREQUESTS,
        "journal failed": RC.EIO,
        "read-only": RC.EREADONLY,
    }[case]
    assert [v3.parse_response(a).status for a in answers] == [v3.v3_status(want)] * 4
    assert [v3.parse_response(a).header.txnId for a in answers] == [10, 11, 12, 13]
    assert records == []


@pytest.mark.parametrize("fastpaths", [True, False])
def test_a_run_that_finds_the_journal_full_waits_for_it_in_order(tmp_path, fastpaths):
    with bookie_env(tmp_path, max_throttle_time=10.0) as env:
        env.factory.twins = fastpath.build(fastpaths)
        c = env.connect()
        durable(env, c, v3_add(1, 1, 7))
        c.replies()
        env.journal.full = True
        c.proto.dataReceived(b"".join(v3_add(10 + e, 1, e) for e in range(4)))
        assert c.replies() == [] and env.bookie.throttled_adds == 4
        env.journal.full = False
        env.bookie.journal_progressed()
        env.clock.advance(0)
        env.journal.sync()
        got = [v3.parse_response(a) for a in c.replies()]
        assert [(r.header.txnId, r.status) for r in got] == [(10 + e, 0) for e in range(4)]
        assert [r.entry_id for r in env.journal.records if isinstance(r, EntryRecord)] == [7, 0, 1, 2, 3]


def test_recovery_adds_to_a_fenced_ledger_pass_as_a_run(tmp_path):
    def fence(env, c):
        durable(env, c, v3_add(1, 1, 7))
        env.store.set_fenced(1)

    chunk = b"".join(v3_add(10 + e, 1, e, recovery=True) for e in range(3)) + v3_add(13, 1, 3)
    answers, records, *_, runs = both(tmp_path, chunk, prepare=fence)
    assert runs == [(1, [0, 1, 2])]  # a plain add's flags differ: not in the run
    got = [v3.parse_response(a) for a in answers]  # the refusal is answered at once
    assert [(r.header.txnId, r.status) for r in got] == [(13, v3.v3_status(RC.EFENCED)), (10, 0), (11, 0), (12, 0)]


def test_no_answer_before_the_runs_journal_item_is_durable(tmp_path):
    chunk = b"".join(v3_add(10 + e, 1, e) for e in range(4))
    answers, records, counts, *_ = served(
        tmp_path, chunk, True, sync=False, prepare=lambda env, c: durable(env, c, v3_add(1, 1, 7))
    )
    assert answers == [] and counts == {} and len(records) == 4


def test_a_write_cache_that_fills_up_mid_run_holds_back_the_rest_in_order(tmp_path):
    """The first adds that fit are journaled; the rest wait for room (dbStorage_maxThrottleTimeMs)."""
    size = len(entry(0))
    with bookie_env(tmp_path, {"write_cache_max_bytes": 4 * size}, max_throttle_time=10.0) as env:
        c = env.connect()
        durable(env, c, v3_add(1, 1, 7))
        c.replies()
        c.proto.dataReceived(b"".join(v3_add(10 + e, 1, e) for e in range(6)))
        assert [r.entry_id for r in env.journal.records if isinstance(r, EntryRecord)] == [7, 0, 1, 2]
        assert env.bookie.throttled_adds == 3
        env.journal.sync()
        assert [v3.parse_response(a).header.txnId for a in c.replies()] == [10, 11, 12]
        env.store.flush()
        env.bookie.write_cache_drained()
        env.journal.sync()
        got = [v3.parse_response(a) for a in c.replies()]
        assert [(r.header.txnId, r.status) for r in got] == [(13, 0), (14, 0), (15, 0)]


def test_a_runs_journal_item_is_the_bytes_of_its_records_and_counts_each(tmp_path):
    bodies = [entry(e, lac=e - 1) for e in range(3)]
    groups = []
    j = Journal(str(tmp_path / "j"), max_group_wait_ms=0, on_group=groups.append, twins=fastpath.selected())
    done = []
    j.start()
    try:
        j.append_entries(1, [0, 1, 2], bodies, done.append)
        j.force(lambda e: None)
    finally:
        j.close()
    assert done == [None] and sum(groups) == 3 and j.stats.records == 3
    replayed = [
        r for r in Journal(str(tmp_path / "j"), twins=fastpath.selected()).replay() if isinstance(r, EntryRecord)
    ]
    assert replayed == [EntryRecord(1, e, b) for e, b in enumerate(bodies)]
    on_disk = b"".join(encode_record(EntryRecord(1, e, b)) for e, b in enumerate(bodies))
    assert on_disk in b"".join(p.read_bytes() for p in sorted((tmp_path / "j" / "current").glob("*.bjn")))


def v2_add(ledger, entry_id, key=KEY, flags=0):
    return frame(
        v2.AddRequest(2, flags, key, entry(entry_id, lac=entry_id - 1, ledger=ledger), ledger, entry_id).encode()
    )


def test_runs_of_version_2_adds_as_pulsar_sends_them_are_answered_as_one_by_one(tmp_path):
    """A Pulsar broker's client speaks version 2: its pipelined adds make runs too, and a
    recovery add (other flags) or another ledger ends one."""

    def keys(env, c):
        durable(env, c, v2_add(1, 7) + v2_add(2, 7))

    chunk = (
        b"".join(v2_add(1, e) for e in range(4))
        + v2_add(2, 0)
        + v2_add(2, 1)
        + v2_add(1, 4, flags=int(Flag.RECOVERY_ADD))
        + v2_add(1, 5)
        + v2_add(1, 6)
    )
    answers, records, counts, stored, lacs, runs = both(tmp_path, chunk, prepare=keys)
    assert runs == [(1, [0, 1, 2, 3]), (2, [0, 1]), (1, [5, 6])]
    got = [v2.decode_response(a) for a in answers]
    assert [(r.ledger_id, r.entry_id, r.rc) for r in got] == [
        (1, 0, 0),
        (1, 1, 0),
        (1, 2, 0),
        (1, 3, 0),
        (2, 0, 0),
        (2, 1, 0),
        (1, 4, 0),
        (1, 5, 0),
        (1, 6, 0),
    ]
    assert all(r.version == 2 for r in got)
    assert counts == {("add", "EOK"): 9}
    assert lacs == {1: 6, 2: 6}


def test_a_version_2_run_on_a_fenced_ledger_is_efenced_each(tmp_path):
    def fence(env, c):
        durable(env, c, v2_add(1, 7))
        env.store.set_fenced(1)

    answers, records, *_ = both(tmp_path, b"".join(v2_add(1, e) for e in range(3)), prepare=fence)
    assert [(v2.decode_response(a).entry_id, v2.decode_response(a).rc) for a in answers] == [
        (0, RC.EFENCED),
        (1, RC.EFENCED),
        (2, RC.EFENCED),
    ]
    assert records == []


@pytest.mark.parametrize("fastpaths", [True, False])
def test_recovery_adds_alone_are_journaled_as_patient(tmp_path, fastpaths):
    """Re-replication's copies (recovery adds, one by one or in a run, v3 or version 2) may wait
    for company in the journal; an ordinary add never does."""
    with bookie_env(tmp_path) as env:
        env.factory.twins = fastpath.build(fastpaths)
        c3, c2 = env.connect(), env.connect()
        durable(env, c3, v3_add(1, 1, 0))
        durable(env, c2, v2_add(2, 0))
        recovery = int(Flag.RECOVERY_ADD)
        durable(
            env,
            c3,
            b"".join(v3_add(10 + e, 1, e, recovery=True) for e in (1, 2, 3))
            + v3_add(20, 1, 4)
            + v3_add(21, 1, 5, recovery=True),
        )
        durable(env, c2, b"".join(v2_add(2, e, flags=recovery) for e in (1, 2)) + v2_add(2, 3))
        assert env.journal.patient == [1, 2, 3, 5, 1, 2]
        assert len(c3.replies()) == 6 and len(c2.replies()) == 4


@pytest.mark.parametrize("fastpaths", [True, False], ids=["fast", "general"])
def test_every_form_of_a_single_add_reaches_the_bookie_through_one_way_in(tmp_path, fastpaths, monkeypatch):
    """A parsed or taken-apart v3 ADD_ENTRY and version-2 ADD (of the current version and an
    older one) each enter through ``Adds.add``, and are answered as their form asks."""
    with bookie_env(tmp_path) as env:
        env.factory.twins = fastpath.build(fastpaths)
        c = env.connect()
        ways = []
        add = Adds.add
        monkeypatch.setattr(
            Adds,
            "add",
            lambda self, txn_id, ledger_id, entry_id, *a, **kw: (
                ways.append((txn_id, ledger_id, entry_id)),
                add(self, txn_id, ledger_id, entry_id, *a, **kw),
            ),
        )
        c.proto.dataReceived(v3_add(7, 1, 0))
        env.journal.sync()
        [v3_answer] = c.v3()
        assert (v3_answer.header.txnId, v3_answer.status, v3_answer.addResponse.entryId) == (7, 0, 0)
        c.proto.dataReceived(frame(v2.AddRequest(2, 0, KEY, entry(1, lac=0), 1, 1).encode()))
        c.proto.dataReceived(frame(v2.AddRequest(1, 0, KEY, entry(2, lac=1), 1, 2).encode()))
        env.journal.sync()
        assert ways == [(7, 1, 0), (None, 1, 1), (None, 1, 2)]
        assert c.v2() == [v2.AddResponse(2, RC.EOK, 1, 1), v2.AddResponse(1, RC.EOK, 1, 2)]
