"""The bookies a client can place on now: its one copy of the writable and read-only
bookie lists, kept by the metadata store's watches (Java's ``BookieWatcherImpl`` over
``RegistrationClient.watchWritableBookies``/``watchReadOnlyBookies``).

Every new ensemble (a ledger created, an ensemble changed, a fragment re-replicated)
starts from these lists.  Read from ZooKeeper each time, they cost two round trips a
ledger: a restore of 10^5 ledgers made 2x10^5 of them before its first add.  Here the
lists are read once, with watches, on first use (not at the client's start: a one-shot
command that never places a ledger sets no watch), and then answered without a round
trip; the watches' notifications replace them, so a bookie that registers or goes away
is seen by the first choice made after ZooKeeper told the client.

* A session loss (expired, or the store closed) drops the lists and their watches: the
  next call reads them again and watches anew.  (Java's watch task re-reads after an
  expiry on its own; reading on demand keeps a client that no longer places ledgers
  from reading at all.)
* The placement's rack source (``placement.refresh``: a topology script for hosts not
  known yet; the rack map znode, which the source watches on its own from its first
  refresh: :class:`~bkctl.wire.metadata.racks.RackSource`) is refreshed with the lists:
  when they are first read, when a notification changed them, and when the client's
  placement is another object than the one last refreshed -- not at every choice.
* :meth:`BookieWatcher.close` unwatches (the client's close).

Notifications come from the store's thread (kazoo's on ZooKeeper): they only swap the
lists under a short lock, never call the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import NamedTuple

from twisted.internet import defer

from bkctl.wire.metadata.errors import ZKUnavailable
from bkctl.wire.metadata.store import MetadataStore, Unwatch

from .errors import ClientClosed

__all__ = ["AvailableBookies", "BookieWatcher"]


class AvailableBookies(NamedTuple):
    """The writable and read-only bookies, each sorted, as the registrations say now."""

    writable: list[str]
    readonly: list[str]


class BookieWatcher:
    """The client's bookie lists, kept by watches (see the module's text).

    ``run_blocking(fn, *args)`` runs a store call off the reactor thread (the client's,
    which also starts the store) and fires with its result."""

    def __init__(self, store: MetadataStore, run_blocking: Callable[..., defer.Deferred[AvailableBookies]]):
        self._store = store
        self._run_blocking = run_blocking
        #: held while the watches are set up (store calls); never by a notification
        self._setting_up = threading.Lock()
        #: held only to read or swap the state below, never around a store call
        self._lock = threading.Lock()
        self._generation = 0  # a session loss or close: the watches of an older one are ignored
        self._changes = 0  # notifications taken in: racks refreshed before one are stale
        self._writable: list[str] | None = None
        self._readonly: list[str] | None = None
        self._watching = False
        self._unwatch: list[Unwatch] = []
        self._stop_lost: Unwatch | None = None
        self._racks_of: object = None  # the placement whose racks were refreshed for these lists
        self._closed = False

    def lists(self, placement: object) -> defer.Deferred[AvailableBookies]:
        """Fires with the :class:`AvailableBookies`: at once once they are known (and
        ``placement``'s racks refreshed for them), else after reading and watching them
        off the reactor thread."""
        with self._lock:
            writable, readonly, fresh = self._writable, self._readonly, self._racks_of is placement
        if fresh and writable is not None and readonly is not None:
            return defer.succeed(AvailableBookies(list(writable), list(readonly)))
        return self._run_blocking(self._read, placement)

    def _read(self, placement: object) -> AvailableBookies:
        """(In a thread.)  The lists, watched first if they are not; ``placement``'s racks
        refreshed for them when they changed since."""
        with self._setting_up:
            if self._closed:
                raise ClientClosed("the BookKeeper client is closed")
            if not self._watching:
                self._watch()
            with self._lock:
                writable, readonly, changes = self._writable, self._readonly, self._changes
                fresh = self._racks_of is placement
            if writable is None or readonly is None:
                raise ZKUnavailable("the ZooKeeper session ended while the bookie lists were read")
            refresh = getattr(placement, "refresh", None)
            if not fresh and refresh is not None:
                refresh(list(writable) + list(readonly))
            with self._lock:
                if self._changes == changes and self._writable is not None:
                    self._racks_of = placement
            return AvailableBookies(list(writable), list(readonly))

    def _watch(self) -> None:
        """(In a thread, setting up.)  Watch both lists: each watch tells its list at once."""
        registration = self._store.registration
        if self._stop_lost is None:
            self._stop_lost = self._store.on_session_lost(self._session_lost)
        with self._lock:
            generation = self._generation
        stops: list[Unwatch] = []
        try:
            stops.append(registration.watch_writable_bookies(lambda ids: self._changed(generation, ids, None)))
            stops.append(registration.watch_readonly_bookies(lambda ids: self._changed(generation, None, ids)))
        except BaseException:
            _stop_all(stops)
            raise
        with self._lock:
            current = generation == self._generation
            if current:
                self._unwatch, self._watching = stops, True
            stop_lost = self._stop_lost if self._closed else None
            if stop_lost is not None:
                self._stop_lost = None
        if not current:  # lost (or closed) meanwhile: these watches belong to no one
            _stop_all(stops)
        if stop_lost is not None:  # closed while this was set up
            stop_lost()

    def _changed(self, generation: int, writable: list[str] | None, readonly: list[str] | None) -> None:
        """(From the store's thread.)  A watch told a list."""
        with self._lock:
            if generation != self._generation:
                return
            if writable is not None:
                self._writable = list(writable)
            if readonly is not None:
                self._readonly = list(readonly)
            self._changes += 1
            self._racks_of = None

    def _session_lost(self) -> None:
        """(From the store's thread.)  The lists may have changed unseen: dropped with
        their watches, read and watched again at the next call."""
        self._forget()

    def _forget(self) -> None:
        with self._lock:
            self._generation += 1
            stops, self._unwatch = self._unwatch, []
            self._writable = self._readonly = None
            self._watching = False
            self._racks_of = None
        _stop_all(stops)

    def close(self) -> None:
        """Stop watching (idempotent); a later call fails with ClientClosed."""
        with self._lock:
            self._closed = True
            stop_lost, self._stop_lost = self._stop_lost, None
        self._forget()
        if stop_lost is not None:
            stop_lost()


def _stop_all(stops: Iterable[Unwatch]) -> None:
    for stop in stops:
        stop()
