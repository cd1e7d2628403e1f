"""A bookie's ``/metrics`` (Prometheus text format 0.0.4), read for ``bkctl top``.

Two namings are read.  bookied's: ``bookie_requests_total{op,status}`` and
the histograms ``bookie_request_latency_seconds{op}`` and
``bookie_journal_fsync_latency_seconds`` (seconds).  Java's (its Prometheus
stats provider): an OpStatsLogger per operation as a summary with quantiles,
``bookkeeper_server_ADD_ENTRY_REQUEST{success,quantile}`` and its ``_count``,
``bookkeeper_server_READ_ENTRY_REQUEST``, ``bookie_journal_JOURNAL_SYNC``
(milliseconds).  Rates and bookied's latency quantiles come from the
difference of two scrapes: what happened between them, not since start.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

#: what ``top`` shows -> (bookied's op label, Java's summary name)
OPS = {"add": ("add", "bookkeeper_server_ADD_ENTRY_REQUEST"), "read": ("read", "bookkeeper_server_READ_ENTRY_REQUEST")}
JAVA_JOURNAL_SYNC = "bookie_journal_JOURNAL_SYNC"
BOOKIED_JOURNAL_SYNC = "bookie_journal_fsync_latency_seconds"
BOOKIED_REQUESTS = "bookie_requests_total"
BOOKIED_LATENCY = "bookie_request_latency_seconds"


class Scrape:
    """The samples of one scrape: name -> [(labels, value)]."""

    def __init__(self, text: str) -> None:
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            if m is None:
                continue
            try:
                value = float(m.group(3))
            except ValueError:
                continue
            labels = dict(_LABEL.findall(m.group(2) or ""))
            self.samples[m.group(1)].append((labels, value))

    def __bool__(self) -> bool:
        return bool(self.samples)

    def total(self, name: str, **match: str) -> float | None:
        """The sum of ``name``'s samples whose labels include ``match``; None when there is none."""
        found = [v for labels, v in self.samples.get(name, ()) if all(labels.get(k) == w for k, w in match.items())]
        return sum(found) if found else None

    def worst(self, name: str, **match: str) -> float | None:
        """The largest number among ``name``'s samples whose labels include ``match``: a
        quantile of several label sets (Java's journals, one ``journalIndex`` each) is the
        worst one's, never their sum; None when none is a number (an idle Java bookie's
        summaries answer NaN: not known, not a latency)."""
        found = [
            v
            for labels, v in self.samples.get(name, ())
            if not math.isnan(v) and all(labels.get(k) == w for k, w in match.items())
        ]
        return max(found) if found else None

    def buckets(self, name: str, **match: str) -> dict[float, float]:
        """A histogram's cumulative counts by upper bound (``name_bucket``)."""
        out: dict[float, float] = defaultdict(float)
        for labels, v in self.samples.get(name + "_bucket", ()):
            if all(labels.get(k) == w for k, w in match.items()) and "le" in labels:
                out[math.inf if labels["le"] == "+Inf" else float(labels["le"])] += v
        return dict(out)

    @property
    def naming(self) -> str | None:
        """``bookied`` or ``java``: whose metric names the scrape has (None: neither)."""
        if BOOKIED_REQUESTS in self.samples or BOOKIED_JOURNAL_SYNC + "_count" in self.samples:
            return "bookied"
        if any(name.startswith(("bookkeeper_server_", "bookie_journal_JOURNAL")) for name in self.samples):
            return "java"
        return None


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """Upper bound of the bucket holding quantile ``q`` of what was observed between two scrapes
    (None: nothing observed)."""
    bounds = sorted(after)
    if not bounds:
        return None
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    if total <= 0:
        return None
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= q * total:
            return bound
    return math.inf


@dataclass(frozen=True, slots=True)
class Rates:
    """A bookie's requests per second and latencies (ms) between two scrapes (None: not known)."""

    add_rate: float | None = None
    add_p50_ms: float | None = None
    add_p99_ms: float | None = None
    read_rate: float | None = None
    read_p50_ms: float | None = None
    read_p99_ms: float | None = None
    journal_sync_p99_ms: float | None = None


def rates(before: Scrape | None, after: Scrape, seconds: float) -> Rates:
    """Per second and latencies (ms) between two scrapes of one bookie, adds and reads, and the
    journal's sync p99.  Without an earlier scrape rates and bookied's quantiles are None (Java's
    summaries keep a window of their own: their quantiles are the bookie's)."""
    out: dict[str, tuple[float | None, float | None, float | None]] = {}
    naming = after.naming
    for what, (op, java_name) in OPS.items():
        rate = p50 = p99 = None
        if naming == "bookied":
            now = after.total(BOOKIED_REQUESTS, op=op)
            then = before.total(BOOKIED_REQUESTS, op=op) if before else None
            if now is not None and then is not None and seconds > 0:
                rate = max(0.0, (now - then) / seconds)
            if before is not None:
                b_before, b_after = before.buckets(BOOKIED_LATENCY, op=op), after.buckets(BOOKIED_LATENCY, op=op)
                p50, p99 = (_ms(bucket_quantile(b_before, b_after, q)) for q in (0.5, 0.99))
        elif naming == "java":
            now = after.total(java_name + "_count", success="true")
            then = before.total(java_name + "_count", success="true") if before else None
            if now is not None and then is not None and seconds > 0:
                rate = max(0.0, (now - then) / seconds)
            p50 = after.worst(java_name, success="true", quantile="0.5")
            p99 = after.worst(java_name, success="true", quantile="0.99")
        out[what] = (rate, p50, p99)
    sync = None
    if naming == "bookied" and before is not None:
        sync = _ms(bucket_quantile(before.buckets(BOOKIED_JOURNAL_SYNC), after.buckets(BOOKIED_JOURNAL_SYNC), 0.99))
    elif naming == "java":
        sync = after.worst(JAVA_JOURNAL_SYNC, success="true", quantile="0.99")
    (add_rate, add_p50, add_p99), (read_rate, read_p50, read_p99) = out["add"], out["read"]
    return Rates(add_rate, add_p50, add_p99, read_rate, read_p50, read_p99, sync)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0
