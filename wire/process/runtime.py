"""How a process that talks to bookies loads its runtime: the garbage collector of a
process that moves many entries (bookied and its autorecovery process, bkctl's bookie
client, ``bkctl autorecovery run``): one setting for all of them, and what it loads to
keep frozen as it loads (:func:`frozen_when_loaded`); and Twisted loaded without TLS
where the process uses none (:func:`twisted_without_tls`).

The tens of thousands of objects loaded at start (Twisted, kazoo, protobuf
descriptors, ...) never become garbage; :func:`gc.freeze` takes them out of
the collector's sight, so a full collection walks only what was allocated
since -- a few ms of stall instead of tens.  And the youngest generation is
collected every ``GC_THRESHOLD[0]`` net allocations instead of CPython's 700:
the objects of the adds and reads in flight (thousands under load) live for
a round trip or an fsync, and with the default they are promoted to the old
generations -- and walked again by each collection there -- before they die.
Measured with a client writing 60,000 pipelined adds (E3/Qw2/Qa2, 1,000 in
flight): 11.9-13.3 -> 10.3-11.6 us of CPU per add.

A library does not change a process's collector on its own: programs call
:func:`settle_garbage_collector` (bookied at start, bkctl when it first needs
the bookies); an application embedding the client may too.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "GC_THRESHOLD",
    "collector_held_off",
    "frozen_when_loaded",
    "settle_garbage_collector",
    "twisted_without_tls",
]

#: gc.set_threshold() of such a process (CPython's default: 700, 10, 10).
GC_THRESHOLD = (10_000, 10, 10)


def settle_garbage_collector(threshold: tuple[int, int, int] = GC_THRESHOLD) -> None:
    """Collect once, freeze what survives (everything loaded so far) and raise
    the youngest generation's threshold.  Calling it again freezes what was
    loaded since."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*threshold)


@contextmanager
def frozen_when_loaded() -> Iterator[None]:
    """What is loaded inside the block (the modules a process keeps to its end: Twisted,
    kazoo, protobuf, the client, the bookie) loaded without the garbage collector, then frozen.

    What they allocate (some 300,000 objects for a bookie) lives as long as the process;
    collected on the way, it is walked again and again for nothing, and by every full
    collection after unless frozen: some 60 ms of CPU per bookie start, 4% of the
    instructions of loading the reactor and crochet.  The few hundred objects of garbage
    the imports leave stay with them.  The collector is left as it was found."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _CollectorHold:
    """How many threads are inside :func:`collector_held_off`, and whether the collector was on
    when the first went in (a lock: the last one out, whichever it is, turns it back on)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.was_enabled = False

    def take(self) -> None:
        with self.lock:
            if self.holders == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.holders += 1

    def give_back(self) -> None:
        with self.lock:
            self.holders -= 1
            if self.holders == 0 and self.was_enabled:
                gc.enable()


_HOLD = _CollectorHold()


@contextmanager
def collector_held_off() -> Iterator[None]:
    """No automatic collection while a background thread builds and frees a large batch of
    acyclic objects (a bookie's flush: two lists per ledger, up to ~670,000 entries in them).

    A collection walks every item of the young lists it finds, holding the GIL: with the
    flush's lists young, each one took 22-26 ms (64 MiB of 100-byte entries in 10,000
    ledgers, three per flush), and any thread's allocations could set it off -- the
    reactor's adds waited that long.  Those objects never form a cycle and are freed by the
    flush itself, so the collector has nothing to find in them; the other threads' garbage
    waits for the block's end (the collector is back on when the last thread holding it off
    leaves, unless it was off before)."""
    _HOLD.take()
    try:
        yield
    finally:
        _HOLD.give_back()


@contextmanager
def twisted_without_tls(unless: bool) -> Iterator[None]:
    """Twisted loaded as where pyOpenSSL is not installed, for a process that uses no TLS.

    Twisted's TCP transports take their START_TLS support (pyOpenSSL, and with it
    cryptography's X.509 and service_identity: ~50-65 ms of CPU per start) when the
    reactor is imported, if ``OpenSSL`` imports; otherwise they are built without
    it, as Twisted supports.  A bookie without tlsProviderFactoryClass uses TLS
    nowhere (its server answers START_TLS with EBADREQ before touching the
    transport, its autorecovery process's client connects in plain text), nor does
    a one-shot ``bkctl`` command given no bookie TLS; so ``OpenSSL`` is made
    unimportable while the reactor loads (inside this block), and importable again
    after.  Once loaded so, the process's connections cannot start TLS: ``unless``
    (TLS configured, or may be later, as in the shell) loads Twisted as usual, and so
    does a process that loaded Twisted's TCP or pyOpenSSL already."""
    if unless or "twisted.internet.tcp" in sys.modules or "OpenSSL" in sys.modules:
        yield
        return
    # import OpenSSL -> ImportError (the import system's documented use of None; typeshed types modules only)
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "OpenSSL" in sys.modules and sys.modules["OpenSSL"] is None:
            del sys.modules["OpenSSL"]
