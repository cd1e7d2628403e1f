"""A bookie's server with Twisted's fakes, for the bookie's protocol tests: a journal
whose fsyncs the test completes by hand (:class:`ManualJournal`), a real entry store,
task.Clock, and connections over StringTransport (:class:`Env`, :class:`Conn`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from twisted.internet import task
from twisted.internet.testing import StringTransport

from bkctl.bookied.bookie import Bookie
from bkctl.bookied.errors import JournalFull, JournalUnavailable
from bkctl.bookied.journal import EntryRecord
from bkctl.bookied.metrics import Metrics
from bkctl.bookied.server import BookieServerFactory
from bkctl.bookied.storage import EntryStore
from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.framing import FrameDecoder, frame

KEY = master_key(b"password")
OTHER_KEY = master_key(b"wrong")
DM = DigestManager(1, DigestType.CRC32C, b"password")


class ManualJournal:
    """Stands in for bookied.journal.Journal: nothing is durable until the test says so."""

    def __init__(self):
        self.records = []
        #: the entry ids appended as patient (the bookie's recovery adds), in order
        self.patient = []
        self.waiting = []
        self.failed = None
        self.full = False

    def append(self, record, callback, *, sync=True, patient=False):
        if self.failed is not None:
            raise JournalUnavailable("journal failed")
        if self.full:
            raise JournalFull("full")
        self.records.append(record)
        if patient:
            self.patient.append(record.entry_id)
        self.waiting.append(callback)

    def append_entries(self, ledger_id, entry_ids, bodies, callback, patient=False):
        """As Journal.append_entries: an EntryRecord each, one callback for all, all or none."""
        if self.failed is not None:
            raise JournalUnavailable("journal failed")
        if self.full:
            raise JournalFull("full")
        self.records.extend(EntryRecord(ledger_id, e, b) for e, b in zip(entry_ids, bodies))
        if patient:
            self.patient.extend(entry_ids)
        self.waiting.append(callback)

    #: as Journal's; a full journal has all of it queued (the bookie's adds wait for half)
    max_queue_bytes = 1 << 20

    @property
    def pending_bytes(self) -> int:
        return self.max_queue_bytes if self.full else 0

    def force(self, callback):
        self.waiting.append(callback)

    def sync(self, error=None):
        waiting, self.waiting = self.waiting, []
        for cb in waiting:
            cb(error)

    def replay(self):
        return iter(())


class Env:
    def __init__(self, factory, journal, store, clock, bookie):
        self.factory, self.journal, self.store, self.clock, self.bookie = factory, journal, store, clock, bookie

    def connect(self):
        proto = self.factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return Conn(proto, transport)


class Conn:
    def __init__(self, proto, transport):
        self.proto, self.transport = proto, transport
        self.decoder = FrameDecoder()

    def send(self, payload: bytes):
        self.proto.dataReceived(frame(payload))

    def replies(self):
        data = self.transport.value()
        self.transport.clear()
        return self.decoder.feed(data)

    def v2(self):
        return [v2.decode_response(p) for p in self.replies()]

    def v3(self):
        return [v3.parse_response(p) for p in self.replies()]


def entry(entry_id, payload=b"hello", lac=-1, ledger=1):
    return DigestManager(ledger, DigestType.CRC32C, b"password").package(entry_id, lac, 5 * (entry_id + 1), payload)


def add(c, entry_id, key=KEY, flags=0, ledger=1, lac=-1):
    c.send(v2.AddRequest(2, flags, key, entry(entry_id, ledger=ledger, lac=lac), ledger, entry_id).encode())


@contextlib.contextmanager
def bookie_env(ledger_dir, store_options: dict | None = None, **bookie_options) -> Iterator[Env]:
    """A bookie over a real entry store in ``ledger_dir`` and a :class:`ManualJournal`,
    its server factory and a task.Clock; the store is closed at the end."""
    journal = ManualJournal()
    store = EntryStore(str(ledger_dir), **(store_options or {}), twins=fastpath.selected())
    clock = task.Clock()
    bookie = Bookie([journal], [store], clock=clock, **bookie_options)
    try:
        yield Env(BookieServerFactory(bookie, Metrics(), twins=fastpath.selected()), journal, store, clock, bookie)
    finally:
        store.close()
