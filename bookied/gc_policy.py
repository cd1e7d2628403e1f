"""When garbage collection compacts: the GC keys (:class:`GcPolicy`, in Java's units) and the rule a
pass follows to pick a major, a minor or no compaction (:func:`choose_compaction`, Java's
runWithFlags), which ``bookie gc --status`` and ``bkctl disk`` reason with too.

bookied adds two rules (:meth:`GcPolicy.takes_at_every_pass`): a pass that runs no compaction of
Java's still compacts the rolled logs that are nearly empty (``nearlyEmptyCompactionThreshold``,
:data:`NEARLY_EMPTY`) or settled (``settledCompactionThreshold``). Under a Pulsar-like churn a
log whose ledgers have almost all been deleted keeps a few entries of a longer-lived ledger for
seconds; Java leaves its whole size on disk until the next minor compaction, while moving those
few entries costs a few percent of what it gives back. With mixed retention (some topics keep
their ledgers four times longer) a log's short-lived ledgers die within seconds of each other and
leave it at the long-lived topics' share, say 20-25% live, for as long again: Java keeps it
until the next major compaction takes it. Its live bytes stop changing then (only a deletion or
compaction changes a rolled log's): once they have not changed for three GC passes
(:attr:`GcPolicy.settled_delay_ms`), waiting longer saves no copy before the long-lived ledgers
go, and the log is taken at the next pass -- only a log a periodic compaction would take anyway
(below the major threshold, or the minor one when major compaction is off), never above half live,
so each byte moved gives back at least one."""

from __future__ import annotations

from dataclasses import dataclass

from .storage.compactor import Throttle

MAJOR = "major"
MINOR = "minor"
#: a compaction of the nearly empty logs only, at a pass that runs neither of Java's
NEARLY_EMPTY = "nearly empty"


@dataclass(frozen=True)
class GcPolicy:
    """The GC keys, in Java's units (ms, except the intervals' seconds turned into ms)."""

    gc_wait_ms: int = 600000
    minor_threshold: float = 0.2
    minor_interval_ms: int = 3600 * 1000
    minor_max_ms: int = -1
    major_threshold: float = 0.8
    major_interval_ms: int = 86400 * 1000
    major_max_ms: int = -1
    nearly_empty_threshold: float = 0.1
    settled_threshold: float = 0.5
    rate_by_entries: int = 1000
    rate_by_bytes: int = 1000000
    throttle_by_bytes: bool = False
    max_outstanding: int = 100000
    force_allow: bool = False
    force_when_no_space: bool = False

    @classmethod
    def from_config(cls, cfg) -> GcPolicy:
        return cls(
            gc_wait_ms=cfg.gc_wait_time,
            minor_threshold=cfg.minor_compaction_threshold,
            minor_interval_ms=cfg.minor_compaction_interval * 1000,
            minor_max_ms=cfg.minor_compaction_max_time_millis,
            major_threshold=cfg.major_compaction_threshold,
            major_interval_ms=cfg.major_compaction_interval * 1000,
            major_max_ms=cfg.major_compaction_max_time_millis,
            nearly_empty_threshold=cfg.nearly_empty_compaction_threshold,
            settled_threshold=cfg.settled_compaction_threshold,
            rate_by_entries=cfg.compaction_rate_by_entries,
            rate_by_bytes=cfg.compaction_rate_by_bytes,
            throttle_by_bytes=cfg.is_throttle_by_bytes,
            max_outstanding=cfg.compaction_max_outstanding_requests,
            force_allow=cfg.force_allow_compaction,
            force_when_no_space=cfg.is_force_gc_allow_when_no_space,
        )

    @property
    def minor_enabled(self) -> bool:
        return self.minor_interval_ms > 0 and self.minor_threshold > 0

    @property
    def major_enabled(self) -> bool:
        return self.major_interval_ms > 0 and self.major_threshold > 0

    @property
    def nearly_empty_below(self) -> float:
        """The live fraction under which a rolled log is compacted at every pass: the key, never
        above the minor threshold, and 0 (none) when minor compaction is off."""
        return min(self.nearly_empty_threshold, self.minor_threshold) if self.minor_enabled else 0.0

    @property
    def settled_below(self) -> float:
        """The live fraction under which a settled rolled log is compacted at the next pass: the
        key, never above the major threshold (the minor one when major compaction is off), and
        0 (none) when minor compaction is off, as for the nearly-empty rule."""
        if not self.minor_enabled:
            return 0.0
        cap = self.major_threshold if self.major_enabled else self.minor_threshold
        return min(self.settled_threshold, cap)

    @property
    def settled_delay_ms(self) -> int:
        """How long a rolled log's live bytes must stay unchanged before it counts as settled:
        three GC passes."""
        return 3 * self.gc_wait_ms

    def takes_at_every_pass(self, usage: float, unchanged_ms: float) -> bool:
        """Whether a rolled log of at least :func:`~.garbage_collector.nearly_empty_size` with
        live fraction ``usage``, whose live bytes have not changed for ``unchanged_ms``, is
        compacted at a pass that runs no compaction of Java's: nearly empty, or settled."""
        if usage < self.nearly_empty_below:
            return True
        return usage < self.settled_below and unchanged_ms >= self.settled_delay_ms

    @property
    def force_minor_allowed(self) -> bool:
        return self.force_allow and 0 < self.minor_threshold < 1

    @property
    def force_major_allowed(self) -> bool:
        return self.force_allow and 0 < self.major_threshold < 1

    def forced_refusal(self, kind: str) -> str | None:
        """Why a forced pass (``bookie gc``) runs no ``kind`` compaction, by :func:`choose_compaction`'s
        rule; None when it runs one (disk pressure aside: the status says when it is suspended)."""
        major = kind == MAJOR
        enabled, allowed = (
            (self.major_enabled, self.force_major_allowed) if major else (self.minor_enabled, self.force_minor_allowed)
        )
        if enabled or allowed:
            return None
        name = "major" if major else "minor"
        threshold = self.major_threshold if major else self.minor_threshold
        if threshold <= 0:
            return f"{name}CompactionThreshold is 0: {name} compaction is off"
        if not self.force_allow:
            return (
                f"{name}CompactionInterval is 0 (not periodic) and forceAllowCompaction=false: a forced "
                "pass does not compact either"
            )
        return f"forceAllowCompaction runs it only with {name}CompactionThreshold below 1 (it is {threshold:g})"

    def to_status(self) -> dict:
        """The compaction settings ``bookie gc --status`` and ``bkctl disk`` reason with."""
        return {
            "minorCompactionThreshold": self.minor_threshold,
            "majorCompactionThreshold": self.major_threshold,
            "minorCompactionInterval": self.minor_interval_ms // 1000,
            "majorCompactionInterval": self.major_interval_ms // 1000,
            "nearlyEmptyCompactionThreshold": self.nearly_empty_below,
            "settledCompactionThreshold": self.settled_below,
            "settledCompactionDelayMs": self.settled_delay_ms,
            "forceAllowCompaction": self.force_allow,
            "forcedCompactionRefused": {k: self.forced_refusal(v) for k, v in (("major", MAJOR), ("minor", MINOR))},
        }

    def throttle(self, **kw) -> Throttle:
        return Throttle(
            self.rate_by_bytes if self.throttle_by_bytes else self.rate_by_entries, self.throttle_by_bytes, **kw
        )


class SettledLogs:
    """Since when each entry log's live bytes have been what the GC passes see (a rolled log's
    change only when a deletion or a compaction takes some): ``observe`` at each pass,
    ``unchanged_ms`` to ask. Times are seconds of the caller's clock (the GC's reactor clock)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], tuple[int, float]] = {}  # (directory, log id) -> (live, since)

    def observe(self, directory: str, live_bytes: dict[int, int], now: float) -> None:
        """The live bytes of every log of ``directory`` now; logs no longer there are forgotten."""
        seen = self._seen
        fresh = {key: value for key, value in seen.items() if key[0] != directory}
        for log_id, live in live_bytes.items():
            before = seen.get((directory, log_id))
            fresh[(directory, log_id)] = before if before is not None and before[0] == live else (live, now)
        self._seen = fresh  # one assignment: the status reads it from another thread

    def unchanged_ms(self, directory: str, log_id: int, now: float) -> float:
        """How long the log's live bytes have been what they are (0 for a log never observed)."""
        before = self._seen.get((directory, log_id))
        return 0.0 if before is None else max(0.0, now - before[1]) * 1000


def choose_compaction(
    policy: GcPolicy,
    now_ms: int,
    last_major_ms: int,
    last_minor_ms: int,
    force: bool,
    suspend_major: bool,
    suspend_minor: bool,
) -> str | None:
    """Which compaction a pass runs (Java's runWithFlags): major before minor, None for neither."""
    if not suspend_major and (
        (policy.force_major_allowed and force)
        or (policy.major_enabled and (force or now_ms - last_major_ms > policy.major_interval_ms))
    ):
        return MAJOR
    if not suspend_minor and (
        (policy.force_minor_allowed and force)
        or (policy.minor_enabled and (force or now_ms - last_minor_ms > policy.minor_interval_ms))
    ):
        return MINOR
    return None
