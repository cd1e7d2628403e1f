"""The same behavioural checks of a BookieChannel (wire/client/channel.py) on both of its
implementations: BookieConnection to a real bookied, and the unit tests' fake bookie
(tests/support/fake_bookie.py).  Whatever the ledger layer's unit tests learn from the fake
holds on a real bookie, because here the fake has to answer as bookied does: adds and
reads, the first master key, fencing and recovery adds, what a bookie does not have, the
LAC (READ_LAC, WRITE_LAC, long polls), batch reads, each protocol's limits, and close."""

from __future__ import annotations

import itertools
import os
import uuid

import pytest
from twisted.internet import defer, task

from bkctl.wire import fastpath
from bkctl.wire.client.blocking import run_in_reactor
from bkctl.wire.client.channel import BookieChannel
from bkctl.wire.client.connection import BookieConnection
from bkctl.wire.client.errors import (
    BookieUnavailable,
    LedgerFencedError,
    NoSuchEntry,
    NoSuchLedgerOnBookie,
    NotSupported,
    Unauthorized,
)
from bkctl.wire.codecs.add_frames import AddEncoder, EncodedAdd
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakeConnection

# module-scoped bookie: one xdist worker runs the whole module
pytestmark = pytest.mark.xdist_group("bookie_channel_conformance")

KEY = master_key(b"pw")
OTHER_KEY = master_key(b"not the password")
#: ledger ids no two tests share (the real bookie serves the whole module)
LEDGER_IDS = itertools.count(os.getpid() % 1000 * 1_000_000 + 1)


class Bookie:
    """Channels to one bookie: :meth:`open` one, :meth:`start` a call on it and
    :meth:`wait` for what came of it -- ``("ok", value)`` or ``("error", exception)``."""

    bookie_id: str

    def open(self, protocol: str) -> BookieChannel:
        raise NotImplementedError

    def start(self, call):
        raise NotImplementedError

    def wait(self, pending) -> tuple[str, object]:
        raise NotImplementedError

    def outcome(self, call) -> tuple[str, object]:
        return self.wait(self.start(call))

    def close_all(self) -> None:
        pass


def _outcome(call) -> defer.Deferred:
    return defer.maybeDeferred(call).addCallbacks(lambda value: ("ok", value), lambda f: ("error", f.value))


class RealBookie(Bookie):
    """A bookied process, reached by BookieConnections in the client's reactor thread."""

    def __init__(self, proc: BookieProcess):
        self.bookie_id = proc.bookie_id
        self.opened: list[BookieConnection] = []

    def open(self, protocol: str) -> BookieChannel:
        conn = run_in_reactor(
            lambda: BookieConnection(
                self.bookie_id, protocol=protocol, add_timeout=30.0, read_timeout=30.0, twins=fastpath.selected()
            )
        )
        self.opened.append(conn)
        return conn

    def start(self, call):
        return run_in_reactor(lambda: [_outcome(call)], timeout=30)[0]

    def wait(self, pending) -> tuple[str, object]:
        return run_in_reactor(lambda: pending, timeout=60)

    def close_all(self) -> None:
        for conn in self.opened:
            run_in_reactor(conn.close, timeout=30)


class FakeBookie(Bookie):
    """The fake, on a clock that runs on while the test waits for an answer."""

    def __init__(self):
        self.bookie_id = "127.0.0.1:3181"
        self.clock = task.Clock()

    def open(self, protocol: str) -> BookieChannel:
        conn = FakeConnection(self.bookie_id, clock=self.clock, protocol=protocol)
        conn.auto = True
        return conn

    def start(self, call):
        return _outcome(call)

    def wait(self, pending) -> tuple[str, object]:
        for _ in range(600):  # time passes until it answers (a minute at most)
            if pending.called:
                break
            self.clock.advance(0.1)
        return successResultOf(pending)


@pytest.fixture(scope="module")
def real_bookie(zookeeper, tmp_path_factory):
    from bkctl.wire.metadata.zk import ZKMetadataStore

    root = f"/channel{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    proc = BookieProcess(tmp_path_factory.mktemp("channel-bookie"), uri)
    try:
        start_bookies([proc], uri)
        yield proc
    finally:
        proc.kill()


@pytest.fixture(params=["bookied", "fake"])
def bookie(request):
    b = RealBookie(request.getfixturevalue("real_bookie")) if request.param == "bookied" else FakeBookie()
    try:
        yield b
    finally:
        b.close_all()


class Ledger:
    """One ledger's entries as a writer packages them (entry ``e`` carries LAC ``e - 1``)."""

    def __init__(self):
        self.id = next(LEDGER_IDS)
        self.digest = DigestManager(self.id, DigestType.CRC32C, b"pw")

    def entry(self, entry_id: int) -> bytes:
        payload = b"entry-%d" % entry_id
        return self.digest.package(entry_id, entry_id - 1, 100 + entry_id, payload)


def added(
    bookie: Bookie,
    ch: BookieChannel,
    ledger: Ledger,
    entry_id: int,
    *,
    key: bytes = KEY,
    recovery: bool = False,
    slot: int = 7,
):
    """ADD through the ledger layer's callback: what ``on_done`` got, or what the call raised."""

    def call():
        d = defer.Deferred()
        add = EncodedAdd(ledger.id, entry_id, key, ledger.entry(entry_id), recovery, False)
        ch.add_run([add], [slot], lambda ctx, *rest: d.callback(("ctx" if ctx is add else ctx, *rest)))  # itself
        return d

    kind, value = bookie.outcome(call)
    return value if kind == "ok" else ("raised", value)


def add_all(bookie, ch, ledger, entry_ids) -> None:
    for e in entry_ids:
        assert added(bookie, ch, ledger, e) == ("ctx", 7, bookie.bookie_id, None)


def ok(outcome):
    kind, value = outcome
    assert kind == "ok", value
    return value


def error(outcome, cls):
    kind, value = outcome
    assert kind == "error" and isinstance(value, cls), value
    return value


def failed_on(outcome, cls, bookie):
    """An error of ``cls`` that names the bookie it came from."""
    exc = error(outcome, cls)
    assert exc.bookie == bookie.bookie_id
    return exc


@pytest.fixture(params=["v3", "v2"])
def protocol(request):
    return request.param


# -- adds and reads ----------------------------------------------------------------------


def test_entries_added_read_back_whole(bookie, protocol):
    ch = bookie.open(protocol)
    assert ch.bookie_id == bookie.bookie_id and isinstance(ch, BookieChannel)
    ledger = Ledger()
    assert added(bookie, ch, ledger, 0) == ("ctx", 7, bookie.bookie_id, None)

    def encoded():
        d = defer.Deferred()
        add = AddEncoder(protocol, codec=fastpath.selected().codec).encode(
            ledger.id, 1, KEY, ledger.entry(1), False, False
        )
        ch.add_run([add], [8], lambda ctx, *rest: d.callback(("enc" if ctx is add else ctx, *rest)))  # itself
        return d

    assert ok(bookie.outcome(encoded)) == ("enc", 8, bookie.bookie_id, None)
    assert ok(bookie.outcome(lambda: ch.read(ledger.id, 0))) == ledger.entry(0)

    def read_with_callback():
        d = defer.Deferred()
        ch.read_with_callback(ledger.id, 1, lambda *outcome: d.callback(outcome), "rd", 9)
        return d

    assert ok(bookie.outcome(read_with_callback)) == ("rd", 9, bookie.bookie_id, ledger.entry(1))
    assert ok(bookie.outcome(lambda: ch.read(ledger.id, -1))) == ledger.entry(1)  # -1: the last one it has


def test_what_the_bookie_does_not_have(bookie, protocol):
    ch = bookie.open(protocol)
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, 0)), NoSuchLedgerOnBookie, bookie)
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, -1)), NoSuchLedgerOnBookie, bookie)

    def read_with_callback():
        d = defer.Deferred()
        ch.read_with_callback(ledger.id, 0, lambda *outcome: d.callback(outcome), None, 0)
        return d

    _ctx, _slot, bookie_id, result = ok(bookie.outcome(read_with_callback))
    assert bookie_id == bookie.bookie_id and isinstance(result, NoSuchLedgerOnBookie)
    add_all(bookie, ch, ledger, [0, 1])
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, 5)), NoSuchEntry, bookie)


def test_a_ledger_keeps_the_master_key_it_was_first_written_with(bookie, protocol):
    ch = bookie.open(protocol)
    ledger = Ledger()
    add_all(bookie, ch, ledger, [0])
    ctx, _slot, bookie_id, err = added(bookie, ch, ledger, 1, key=OTHER_KEY)
    assert bookie_id == bookie.bookie_id and isinstance(err, Unauthorized)
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, -1, fence_master_key=OTHER_KEY)), Unauthorized, bookie)
    if protocol == "v3":
        body = ledger.digest.package_lac(0)
        failed_on(bookie.outcome(lambda: ch.write_lac(ledger.id, 0, OTHER_KEY, body)), Unauthorized, bookie)
    assert added(bookie, ch, ledger, 1) == ("ctx", 7, bookie.bookie_id, None)  # the right key still works
    # a master key is a SHA-1: anything else is refused before it is sent
    raised, exc = added(bookie, ch, ledger, 2, key=b"short")
    assert raised == "raised" and isinstance(exc, ValueError)


# -- fencing -------------------------------------------------------------------------------


def test_a_fenced_ledger_takes_recovery_adds_only(bookie, protocol):
    ch = bookie.open(protocol)
    ledger = Ledger()
    add_all(bookie, ch, ledger, [0, 1, 2])
    assert ok(bookie.outcome(lambda: ch.read(ledger.id, -1, fence_master_key=KEY, high_priority=True))) == ledger.entry(
        2
    )
    _ctx, _slot, _b, err = added(bookie, ch, ledger, 3)
    assert isinstance(err, LedgerFencedError) and err.bookie == bookie.bookie_id
    assert added(bookie, ch, ledger, 3, recovery=True) == ("ctx", 7, bookie.bookie_id, None)
    assert ok(bookie.outcome(lambda: ch.read(ledger.id, 3))) == ledger.entry(3)
    # fencing again changes nothing
    assert ok(bookie.outcome(lambda: ch.read(ledger.id, -1, fence_master_key=KEY))) == ledger.entry(3)


def test_fencing_a_ledger_the_bookie_never_saw_gives_it_the_key(bookie, protocol):
    ch = bookie.open(protocol)
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, -1, fence_master_key=KEY)), NoSuchEntry, bookie)
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, 0)), NoSuchEntry, bookie)  # it knows the ledger now
    _ctx, _slot, _b, err = added(bookie, ch, ledger, 0, key=OTHER_KEY)
    assert isinstance(err, Unauthorized)
    _ctx, _slot, _b, err = added(bookie, ch, ledger, 0)
    assert isinstance(err, LedgerFencedError)
    assert added(bookie, ch, ledger, 0, recovery=True) == ("ctx", 7, bookie.bookie_id, None)


# -- the LAC (v3) ----------------------------------------------------------------------------


def test_read_lac_gives_the_explicit_lac_and_the_last_entry(bookie):
    ch = bookie.open("v3")
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: ch.read_lac(ledger.id)), NoSuchEntry, bookie)  # a ledger it never saw
    add_all(bookie, ch, ledger, [0, 1, 2])
    assert ok(bookie.outcome(lambda: ch.read_lac(ledger.id))) == (None, ledger.entry(2))
    lac_body = ledger.digest.package_lac(2)
    assert ok(bookie.outcome(lambda: ch.write_lac(ledger.id, 2, KEY, lac_body))) is None
    assert ok(bookie.outcome(lambda: ch.read_lac(ledger.id))) == (lac_body, ledger.entry(2))
    only_lac = Ledger()  # a WRITE_LAC before any entry
    body = only_lac.digest.package_lac(-1)
    assert ok(bookie.outcome(lambda: ch.write_lac(only_lac.id, -1, KEY, body))) is None
    assert ok(bookie.outcome(lambda: ch.read_lac(only_lac.id))) == (body, None)


def test_long_polls_answer_once_the_lac_passes_or_their_time_is_up(bookie):
    ch = bookie.open("v3")
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: ch.read_long_poll(ledger.id, -1, 200)), NoSuchLedgerOnBookie, bookie)
    add_all(bookie, ch, ledger, [0, 1, 2])  # the bookie's LAC is 1 (entry 2 carries it)
    assert ok(bookie.outcome(lambda: ch.read_long_poll(ledger.id, 0, 30_000))) == (1, 1, ledger.entry(1))
    assert ok(bookie.outcome(lambda: ch.read_long_poll(ledger.id, 0, 30_000, piggyback=False))) == (1, None, None)
    assert ok(bookie.outcome(lambda: ch.read_long_poll(ledger.id, 1, 200))) == (1, None, None)  # time is up
    assert ok(bookie.outcome(lambda: ch.read_long_poll(ledger.id, 5, 0))) == (1, None, None)  # no wait at all
    waiting = bookie.start(lambda: ch.read_long_poll(ledger.id, 1, 30_000))
    add_all(bookie, ch, ledger, [3])  # carries LAC 2
    assert ok(bookie.wait(waiting)) == (2, 2, ledger.entry(2))
    waiting = bookie.start(lambda: ch.read_long_poll(ledger.id, 2, 30_000))
    assert ok(bookie.outcome(lambda: ch.write_lac(ledger.id, 3, KEY, ledger.digest.package_lac(3)))) is None
    assert ok(bookie.wait(waiting)) == (3, 3, ledger.entry(3))  # an explicit LAC moves it too


# -- batch reads (v2) ----------------------------------------------------------------------


def test_batch_reads_give_consecutive_entries_from_the_first(bookie):
    ch = bookie.open("v2")
    ledger = Ledger()
    add_all(bookie, ch, ledger, range(10))
    big = 1 << 20
    assert ok(bookie.outcome(lambda: ch.batch_read(ledger.id, 2, 3, big))) == [ledger.entry(e) for e in (2, 3, 4)]
    assert ok(bookie.outcome(lambda: ch.batch_read(ledger.id, 2, 0, big))) == [ledger.entry(e) for e in range(2, 10)]
    assert ok(bookie.outcome(lambda: ch.batch_read(ledger.id, 9, 5, big))) == [ledger.entry(9)]
    assert ok(bookie.outcome(lambda: ch.batch_read(ledger.id, 2, 5, 1))) == [ledger.entry(2)]  # the first always
    failed_on(bookie.outcome(lambda: ch.batch_read(ledger.id, 10, 5, big)), NoSuchEntry, bookie)
    failed_on(bookie.outcome(lambda: ch.batch_read(next(LEDGER_IDS), 0, 5, big)), NoSuchLedgerOnBookie, bookie)
    # a fencing batch read fences
    assert ok(bookie.outcome(lambda: ch.batch_read(ledger.id, 8, 5, big, fence_master_key=KEY))) == [
        ledger.entry(8),
        ledger.entry(9),
    ]
    _ctx, _slot, _b, err = added(bookie, ch, ledger, 10)
    assert isinstance(err, LedgerFencedError)


# -- each protocol's limits --------------------------------------------------------------------


def test_the_entry_list_names_the_entries_held(bookie):
    from bkctl.wire.codecs.availability import decode_availability

    ch = bookie.open("v3")
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: ch.entry_availability(ledger.id)), NoSuchLedgerOnBookie, bookie)
    add_all(bookie, ch, ledger, [0, 1, 2, 5, 6, 9])
    assert decode_availability(ok(bookie.outcome(lambda: ch.entry_availability(ledger.id)))) == [(0, 2), (5, 6), (9, 9)]
    v2 = bookie.open("v2")
    failed_on(bookie.outcome(lambda: v2.entry_availability(ledger.id)), NotSupported, bookie)


def test_each_protocol_refuses_what_it_cannot_carry(bookie):
    v2, v3 = bookie.open("v2"), bookie.open("v3")
    ledger = Ledger()
    failed_on(bookie.outcome(lambda: v3.batch_read(ledger.id, 0, 5, 1 << 20)), NotSupported, bookie)
    failed_on(bookie.outcome(lambda: v2.read_lac(ledger.id)), NotSupported, bookie)
    failed_on(bookie.outcome(lambda: v2.read_long_poll(ledger.id, 0, 100)), NotSupported, bookie)
    failed_on(
        bookie.outcome(lambda: v2.write_lac(ledger.id, 0, KEY, ledger.digest.package_lac(0))), NotSupported, bookie
    )
    # a v2 ADD carries the ids in its body: one that does not start with them is refused
    kind, exc = bookie.outcome(
        lambda: v2.add_run([EncodedAdd(ledger.id, 0, KEY, b"\0" * 40, False, False)], [0], lambda *a: None)
    )
    assert kind == "error" and isinstance(exc, ValueError)


# -- close -------------------------------------------------------------------------------------


def test_close_fails_what_waits_and_everything_after(bookie, protocol):
    ch = bookie.open(protocol)
    ledger = Ledger()
    add_all(bookie, ch, ledger, [0])
    waiting = bookie.start(lambda: ch.read_long_poll(ledger.id, 5, 30_000)) if protocol == "v3" else None
    assert ok(bookie.outcome(ch.close)) is None
    if waiting is not None:
        failed_on(bookie.wait(waiting), BookieUnavailable, bookie)
    _ctx, _slot, bookie_id, err = added(bookie, ch, ledger, 1)
    assert bookie_id == bookie.bookie_id and isinstance(err, BookieUnavailable)
    failed_on(bookie.outcome(lambda: ch.read(ledger.id, 0)), BookieUnavailable, bookie)
    assert ok(bookie.outcome(ch.close)) is None  # closing again is fine
