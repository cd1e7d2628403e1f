"""ZKMetadataStore against a real ZooKeeper: every znode at BookKeeper's exact path."""

from __future__ import annotations

import random
import threading
import time
import types
import uuid

import pytest
from kazoo.client import KazooClient

from bkctl.wire import fastpath
from bkctl.wire.metadata.cookie import Cookie, parse_cookie
from bkctl.wire.metadata.errors import (
    BookieRegistrationError,
    ClusterExists,
    ClusterNotFound,
    CookieExists,
    CookieVersionConflict,
    LayoutMismatch,
    LedgerExists,
    MetadataVersionConflict,
    NoSuchCookie,
    NoSuchLedger,
    NukeRefused,
    ZKUnavailable,
)
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState, parse_ledger_metadata
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.golden import VECTORS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

HIER = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"


def root_of(uri: str) -> str:
    return "/" + uri.split("://", 1)[1].split("/", 1)[1]


def md(*bookies: str, **kw) -> LedgerMetadata:
    return LedgerMetadata.new(bookies or ("127.0.0.1:3181", "127.0.0.1:3182"), password=b"pw", **kw)


# ---------------------------------------------------------------------------
# cluster bootstrap
# ---------------------------------------------------------------------------
def test_init_cluster_creates_exact_znodes(uninitialised_uri, zk_client):
    root = root_of(uninitialised_uri)
    with ZKMetadataStore(uninitialised_uri, twins=fastpath.selected()) as store:
        assert not store.cluster.exists()
        instance_id = store.cluster.init()
        assert store.cluster.exists()
        assert store.cluster.instance_id() == instance_id
        assert store.cluster.layout().manager == "hierarchical"
        with pytest.raises(ClusterExists):
            store.cluster.init()

    assert sorted(zk_client.get_children(root)) == ["INSTANCEID", "LAYOUT", "available"]
    assert zk_client.get_children(f"{root}/available") == ["readonly"]
    data, _ = zk_client.get(f"{root}/INSTANCEID")
    assert len(data) == 36 and data == instance_id.encode() and b"\n" not in data
    assert uuid.UUID(data.decode()).version == 4
    assert zk_client.get(f"{root}/LAYOUT")[0] == HIER
    for node in (root, f"{root}/available", f"{root}/available/readonly"):
        assert zk_client.get(node)[0] == b""


@pytest.mark.parametrize(
    "scheme,factory",
    [
        ("zk+flat", "FlatLedgerManagerFactory"),
        ("zk+longhierarchical", "LongHierarchicalLedgerManagerFactory"),
        ("zk", "HierarchicalLedgerManagerFactory"),
    ],
)
def test_init_cluster_layout_follows_uri(zookeeper, zk_namespace, zk_client, scheme, factory):
    uri = f"{scheme}://{zookeeper.connect_string}{zk_namespace}/ledgers"
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        store.cluster.init()
    data = zk_client.get(f"{zk_namespace}/ledgers/LAYOUT")[0]
    assert data == f"2\norg.apache.bookkeeper.meta.{factory}:1".encode()


def test_manager_from_layout_and_mismatch(zookeeper, zk_namespace):
    base = f"{zookeeper.connect_string}{zk_namespace}/ledgers"
    with ZKMetadataStore(f"zk+flat://{base}", twins=fastpath.selected()) as store:
        store.cluster.init()
    with ZKMetadataStore(f"zk://{base}", twins=fastpath.selected()) as store:
        assert store.cluster.manager == "flat"
    with (
        ZKMetadataStore(f"zk+hierarchical://{base}", twins=fastpath.selected()) as store,
        pytest.raises(LayoutMismatch),
    ):
        _ = store.cluster.manager


def test_missing_cluster_errors(uninitialised_uri):
    with ZKMetadataStore(uninitialised_uri, twins=fastpath.selected()) as store:
        with pytest.raises(ClusterNotFound):
            store.cluster.instance_id()
        with pytest.raises(ClusterNotFound):
            store.cookies.put("127.0.0.1:3181", b"x")
        assert store.cluster.layout() is None
        assert store.registration.writable_bookies() == []


def test_unreachable_zookeeper_is_one_line_error():
    from bkctl.sandbox.zookeeper import free_port

    port = free_port()
    store = ZKMetadataStore(f"zk+hierarchical://127.0.0.1:{port}/ledgers", timeout=1, twins=fastpath.selected())
    with pytest.raises(ZKUnavailable) as info:  # gives up (the test's timeout guards a hang)
        store.start()
    assert "\n" not in str(info.value) and f"127.0.0.1:{port}" in str(info.value)
    assert not store.connected
    with pytest.raises(ZKUnavailable):
        store.registration.writable_bookies()


# ---------------------------------------------------------------------------
# ledger ids
# ---------------------------------------------------------------------------
def test_generate_ledger_ids_hierarchical(zkstore, zk_client):
    root = zkstore.root
    ids = [zkstore.ledger_ids.generate() for _ in range(5)]
    assert ids == sorted(set(ids))
    assert all(0 <= i < 2**31 - 1 for i in ids)
    # the sequential nodes are deleted right after use
    assert zk_client.get_children(f"{root}/idgen") == []
    assert not zk_client.exists(f"{root}/idgen-long")


def test_generate_ledger_ids_long_scheme(zkstore, zk_client):
    root = zkstore.root
    zk_client.ensure_path(f"{root}/idgen-long")
    first = zkstore.ledger_ids.generate()
    second = zkstore.ledger_ids.generate()
    assert first >> 32 == 1 and second >> 32 == 1 and second > first
    assert zk_client.get_children(f"{root}/idgen-long") == ["HOB-0000000001"]
    assert zk_client.get_children(f"{root}/idgen-long/HOB-0000000001") == []
    ledger_id, _ = zkstore.ledgers.create(md())
    assert ledger_id >> 32 == 1
    s19 = "%019d" % ledger_id
    path = f"{root}/{s19[0:3]}/{s19[3:7]}/{s19[7:11]}/{s19[11:15]}/L{s19[15:19]}"
    assert zk_client.exists(path)


def test_generate_ledger_ids_long_scheme_keeps_newest_three_hobs(zkstore, zk_client):
    base = f"{zkstore.root}/idgen-long"
    for high in (1, 2, 3, 4, 5):
        zk_client.ensure_path(f"{base}/HOB-{high:010d}")
    ledger_id = zkstore.ledger_ids.generate()
    assert ledger_id >> 32 == 5
    assert sorted(zk_client.get_children(base)) == ["HOB-0000000003", "HOB-0000000004", "HOB-0000000005"]


def test_ledger_ids_drawn_many_a_request(zkstore, zk_client, monkeypatch):
    """``restore --remap`` draws an id a ledger: 500 sequential nodes a multi, not a create each."""
    client, calls = zkstore.client, {"create": 0, "transaction": 0}

    def counting(name: str):
        call = getattr(client, name)

        def counted(*args, **kw):
            calls[name] += 1
            return call(*args, **kw)

        return counted

    for name in calls:
        monkeypatch.setattr(client, name, counting(name))
    ids = zkstore.ledger_ids.generate_many(1200)
    assert len(ids) == 1200 and ids == sorted(set(ids)) and all(0 <= i < 2**31 - 1 for i in ids)
    assert calls == {"create": 3, "transaction": 6}  # a first id the usual way, 500 more in a multi, thrice
    assert zk_client.get_children(f"{zkstore.root}/idgen") == []  # every sequential node deleted
    zk_client.ensure_path(f"{zkstore.root}/idgen-long")  # the 63-bit scheme: from its HOB, alike
    zkstore.ledger_ids.forget_cached()
    long_ids = zkstore.ledger_ids.generate_many(700)
    assert len(long_ids) == 700 and all(i >> 32 == 1 for i in long_ids) and long_ids == sorted(set(long_ids))
    assert zk_client.get_children(f"{zkstore.root}/idgen-long/HOB-0000000001") == []


def test_generate_ledger_ids_flat(zookeeper, zk_namespace, zk_client):
    uri = f"zk+flat://{zookeeper.connect_string}{zk_namespace}/ledgers"
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        store.cluster.init()
        a, b = store.ledger_ids.generate(), store.ledger_ids.generate()
        assert b > a
        assert not any(c.startswith("ID-") for c in zk_client.get_children(store.root))
        ledger_id, _ = store.ledgers.create(md())
        assert zk_client.exists(f"{store.root}/L{ledger_id:010d}")


# ---------------------------------------------------------------------------
# ledger metadata
# ---------------------------------------------------------------------------
def test_ledger_crud_and_paths(zkstore, zk_client, metadata_uri):
    meta = md(custom_metadata={"app": b"test"})
    ledger_id, version = zkstore.ledgers.create(meta, ledger_id=1234567890)
    assert (ledger_id, version) == (1234567890, 0)
    path = f"{zkstore.root}/12/3456/L7890"
    raw, stat = zk_client.get(path)
    assert raw.startswith(b"BookieMetadataFormatVersion\t3\n")
    assert zkstore.ledgers.exists(ledger_id)

    # a second client sees exactly what the first wrote
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as other:
        read, v = other.ledgers.read(ledger_id)
    assert v == 0
    assert read.ctime == stat.ctime  # not stored in the value: the znode's ctime
    assert parse_ledger_metadata(raw).ctime is None
    assert replace_ctime(read, None) == meta

    closed = read.closed(last_entry_id=9, length=1000)
    assert zkstore.ledgers.update(ledger_id, closed, 0) == 1
    raw2, stat2 = zk_client.get(path)
    assert stat2.version == 1
    # the filled-in ctime is not written into the value (Java keeps it unstored)
    assert parse_ledger_metadata(raw2).ctime is None
    again, v2 = zkstore.ledgers.read(ledger_id)
    assert v2 == 1 and again.state is LedgerState.CLOSED and again.last_entry_id == 9

    with pytest.raises(LedgerExists):
        zkstore.ledgers.create(meta, ledger_id=ledger_id)

    zkstore.ledgers.delete(ledger_id)
    assert not zkstore.ledgers.exists(ledger_id)
    with pytest.raises(NoSuchLedger):
        zkstore.ledgers.read(ledger_id)
    with pytest.raises(NoSuchLedger):
        zkstore.ledgers.update(ledger_id, closed, 1)
    zkstore.ledgers.delete(ledger_id)  # NONODE counts as success


def replace_ctime(meta, ctime):
    import dataclasses

    return dataclasses.replace(meta, ctime=ctime)


def test_stored_ctime_is_kept(zkstore, zk_client):
    meta = md(ctime=1_700_000_000_000)
    ledger_id, _ = zkstore.ledgers.create(meta)
    read, v = zkstore.ledgers.read(ledger_id)
    assert read.ctime == 1_700_000_000_000
    zkstore.ledgers.update(ledger_id, read.closed(-1, 0), v)
    raw, _ = zk_client.get(zkstore.ledgers.path(ledger_id))
    assert parse_ledger_metadata(raw).ctime == 1_700_000_000_000


def test_cas_conflict_carries_current_metadata(zkstore, metadata_uri):
    ledger_id, v0 = zkstore.ledgers.create(md())
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as writer:
        current, v = writer.ledgers.read(ledger_id)
        recovering = current.in_recovery()
        v1 = writer.ledgers.update(ledger_id, recovering, v)
    stale, _ = zkstore.ledgers.read(ledger_id)
    with pytest.raises(MetadataVersionConflict) as info:
        zkstore.ledgers.update(ledger_id, md().closed(5, 50), v0)
    err = info.value
    assert err.ledger_id == ledger_id
    assert err.expected_version == v0
    assert err.current_version == v1 == 1
    assert err.metadata.state is LedgerState.IN_RECOVERY
    assert err.current == stale
    # the losing writer re-applies its change on top of what it got back
    assert zkstore.ledgers.update(ledger_id, err.metadata.closed(5, 50), err.current_version) == 2


def test_cas_conflict_without_ctime_shortcut(zkstore):
    # metadata built by hand (ctime None) takes the plain setData path
    ledger_id, _ = zkstore.ledgers.create(md())
    zkstore.ledgers.update(ledger_id, md().in_recovery(), 0)
    with pytest.raises(MetadataVersionConflict) as info:
        zkstore.ledgers.update(ledger_id, md().closed(1, 1), 0)
    assert info.value.current_version == 1
    assert info.value.metadata.state is LedgerState.IN_RECOVERY


def test_delete_prunes_empty_parents(zkstore, zk_client):
    root = zkstore.root
    zkstore.ledgers.create(md(), ledger_id=1)
    zkstore.ledgers.create(md(), ledger_id=2)
    zkstore.ledgers.create(md(), ledger_id=4294967301)
    zkstore.ledgers.delete(1)
    assert zk_client.exists(f"{root}/00/0000")  # ledger 2 still there
    zkstore.ledgers.delete(2)
    assert not zk_client.exists(f"{root}/00")
    zkstore.ledgers.delete(4294967301)
    assert not zk_client.exists(f"{root}/000")
    assert zk_client.exists(root)
    assert zk_client.exists(f"{root}/LAYOUT")


def test_delete_with_wrong_version_conflicts(zkstore):
    ledger_id, _ = zkstore.ledgers.create(md())
    with pytest.raises(MetadataVersionConflict):
        zkstore.ledgers.delete(ledger_id, version=7)
    zkstore.ledgers.delete(ledger_id, version=0)
    assert not zkstore.ledgers.exists(ledger_id)


ORDER_IDS = [1, 2, 10000, 99999, 123456789, 2**31 - 2, 2**31 - 1, 2**31 + 5, 4294967301, 2**40, 2**62 + 7]


@pytest.mark.parametrize("manager", ["hierarchical", "longhierarchical", "flat"])
def test_iter_ledger_ids_ascending_across_levels(zookeeper, zk_namespace, zk_client, manager):
    uri = f"zk+{manager}://{zookeeper.connect_string}{zk_namespace}/ledgers"
    ids = [i for i in ORDER_IDS if manager != "flat" or i < 10**10]
    shuffled = ids[:]
    random.Random(7).shuffle(shuffled)
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        store.cluster.init()
        for ledger_id in shuffled:
            store.ledgers.create(md(), ledger_id=ledger_id)
        store.ledger_ids.generate()  # leaves idgen/ behind: not a ledger
        if manager != "flat":  # children of a leaf parent that are no ledger's
            leaf = store.ledgers.path(ids[0]).rsplit("/", 1)[0]
            for junk in ("L12", "L123456", "xL0003", "L0004-lock", "Labcd"):
                zk_client.create(f"{leaf}/{junk}")
        stream = store.ledgers.ids()
        assert isinstance(stream, types.GeneratorType)
        assert list(stream) == sorted(ids)
    if manager == "hierarchical":
        assert zk_client.exists(f"{zk_namespace}/ledgers/21/4748/L3646")  # 2**31-2: legacy form
        assert zk_client.exists(f"{zk_namespace}/ledgers/000/0000/0021/4748/L3647")  # 2**31-1: long form


def test_reads_ledgers_written_by_java(zkstore, zk_client):
    raw = (VECTORS / "zk" / "raw" / "ledgers__00__0000__L0000.bin").read_bytes()
    zk_client.create(f"{zkstore.root}/00/0000/L0000", raw, makepath=True)
    meta, version = zkstore.ledgers.read(0)
    assert version == 0 and meta.state is LedgerState.CLOSED
    assert list(zkstore.ledgers.ids()) == [0]


# ---------------------------------------------------------------------------
# bookie registration
# ---------------------------------------------------------------------------
def test_register_writable_and_readonly(zkstore, zk_client):
    root = zkstore.root
    info = BookieServiceInfo.for_bookie("127.0.0.1", 3181)
    zkstore.registration.register("127.0.0.1:3181", info)
    data, stat = zk_client.get(f"{root}/available/127.0.0.1:3181")
    assert data == info.serialize()
    assert stat.ephemeralOwner == zkstore.session_id
    assert zkstore.registration.writable_bookies() == ["127.0.0.1:3181"]
    assert zkstore.registration.readonly_bookies() == []
    assert zkstore.registration.service_info("127.0.0.1:3181") == info
    assert zkstore.registration.is_registered("127.0.0.1:3181")

    # readonly/ missing: the bookie creates it (persistent) on the way
    zk_client.delete(f"{root}/available/readonly")
    zkstore.registration.register("127.0.0.1:3181", info, readonly=True)
    assert zkstore.registration.writable_bookies() == []
    assert zkstore.registration.readonly_bookies() == ["127.0.0.1:3181"]
    assert zk_client.exists(f"{root}/available/readonly").ephemeralOwner == 0
    _, stat = zk_client.get(f"{root}/available/readonly/127.0.0.1:3181")
    assert stat.ephemeralOwner == zkstore.session_id

    zkstore.registration.unregister("127.0.0.1:3181")
    assert zkstore.registration.readonly_bookies() == [] and zkstore.registration.writable_bookies() == []
    assert zkstore.registration.service_info("127.0.0.1:3181") is None


def test_legacy_registration_without_data(zkstore):
    zkstore.registration.register("127.0.0.1:3185", b"")
    info = zkstore.registration.service_info("127.0.0.1:3185")
    assert info.is_legacy and info.rpc_address("127.0.0.1:3185") == ("127.0.0.1", 3185)


def test_invalid_bookie_ids_rejected(zkstore):
    for bad in ("readonly", "a/b", "", "sp ace"):
        with pytest.raises(ValueError):
            zkstore.registration.register(bad, b"")


def test_registration_vanishes_when_session_closes(metadata_uri, zk_client):
    root = root_of(metadata_uri)
    store = ZKMetadataStore(metadata_uri, twins=fastpath.selected()).start()
    store.registration.register("127.0.0.1:3181", b"")
    assert zk_client.exists(f"{root}/available/127.0.0.1:3181")
    store.close()
    assert not zk_client.exists(f"{root}/available/127.0.0.1:3181")


def expire_session(store: ZKMetadataStore, connect_string: str) -> int:
    """The classic trick: attach a second client to the session, then close it."""
    session_id, password = store.client.client_id
    intruder = KazooClient(hosts=connect_string, client_id=(session_id, password), timeout=10)
    intruder.start(timeout=20)
    intruder.stop()
    intruder.close()
    return session_id


def test_reregisters_after_session_expiry(metadata_uri, zookeeper, zk_client):
    root = root_of(metadata_uri)
    with ZKMetadataStore(metadata_uri, session_timeout=6, twins=fastpath.selected()) as store:
        store.registration.register("127.0.0.1:3181", b"writable")
        store.registration.register("127.0.0.1:3182", b"ro", readonly=True)
        old = expire_session(store, zookeeper.connect_string)

        def back():
            w = zk_client.exists(f"{root}/available/127.0.0.1:3181")
            r = zk_client.exists(f"{root}/available/readonly/127.0.0.1:3182")
            return (
                w and r and w.ephemeralOwner != old and r.ephemeralOwner != old and w.ephemeralOwner == store.session_id
            )

        wait_for(back, timeout=40, what="re-registration after session expiry")
        assert zk_client.get(f"{root}/available/127.0.0.1:3181")[0] == b"writable"
        assert store.registration.writable_bookies() == ["127.0.0.1:3181"]
        # unregistered bookies stay unregistered across the next expiry
        store.registration.unregister("127.0.0.1:3182")
        old = expire_session(store, zookeeper.connect_string)
        wait_for(
            lambda: (
                (
                    zk_client.exists(f"{root}/available/127.0.0.1:3181") or types.SimpleNamespace(ephemeralOwner=old)
                ).ephemeralOwner
                != old
            ),
            timeout=40,
            what="second re-registration",
        )
        assert not zk_client.exists(f"{root}/available/readonly/127.0.0.1:3182")


def test_registration_waits_for_other_session(metadata_uri, zk_client):
    root = root_of(metadata_uri)
    holder = ZKMetadataStore(metadata_uri, twins=fastpath.selected()).start()
    holder.registration.register("127.0.0.1:3181", b"old")
    with ZKMetadataStore(metadata_uri, session_timeout=5, twins=fastpath.selected()) as contender:
        # still held after the session timeout: fail, and leave the holder's registration alone
        with pytest.raises(BookieRegistrationError):
            contender.registration.register("127.0.0.1:3181", b"new")
        data, stat = zk_client.get(f"{root}/available/127.0.0.1:3181")
        assert data == b"old" and stat.ephemeralOwner == holder.session_id != contender.session_id

        # held, then released while waiting: succeed
        timer = threading.Timer(0.5, holder.close)
        timer.start()
        try:
            contender.registration.register("127.0.0.1:3181", b"new")
        finally:
            timer.join()
        data, stat = zk_client.get(f"{root}/available/127.0.0.1:3181")
        assert data == b"new" and stat.ephemeralOwner == contender.session_id
        # registering again from the owning session is a no-op
        contender.registration.register("127.0.0.1:3181", b"new")


# ---------------------------------------------------------------------------
# cookies
# ---------------------------------------------------------------------------
def make_cookie(bookie_id="127.0.0.1:3181", instance_id="abc"):
    return Cookie(bookie_id, ("/data/journal",), ("/data/ledgers",), instance_id)


def test_cookie_lifecycle(zkstore, zk_client):
    bid = "127.0.0.1:3181"
    assert zkstore.cookies.get(bid) is None
    cookie = make_cookie()
    zk_client.delete(f"{zkstore.root}/cookies", recursive=True) if zk_client.exists(f"{zkstore.root}/cookies") else None
    assert zkstore.cookies.put(bid, cookie) == 0
    raw, _ = zk_client.get(f"{zkstore.root}/cookies/{bid}")
    assert raw == cookie.serialize() and parse_cookie(raw) == cookie
    assert zkstore.cookies.get(bid) == (cookie, 0)
    assert zkstore.registration.all_bookies() == [bid]
    with pytest.raises(CookieExists):
        zkstore.cookies.put(bid, cookie)

    expanded = Cookie(bid, ("/data/journal",), ("/data/ledgers", "/data/ledgers2"), "abc")
    assert zkstore.cookies.put(bid, expanded, version=0) == 1
    with pytest.raises(CookieVersionConflict) as info:
        zkstore.cookies.put(bid, cookie, version=0)
    assert info.value.cookie == expanded and info.value.current_version == 1
    with pytest.raises(CookieVersionConflict):
        zkstore.cookies.delete(bid, version=0)
    zkstore.cookies.delete(bid, version=1)
    assert zkstore.cookies.get(bid) is None and zkstore.registration.all_bookies() == []
    with pytest.raises(NoSuchCookie):
        zkstore.cookies.delete(bid)
    with pytest.raises(NoSuchCookie):
        zkstore.cookies.put(bid, cookie, version=3)


# ---------------------------------------------------------------------------
# autorecovery
# ---------------------------------------------------------------------------
def test_autorecovery_toggle_at_spec_paths(zkstore, zk_client):
    b = f"{zkstore.root}/underreplication"
    assert zkstore.underreplication.is_enabled()
    assert zkstore.underreplication.disable() is True
    assert zk_client.get(f"{b}/disable")[0] == b""
    assert not zkstore.underreplication.is_enabled()
    assert zkstore.underreplication.disable() is False  # already disabled
    assert zkstore.underreplication.enable() is True
    assert not zk_client.exists(f"{b}/disable")
    assert zkstore.underreplication.enable() is False  # already enabled
    # the manager's layout nodes exist, with Java's exact LAYOUT text
    assert zk_client.get(f"{b}/LAYOUT")[0] == b'type: "BASIC"\nversion: 1\n'
    assert zk_client.exists(f"{b}/ledgers") and zk_client.exists(f"{b}/locks")


def test_lost_bookie_recovery_delay(zkstore, zk_client):
    path = f"{zkstore.root}/underreplication/lostBookieRecoveryDelay"
    assert zkstore.underreplication.lost_bookie_recovery_delay() is None
    zkstore.underreplication.set_lost_bookie_recovery_delay(30)
    assert zk_client.get(path)[0] == b"30"
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    assert zk_client.get(path)[0] == b"0"
    assert zkstore.underreplication.lost_bookie_recovery_delay() == 0


def test_underreplication_marks_merge(zkstore, zk_client, metadata_uri):
    b = f"{zkstore.root}/underreplication"
    zkstore.underreplication.mark(1, ["10.0.0.3:3181"])
    path = f"{b}/ledgers/0000/0000/0000/0001/urL0000000001"
    assert zk_client.get(path)[0] == b'replica: "10.0.0.3:3181"\n'
    zkstore.underreplication.mark(1, ["10.0.0.3:3181", "10.0.0.4:3181"])
    data, stat = zk_client.get(path)
    assert data == b'replica: "10.0.0.3:3181"\nreplica: "10.0.0.4:3181"\n'
    zkstore.underreplication.mark(1, ["10.0.0.4:3181"])  # nothing new: untouched
    assert zk_client.get(path)[1].version == stat.version

    big = 0x4AFEBEEF0000FEED
    zkstore.underreplication.mark(big, ["b:1"])
    assert zk_client.exists(f"{b}/ledgers/4afe/beef/0000/feed/urL{big:010d}")
    zkstore.underreplication.mark(70000, ["c:1"])

    # concurrent markers from two sessions all end up merged
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as other:
        threads = [
            threading.Thread(target=s.underreplication.mark, args=(5, [f"h{i}:1"]))
            for i, s in enumerate([zkstore, other] * 4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(zkstore.underreplication.get(5).replicas) == sorted(f"h{i}:1" for i in range(8))

    marks = list(zkstore.underreplication.marks())
    assert [m.ledger_id for m in marks] == [1, 5, 70000, big]
    ledger_id, replicas, ctime = marks[0]
    assert (ledger_id, replicas, ctime) == (1, ("10.0.0.3:3181", "10.0.0.4:3181"), None)
    assert zkstore.underreplication.count() == 4


def test_underreplication_marks_are_read_a_level_of_the_tree_at_a_time(zkstore, monkeypatch):
    """Every mark has a leaf directory of its own: the walk lists a level at a time, a few
    lists a step (here 2), and still gives every mark once, ascending."""
    from bkctl.wire.metadata.zk import underreplication as zk_ur

    monkeypatch.setattr(zk_ur, "_LISTS_AT_ONCE", 2)
    ids = [3, 1, 70000, 0x10000, 65535, 2**40 + 7, 9]
    for ledger_id in ids:
        zkstore.underreplication.mark(ledger_id, [f"10.0.0.{ledger_id % 7}:3181"])
    marks = list(zkstore.underreplication.marks())
    assert [m.ledger_id for m in marks] == sorted(ids)
    assert all(m.replicas == (f"10.0.0.{m.ledger_id % 7}:3181",) for m in marks)
    assert zkstore.underreplication.count() == len(ids)


def test_underreplication_mark_with_ctime(metadata_uri, zk_client):
    with ZKMetadataStore(metadata_uri, store_ctime=True, twins=fastpath.selected()) as store:
        before = int(time.time() * 1000)
        store.underreplication.mark(3, ["a:1"])
        mark = store.underreplication.get(3)
    assert mark.ctime >= before
    assert (
        b"ctime: "
        in zk_client.get(f"{root_of(metadata_uri)}/underreplication/ledgers/0000/0000/0000/0003/urL0000000003")[0]
    )


def test_who_is_auditor_lowest_vote(zkstore, zk_client):
    election = f"{zkstore.root}/underreplication/auditorelection"
    assert zkstore.auditor.current() is None
    zk_client.ensure_path(election)
    first = zk_client.create(f"{election}/V_", b'bookieId: "127.0.0.1:3181"\n', ephemeral=True, sequence=True)
    zk_client.create(f"{election}/V_", b'bookieId: "127.0.0.1:3182"\n', ephemeral=True, sequence=True)
    assert zkstore.auditor.current() == "127.0.0.1:3181"
    zk_client.delete(first)
    assert zkstore.auditor.current() == "127.0.0.1:3182"


def test_lock_holder(zkstore, zk_client):
    zkstore.underreplication.mark(9, ["x:1"])
    assert zkstore.underreplication.lock_holder(9) is None
    zk_client.create(f"{zkstore.root}/underreplication/locks/urL0000000009", b'bookieId: "host-a"\n', ephemeral=True)
    assert zkstore.underreplication.lock_holder(9) == "host-a"


# ---------------------------------------------------------------------------
# metaformat / nuke
# ---------------------------------------------------------------------------
def populate(store: ZKMetadataStore, zk: KazooClient) -> None:
    b = f"{store.root}/underreplication"
    store.ledgers.create(md(), ledger_id=1)
    store.ledgers.create(md(), ledger_id=2**33)
    store.ledger_ids.generate()
    zk.ensure_path(f"{store.root}/idgen-long/HOB-0000000001")
    store.cookies.put("127.0.0.1:3181", make_cookie())
    store.underreplication.mark(1, ["127.0.0.1:3182"])
    zk.create(f"{b}/locks/urL0000000001", b'bookieId: "h"\n')
    store.underreplication.disable()
    store.underreplication.set_lost_bookie_recovery_delay(17)
    zk.create(f"{b}/auditorelection", b'bookieId: "127.0.0.1:3181"\n')
    zk.create(f"{b}/auditorelection/V_0000000000", b'bookieId: "127.0.0.1:3181"\n')


def test_format_keeps_and_wipes_per_spec(zkstore, zk_client):
    root = zkstore.root
    b = f"{root}/underreplication"
    populate(zkstore, zk_client)
    zkstore.registration.register("127.0.0.1:3181", b"")
    old_instance = zkstore.cluster.instance_id()
    zk_client.set(f"{root}/LAYOUT", HIER)  # same manager, rewritten anyway

    asked = []
    assert zkstore.cluster.format(confirm=lambda: asked.append(1) or False) is False
    assert asked and zkstore.ledgers.exists(1)  # declined: nothing wiped

    assert zkstore.cluster.format() is True
    children = set(zk_client.get_children(root))
    assert children == {"available", "underreplication", "LAYOUT", "INSTANCEID"}
    assert list(zkstore.ledgers.ids()) == []
    assert zkstore.cluster.instance_id() != old_instance and len(zkstore.cluster.instance_id()) == 36
    assert zk_client.get(f"{root}/LAYOUT")[0] == HIER
    assert zkstore.registration.writable_bookies() == ["127.0.0.1:3181"]  # available/ left alone
    assert not zk_client.exists(f"{b}/ledgers") and not zk_client.exists(f"{b}/locks")
    assert zk_client.exists(f"{b}/disable")
    assert zkstore.underreplication.lost_bookie_recovery_delay() == 17
    assert zk_client.get_children(f"{b}/auditorelection") == ["V_0000000000"]
    assert zkstore.registration.all_bookies() == []
    # the cluster is usable again right away
    assert zkstore.ledgers.create(md(), ledger_id=1) == (1, 0)
    zkstore.underreplication.mark(1, ["x:1"])


def test_prepare_format_on_missing_root(uninitialised_uri, zk_client):
    with ZKMetadataStore(uninitialised_uri, twins=fastpath.selected()) as store:
        assert store.cluster.prepare_format() is False
        assert zk_client.exists(f"{store.root}/available/readonly")
        assert store.cluster.format() is True  # the root exists now
        assert zk_client.get(f"{store.root}/LAYOUT")[0] == HIER
        assert len(store.cluster.instance_id()) == 36


def test_nuke_refusals_and_success(zkstore, zk_client, metadata_uri):
    root = zkstore.root
    populate(zkstore, zk_client)
    with pytest.raises(ValueError):
        zkstore.cluster.nuke()
    with pytest.raises(ValueError):
        zkstore.cluster.nuke(instance_id="x", force=True)
    with pytest.raises(NukeRefused):
        zkstore.cluster.nuke(instance_id="not-the-instance-id")

    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as bookie:
        bookie.registration.register("127.0.0.1:3181", b"")
        with pytest.raises(NukeRefused, match="stop all bookies"):
            zkstore.cluster.nuke(force=True)
        bookie.registration.register("127.0.0.1:3181", b"", readonly=True)
        with pytest.raises(NukeRefused):
            zkstore.cluster.nuke(force=True)
    assert zkstore.ledgers.exists(1)

    zk_client.create(f"{root}/someone-elses-node", b"")
    with pytest.raises(NukeRefused, match="someone-elses-node"):
        zkstore.cluster.nuke(force=True)
    assert zkstore.ledgers.exists(1)
    zk_client.delete(f"{root}/someone-elses-node")

    assert zkstore.cluster.nuke(instance_id=zkstore.cluster.instance_id()) is True
    assert not zk_client.exists(root)
    assert zkstore.cluster.nuke(force=True) is False  # nothing left
    with pytest.raises(ClusterNotFound):
        zkstore.cluster.nuke(instance_id="x")
    # and it can be initialised again
    zkstore.cluster.init()
    assert zk_client.get(f"{root}/LAYOUT")[0] == HIER


def test_format_flat_cluster_via_plain_zk_uri(zookeeper, zk_namespace, zk_client):
    base = f"{zookeeper.connect_string}{zk_namespace}/ledgers"
    with ZKMetadataStore(f"zk+flat://{base}", twins=fastpath.selected()) as store:
        store.cluster.init()
        store.ledgers.create(md(), ledger_id=42)
        store.ledgers.create(md())
    with ZKMetadataStore(f"zk://{base}", twins=fastpath.selected()) as store:
        assert store.cluster.format() is True
        # flat ledger nodes are recognised and wiped; the layout stays flat
        assert sorted(zk_client.get_children(f"{zk_namespace}/ledgers")) == ["INSTANCEID", "LAYOUT", "available"]
        assert (
            zk_client.get(f"{zk_namespace}/ledgers/LAYOUT")[0]
            == b"2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1"
        )
        assert store.cluster.manager == "flat"
    with ZKMetadataStore(f"zk+longhierarchical://{base}", twins=fastpath.selected()) as store:
        # an explicit manager in the URI is what metaformat writes
        store.cluster.format()
        assert store.cluster.layout().manager == "longhierarchical"


def test_concurrent_init_only_one_wins(uninitialised_uri):
    outcomes = []

    def init():
        with ZKMetadataStore(uninitialised_uri, twins=fastpath.selected()) as store:
            try:
                outcomes.append(store.cluster.init())
            except ClusterExists:
                outcomes.append("exists")

    threads = [threading.Thread(target=init) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("exists") == 3
    with ZKMetadataStore(uninitialised_uri, twins=fastpath.selected()) as store:
        assert store.cluster.instance_id() in outcomes


def test_a_walk_of_ledger_metadata_goes_on_past_a_corrupt_one(metadata_uri, capsys):
    """read_many names a ledger whose metadata does not decode in its place and
    goes on; ``ledger list`` reports it in a row of its own (exit 0)."""
    import json

    from bkctl.cli import run

    with ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as store:
        for ledger_id in (1, 2, 3):
            store.ledgers.create(md("127.0.0.1:3181"), ledger_id)
        store.client.set(store.ledgers.path(2), b"\x00not ledger metadata")
        got = list(store.ledgers.read_many(store.ledgers.ids()))
        assert [(i, type(m).__name__, v) for i, m, v in got] == [
            (1, "LedgerMetadata", 0),
            (2, "MetadataStoreError", -1),
            (3, "LedgerMetadata", 0),
        ]
        assert "ledger 2 has corrupt metadata" in str(got[1][1])
    capsys.readouterr()
    assert run(["-m", metadata_uri, "--json", "ledger", "list"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["ledger_id"] for r in rows] == [1, 2, 3]
    assert "corrupt metadata" in rows[1]["error"] and "error" not in rows[0]
