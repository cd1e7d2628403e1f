"""What each bookie's HTTP admin says about it, endpoint by endpoint (``bkctl disk`` and ``bkctl top``).

A view of many bookies must not fail for one: an endpoint that cannot be
read -- the bookie is down, its HTTP server is off, a Java bookie answers
``gc_details`` without entry-log figures or ``/metrics`` with nothing (no
Prometheus provider) -- is named in ``unread`` with the reason, and the
views show what they could read.  The bookies are read at once, each in a
thread of its own, with a short timeout, so one stalled bookie delays a
view by that timeout, never by the sum.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .bookie_http import GC, GC_DETAILS, HTTP_FAILURES, call, http_address, read_only_reasons_of
from .bookies import BookieRow, Registration

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

INFO = "/api/v1/bookie/info"
METRICS = "/metrics"
#: endpoint -> the name ``unread`` uses for it
NAMES = {INFO: "info", GC: "gc", GC_DETAILS: "gc_details", METRICS: "metrics"}


@dataclass
class BookieReading:
    """One bookie as its registration and HTTP admin showed it at ``read_at`` (``time.monotonic()``)."""

    bookie_id: str
    state: Registration
    http: str | None = None  # host:port of its HTTP admin
    info: dict | None = None  # freeSpace, totalSpace
    gc: dict | None = None  # GET /api/v1/bookie/gc (bookied adds its figures to Java's one key)
    gc_details: list | None = None
    metrics: str | None = None  # Prometheus text
    unread: dict[str, str] = field(default_factory=dict)
    read_at: float = 0.0

    @property
    def kind(self) -> str | None:
        """``bookied`` (its gc status has run counters), ``java`` (it answered, without them), None (no answer)."""
        if isinstance(self.gc, dict) and "gcRuns" in self.gc:
            return "bookied"
        if self.info is not None or self.gc is not None:
            return "java"
        return None

    @property
    def gc_state(self) -> dict:
        """The first (bookied: only) garbage collector's ``gc_details`` entry, or {}."""
        if self.gc_details and isinstance(self.gc_details[0], dict):
            return self.gc_details[0]
        return {}

    @property
    def entry_logs(self) -> list[dict] | None:
        """Each entry log's size, live bytes and ratio (bookied's ``gc_details``); None when not reported."""
        logs = self.gc_state.get("entryLogs")
        return logs if isinstance(logs, list) else None

    @property
    def read_only_reasons(self) -> dict[str, str] | None:
        """Why the bookie is read-only, as it says (bookied's ``info`` ``readOnlyReasons``: cause ->
        why); None when it is writable or does not say (Java's HTTP admin does not)."""
        return read_only_reasons_of(self.info)

    @property
    def total_bytes(self) -> int | None:
        return _int(self.info, "totalSpace")

    @property
    def free_bytes(self) -> int | None:
        return _int(self.info, "freeSpace")

    @property
    def used_bytes(self) -> int | None:
        total, free = self.total_bytes, self.free_bytes
        return None if total is None or free is None else total - free


def _int(doc: Any, key: str) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_bookie(
    store: MetadataStore | None,
    bookie_id: str,
    state: Registration,
    endpoints: tuple[str, ...],
    timeout: float = 2.0,
    address: str | None = None,
) -> BookieReading:
    """Ask one bookie's HTTP admin for ``endpoints`` (paths above); every failure goes to ``unread``."""
    reading = BookieReading(bookie_id, state, read_at=time.monotonic())
    if state is Registration.DOWN:
        reading.unread["http"] = "not registered (down)"
        return reading
    if address is None:
        try:
            address = http_address(store, bookie_id)
        except HTTP_FAILURES as e:
            reading.unread["http"] = str(e)
            return reading
    reading.http = address
    for path in endpoints:
        name = NAMES.get(path, path)
        try:
            answer = call(address, "GET", path, timeout=timeout)
        except HTTP_FAILURES as e:
            reading.unread[name] = str(e)
            if "HTTP " not in str(e):  # not answering at all: the other endpoints will not answer either
                for other in endpoints[endpoints.index(path) + 1 :]:
                    reading.unread[NAMES.get(other, other)] = "not asked: the bookie did not answer"
                break
            continue
        if path == METRICS:
            if not isinstance(answer, str) or not answer.strip():
                reading.unread[name] = "empty (the bookie exports no metrics: no Prometheus stats provider?)"
            else:
                reading.metrics = answer
        elif path == INFO:
            reading.info = answer if isinstance(answer, dict) else None
        elif path == GC:
            reading.gc = answer if isinstance(answer, dict) else None
        elif path == GC_DETAILS:
            reading.gc_details = answer if isinstance(answer, list) else None
        if path != METRICS and not isinstance(answer, (dict, list)):
            reading.unread[name] = f"not a JSON document: {str(answer)[:80]!r}"
    reading.read_at = time.monotonic()
    return reading


def read_bookies(
    store: MetadataStore | None,
    bookies: list[BookieRow],
    endpoints: tuple[str, ...],
    timeout: float = 2.0,
    addresses: dict[str, str] | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> list[BookieReading]:
    """:func:`read_bookie` for every row of ``bookies`` (``list_bookies``), at once.

    ``addresses`` (bookie id -> host:port) saves the registration reads of a
    caller that reads the same bookies again and again (``top``)."""
    addresses = addresses or {}

    def one(row: BookieRow) -> BookieReading:
        return read_bookie(store, row.bookie_id, row.state, endpoints, timeout, addresses.get(row.bookie_id))

    if pool is not None:
        return list(pool.map(one, bookies))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(bookies)))) as own:
        return list(own.map(one, bookies))
