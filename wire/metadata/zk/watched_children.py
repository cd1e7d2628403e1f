"""getChildren answers kept for as long as ZooKeeper's watches say they still hold.

The bookie's garbage collector lists every ledger range on each pass (Java's
ScanAndCompareGarbageCollector does: one getChildren per leaf znode of up to 10,000
ledgers, about a hundred of them at 10^6 ledgers).  Between two passes most leaves do not
change, yet ZooKeeper serialises each one again, on the same hosts' CPUs as the bookies'
in small clusters.  :class:`WatchedChildren` lists a znode once, leaves a one-shot child
watch, and answers from what it kept until that watch fires; a changed leaf is listed
again, an unchanged one costs nothing.

Why what it answers is what a fresh getChildren would have answered at the
:meth:`~WatchedChildren.settle` before it:

* ZooKeeper sends a watch's event before any answer that reflects the change, and a sync
  makes the server this session talks to catch up with the leader first; ``settle``
  waits for the events of every change committed before it to be handed over
  (:meth:`~.session.ZKSession.settle`).  The garbage collector takes the bookie's ledgers
  before it settles, so a ledger the bookie holds had its metadata created before the
  listing settles, and that creation's event has emptied the leaf's entry by then.
* An answer whose watch fired while it was being read is not kept (a count of events per
  znode, compared before and after).
* A dropped connection or an ended session forgets everything (events may have been
  missed, and a new session has no watches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from bkctl.wire.metadata.zk.session import ZKSession

__all__ = ["WatchedChildren"]

_T = TypeVar("_T")


class WatchedChildren:
    """One session's kept getChildren answers, each turned by its reader's ``parse`` into
    what the reader needs (a leaf's ledger ids as a SortedIds: 8 bytes a ledger, not a
    Python string per child)."""

    def __init__(self, session: ZKSession):
        self.session = session
        self._lock = threading.Lock()
        self._kept: dict[str, Any] = {}
        self._events: dict[str, int] = {}  # per znode, the watch events seen
        self._forgotten = 0  # times everything was forgotten (a dropped connection)
        #: getChildren requests sent, and answers given from what was kept
        self.listed = 0
        self.reused = 0
        self._stop_listening = session.on_disconnect(self.forget)

    def settle(self) -> None:
        """Before a listing: every change committed until now has emptied its znode's entry."""
        self.session.settle()

    def children(self, path: str, parse: Callable[[list[str]], _T]) -> _T:
        """``parse(children of path)``, kept until they change; NoNodeError for a missing
        znode (ZooKeeper watches no missing znode's children: nothing is kept)."""
        with self._lock:
            if path in self._kept:
                self.reused += 1
                kept: _T = self._kept[path]
                return kept
            before = (self._forgotten, self._events.get(path, 0))
        self.listed += 1
        value = parse(self.session.children_watched(path, self._changed))
        with self._lock:
            if (self._forgotten, self._events.get(path, 0)) == before:
                self._kept[path] = value
        return value

    def listing(self, path: str, parse: Callable[[list[str]], _T], missing_ok: bool = True) -> _T:
        """:meth:`children`, a missing znode read as one without children when ``missing_ok``
        (how the ledger manager's walks read a level)."""
        try:
            return self.children(path, parse)
        except NoNodeError:
            if not missing_ok:
                raise
            return parse([])

    def forget(self) -> None:
        """Drop everything kept (any thread)."""
        with self._lock:
            self._forgotten += 1
            self._kept.clear()

    def close(self) -> None:
        """Keep nothing more, and stop hearing of the session's connection."""
        self._stop_listening()
        self.forget()

    def _changed(self, event: WatchedEvent) -> None:
        # on kazoo's callback thread; a path of None: the session's watches are lost
        if event.path is None:
            self.forget()
            return
        with self._lock:
            self._events[event.path] = self._events.get(event.path, 0) + 1
            self._kept.pop(event.path, None)
