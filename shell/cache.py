"""What the shell shows and completes about the cluster, refreshed in a background thread.

:class:`MetadataCache` keeps its own ZooKeeper session (separate from the
session App's, so a slow or failing refresh never holds up a command) and
re-reads, every :attr:`~MetadataCache.interval` seconds and after every
command (:meth:`~MetadataCache.poke`):

* the bookies (writable, read-only, with a cookie) and autorecovery as
  ``autorecovery status`` says it (the switch and the elected auditor), for
  the toolbar;
* the ledger ids, for completion.

Readers (the completer, the toolbar) only look at the last published
snapshot: they never wait for ZooKeeper.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bkctl.completers import LedgerIdIndex, bookie_states

if TYPE_CHECKING:
    from bkctl.wire.fastpath import Twins
    from bkctl.wire.metadata.zk import ZKMetadataStore


#: Stop listing ledger ids for completion after this many.
MAX_LEDGER_IDS = 500_000


@dataclass(frozen=True)
class Status:
    """One published snapshot of the cluster's state."""

    uri: str | None = None
    #: "none" (no cluster), "connecting", "ok" or "error"
    state: str = "none"
    error: str | None = None
    writable: int | None = None
    readonly: int | None = None
    #: autorecovery as ``autorecovery status`` says it: the switch, and the elected auditor (None: no daemon)
    autorecovery: bool | None = None
    auditor: str | None = None
    bookies: dict = field(default_factory=dict)
    updated: float | None = None


class MetadataCache:
    """Background-refreshed cluster facts; implements :class:`bkctl.completers.MetadataSource`."""

    def __init__(
        self,
        uri: str | None,
        twins: Twins,
        interval: float = 10.0,
        ledger_interval: float = 30.0,
        connect_timeout: float = 5.0,
        on_change: Callable[[], None] | None = None,
    ):
        self.interval = interval
        self.ledger_interval = ledger_interval
        self.connect_timeout = connect_timeout
        self.on_change = on_change
        #: the implementations its store uses (:mod:`bkctl.wire.fastpath`: the shell's record)
        self.twins = twins
        self._uri = uri
        self._generation = 0
        self._status = Status(uri=uri, state="connecting" if uri else "none")
        self._ledgers = LedgerIdIndex()
        self._ledgers_at = 0.0
        self._ledgers_wanted = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: ZKMetadataStore | None = None
        #: seconds the last ledger id listing took (for the benchmark)
        self.last_ledger_refresh: float | None = None
        #: set after every completed refresh round (tests and benchmarks wait on it)
        self.refreshed = threading.Event()

    # -- control (any thread) ------------------------------------------------
    def start(self, delay: float = 0.0) -> MetadataCache:
        """Start refreshing; ``delay`` lets the first prompt appear before kazoo is imported."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, args=(delay,), name="bkctl-shell-cache", daemon=True)
            self._thread.start()
        return self

    def poke(self) -> None:
        """Refresh now: a command may have changed things.

        The ledger ids are listed again too, unless they were listed moments
        ago or listing them is slow (a big cluster): then the usual
        :attr:`ledger_interval` applies.
        """
        self._ledgers_wanted = True
        self._wake.set()

    def set_uri(self, uri: str | None) -> None:
        """Follow another cluster: forget everything known about the old one."""
        self._uri = uri
        self._generation += 1
        self._status = Status(uri=uri, state="connecting" if uri else "none")
        self._ledgers = LedgerIdIndex()
        self._ledgers_at = 0.0
        self.refreshed.clear()
        self._notify()
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(2)
        self._drop_store()

    # -- reading (never blocks) ----------------------------------------------
    @property
    def status(self) -> Status:
        return self._status

    @property
    def ledger_count(self) -> int:
        return len(self._ledgers)

    def ledger_ids_matching(self, prefix: str, limit: int) -> list[str]:
        return self._ledgers.matching(prefix, limit)

    def bookie_states(self) -> dict[str, str]:
        return dict(self._status.bookies)

    def open_ledgers(self, ledger_ids) -> set[int]:
        """Those of ``ledger_ids`` that are not closed, asked of ZooKeeper at
        once (the completion thread waits at most a second; none without a session)."""
        from bkctl.completers import open_ledgers

        store = self._store
        if store is None:
            return set()
        return open_ledgers(store, ledger_ids, timeout=1.0)

    def pulsar_topics(self, base: str | None) -> list[str]:
        """Pulsar's topics, asked of ZooKeeper through the cache's session (none without one)."""
        from bkctl.completers import topic_names

        store = self._store
        return [] if store is None else topic_names(store, base)

    def pulsar_subscriptions(self, topic: str, base: str | None) -> list[str]:
        """A topic's subscriptions, asked through the cache's session (none without one)."""
        from bkctl.completers import subscription_names

        store = self._store
        return [] if store is None else subscription_names(store, topic, base)

    # -- the refresher thread ------------------------------------------------
    def _notify(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # a closed prompt, say: the toolbar is cosmetic
                pass

    def _drop_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:
                pass

    def _loop(self, delay: float) -> None:
        if delay and self._stop.wait(delay):
            return
        self._silence_kazoo()
        while not self._stop.is_set():
            self._wake.clear()  # a poke() from now on asks for another round
            generation = self._generation
            try:
                self._refresh(generation)
            except Exception as exc:  # unreachable, cluster gone, bad URI...
                self._drop_store()
                if generation == self._generation:
                    self._status = Status(uri=self._uri, state="error", error=_one_line(exc), updated=time.time())
                    self._notify()
            self.refreshed.set()
            self._wake.wait(self.interval)

    @staticmethod
    def _silence_kazoo() -> None:
        # kazoo logs every failed reconnect; the toolbar says it better
        logging.getLogger("kazoo").setLevel(logging.CRITICAL + 1)

    def _connected_store(self, uri: str, generation: int):
        store = self._store
        if store is not None and getattr(store, "uri", None) == uri:
            return store
        self._drop_store()
        from bkctl.wire.metadata.zk import ZKMetadataStore

        store = ZKMetadataStore(uri, timeout=self.connect_timeout, twins=self.twins)
        store.start()
        if generation != self._generation:  # switched cluster meanwhile
            store.close()
            raise _Stale()
        self._store = store
        return store

    def _refresh(self, generation: int) -> None:
        uri = self._uri
        if not uri:
            return
        try:
            store = self._connected_store(uri, generation)
            bookies = bookie_states(store)
            # the switch and the elected auditor, as `autorecovery status` reads them; not its
            # whole report, which walks every mark (8.1 s for 2,000 marks, against 2 ms for these)
            enabled, auditor = store.underreplication.is_enabled(), store.auditor.current()
        except _Stale:
            return
        if generation != self._generation:
            return
        states = list(bookies.values())
        self._status = Status(
            uri=uri,
            state="ok",
            writable=states.count("writable"),
            readonly=states.count("read-only"),
            autorecovery=enabled,
            auditor=auditor,
            bookies=bookies,
            updated=time.time(),
        )
        self._notify()
        if not self._ledgers_due():
            return
        started = time.monotonic()
        ids = []
        for ledger_id in store.ledgers.ids():
            ids.append(ledger_id)
            if len(ids) >= MAX_LEDGER_IDS or self._stop.is_set() or generation != self._generation:
                break
        if generation != self._generation:
            return
        self._ledgers = LedgerIdIndex(ids)
        self._ledgers_at = time.monotonic()
        self._ledgers_wanted = False
        self.last_ledger_refresh = self._ledgers_at - started

    def _ledgers_due(self) -> bool:
        if not self._ledgers_at:
            return True
        age = time.monotonic() - self._ledgers_at
        if age >= self.ledger_interval:
            return True
        return self._ledgers_wanted and age >= max(2.0, 5 * (self.last_ledger_refresh or 0.0))


class _Stale(Exception):
    """The cluster was switched while we were connecting."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
