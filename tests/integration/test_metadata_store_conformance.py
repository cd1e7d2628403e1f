"""The same behavioural checks on both metadata stores: ZKMetadataStore on the real
ZooKeeper of the test session, and the unit tests' in-memory fake
(tests/support/fake_store.py).  Whatever the unit tests learn from the fake holds on
ZooKeeper, because here the fake has to answer as ZooKeeper does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.cookie import Cookie
from bkctl.wire.metadata.errors import (
    ClusterExists,
    ClusterNotFound,
    CookieExists,
    CookieVersionConflict,
    LedgerExists,
    MetadataStoreError,
    MetadataVersionConflict,
    NoSuchCookie,
    NoSuchLedger,
    NukeRefused,
    VersionConflict,
    ZKUnavailable,
)
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata, serialize_ledger_metadata
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.metadata.store import MetadataStore, StoredManagedLedger, StoredValue, UnderreplicatedMark
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.fake_store import FakeMetadataStore
from tests.support.waiting import wait_for

A, B, C = "127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"


def md(**kw) -> LedgerMetadata:
    return LedgerMetadata.new((A, B), password=b"pw", **kw)


class Sessions:
    """Stores of one kind on one cluster: ``open()`` a started one, ``unstarted()`` one never started;
    ``pulsar_writes(store)`` writes Pulsar's metadata as a broker does (on ZooKeeper, with a raw
    kazoo client of its own)."""

    def __init__(self, kind: str, uri: str | None, zk=None):
        self.kind, self.uri, self.zk = kind, uri, zk
        self.opened: list = []
        self._fake: FakeMetadataStore | None = None

    def pulsar_writes(self, store) -> PulsarBroker:
        return PulsarBroker(store, self.zk if self.kind == "zk" else None)

    def unstarted(self) -> MetadataStore:
        if self.kind == "zk":
            return ZKMetadataStore(self.uri, timeout=20, twins=fastpath.selected())
        return FakeMetadataStore()

    def open(self, session_timeout: float | None = None) -> MetadataStore:
        """A store on the cluster; for the fake (one session), the same object restarted."""
        if self.kind == "zk":
            store = ZKMetadataStore(
                self.uri, timeout=20, session_timeout=session_timeout, twins=fastpath.selected()
            ).start()
            self.opened.append(store)
            return store
        if self._fake is None:
            self._fake = FakeMetadataStore()
        return self._fake.start()

    def expire(self, store) -> None:
        """ZooKeeper expires ``store``'s session (on ZooKeeper: another client takes it over
        and closes it; the store notices at its next ping)."""
        if self.kind == "fake":
            store.expire_session()
            return
        from kazoo.client import KazooClient

        session_id, password = store.client.client_id
        thief = KazooClient(hosts=store.hosts, client_id=(session_id, password))
        thief.start(timeout=20)
        thief.stop()
        thief.close()

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


class PulsarBroker:
    """Writes managed ledgers, cursors and partitioned-topic metadata where Pulsar does."""

    def __init__(self, store, zk):
        self.store, self.zk = store, zk
        self.base = P.managed_ledgers_base(store.root)

    def managed_ledger(self, name: str, value: bytes, cursors: dict[str, bytes] | None = None) -> None:
        if self.zk is None:
            self.store.pulsar.put_managed_ledger(name, value, cursors)
            return
        path = P.managed_ledger_path(self.base, name)
        if self.zk.exists(path):
            self.zk.set(path, value)
        else:
            self.zk.create(path, value, makepath=True)
        for cursor, data in (cursors or {}).items():
            self.zk.create(f"{path}/{cursor}", data)

    def partitioned_topic(self, name: str, value: bytes) -> None:
        if self.zk is None:
            self.store.pulsar.put_partitioned_topic(name, value)
        else:
            self.zk.create(P.partitioned_topic_path(self.base, name), value, makepath=True)


@pytest.fixture(params=["zk", "fake"])
def sessions(request):
    uri = request.getfixturevalue("metadata_uri") if request.param == "zk" else None
    zk = request.getfixturevalue("zk_client") if request.param == "zk" else None
    sessions = Sessions(request.param, uri, zk)
    try:
        yield sessions
    finally:
        sessions.close_all()


@pytest.fixture
def store(sessions):
    return sessions.open()


def test_calls_before_start_are_unavailable(sessions):
    store = sessions.unstarted()
    assert isinstance(store, MetadataStore) and not store.connected
    for call in (
        lambda: store.ledgers.read(1),
        lambda: store.registration.writable_bookies(),
        lambda: store.cookies.get(A),
        lambda: store.underreplication.count(),
    ):
        with pytest.raises(ZKUnavailable):
            call()


def test_ledger_create_read_update_with_versions(store):
    assert store.connected
    assert store.ledgers.create(md(), 7) == (7, 0)
    with pytest.raises(LedgerExists):
        store.ledgers.create(md(), 7)
    read, version = store.ledgers.read(7)
    assert version == 0 and read.ctime is not None  # the znode's, as Java shows it
    assert replace(read, ctime=None) == md()

    closed = read.closed(4, 40)
    assert store.ledgers.update(7, closed, 0) == 1
    with pytest.raises(MetadataVersionConflict) as info:
        store.ledgers.update(7, read.in_recovery(), 0)
    assert info.value.current_version == 1 and info.value.metadata == closed
    assert store.ledgers.read(7) == (closed, 1)  # the losing write changed nothing
    assert store.ledgers.update(7, closed, -1) == 2  # version -1: unconditionally
    assert store.ledgers.read(7)[0].ctime == read.ctime  # a ctime only shown, never stored, stays the znode's

    with pytest.raises(NoSuchLedger):
        store.ledgers.read(8)
    with pytest.raises(NoSuchLedger):
        store.ledgers.update(8, closed, 0)


def test_ledger_bytes_dumped_and_restored_as_they_are(store):
    """What ``ledger metadata dump/restore`` and ``metadata backup/restore`` use: the stored value
    as it is, written back unchanged (checked by decoding it)."""
    store.ledgers.create(md(), 9)
    data, version = store.ledgers.read_bytes(9)
    assert version == 0 and replace(parse_ledger_metadata(data), ctime=None) == md()
    with pytest.raises(NoSuchLedger):
        store.ledgers.read_bytes(10)
    closed = serialize_ledger_metadata(md().closed(4, 40))
    with pytest.raises(LedgerExists):
        store.ledgers.restore_bytes(9, closed)
    assert store.ledgers.restore_bytes(9, closed, overwrite=True) == 1
    assert store.ledgers.read_bytes(9) == (closed, 1)
    assert store.ledgers.restore_bytes(10, closed) == 0 and store.ledgers.read(10)[0].last_entry_id == 4
    with pytest.raises(MetadataStoreError):
        store.ledgers.restore_bytes(11, b"not metadata")
    assert not store.ledgers.exists(11)


def test_ledger_delete_exists_and_ids(store):
    for ledger_id in (2**33, 5, 70_000):
        store.ledgers.create(md(), ledger_id)
    generated, version = store.ledgers.create(md())
    assert version == 0 and store.ledgers.exists(generated)
    assert list(store.ledgers.ids()) == sorted({5, 70_000, 2**33, generated})

    with pytest.raises(MetadataVersionConflict):
        store.ledgers.delete(5, version=3)
    assert store.ledgers.exists(5)
    store.ledgers.delete(5, version=0)
    store.ledgers.delete(5)  # a missing ledger is fine
    store.ledgers.delete(70_000)
    assert not store.ledgers.exists(5) and not store.ledgers.exists(70_000)
    assert list(store.ledgers.ids()) == sorted({2**33, generated})


def test_ledger_ranges_one_per_leaf_of_ten_thousand_ids(store):
    ids = [1, 2, 9_999, 10_000, 25_000, 2**33, 2**33 + 10_000]
    for ledger_id in ids:
        store.ledgers.create(md(), ledger_id)
    ranges = list(store.ledgers.ranges())
    # the hierarchical layout: one leaf znode per 10,000 ids, each listed with one getChildren
    assert [(r.end, sorted(r.ledgers)) for r in ranges] == [
        (9_999, [1, 2, 9_999]),
        (19_999, [10_000]),
        (29_999, [25_000]),
        (2**33 // 10_000 * 10_000 + 9_999, [2**33]),
        ((2**33 + 10_000) // 10_000 * 10_000 + 9_999, [2**33 + 10_000]),
    ]
    assert [i for r in ranges for i in sorted(r.ledgers)] == list(store.ledgers.ids())
    store.ledgers.delete(10_000)  # an emptied leaf lists as an empty range or none: either covers no ledger
    assert [i for r in store.ledgers.ranges() for i in sorted(r.ledgers)] == [
        1,
        2,
        9_999,
        25_000,
        2**33,
        2**33 + 10_000,
    ]


def test_ledger_read_many_in_order_with_the_missing_ones(store):
    for ledger_id in (3, 9, 2**33):
        store.ledgers.create(md(), ledger_id)
    store.ledgers.update(9, store.ledgers.read(9)[0].closed(1, 10), 0)
    got = list(store.ledgers.read_many([2**33, 4, 9, 3]))
    assert [(i, v) for i, _, v in got] == [(2**33, 0), (4, -1), (9, 1), (3, 0)]
    assert got[1][1] is None
    assert [m for _, m, _ in got if m is not None] == [store.ledgers.read(i)[0] for i in (2**33, 9, 3)]
    # a stream of ids streams out, in windows (more ids than one window holds)
    assert [i for i, _, _ in store.ledgers.read_many(iter(range(600)))] == list(range(600))
    assert [i for i, m, _ in store.ledgers.read_many(store.ledgers.ids()) if m is not None] == [3, 9, 2**33]


def test_ledger_walk_reads_every_ledger_in_order_and_counts_them(store):
    for ledger_id in (7, 3, 2**33, 10_000):
        store.ledgers.create(LedgerMetadata.new((A, B) if ledger_id != 3 else (B, C), password=b"pw"), ledger_id)
    seen = []

    class Progress:
        def update(self, *, total):
            seen.append(("total", total))

        def advance(self, n=1):
            seen.append(("advance", n))

    walked = list(store.ledgers.walk(progress=Progress()))
    assert [r.ledger_id for r in walked] == [3, 7, 10_000, 2**33]
    assert [r.metadata for r in walked] == [store.ledgers.read(i)[0] for i in (3, 7, 10_000, 2**33)]
    assert store.ledgers.count() == 4
    assert seen[0] == ("total", 4) and sum(n for what, n in seen if what == "advance") == 4
    # naming: ledgers whose metadata cannot name the bookie are left out undecoded
    assert [r.ledger_id for r in store.ledgers.walk(naming=(C,))] == [3]
    assert [r.ledger_id for r in store.ledgers.walk(naming=(A,))] == [7, 10_000, 2**33]
    assert [r.ledger_id for r in store.ledgers.read_many([3, 4, 7], naming=(C,))] == [3, 4]  # 4: missing


def test_ledger_ids_are_new_and_ascending(store):
    ids = [store.ledger_ids.generate() for _ in range(5)]
    assert ids == sorted(set(ids)) and all(i >= 0 for i in ids)
    created, _ = store.ledgers.create(md())
    assert created not in ids


def test_ledger_ids_drawn_many_at_once_are_new_and_ascending(store):
    before = store.ledger_ids.generate()
    many = store.ledger_ids.generate_many(1203)  # over a batch of ZooKeeper's: three multis
    after = store.ledger_ids.generate()
    assert len(many) == 1203 and many == sorted(set(many)) and before < many[0] and many[-1] < after
    assert store.ledger_ids.generate_many(1) == [after + 1] and store.ledger_ids.generate_many(0) == []


def test_a_registration_that_does_not_parse_names_its_bookie_one_way_or_many(store):
    """A registration node whose value is not a BookieServiceInfo (a protobuf that does not
    parse) is the same MetadataStoreError read alone or with others, naming the bookie."""
    store.registration.register(A, BookieServiceInfo.for_bookie("127.0.0.1", 3181))
    store.registration.register(B, b"\xff\xff\xff", readonly=True)
    for read in (lambda: store.registration.service_info(B), lambda: store.registration.service_infos([A, B])):
        with pytest.raises(MetadataStoreError, match=f"corrupt registration of bookie {B}"):
            read()


def test_registration_lists_and_session_end(sessions, store):
    info = BookieServiceInfo.for_bookie("127.0.0.1", 3181, http_port=8000)
    assert store.registration.writable_bookies() == [] and store.registration.service_info(A) is None
    store.registration.register(A, info)
    store.registration.register(B, readonly=True)
    assert store.registration.writable_bookies() == [A]
    assert store.registration.readonly_bookies() == [B]
    assert store.registration.is_registered(A) and store.registration.is_registered(B)
    assert not store.registration.is_registered(C)
    assert store.registration.service_info(A) == info
    assert store.registration.service_info(B).rpc_address(B) == ("127.0.0.1", 3182)  # legacy: the id
    # the same, of many in one go: writable, read-only and not registered
    many = store.registration.service_infos([A, B, C])
    assert many == {A: info, B: store.registration.service_info(B), C: None}

    store.registration.register(A, info, readonly=True)  # going read-only moves the node
    assert store.registration.writable_bookies() == [] and store.registration.readonly_bookies() == [A, B]
    store.registration.unregister(B)
    assert store.registration.readonly_bookies() == [A]
    with pytest.raises(ValueError):
        store.registration.register("readonly")

    assert store.registration.all_bookies() == []  # every bookie with a cookie, registered or not
    store.cookies.put(C, Cookie(C, ("/j",), ("/l",), "instance"))
    assert store.registration.all_bookies() == [C]

    held_by = store.registration.session_of(A)
    assert held_by is not None and store.registration.session_of(C) is None
    store.close()  # the registrations were the session's
    again = sessions.open()
    assert again.registration.readonly_bookies() == [] and again.registration.session_of(A) is None
    again.registration.register(A)  # a new session's registration: another session id
    assert again.registration.session_of(A) not in (None, held_by)


def test_cookies_with_versions(store):
    cookie = Cookie(A, ("/data/journal",), ("/data/ledgers",), "instance-1")
    grown = Cookie(A, ("/data/journal",), ("/data/ledgers", "/data/more"), "instance-1")
    assert store.cookies.get(A) is None
    with pytest.raises(NoSuchCookie):
        store.cookies.put(A, cookie, version=0)
    assert store.cookies.put(A, cookie) == 0
    with pytest.raises(CookieExists):
        store.cookies.put(A, cookie)
    assert store.cookies.put(A, grown, version=0) == 1
    with pytest.raises(CookieVersionConflict) as info:
        store.cookies.put(A, cookie, version=0)
    assert info.value.current_version == 1 and info.value.cookie == grown
    assert store.cookies.get(A) == (grown, 1)
    assert store.cookies.put(A, cookie.serialize(), version=-1) == 2  # bytes, unconditionally

    with pytest.raises(CookieVersionConflict):
        store.cookies.delete(A, version=1)
    store.cookies.delete(A, version=2)
    assert store.cookies.get(A) is None
    with pytest.raises(NoSuchCookie):
        store.cookies.delete(A)


def test_replication_switch_and_delay(store):
    ur = store.underreplication
    assert ur.is_enabled()
    assert ur.disable() is True and ur.disable() is False and not ur.is_enabled()
    assert ur.enable() is True and ur.enable() is False and ur.is_enabled()
    assert ur.lost_bookie_recovery_delay() is None
    ur.set_lost_bookie_recovery_delay(30)
    assert ur.lost_bookie_recovery_delay() == 30
    for bad in (2**31, True, "5", 1.5):
        with pytest.raises(ValueError):
            ur.set_lost_bookie_recovery_delay(bad)
    assert ur.lost_bookie_recovery_delay() == 30


def test_the_auditor_checks_last_run_times(store):
    from bkctl.wire.metadata import paths as P

    ur = store.underreplication
    assert [ur.check_ctime(c) for c in P.UR_CHECK_CTIMES] == [None, None, None]
    ur.set_check_ctime(P.UR_REPLICAS_CHECK_CTIME, 1_700_000_000_000)
    ur.set_check_ctime(P.UR_REPLICAS_CHECK_CTIME, 1_600_000_000_000)  # set again: replaced, not refused
    assert ur.check_ctime(P.UR_REPLICAS_CHECK_CTIME) == 1_600_000_000_000
    assert ur.check_ctime(P.UR_CHECK_ALL_LEDGERS_CTIME) is None
    with pytest.raises(ValueError):
        ur.check_ctime("lostBookieRecoveryDelay")


def test_underreplication_marks_and_locks(sessions, store):
    ur = store.underreplication
    assert ur.get(7) is None and ur.count() == 0 and ur.acquire("w1") is None
    ur.mark(7, [A])
    ur.mark(7, [A])  # already there: unchanged
    ur.mark(7, [B, A])  # merged
    ur.mark(3, [C])
    assert ur.get(7) == UnderreplicatedMark(7, (A, B), None)
    assert [m.ledger_id for m in ur.marks()] == [3, 7] and ur.count() == 2

    taken, version = ur.acquire("w1", skip=[3])
    assert taken == UnderreplicatedMark(7, (A, B), None) and version == 1  # created, then merged once
    assert ur.lock_holder(7) == "w1" and ur.locks() == {7: "w1"}
    assert list(ur.lock_ctimes()) == [7] and isinstance(ur.lock_ctimes()[7], int)
    assert ur.acquire("w2", skip=[3]) is None  # 7 is locked, 3 skipped

    ur.mark(7, [C])  # re-marked while being replicated
    assert ur.mark_replicated(7, version) is False  # so the mark stays
    assert ur.get(7).replicas == (A, B, C) and ur.lock_holder(7) is None  # the lock is released anyway

    taken, version = ur.acquire("w1", skip=[3])
    assert ur.mark_version(7) == version and ur.mark_version(8) is None
    assert ur.mark_replicated(7, version) is True
    assert ur.get(7) is None and ur.locks() == {} and ur.mark_version(7) is None
    assert ur.mark_replicated(7, version) is True  # gone already: done

    taken, _ = ur.acquire("w1")
    assert taken.ledger_id == 3 and ur.lock_holder(3) == "w1"
    ur.release(3)
    assert ur.lock_holder(3) is None and ur.get(3) is not None

    ur.acquire("w1")
    store.close()  # the locks were the session's; the marks stay
    again = sessions.open().underreplication
    assert again.locks() == {} and again.count() == 1


def test_a_replication_lock_taken_on_an_unmarked_ledger_keeps_workers_off(sessions, store):
    ur = store.underreplication
    assert ur.lock(9, "mover") is True and ur.lock_holder(9) == "mover"
    assert ur.lock(9, "another") is False  # held: a second mover (or worker) stays off
    ur.mark(9, [A])  # the auditor marks it meanwhile: no worker can take it while it is locked
    assert ur.acquire("w1") is None
    ur.release(9)
    taken, _ = ur.acquire("w1")
    assert taken.ledger_id == 9
    ur.release(9)
    assert ur.lock(9, "mover") is True
    store.close()  # the lock was the session's
    assert sessions.open().underreplication.lock(9, "mover") is True


def test_a_write_that_lets_go_of_the_replication_lock_in_the_same_transaction(sessions, store):
    from bkctl.wire.metadata.errors import MetadataStoreError, MetadataVersionConflict

    lid, version = store.ledgers.create(LedgerMetadata.new([A, B]))
    md, _ = store.ledgers.read(lid)
    moved = md.replace_bookie(0, A, C)
    with pytest.raises(MetadataStoreError):  # not locked: nothing written
        store.ledgers.update(lid, moved, version, unlock=True)
    assert store.ledgers.read(lid) == (md, version)
    assert store.underreplication.lock(lid, "mover")
    with pytest.raises(MetadataVersionConflict):  # a conflict keeps the lock
        store.ledgers.update(lid, moved, version + 5, unlock=True)
    assert store.underreplication.lock_holder(lid) == "mover"
    new_version = store.ledgers.update(lid, moved, version, unlock=True)
    assert store.ledgers.read(lid) == (moved, new_version) and new_version == version + 1
    assert store.underreplication.lock_holder(lid) is None


def test_auditor_election(sessions, store):
    assert store.auditor.votes() == [] and store.auditor.current() is None
    first = store.auditor.cast_vote(A)
    second = store.auditor.cast_vote(B)
    assert store.auditor.votes() == [first, second] and first < second
    assert store.auditor.current() == A
    store.close()  # the votes were the session's
    assert sessions.open().auditor.current() is None


def test_pulsar_managed_ledgers_listed_and_read_as_stored(sessions, store):
    broker = sessions.pulsar_writes(store)
    base, pulsar = broker.base, store.pulsar
    assert pulsar.managed_ledger_names(base) == [] and pulsar.managed_ledger(base, "t/ns/persistent/x") is None
    names = [
        "public/default/persistent/orders",
        "public/default/persistent/a%2Fb+c",
        "public/other/persistent/orders",
        "acme/ns/persistent/x",
        "old/east/ns/persistent/legacy",
    ]
    for n, name in enumerate(names):
        broker.managed_ledger(name, b"info-%d" % n)
    broker.managed_ledger(names[0], b"info-0 again", {"sub%2F1": b"cursor-1", "sub2": b"cursor-2"})
    assert pulsar.managed_ledger_names(base) == sorted(names)
    assert pulsar.managed_ledger_names(base, "public") == sorted(names[:3])
    assert pulsar.managed_ledger_names(base, "public", "default") == sorted(names[:2])
    assert pulsar.managed_ledger_names(base, None, "ns") == ["acme/ns/persistent/x"]
    assert pulsar.managed_ledger_names(base, "old", "east/ns") == [names[4]]  # a v1 name's namespace
    assert pulsar.managed_ledger_names(base, "nobody") == []
    assert pulsar.managed_ledger_names(P.managed_ledgers_base("/elsewhere/ledgers")) == []

    path = P.managed_ledger_path(base, names[0])
    assert pulsar.managed_ledger(base, names[0]) == StoredManagedLedger(
        path, b"info-0 again", 1, {"sub%2F1": b"cursor-1", "sub2": b"cursor-2"}
    )
    assert list(pulsar.managed_ledger(base, names[0]).cursors) == ["sub%2F1", "sub2"]
    assert pulsar.managed_ledger(base, names[0], cursors=False) == StoredManagedLedger(path, b"info-0 again", 1, {})
    assert pulsar.managed_ledger(base + "/", names[4]).value == b"info-4"
    assert pulsar.managed_ledger(base, "public/default/persistent/nothing") is None


def test_pulsar_partitioned_topic_metadata_beside_the_managed_ledgers(sessions, store):
    broker = sessions.pulsar_writes(store)
    name = "public/default/persistent/parts"
    assert store.pulsar.partitioned_topic(broker.base, name) is None
    broker.partitioned_topic(name, b'{"partitions": 3}')
    assert store.pulsar.partitioned_topic(broker.base, name) == StoredValue(
        P.partitioned_topic_path(broker.base, name), b'{"partitions": 3}', 0
    )
    assert store.pulsar.managed_ledger_names(broker.base) == []  # no managed ledger: no data yet


def test_pulsar_values_restored_are_read_as_a_broker_wrote_them(store):
    from bkctl.wire.metadata.errors import ValueExists
    from bkctl.wire.pulsar.registry import schemas_base

    base = P.managed_ledgers_base(store.root)
    name = "public/default/persistent/parts-partition-0"
    path = P.managed_ledger_path(base, name)
    pulsar = store.pulsar
    assert pulsar.restore_value(path, b"info") is True
    assert pulsar.restore_value(f"{path}/sub", b"cursor") is True
    assert pulsar.restore_value(path, b"info") is False  # the same value: nothing to do
    with pytest.raises(ValueExists):
        pulsar.restore_value(f"{path}/sub", b"another cursor")
    assert pulsar.managed_ledger(base, name) == StoredManagedLedger(path, b"info", 0, {"sub": b"cursor"})
    whole = "public/default/persistent/parts"
    assert pulsar.restore_value(P.partitioned_topic_path(base, whole), b'{"partitions":1}') is True
    assert pulsar.partitioned_topic(base, whole).value == b'{"partitions":1}'
    schemas = schemas_base(base)
    assert pulsar.restore_value(f"{schemas}/public/default/parts", b"locator") is True
    assert pulsar.schema_ids(schemas) == ["public/default/parts"]
    assert pulsar.schema_locator(schemas, "public/default/parts").value == b"locator"
    # a cursor restored before its managed ledger: the parent is there, empty, as ZooKeeper makes it
    other = P.managed_ledger_path(base, "public/default/persistent/y")
    assert pulsar.restore_value(f"{other}/c", b"c") is True
    assert pulsar.managed_ledger(base, "public/default/persistent/y").value == b""
    with pytest.raises(ValueExists):
        pulsar.restore_value(other, b"info")


class Heard:
    """What a watch's listener was told, in order (from whichever thread tells it)."""

    def __init__(self):
        self.calls: list = []

    def __call__(self, *args) -> None:
        self.calls.append(args[0] if len(args) == 1 else args)

    @property
    def last(self):
        return self.calls[-1] if self.calls else "nothing yet"

    def settles_on(self, value, what: str) -> None:
        wait_for(lambda: self.calls and self.calls[-1] == value, timeout=30, what=what)


def test_registration_watches_see_bookies_come_go_and_turn_readonly(store):
    writable, readonly, stopped = Heard(), Heard(), Heard()
    unwatch = store.registration.watch_writable_bookies(writable)
    store.registration.watch_readonly_bookies(readonly)
    store.registration.watch_writable_bookies(stopped)()  # told once, at once, then stopped
    assert writable.calls == [[]] and readonly.calls == [[]]  # at once, from the watching call
    store.registration.register(A)
    writable.settles_on([A], "the writable watch to see A")
    store.registration.register(B, readonly=True)
    readonly.settles_on([B], "the read-only watch to see B")
    store.registration.register(A, readonly=True)  # A turns read-only: it leaves one list for the other
    writable.settles_on([], "A to leave the writable list")
    readonly.settles_on([A, B], "A in the read-only list")
    unwatch()
    store.registration.register(C)
    store.registration.unregister(B)
    readonly.settles_on([A], "B to leave")  # told after C came: an unwatched listener would have heard by now
    assert writable.last == [] and stopped.calls == [[]]
    assert all(a != b for a, b in zip(writable.calls, writable.calls[1:]))  # only changes are told


def test_cookie_watch_sees_cookies_written_and_deleted(store):
    cookies = Heard()
    unwatch = store.registration.watch_all_bookies(cookies)
    assert cookies.calls == [[]]
    store.cookies.put(A, Cookie(A, ("/j",), ("/l",), "instance"))
    cookies.settles_on([A], "A's cookie")
    store.cookies.put(B, Cookie(B, ("/j",), ("/l",), "instance"))
    cookies.settles_on([A, B], "B's cookie")
    store.cookies.delete(A)  # a decommission
    cookies.settles_on([B], "A's cookie to go")
    unwatch()
    store.cookies.delete(B)
    store.cookies.put(C, Cookie(C, ("/j",), ("/l",), "instance"))
    assert store.registration.all_bookies() == [C] and cookies.last == [B]


@pytest.mark.parametrize("wipe", ["format", "nuke"])
def test_a_cookie_watch_outlives_a_format_or_nuke(store, wipe):
    """Format and nuke delete ``cookies/`` itself, with a watching auditor still running: its
    watch is told the list emptied and goes on hearing the cookies written after (kazoo's
    ChildrenWatch alone ends, silently, where it finds its znode gone)."""
    cookies = Heard()
    store.registration.watch_all_bookies(cookies)
    store.cookies.put(A, Cookie(A, ("/j",), ("/l",), "instance"))
    cookies.settles_on([A], "A's cookie")
    if wipe == "format":
        store.cluster.format()
    else:
        store.cluster.nuke(store.cluster.instance_id())
        store.cluster.init()
    assert store.registration.all_bookies() == []
    cookies.settles_on([], "the cookies gone")
    fresh = Heard()
    store.registration.watch_all_bookies(fresh)
    assert fresh.calls == [[]]
    store.cookies.put(B, Cookie(B, ("/j",), ("/l",), "instance"))
    cookies.settles_on([B], "B's cookie, to the watch set before the wipe")
    fresh.settles_on([B], "B's cookie, to a watch set after it")
    store.cookies.put(C, Cookie(C, ("/j",), ("/l",), "instance"))
    cookies.settles_on([B, C], "C's cookie")
    fresh.settles_on([B, C], "C's cookie, after the wipe")
    assert cookies.calls[-4:] == [[A], [], [B], [B, C]]  # each list told once, in order


def test_replication_switch_and_delay_watches(store):
    enabled, delay = Heard(), Heard()
    ur = store.underreplication
    ur.ensure_layout()
    ur.watch_enabled(enabled)
    ur.watch_lost_bookie_recovery_delay(delay)
    assert enabled.calls == [True] and delay.calls == [None]
    ur.disable()
    enabled.settles_on(False, "disabled")
    ur.disable()  # already disabled: nothing changed
    ur.enable()
    enabled.settles_on(True, "enabled again")
    assert enabled.calls == [True, False, True]

    path = P.underreplication_node(P.UR_LOST_BOOKIE_RECOVERY_DELAY, store.root)
    ur.set_lost_bookie_recovery_delay(30)
    delay.settles_on(StoredValue(path, b"30", 0), "the delay's first write")
    ur.set_lost_bookie_recovery_delay(30)  # the same value again: a write all the same (triggeraudit)
    delay.settles_on(StoredValue(path, b"30", 1), "the same value rewritten")


def test_daemon_status_nodes_go_with_the_session(sessions, store):
    ur = store.underreplication
    assert ur.daemon_statuses() == {}
    ur.publish_daemon_status("auditor", b'{"a": 1}')
    ur.publish_daemon_status("workers/10.0.0.1:3181", b'{"w": 1}')
    ur.publish_daemon_status("auditor", b'{"a": 2}')  # rewritten in place
    assert ur.daemon_statuses() == {"auditor": b'{"a": 2}', "workers/10.0.0.1:3181": b'{"w": 1}'}
    for bad in ("", "/auditor", "workers/", "a/b/c", "workers/.."):
        with pytest.raises(ValueError):
            ur.publish_daemon_status(bad, b"{}")
    store.close()
    assert sessions.open().underreplication.daemon_statuses() == {}


def test_auditor_vote_withdrawn_and_watched(store):
    election = store.auditor
    first, second = election.cast_vote(A), election.cast_vote(B)
    gone = Heard()
    assert election.watch_vote_gone(first, lambda: gone("first gone")) is True
    election.publish(A)
    election.withdraw_vote(first)
    gone.settles_on("first gone", "the watch on the withdrawn vote")
    assert election.votes() == [second] and election.current() == B
    election.withdraw_vote(first)  # gone already: fine
    assert election.watch_vote_gone(first, lambda: gone("again")) is False
    election.withdraw_vote(second)
    assert election.votes() == [] and gone.calls == ["first gone"]  # one-shot


def test_session_expiry_takes_the_votes_tells_the_listeners_and_keeps_registrations(sessions):
    store = sessions.open(session_timeout=4)
    store.registration.register(A)
    vote = store.auditor.cast_vote(A)
    lost, gone, unwatched = Heard(), Heard(), Heard()
    store.on_session_lost(lambda: lost("lost"))
    store.on_session_lost(lambda: unwatched("lost"))()
    assert store.auditor.watch_vote_gone(vote, lambda: gone("vote gone"))
    sessions.expire(store)
    lost.settles_on("lost", "the session-lost listener")
    gone.settles_on("vote gone", "the vote watch")
    wait_for(lambda: store.connected and store.auditor.votes() == [], timeout=30, what="a new session")
    wait_for(lambda: store.registration.writable_bookies() == [A], timeout=30, what="the registration to be restored")
    assert unwatched.calls == [] and lost.calls == ["lost"]


def test_the_session_lost_listener_hears_each_end_until_unwatched(sessions):
    store = sessions.unstarted()  # a listener may be set before the session starts
    lost, unwatched = Heard(), Heard()
    unwatch = store.on_session_lost(lambda: lost("closed"))
    stop = store.on_session_lost(lambda: unwatched("closed"))
    store.start()
    if sessions.kind == "zk":
        sessions.opened.append(store)  # closed at the end whatever happens
    stop()
    stop()  # stopped already: nothing to do
    store.close()
    lost.settles_on("closed", "the listener to hear the close")
    unwatch()
    assert lost.calls == ["closed"] and unwatched.calls == []  # none heard after its unwatch


def test_append_lock_one_holder_at_a_time_gone_with_the_session(sessions, store):
    import threading

    mine = store.ledgers.append_lock(5, "me")
    assert mine.path == P.append_lock_path(5, store.root)
    assert mine.acquire() is True
    theirs = store.ledgers.append_lock(5, "you")
    assert theirs.acquire() is False and theirs.holders() == ["me"]
    other_ledger = store.ledgers.append_lock(6, "you")
    assert other_ledger.acquire() is True
    other_ledger.release()
    theirs.release()  # not held: nothing happens
    assert theirs.holders() == ["me"]

    got: list[bool] = []
    waiting = threading.Thread(target=lambda: got.append(theirs.acquire(timeout=30)))
    waiting.start()
    wait_for(lambda: theirs.holders() == ["me", "you"], timeout=30, what="the second contender to wait")
    mine.release()
    waiting.join(60)
    assert got == [True] and theirs.holders() == ["you"]
    assert mine.acquire(timeout=0.1) is False  # waited its time, still held

    store.close()  # the lock was the session's
    again = sessions.open().ledgers.append_lock(5, "later")
    assert again.acquire() is True and again.holders() == ["later"]
    again.release()


# -- the cluster's own metadata and Pulsar's rack map --------------------------------------------


def test_the_cluster_is_there_once(store):
    """As the tests' clusters are made (``metadata_uri``): root, INSTANCEID, a hierarchical LAYOUT."""
    cluster = store.cluster
    assert cluster.exists() and cluster.holds_cluster()
    instance = cluster.instance_id()
    assert isinstance(instance, str) and len(instance) == 36
    assert cluster.layout().manager == "hierarchical"
    with pytest.raises(ClusterExists):
        cluster.init()
    assert cluster.prepare_format() is True  # the root was there
    cluster.set_instance_id("restored-from-a-backup")
    assert cluster.instance_id() == "restored-from-a-backup"


def test_format_wipes_ledgers_cookies_and_marks_and_keeps_registrations(store):
    store.ledgers.create(md(), 7)
    store.cookies.put(C, Cookie(C, ("/j",), ("/l",), "instance"))
    store.underreplication.mark(7, [A])
    store.registration.register(A)
    before = store.cluster.instance_id()
    assert store.cluster.format(confirm=lambda: False) is False  # the root existed: asked, refused
    assert store.ledgers.exists(7) and store.cookies.get(C) is not None and store.underreplication.count() == 1
    assert store.cluster.format() is True
    assert not store.ledgers.exists(7) and store.cookies.get(C) is None and store.underreplication.count() == 0
    assert store.registration.writable_bookies() == [A]
    assert store.cluster.instance_id() not in (None, before)
    assert store.cluster.layout().manager == "hierarchical"
    store.ledgers.create(md(), 8)  # and the cluster takes ledgers again
    assert store.ledgers.read(8)[1] == 0


def test_nuke_asks_for_the_instance_id_and_no_bookies(store):
    cluster = store.cluster
    instance = cluster.instance_id()
    with pytest.raises(ValueError):
        cluster.nuke()  # neither an instance id nor force
    store.registration.register(A)
    with pytest.raises(NukeRefused):
        cluster.nuke(force=True)
    store.registration.unregister(A)
    with pytest.raises(NukeRefused):
        cluster.nuke("not-" + instance)
    store.ledgers.create(md(), 7)
    store.rebalance.write(b"a kept plan")
    store.lost_entries.write(7, b"a record")
    assert cluster.nuke(instance) is True
    assert store.rebalance.read() is None  # a kept plan goes with its cluster
    assert store.lost_entries.all() == {}  # and the records of its lost entries
    assert not cluster.exists() and not cluster.holds_cluster() and cluster.layout() is None
    with pytest.raises(ClusterNotFound):
        cluster.instance_id()
    assert cluster.nuke(force=True) is False  # nothing left to nuke
    assert cluster.init() != instance
    assert cluster.exists() and not store.ledgers.exists(7)


def test_the_rack_map_is_compared_and_set(request, sessions):
    if sessions.kind == "zk":
        request.getfixturevalue("rack_map")  # ZooKeeper-wide: this test's alone meanwhile
    store = sessions.open()
    racks = store.racks
    assert racks.read() == ({}, None)
    doc = {"default": {A: {"rack": "/r1", "hostname": "h1"}}}
    assert racks.write(doc, None) == 0
    assert racks.read() == (doc, 0)
    moved = {"default": {A: {"rack": "/r2"}, B: {"rack": "/r1"}}}
    assert racks.write(moved, 0) == 1
    with pytest.raises(VersionConflict) as stale:
        racks.write(doc, 0)
    assert stale.value.current == moved and stale.value.current_version == 1
    with pytest.raises(VersionConflict):
        racks.write(doc, None)  # there is one already
    assert racks.read() == (moved, 1)


def test_the_rack_map_watch_tells_each_map_written_and_keeps_the_last_good_one(request, sessions):
    if sessions.kind == "zk":
        request.getfixturevalue("rack_map")  # ZooKeeper-wide: this test's alone meanwhile
    store = sessions.open()
    heard, stopped = Heard(), Heard()
    unwatch = store.racks.watch(heard)
    store.racks.watch(stopped)()  # told once, at once, then stopped
    assert heard.calls == [{}] and stopped.calls == [{}]  # none yet: an empty map, at once
    doc = {"default": {A: {"rack": "/r1"}}}
    store.racks.write(doc, None)
    heard.settles_on(doc, "the map written")
    moved = {"default": {A: {"rack": "/r2"}, B: {"rack": "/r1"}}}
    store.racks.write(moved, 0)
    heard.settles_on(moved, "the map moved")
    unwatch()
    store.racks.write(doc, 1)
    assert store.racks.read() == (doc, 2)
    late = Heard()
    store.racks.watch(late)
    assert late.calls == [doc] and heard.last == moved and stopped.calls == [{}]


def test_the_saved_rebalance_is_kept_whole_replaced_and_cleared(sessions, store):
    assert store.rebalance.read() is None
    store.rebalance.clear()  # nothing kept: nothing to do
    big = bytes(range(256)) * 6000  # 1.5 MB: over ZooKeeper's node limit, so in parts
    store.rebalance.write(big)
    assert store.rebalance.read() == big
    store.rebalance.write(b"small")  # replaces it whole, no part of the big one left
    assert store.rebalance.read() == b"small"
    other = sessions.open()  # another session (a rerun) reads it
    assert other.rebalance.read() == b"small"
    other.rebalance.clear()
    assert store.rebalance.read() is None


def test_restore_journals_are_kept_whole_by_key_replaced_and_cleared(sessions, store):
    assert store.restores.read("a1") is None and store.restores.kept() == []
    store.restores.clear("a1")  # nothing kept: nothing to do
    big = bytes(range(256)) * 6000  # 1.5 MB: over ZooKeeper's node limit, so in parts
    store.restores.write("a1", big)
    store.restores.write("b2", b"other")
    assert store.restores.read("a1") == big and store.restores.kept() == ["a1", "b2"]
    store.restores.write("a1", b"small")  # replaces it whole
    other = sessions.open()  # another session (a rerun) reads it
    assert other.restores.read("a1") == b"small"
    other.restores.clear("a1")
    assert store.restores.read("a1") is None and store.restores.kept() == ["b2"]
    with pytest.raises(ValueError):
        store.restores.write("../x", b"")


def test_restore_journals_in_chunks_count_what_the_head_counts(sessions, store):
    from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES, RestoreJournalChunks

    journals = store.restores
    assert journals.read_chunks("c1") is None
    journals.write_chunk("c1", 0, b"zero")
    journals.write_chunk("c1", 1, b"one")
    assert journals.read_chunks("c1") is None  # no head yet: no journal
    assert journals.read("c1") is None
    journals.write_head("c1", b'{"h":1}', 1)
    assert journals.read_chunks("c1") == RestoreJournalChunks(b'{"h":1}', [b"zero"])  # chunk 1 not counted
    journals.write_chunk("c1", 0, b"zero again")  # in place
    journals.write_head("c1", b'{"h":2}', 2)
    other = sessions.open()  # another session (a rerun) reads it
    assert other.restores.read_chunks("c1") == RestoreJournalChunks(b'{"h":2}', [b"zero again", b"one"])
    assert other.restores.read("c1") is None and other.restores.kept() == ["c1"]
    journals.write_chunk("c1", 2, b"x" * RESTORE_CHUNK_BYTES)  # the most a chunk holds
    with pytest.raises(ValueError):
        journals.write_chunk("c1", 3, b"x" * (RESTORE_CHUNK_BYTES + 1))
    with pytest.raises(ValueError):
        journals.write_chunk("../x", 0, b"")
    # an older bkctl's one-document journal: read as it was until a head replaces it
    big = bytes(range(256)) * 6000
    journals.write("old", big)
    assert journals.read("old") == big and journals.read_chunks("old") is None
    journals.write_chunk("old", 0, b"new")
    assert journals.read("old") == big  # a chunk alone changes nothing
    journals.write_head("old", b"{}", 1)
    assert journals.read("old") is None and journals.read_chunks("old") == RestoreJournalChunks(b"{}", [b"new"])
    journals.clear("old")
    journals.clear("c1")
    assert journals.kept() == [] and journals.read_chunks("c1") is None


def test_a_restore_journal_saved_at_once_reads_as_written_one_at_a_time(sessions, store):
    """save: the chunks then the head, as write_chunk and write_head make them, whatever the key
    held: nothing, a journal read or written (one multi on ZooKeeper), a chunk a stopped restore
    wrote past the count, an older form, or a journal cleared by another session meanwhile."""
    from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES, RestoreJournalChunks

    journals = store.restores
    assert journals.read_chunks("s1") is None
    journals.save("s1", {0: b"zero"}, b'{"h":1}', 1)  # nothing under the key
    journals.save("s1", {0: b"zero+", 1: b"one"}, b'{"h":2}', 2)  # known: set one, create the other
    other = sessions.open()  # another session (a rerun) reads it
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b'{"h":2}', [b"zero+", b"one"])
    journals.save("s1", {}, b'{"h":3}', 2)  # the head alone
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b'{"h":3}', [b"zero+", b"one"])
    other.restores.write_chunk("s1", 2, b"stale")  # a chunk past the count (a stopped restore's)
    journals.save("s1", {2: b"two"}, b'{"h":4}', 3)
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b'{"h":4}', [b"zero+", b"one", b"two"])
    other.restores.clear("s1")  # gone meanwhile: saved anew
    journals.save("s1", {0: b"again"}, b'{"h":5}', 1)
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b'{"h":5}', [b"again"])
    big = bytes(range(256)) * 6000  # an older bkctl's one-document journal, replaced
    journals.write("old", big)
    assert journals.read_chunks("old") is None
    journals.save("old", {0: b"new"}, b"{}", 1)
    assert other.restores.read("old") is None
    assert other.restores.read_chunks("old") == RestoreJournalChunks(b"{}", [b"new"])
    other.restores.clear("s1")
    other.restores.write_chunk("s1", 0, b"half")  # a stopped restore's first chunk, no head yet
    assert journals.read_chunks("s1") is None
    journals.save("s1", {0: b"whole"}, b"{}", 1)
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b"{}", [b"whole"])
    with pytest.raises(ValueError):
        journals.save("s1", {1: b"x" * (RESTORE_CHUNK_BYTES + 1)}, b"{}", 2)
    assert other.restores.read_chunks("s1") == RestoreJournalChunks(b"{}", [b"whole"])
    journals.clear("s1")
    journals.clear("old")
    assert journals.kept() == []


def test_a_restore_journal_saved_twice_is_one_zookeeper_request_the_second_time(metadata_uri, monkeypatch):
    """Once the store knows what a key holds, a save is one multi (chunks and head), not a
    request each and a read of the head."""
    from kazoo.client import KazooClient

    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        store.restores.save("m", {0: b"a"}, b"{}", 1)
        calls: list[str] = []
        call = KazooClient._call
        monkeypatch.setattr(
            KazooClient,
            "_call",
            lambda zk, request, result: calls.append(type(request).__name__) or call(zk, request, result),
        )
        store.restores.save("m", {0: b"ab", 1: b"c"}, b'{"x":1}', 2)
        assert calls == ["Transaction"]
        store.restores.clear("m")
    finally:
        store.close()


def test_a_restore_journal_replacing_an_older_form_leaves_none_of_its_parts(metadata_uri, zk_client):
    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        path = f"{P.restore_journals_path(store.root)}/k"
        store.restores.write("k", bytes(range(256)) * 6000)  # 1.5 MB, in parts
        assert len(zk_client.get_children(path)) == 3
        store.restores.write_chunk("k", 0, b"lines")
        store.restores.write_head("k", b"{}", 1)
        assert zk_client.get_children(path) == ["chunk-000000"]
    finally:
        store.close()


def test_a_restore_journal_lives_beside_the_cluster_and_goes_with_a_nuke(metadata_uri, zk_client):
    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        store.restores.write("k", b"journal")
        path = P.restore_journals_path(store.root)
        assert zk_client.exists(f"{path}/k") and not path.startswith(store.root + "/")
        zk_client.set(f"{path}/k", b"")  # killed while writing it: not read
        assert store.restores.read("k") is None
        store.restores.write("k", b"journal")
        assert store.cluster.nuke(force=True)
        assert zk_client.exists(path) is None
    finally:
        store.close()


def test_records_of_lost_entries_are_kept_per_ledger_beside_the_cluster(sessions, store):
    records = store.lost_entries
    assert records.read(7) is None and records.all() == {}
    records.forget(7)  # none: nothing to do
    records.write(7, b"first")
    records.write(7, b"second")  # in place of the first
    records.write(12, b"other")
    other = sessions.open()  # another session (fsck, status) reads them
    assert other.lost_entries.read(7) == b"second"
    assert other.lost_entries.all() == {7: b"second", 12: b"other"}
    other.lost_entries.forget(7)
    assert records.all() == {12: b"other"} and records.read(7) is None
    assert not store.ledgers.exists(12)  # nothing of them inside the cluster


def test_one_running_record_at_a_time_cancel_rewrites_it_and_it_goes_with_its_session(sessions, store):
    assert store.rebalance.running() is None
    assert store.rebalance.claim(b"first") is None
    assert store.rebalance.claim(b"second") == (b"first", 0)  # one at a time, whoever asks
    other = sessions.open()
    data, version = other.rebalance.running()
    assert data == b"first"
    assert other.rebalance.update_running(b"first, cancel", version) is True  # a cancel, from elsewhere
    assert other.rebalance.update_running(b"stale", version) is False
    assert store.rebalance.running() == (b"first, cancel", version + 1)
    if sessions.kind == "zk":
        assert other.rebalance.drop_running() is False  # not that session's
    assert store.rebalance.drop_running() is True
    assert store.rebalance.running() is None
    assert store.rebalance.claim(b"third") is None
    sessions.expire(store)
    assert other.rebalance.running() is None  # a run killed leaves none once its session went
    assert other.rebalance.claim(b"fourth") is None
    _data, version = other.rebalance.running()
    assert other.rebalance.drop_running(version + 1) is False
    assert other.rebalance.drop_running(version) is True  # a run found dead, removed by another


def test_a_saved_rebalance_whose_writing_was_cut_short_is_not_read(metadata_uri, zk_client):
    """ZooKeeper's layout of it: the parts, and their count written last."""
    from bkctl.wire.metadata.errors import MetadataStoreError
    from bkctl.wire.metadata.zk.rebalance import PART_BYTES

    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        store.rebalance.write(b"x" * (PART_BYTES + 1))
        path = P.saved_rebalance_path(store.root)
        assert sorted(zk_client.get_children(path)) == ["part-000000", "part-000001"]
        assert not path.startswith(store.root + "/")  # beside the cluster, never inside it
        zk_client.set(path, b"")  # killed after the count was emptied, before the parts were done
        assert store.rebalance.read() is None
        zk_client.set(path, b"2")
        zk_client.delete(f"{path}/part-000001")  # a part lost: an error, not half a plan
        with pytest.raises(MetadataStoreError, match="part 1 of 2 is missing"):
            store.rebalance.read()
        store.rebalance.clear()
        assert zk_client.exists(path) is None
    finally:
        store.close()
