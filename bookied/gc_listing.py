"""Which of the bookie's ledgers have no metadata: the garbage collector's listing of
every ledger in the metadata store, done in a process of its own.

:class:`GarbageFinder` is the comparison, as Java's ScanAndCompareGarbageCollector makes
it: the ledger ranges (one ZooKeeper ``getChildren`` per leaf znode of up to 10,000
ledgers, ids from the znodes' names, no metadata decoded) walked beside the bookie's
ledgers, ascending; a range whose leaf and bookie's ids did not change since the last
pass is answered from memory.

Where it runs.  At 10^6 ledgers in the metadata the listing is seconds of Python (the
ZooKeeper client decodes a million names; a million ids are made and looked up).  In
a thread of the bookie's process that work holds the GIL the reactor needs for every
add and read: measured with ``bench/bench_gc_scale.py``, live adds' p99 during a pass
was 2.2-5.3x idle although bookied runs with a 0.1 ms switch interval.  So the bookie
(:class:`ListingProcess`, in the GC's pool thread) hands its ledger ids to a child
process (:func:`main`, ``python -m bkctl.bookied.gc_listing``) that lists the metadata
on a ZooKeeper session of its own, at a CPU priority below the bookie's threads
(:data:`LISTING_CPU_PRIORITY`: SCHED_IDLE) and working half its time (:func:`paced`), and answers with
the ids to delete; the bookie deletes them.

Safety, as Java's: the bookie's ledgers are taken before the child lists (a ledger
created after that is not among them), with ``verifyMetadataOnGC`` the child reads
each missing one again, and a child that fails, ends or is killed gives no answer, so
the pass deletes nothing (:class:`~.errors.GcListingError`).  A missing ledgers root
is an error too (:meth:`~bkctl.wire.metadata.zk.ledgers.ZKLedgerManager.ranges`), never
an empty listing.

The child is started at the first pass and kept between passes (one ZooKeeper session,
no start-up cost a pass), and so is what it listed: each znode under a child watch, asked
for again only once its watch fired (``ranges(watched=True)``,
:class:`~bkctl.wire.metadata.zk.watched_children.WatchedChildren`), so that a pass over
metadata that did not change costs ZooKeeper a sync, not a hundred leaves of 10,000 names; it ends when its input does (the bookie closes it, or dies),
on SIGTERM (the bookie shutting down ends a listing under way), or, should the bookie
be killed while it lists, when it finds itself orphaned.

The protocol, on the child's standard input and output: a first line of JSON settings
(the bookie's configuration as bk_server.conf text, ``verify``, the log level and
CPU priority); then per pass a request, the bookie's ids in any order (the child sorts
them) as an 8-byte count and that many native 8-byte integers, and an answer, a JSON line
(``{"garbage": n}`` or ``{"error": why}``) followed by the ``n`` ids to delete, native.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, NamedTuple

from .errors import GcListingError, GcListingStopped

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import LedgerRange

    from .storage.compactor import CompactableStore

log = logging.getLogger("bookied.gc")

__all__ = [
    "LISTING_BUSY_SHARE",
    "LISTING_CPU_PRIORITY",
    "DeletedLedgerCollector",
    "GarbageFinder",
    "ListingProcess",
    "PackedIds",
    "ascending",
    "main",
    "pack_ids",
    "paced",
    "unpack_ids",
]

#: the listing's CPU priority (:func:`~.child_process.lower_cpu_priority`): SCHED_IDLE, in
#: the bookie's own CPU group (session), not one of its own.  It takes the CPU the bookie's
#: threads leave, and a waking bookie thread preempts it at once, where at nice 19 the
#: scheduler let it finish its slice first: on a quiet 2-CPU host with 10^6 ledgers, live
#: adds' p99 during a pass was 2.5x idle at nice 19 (2.2x working a quarter of its time) and
#: 1.9x and 2.1x in two runs at SCHED_IDLE.  Against other sessions it takes the bookie's share, as Java's GC
#: thread does; in a group of its own (the autorecovery daemon's) a host kept busy starved
#: it: a pass over 10^5 ledgers took 40 s instead of 0.6 s at load 20 on 2 CPUs
LISTING_CPU_PRIORITY = "idle"

#: the share of its time the listing works (:func:`paced`): at most half a core of the
#: child's and ZooKeeper's CPU at a time, as Java's GC thread would take at most one
LISTING_BUSY_SHARE = 0.5

_COUNT = struct.Struct(">Q")
#: seconds a child has to end once asked to (SIGTERM, or its input closed) before SIGKILL
STOP_TIMEOUT = 5.0
#: seconds between the child's looks at whether its bookie is still there
ORPHAN_CHECK_INTERVAL = 1.0
#: the child's exit status when its bookie went away while it listed
EXIT_ORPHANED = 3


class GarbageFinder:
    """Which of the bookie's ledgers have no metadata, compared as Java's
    ScanAndCompareGarbageCollector compares: range by range, the bookie's ids (ascending,
    taken before the listing) beside the ids a leaf znode lists.

    It remembers each range's answer with what it was computed from, the leaf's listing (the
    object itself) and the bookie's ids in the range.  A watched walk
    (``ranges(watched=True)``) hands out the same listing object for as long as ZooKeeper's
    watch says the leaf did not change, so a later pass computes again only the ranges
    where the leaf or the bookie's ids changed: over 10^6 ledgers in the metadata and 10^5
    on the bookie, a pass where nothing changed costs a few milliseconds of CPU, where
    comparing every range took 0.1 s (a million ids looked up), CPU the bookie's adds felt
    on a 2-CPU host although the listing runs at idle priority.  An answer is a function of
    the two inputs alone, and the objects are held (so never mistaken for new ones), so a
    remembered answer is the one a comparison would give."""

    def __init__(self) -> None:
        self._answers: dict[int, tuple[AbstractSet[int], Sequence[int], list[int]]] = {}
        #: ranges compared, and answered from memory, by the last call
        self.compared = 0
        self.remembered = 0

    def __call__(
        self, ledgers, local: Sequence[int], verify: bool = False, ranges: Iterable[LedgerRange] | None = None
    ) -> list[int]:
        """Which of ``local`` (the bookie's ledgers, ascending and without repeats, taken
        before this is called) have no metadata in ``ledgers`` (a ledger manager), listed by
        ``ranges`` (its ``ranges(watched=True)`` when None, or those as the caller paces them);
        with ``verify`` (Java's ``verifyMetadataOnGC``) each one missing from the listing is
        read once more and kept if its metadata is there."""
        gone: list[int] = []
        answers: dict[int, tuple[AbstractSet[int], Sequence[int], list[int]]] = {}
        known = self._answers
        self.compared = self.remembered = 0
        lo, n = 0, len(local)
        for rng in ledgers.ranges(watched=True) if ranges is None else ranges:
            hi = bisect_right(local, rng.end, lo)
            if hi > lo:
                mine = local[lo:hi]
                was = known.get(rng.end)
                if was is not None and was[0] is rng.ledgers and was[1] == mine:
                    missing = was[2]
                    self.remembered += 1
                else:
                    missing = sorted(set(mine).difference(rng.ledgers))
                    self.compared += 1
                answers[rng.end] = (rng.ledgers, mine, missing)
                gone.extend(missing)
                lo = hi
            if lo == n:
                break
        gone.extend(local[lo:])
        self._answers = answers
        if verify and gone:
            kept = {lid for lid, md, _v in ledgers.read_many(gone) if md is not None}
            if kept:
                log.warning(
                    "ledgers %s were not listed in the metadata store but their metadata is there: not deleted",
                    sorted(kept),
                )
            gone = [lid for lid in gone if lid not in kept]
        return gone


def ascending(ids: Iterable[int]) -> array[int]:
    """``ids`` ascending without repeats, packed: what :class:`GarbageFinder` compares."""
    return array("q", sorted(set(ids)))


def paced(ranges: Iterable[LedgerRange], busy_share: float = LISTING_BUSY_SHARE) -> Iterator[LedgerRange]:
    """``ranges``, with a sleep after each as long as it took to come and be compared, scaled
    so that the listing works ``busy_share`` of its time: its CPU, and ZooKeeper's for it
    (the wait for each getChildren's answer counts as work), come in bursts of one leaf."""
    mark = time.monotonic()
    for rng in ranges:
        yield rng
        time.sleep((time.monotonic() - mark) * (1 - busy_share) / busy_share)
        mark = time.monotonic()


#: ids packed per C call when the bookie sends its ledgers (:func:`pack_ids`)
WRITE_SLICE = 4096


class PackedIds(NamedTuple):
    """Ledger ids as the child reads them: how many, and native 8-byte integers."""

    length: int
    data: bytes

    def ids(self) -> array[int]:
        return unpack_ids(self.data)


def unpack_ids(data: bytes) -> array[int]:
    """Native 8-byte integers (the ids either side sends) as an array."""
    out = array("q")
    out.frombytes(data)
    return out


def pack_ids(ids: Sequence[int]) -> PackedIds:
    """``ids`` packed a slice at a time, each a short C call: 10^5 ids packed at once held
    the GIL about 7 ms, a stall the bookie's reactor (its adds) waited out.  Even sliced,
    packing 10^5 ids is 5 ms of the GIL taken in turns with the reactor, so the bookie
    keeps what it packed for as long as its ledgers do not change
    (:class:`DeletedLedgerCollector`)."""
    return PackedIds(
        len(ids),
        b"".join(array("q", ids[start : start + WRITE_SLICE]).tobytes() for start in range(0, len(ids), WRITE_SLICE)),
    )


def _read_exactly(stream, size: int) -> bytes | None:
    data = stream.read(size) if size else b""
    return data if len(data) == size else None


class ListingProcess:
    """The bookie's handle on its listing child: :meth:`garbage` in the GC's pool thread
    (one pass at a time), :meth:`stop` and :meth:`close` when the bookie stops."""

    def __init__(
        self, config_text: str, *, verify: bool, log_level: str | None = None, cpu_priority: str = LISTING_CPU_PRIORITY
    ):
        self.settings = {
            "config": config_text,
            "verify": verify,
            "cpu_priority": cpu_priority,
            "log_level": log_level or logging.getLevelName(logging.getLogger().getEffectiveLevel()),
        }
        #: the running child (None before the first pass and after one ended)
        self.proc: subprocess.Popen | None = None
        #: children started so far
        self.started = 0
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None and proc.returncode is None else None

    def garbage(self, local: Sequence[int] | PackedIds) -> list[int]:
        """Which of ``local`` (ledger ids, in any order, or packed) have no metadata, as the
        child lists them; a :class:`~.errors.GcListingError` when it gives no answer."""
        packed = local if isinstance(local, PackedIds) else pack_ids(local)
        with self._lock:
            if self._stopped:
                raise GcListingStopped("the bookie is shutting down")
            proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(_COUNT.pack(packed.length))
                proc.stdin.write(packed.data)
                proc.stdin.flush()
                line = proc.stdout.readline()
                doc = json.loads(line) if line else None
                if doc is not None and "error" in doc:
                    if self._stopped:  # asked to stop meanwhile: whatever the child met on its way out
                        raise GcListingStopped("the bookie is shutting down")
                    raise GcListingError(f"listing the ledgers in the metadata store failed: {doc['error']}")
                raw = None if doc is None else _read_exactly(proc.stdout, 8 * doc["garbage"])
            except (OSError, ValueError, KeyError):
                raw = None
            if raw is None:
                status = self._end(proc)
                if self._stopped:
                    raise GcListingStopped("the bookie is shutting down")
                raise GcListingError(f"the metadata listing process {proc.pid} ended ({status}): nothing deleted")
            return unpack_ids(raw).tolist()

    def _start(self) -> subprocess.Popen:
        from .child_process import child_environment

        proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_environment()
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(self.settings).encode("utf-8") + b"\n")
        self.proc = proc
        self.started += 1
        log.info("metadata listing process %d started", proc.pid)
        return proc

    @staticmethod
    def _end(proc: subprocess.Popen) -> str:
        """Wait for a child whose answer broke off (SIGKILL if it lingers); its exit status."""
        try:
            code = proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def stop(self) -> None:
        """No more listings; a listing under way ends at once (its child is sent SIGTERM).
        Any thread, does not wait."""
        self._stopped = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass  # gone meanwhile

    def close(self) -> None:
        """:meth:`stop`, then wait for the child to end (SIGKILL after :data:`STOP_TIMEOUT`).
        Blocking: in a pool thread."""
        self.stop()
        with self._lock:  # the pass that was listing has seen its child end
            proc, self.proc = self.proc, None
            if proc is not None and proc.returncode is None:
                self._end(proc)


# -- the child ---------------------------------------------------------------------------------


def _watch_parent(parent: int) -> None:
    """End this process if its bookie is gone (killed while this one listed)."""
    while True:
        time.sleep(ORPHAN_CHECK_INTERVAL)
        if os.getppid() != parent:
            os._exit(EXIT_ORPHANED)


#: set by SIGTERM, which also raises SystemExit to end a listing at once; a library may swallow
#: that exception where it lands (kazoo's bare ``except:`` around waking its connection turns it
#: into ConnectionClosedError), and then this still says the child is to end, with no answer
_TERMINATED = threading.Event()


def _terminated(_signum, _frame) -> None:
    _TERMINATED.set()
    raise SystemExit(0)


def main() -> int:
    """The child: one answer per request until its input ends or SIGTERM."""
    parent = os.getppid()
    # Ctrl-C in a terminal reaches the bookie's whole process group: the bookie stops this one
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminated)
    from .child_process import lower_cpu_priority, read_settings

    settings = read_settings()
    if settings is None:
        return 0
    threading.Thread(target=_watch_parent, args=(parent,), name="orphan-check", daemon=True).start()
    # the answers on a descriptor of their own: whatever prints to stdout goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from .startup import configure_logging

    configure_logging(settings["log_level"])
    lower_cpu_priority(settings["cpu_priority"], "metadata listing")
    from bkctl.wire import fastpath
    from bkctl.wire.errors import BKError
    from bkctl.wire.metadata import zksecurity
    from bkctl.wire.metadata.zk import ZKMetadataStore

    from .config import load_config_text

    cfg = load_config_text(settings["config"])
    if not cfg.metadata_service_uri:  # the bookie does not start without one
        log.error("metadata listing: no metadataServiceUri in the bookie's configuration")
        return 2
    zksecurity.set_default(cfg.zk_security())
    # this process's start: its record (the bookie's environment), for the walks' scanner
    store = ZKMetadataStore(cfg.metadata_service_uri, timeout=cfg.zk_timeout / 1000.0, twins=fastpath.selected())
    started = False
    requests = sys.stdin.buffer
    find_garbage = GarbageFinder()
    request, local = b"", array("q")
    try:
        while True:
            head = _read_exactly(requests, _COUNT.size)
            raw = None if head is None else _read_exactly(requests, 8 * _COUNT.unpack(head)[0])
            if raw is None:
                return 0  # the bookie closed our input, or is gone
            if raw != request:  # the bookie's ledgers changed since the last pass: sorted again
                request, local = raw, ascending(unpack_ids(raw))
            try:
                if not started:
                    store.start()
                    started = True
                ledgers = store.ledgers
                gone = find_garbage(ledgers, local, settings["verify"], paced(ledgers.ranges(watched=True)))
            except BKError as e:
                if _TERMINATED.is_set():
                    return 0  # the SIGTERM, turned into an error on its way: no answer
                out.write(json.dumps({"error": str(e) or type(e).__name__}).encode("utf-8") + b"\n")
                out.flush()
                continue
            if _TERMINATED.is_set():
                return 0
            out.write(json.dumps({"garbage": len(gone)}).encode("utf-8") + b"\n")
            out.write(array("q", gone).tobytes())
            out.flush()
    except BrokenPipeError:
        return 0  # the bookie is gone
    finally:
        if started:
            store.close()


if __name__ == "__main__":
    sys.exit(main())


class DeletedLedgerCollector:
    """Which ledgers a pass deletes from the entry stores: those whose metadata is gone, found
    as Java's ScanAndCompareGarbageCollector finds them (:class:`~.gc_listing.GarbageFinder`),
    so that ZooKeeper's cost grows with the ledger ranges (one getChildren per leaf znode of
    up to 10,000 ledgers), not with the ledgers.

    Safe against a ledger created meanwhile by its order, Java's: the stores' ledgers are
    taken first, then the metadata is listed. A ledger reaches a bookie only after its
    metadata was created, so each ledger taken has metadata that the listing sees unless
    it was deleted; a ledger created after the snapshot, whose leaf the listing may miss,
    is not in it. With ``verify`` (Java's ``verifyMetadataOnGC``) each ledger missing from
    the listing is read once more and deleted only if its metadata is truly gone.
    Java's over-replicated-ledger removal (``gcOverreplicatedLedgerWaitTime``) is not done.

    ``listing(local)`` (bookied's: :meth:`~.gc_listing.ListingProcess.garbage`, in a process
    of its own) answers which of ``local`` (the bookie's ledger ids, in any order) to delete;
    without it, ``ledgers`` (a ledger manager) is listed in this process.
    """

    def __init__(self, ledgers, verify: bool = False, listing: Callable[[PackedIds], list[int]] | None = None):
        self.ledgers = ledgers  # the metadata store's ledger manager
        self.verify = verify
        self.listing = listing
        self._find_garbage = GarbageFinder()  # without a listing process: in this one
        self._sent: tuple[list[int], PackedIds] | None = None  # the stores' ledgers_version, and their ids
        self.active = 0  # ledgers the stores held at the last pass (Java's ACTIVE_LEDGER_COUNT)

    def __call__(self, stores: Sequence[CompactableStore]) -> int:
        """In a pool thread: delete the ledgers of ``stores`` whose metadata is gone; how many.
        No step holds the GIL long (the reactor takes adds meanwhile).  With a ``listing``
        the stores' ids go to it as they are (one C copy each, packed in slices: it sorts them
        in its own process), packed again only once a store's ledgers changed; without,
        each store's ids come sorted in slices and are merged in Python, not sorted again in
        one C call."""
        if self.listing is not None:
            versions = [store.ledgers_version for store in stores]  # before the ids: see ledger_ids
            if self._sent is None or self._sent[0] != versions:
                held = [store.ledger_ids(ordered=False) for store in stores]
                local = held[0] if len(held) == 1 else list(itertools.chain.from_iterable(held))
                self.active = len(local) if len(held) == 1 else len(set(local))
                self._sent = (versions, pack_ids(local))
            gone = self.listing(self._sent[1])
        else:
            held = [store.ledger_ids() for store in stores]
            local = held[0] if len(held) == 1 else list(dict.fromkeys(heapq.merge(*held)))
            self.active = len(local)
            gone = self._find_garbage(self.ledgers, local, self.verify)
        for store in stores:
            mine = gone if len(stores) == 1 else [ledger_id for ledger_id in gone if store.has_ledger(ledger_id)]
            if mine:
                store.delete_ledgers(mine)
        return len(gone)
