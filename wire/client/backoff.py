"""When a connection may try a bookie again after a failure.

After a failed connect, a lost or a malformed connection, the next attempt
waits ``initial`` seconds, doubling (``factor``) up to ``maximum`` with
every further failure; the delay starts over as soon as the bookie answers
a request.  Inside the delay requests fail at once instead of piling up.
"""

from __future__ import annotations

__all__ = ["Backoff", "DEFAULT_BACKOFF_INITIAL", "DEFAULT_BACKOFF_MAX", "DEFAULT_BACKOFF_FACTOR"]

DEFAULT_BACKOFF_INITIAL = 0.1
DEFAULT_BACKOFF_MAX = 5.0
DEFAULT_BACKOFF_FACTOR = 2.0


class Backoff:
    """The retry delay of one connection, on its clock."""

    __slots__ = ("initial", "maximum", "factor", "failures", "retry_at", "last_error")

    def __init__(
        self,
        initial: float = DEFAULT_BACKOFF_INITIAL,
        maximum: float = DEFAULT_BACKOFF_MAX,
        factor: float = DEFAULT_BACKOFF_FACTOR,
    ):
        if not initial > 0:
            raise ValueError("backoff_initial must be positive")
        if maximum < initial or factor < 1:
            raise ValueError("need backoff_max >= backoff_initial and backoff_factor >= 1")
        self.initial = float(initial)
        self.maximum = float(maximum)
        self.factor = float(factor)
        self.failures = 0
        self.retry_at = 0.0
        #: why the last attempt failed (for the errors of refused requests)
        self.last_error = ""

    def failed(self, why: str, now: float) -> None:
        """An attempt failed at ``now``: no new one before the next delay."""
        delay = min(self.initial * self.factor**self.failures, self.maximum)
        self.failures += 1
        self.retry_at = now + delay
        self.last_error = why

    def wait(self, now: float) -> float:
        """Seconds left before a new attempt is allowed (<= 0: allowed now)."""
        return self.retry_at - now
