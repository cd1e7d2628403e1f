"""Errors of the Pulsar readers (one module for the package)."""

from __future__ import annotations

from ..errors import CodecError, NotFound, ObjectDenied, ObjectMissing, ObjectUnreachable

__all__ = [
    "CorruptEntry",
    "DecodeError",
    "NoSuchSchema",
    "NoSuchSubscription",
    "NoSuchTopic",
    "OffloadDenied",
    "OffloadFormatError",
    "OffloadMissing",
    "OffloadUnlocated",
    "OffloadUnreachable",
    "PulsarFormatError",
    "SchemaUnreadable",
    "Untyped",
]


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


class NoSuchSchema(NotFound):
    """The topic has no schema, or not that version (exit code 3 at the CLI)."""


class SchemaUnreadable(PulsarFormatError):
    """A schema version whose ledger is gone (``missing``) or does not read or
    decode: a broker cannot load the topic (``BookkeeperSchemaStorage`` calls
    a missing ledger non-recoverable)."""

    def __init__(self, ledger_id: int, why: str, missing: bool = False):
        super().__init__(f"schema ledger {ledger_id}: {why}")
        self.ledger_id = ledger_id
        self.why = why
        self.missing = missing


class DecodeError(Exception):
    """A message that does not decode by its schema (its row keeps it, with the reason)."""


class Untyped(Exception):
    """A schema this reader cannot type (the export stays raw, saying why)."""


class OffloadFormatError(CodecError):
    """An offloaded ledger's object (data block, index, MapFile) that does not decode as
    Pulsar's offloader writes it."""


class OffloadUnlocated(NotFound):
    """An offloaded ledger whose offload context does not say where it is (no driver metadata,
    a driver this reader does not know)."""


#: an object (or MapFile) an offload context names that is not in the store (exit code 3), the
#: object store refusing the credentials (6) or not answering (5): the one object store's errors
#: (:mod:`bkctl.wire.objects`), under the names the offload readers have always used
OffloadMissing = ObjectMissing
OffloadDenied = ObjectDenied
OffloadUnreachable = ObjectUnreachable
