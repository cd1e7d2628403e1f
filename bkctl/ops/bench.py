"""``bkctl bench``: write and read throughput of the cluster through the Python client.

Writes ``entries`` entries of ``size`` random bytes to a new ledger, keeping
``inflight`` adds outstanding, and records each add's latency (from the call
to its acknowledgement, which comes in entry order); then closes the ledger,
reads it back in batches and deletes it.  What is measured is this client
(one Python process, one reactor thread) against the cluster, not what the
bookies could take from many clients.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.client.ledger_handle import LedgerHandle


@dataclass(frozen=True, slots=True)
class AddLatency:
    """The adds' latencies, in milliseconds."""

    mean: float
    p50: float
    p99: float
    p999: float
    max: float


@dataclass(frozen=True, slots=True)
class Throughput:
    """How fast a pass went: its ``seconds``, entries and MB (10^6 bytes of payload) per second."""

    seconds: float
    entries_per_second: float
    mb_per_second: float


@dataclass(frozen=True, slots=True)
class AddThroughput:
    """The adds' pass: as :class:`Throughput`, and each add's latency."""

    seconds: float
    entries_per_second: float
    mb_per_second: float
    latency_ms: AddLatency


@dataclass(frozen=True, slots=True)
class BenchResult:
    """A ``bkctl bench`` run: the (deleted) ledger and its shape, what was written, how fast."""

    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    entry_size: int
    entries: int
    inflight: int
    add: AddThroughput
    read: Throughput


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    n = len(sorted_values)
    rank = min(n, max(1, math.ceil(round(fraction * n, 9))))
    return sorted_values[rank - 1]


def handle_window(inflight: int) -> int:
    """The ``max_inflight`` of the ledger handle :func:`drive_adds` writes through with
    ``inflight`` adds outstanding: an eighth above it.  The driver bounds its window
    itself (as the Java client's bench does with a Semaphore); a handle limit equal to
    it marked the bookies max_inflight writes behind at every full window, and each next
    add then waited, with a Deferred of its own, until an eighth of the window was
    answered (the handle's refill rule), which the Java client does not do."""
    inflight = max(1, inflight)
    return inflight + max(1, inflight // 8)


def drive_adds(
    client: BookKeeperClient,
    handle: LedgerHandle,
    count: int,
    payload: bytes,
    inflight: int,
    on_add: Callable[[int], Any] | None,
) -> Deferred[list[float]]:
    """In the reactor thread: ``count`` adds, ``inflight`` outstanding at most;
    fires with the latency (seconds) of each.  ``on_add(n)``: ``n`` more adds
    completed, called every 1/200th of the adds and at the end (a progress bar's
    advance: once per add it cost some 2% of an add's CPU)."""
    from twisted.internet import defer
    from twisted.python.failure import Failure

    issued = acked_count = reported = 0
    step = max(1, count // 200)
    next_report = -1 if on_add is None else min(count, step)  # on_add(n) when acked_count gets there
    report: Callable[[int], Any] = on_add if on_add is not None else (lambda n: None)  # None: never called
    stopped = False  # cancelled or failed: no more adds (those in flight are let finish)

    def cancelled(_d: object) -> None:  # Ctrl-C
        nonlocal stopped
        stopped = True

    done: defer.Deferred[list[float]] = defer.Deferred(canceller=cancelled)
    # latencies[i]: add i's start (perf_counter) until it completes, then its latency.
    # Adds complete in entry order (the handle's promise), so the completion under way is
    # add ``acked_count``'s: its callback needs no arguments of its own (callbackArgs cost
    # a tuple and Deferred's argument handling, some 2% of an add's CPU).  One callable
    # takes either outcome (addBoth): addCallbacks' argument handling cost some 5% more.
    latencies = [0.0] * count
    clock = time.perf_counter
    add_entry = handle.add_entry

    def fill() -> None:
        nonlocal issued
        while not stopped and issued < count and issued - acked_count < inflight:
            latencies[issued] = clock()
            issued += 1
            add_entry(payload).addBoth(acked)

    def acked(result: object) -> None:
        nonlocal acked_count, reported, issued, next_report
        if done.called:  # cancelled or failed: the run is over
            return
        if isinstance(result, Failure):
            failed(result)
            return
        index = acked_count
        latencies[index] = clock() - latencies[index]
        acked_count = index + 1
        if acked_count == next_report:  # one comparison per add (on_add None: never)
            report(acked_count - reported)
            reported = acked_count
            next_report = min(count, acked_count + step)
        if acked_count == count:
            done.callback(latencies)
        elif issued < count and not stopped:
            # fill()'s loop, inline: one completion makes room for one add
            latencies[issued] = clock()
            issued += 1
            add_entry(payload).addBoth(acked)
            if issued - acked_count < inflight:
                fill()

    def failed(f: Failure) -> None:
        nonlocal stopped
        stopped = True
        done.errback(f)

    if count == 0:
        done.callback([])
    else:
        fill()
    return done


def bench(
    bk: BlockingBookKeeper,
    ensemble: int = 3,
    write_quorum: int = 2,
    ack_quorum: int = 2,
    size: int = 100,
    entries: int = 10000,
    inflight: int = 256,
    on_add: Callable[[int], Any] | None = None,
    on_read: Callable[[int], Any] | None = None,
) -> BenchResult:
    """Run the benchmark: the adds' throughput and latency, the reads' throughput."""
    from bkctl.wire.client.blocking import run_in_reactor

    payload = os.urandom(size)
    lh = bk.create(
        ensemble, write_quorum, ack_quorum, "CRC32C", b"", {"Bookie": b"bench"}, max_inflight=handle_window(inflight)
    )
    try:
        started = time.perf_counter()
        latencies = run_in_reactor(drive_adds, bk.client, lh.handle, entries, payload, inflight, on_add, timeout=None)
        add_seconds = time.perf_counter() - started
        lh.close()
        reader = bk.open(lh.ledger_id)
        started = time.perf_counter()
        read = 0
        for batch in reader.read_range(0, batch=1000) if entries else ():
            read += len(batch)
            if on_read is not None:
                on_read(len(batch))
        read_seconds = time.perf_counter() - started
    finally:
        try:
            bk.delete(lh.ledger_id)
        except Exception:  # noqa: BLE001 - the run's own error matters more
            pass
    ordered = sorted(latencies)
    ms = 1000.0

    def rate(n: int, seconds: float) -> float:
        return round(n / seconds, 1) if seconds > 0 else 0.0

    latency = AddLatency(
        mean=round(sum(ordered) / len(ordered) * ms, 3) if ordered else 0.0,
        p50=round(percentile(ordered, 0.50) * ms, 3),
        p99=round(percentile(ordered, 0.99) * ms, 3),
        p999=round(percentile(ordered, 0.999) * ms, 3),
        max=round(ordered[-1] * ms, 3) if ordered else 0.0,
    )
    add = AddThroughput(
        round(add_seconds, 6),
        rate(entries, add_seconds),
        round(entries * size / 1e6 / add_seconds, 3) if add_seconds > 0 else 0.0,
        latency,
    )
    reads = Throughput(
        round(read_seconds, 6),
        rate(read, read_seconds),
        round(read * size / 1e6 / read_seconds, 3) if read_seconds > 0 else 0.0,
    )
    return BenchResult(lh.ledger_id, ensemble, write_quorum, ack_quorum, size, entries, inflight, add, reads)
