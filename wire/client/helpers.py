"""Small helpers the client's operations share (no state, no imports of them)."""

from __future__ import annotations

from collections.abc import Sequence

from twisted.python.failure import Failure

__all__ = ["describe_errors", "ignore_failure"]


def ignore_failure(_failure: Failure) -> None:
    """An errback that swallows the failure of a Deferred nobody waits for any more."""
    return None


def describe_errors(errors: Sequence[BaseException], limit: int = 3) -> str:
    """The first ``limit`` errors, ``; ``-joined, and how many more there were."""
    shown = "; ".join(str(e) for e in errors[:limit])
    if len(errors) > limit:
        shown += f"; and {len(errors) - limit} more"
    return shown
