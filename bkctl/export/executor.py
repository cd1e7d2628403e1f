"""How an export reads the bookies: one client per process, its reads and the LAC.

The same code serves the driver (planning: the LAC of an open ledger, a
cursor ledger's newest position) and Spark's Python workers (the tasks'
entry reads):

* :class:`ReadSettings`: how to reach and read the cluster (picklable; every
  task carries it);
* :func:`new_client`: the one place a :class:`~bkctl.wire.client.blocking.BlockingBookKeeper`
  is made for an export, with one timeout policy;
* :func:`process_client`: the client of this process for a cluster, made
  once and reused by every task the process runs (its reactor is the process's
  one thread; a forked child makes its own);
* :class:`LedgerReader`: the reads -- ``last_add_confirmed``, ``entries`` --
  through a client it makes on first use: on the driver one of its own on the
  driver's metadata store (closed with the reader), in a worker the
  process's.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bkctl.wire.domain.entry_source import EntrySource
    from bkctl.wire.fastpath import Twins
    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import OffloadLocation

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_READ_WINDOW",
    "LedgerRangeError",
    "LedgerReader",
    "ReadSettings",
    "close_process_clients",
    "new_client",
    "process_client",
]

#: Entries per read batch inside a task (one Arrow record batch each).
DEFAULT_BATCH_SIZE = 1_000
#: Seconds a read request may take before another replica is asked.
DEFAULT_READ_TIMEOUT = 10.0
#: Entries in flight per task.
DEFAULT_READ_WINDOW = 256


class LedgerRangeError(RuntimeError):
    """A task asks for entries the ledger does not (or no longer) have."""


@dataclass(frozen=True)
class ReadSettings:
    """How an export's readers reach and read the cluster (no connections; picklable)."""

    uri: str
    protocol: str = "v3"
    read_timeout: float = DEFAULT_READ_TIMEOUT
    read_window: int = DEFAULT_READ_WINDOW
    batch_size: int = DEFAULT_BATCH_SIZE
    #: the ledger password; None: the one stored in the metadata
    password: bytes | None = None
    #: how a worker's ZooKeeper sessions authenticate (:class:`~bkctl.wire.metadata.zksecurity.ZKSecurity`)
    zk_security: Any = None
    #: TLS to the bookies (:class:`bkctl.wire.tls.TLSFiles`), None for plain text
    bookie_tls: Any = None
    #: how offloaded ledgers are reached (:class:`bkctl.wire.pulsar.offload_store.OffloadSettings`;
    #: None: its defaults); the credentials are the reading process's own (AWS_* ...)
    offload: Any = None

    def client_key(self) -> tuple:
        """What a process's clients are told apart by."""
        return (self.uri, self.protocol, self.read_timeout, self.read_window)


def new_client(settings: ReadSettings, metadata: Any = None):
    """A BlockingBookKeeper for ``settings`` on ``metadata`` (a metadata store;
    default: its own session to ``settings.uri``).  Adds and reads time out
    after ``read_timeout``; a whole blocking call after six of those, or a
    minute, whichever is longer (an open with recovery reads several times)."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    tls = {"tls": settings.bookie_tls} if settings.bookie_tls else {}
    return BlockingBookKeeper(
        settings.uri if metadata is None else metadata,
        protocol=settings.protocol,
        **tls,
        read_timeout=settings.read_timeout,
        add_timeout=settings.read_timeout,
        read_window=settings.read_window,
        timeout=max(60.0, settings.read_timeout * 6),
    )


_clients_lock = threading.Lock()
_clients: dict[tuple, Any] = {}
_clients_pid: int | None = None


def process_client(settings: ReadSettings):
    """This process's client for the cluster of ``settings`` (made once)."""
    global _clients_pid
    key = settings.client_key()
    with _clients_lock:
        if _clients_pid != os.getpid():  # a forked child must not use its parent's connections
            _clients.clear()
            _clients_pid = os.getpid()
        bk = _clients.get(key)
        if bk is None:
            if settings.zk_security is not None:
                from bkctl.wire.metadata import zksecurity

                zksecurity.set_default(settings.zk_security)  # the worker's ZooKeeper sessions
            bk = _clients[key] = new_client(settings)
            if len(_clients) == 1:
                atexit.register(close_process_clients)
        return bk


def close_process_clients() -> None:
    """Close this process's clients (at exit)."""
    with _clients_lock:
        clients = list(_clients.values()) if _clients_pid == os.getpid() else []
        _clients.clear()
    for bk in clients:
        try:
            bk.close()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass


class LedgerReader:
    """An export's reads of ledgers, through a client made on first use.

    :meth:`on_driver` makes its own client on the driver's metadata store and
    closes it with the reader; :meth:`in_process` uses the process's client
    (:func:`process_client`), which outlives it.
    """

    def __init__(self, settings: ReadSettings, make_client: Callable[[], Any], owns_client: bool, twins: Twins):
        self.settings = settings
        #: the implementations its decoding uses (:mod:`bkctl.wire.fastpath`: the export
        #: process's, given by :meth:`on_driver`/:meth:`in_process`)
        self.twins = twins
        self._make_client = make_client
        self._owns_client = owns_client
        self._client = None

    def offloaded_last_entry(self, location: OffloadLocation) -> int:
        """The last entry id of ``location``'s ledger by its offloaded copy (its index is read
        now: a missing object, refused credentials or a store that does not answer fail here,
        before any task)."""
        ledger = self._offloaded(location)
        if location.is_s3:
            ledger.store.head(location.data_key)
        return ledger.last_entry_id()

    def _offloaded(self, location: OffloadLocation) -> OffloadedLedger:
        from bkctl.wire.pulsar.offload_reader import OffloadedLedger
        from bkctl.wire.pulsar.offload_store import OffloadSettings

        return OffloadedLedger(location, self.settings.offload or OffloadSettings())

    @classmethod
    def on_driver(cls, settings: ReadSettings, store: Any) -> LedgerReader:
        from bkctl.wire import fastpath

        return cls(settings, lambda: new_client(settings, store), owns_client=True, twins=fastpath.selected())

    @classmethod
    def in_process(cls, settings: ReadSettings) -> LedgerReader:
        from bkctl.wire import fastpath

        return cls(settings, lambda: process_client(settings), owns_client=False, twins=fastpath.selected())

    def client(self):
        """The BlockingBookKeeper the reads go through (made now if not yet)."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def last_add_confirmed(self, ledger_id: int) -> int:
        """The LAC of a ledger that is not closed (opened without recovery)."""
        return self.client().open(ledger_id, self.settings.password).last_add_confirmed

    def tail(self, ledger_id: int):
        """The tail of a ledger that is not closed: its LAC and the entries past
        it that an ack quorum holds, read without fencing (a
        :class:`~bkctl.wire.client.unconfirmed_tail.Tail`)."""
        return self.client().open(ledger_id, self.settings.password).read_tail()

    def entries(self, source: EntrySource, first: int, last: int) -> Iterator[list]:
        """Entries ``first..last`` of the ledger ``source`` reads, as lists of ``(entry id,
        payload)``, ``batch_size`` at a time: from its offloaded copy when the plan chose it, else
        from the bookies, with :class:`LedgerRangeError` rather than reading past the last entry
        of a closed ledger or the LAC of an open one -- unless ``source.unconfirmed``: then the
        entries of an open ledger past its LAC that the plan found (its tail) are read too."""
        if source.offload is not None:
            yield from self._offloaded(source.offload).entries(first, last, self.settings.batch_size)
            return
        ledger_id, unconfirmed = source.ledger_id, source.unconfirmed
        ledger = self.client().open(ledger_id, self.settings.password)
        limit = ledger.last_entry_id if ledger.is_closed else ledger.last_add_confirmed
        past_lac = unconfirmed and not ledger.is_closed
        if last > limit and not past_lac:
            what = "last entry" if ledger.is_closed else "last add confirmed"
            raise LedgerRangeError(f"ledger {ledger_id}: cannot read entries {first}..{last}, its {what} is {limit}")
        expected = first
        for entries in ledger.read_range(first, last, batch=self.settings.batch_size, allow_unconfirmed=past_lac):
            if not entries:
                continue
            if entries[0][0] != expected or entries[-1][0] != expected + len(entries) - 1:
                raise LedgerRangeError(
                    f"ledger {ledger_id}: expected entries from {expected}, got {entries[0][0]}..{entries[-1][0]}"
                )
            expected += len(entries)
            yield entries
        if expected != last + 1:
            raise LedgerRangeError(f"ledger {ledger_id}: read stopped at entry {expected - 1}, wanted up to {last}")

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    def __enter__(self) -> LedgerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
