"""Errors of the Pulsar readers (one module for the package)."""
from __future__ import annotations

from ..errors import CodecError, NotFound

__all__ = ["CorruptEntry", "NoSuchSubscription", "NoSuchTopic", "PulsarFormatError"]


class PulsarFormatError(CodecError):
    """A managed-ledger or cursor znode value that does not decode."""


class CorruptEntry(CodecError):
    """A stored Pulsar entry that cannot be decoded: bad magic or checksum,
    truncated metadata or batch, unknown compression, wrong size."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NoSuchTopic(NotFound):
    """No managed ledger for the topic (exit code 3 at the CLI)."""

    def __init__(self, topic: str, suggestions: list[str] | None = None):
        self.topic = topic
        self.suggestions = list(suggestions or [])
        hint = f" (did you mean {', '.join(self.suggestions)}?)" if self.suggestions else ""
        super().__init__(f"no such topic: {topic}{hint}")


class NoSuchSubscription(NotFound):
    """The topic has no cursor of that name (exit code 3 at the CLI)."""
