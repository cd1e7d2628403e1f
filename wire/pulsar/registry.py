"""Pulsar's schema registry read as a broker reads it, read-only.

The locators are read through the metadata store's Pulsar manager
(``store.pulsar.schema_ids`` / ``schema_locator``, below ``/schemas`` beside
the managed ledgers); a version's ``SchemaEntry`` through ``read_entry(ledger,
entry)``, which the caller gives (a BookKeeper client opening the ledger with
Pulsar's empty password), as ``BookkeeperSchemaStorage`` does: find the
version in the locator's index, open that ledger, read its entry, parse it.
:mod:`.schema` decodes the values.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..metadata import paths as P
from .errors import NoSuchSchema, PulsarFormatError, SchemaUnreadable
from .schema import SchemaEntry, SchemaLocator, StoredSchema, parse_locator, parse_schema_entry, schema_hash

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore, PulsarMetadata

__all__ = ["SchemaRegistry", "schemas_base"]

#: ``read_entry(ledger_id, entry_id)``: the entry's bytes; NotFound when the ledger or entry is gone
EntryReader = Callable[[int, int], bytes]


def schemas_base(managed_ledgers: str) -> str:
    """``/schemas`` beside the managed-ledger root (``/x/managed-ledgers`` -> ``/x/schemas``)."""
    return posixpath.join(posixpath.dirname(managed_ledgers.rstrip("/")) or "/", "schemas")


class SchemaRegistry:
    """The schemas of a cluster's topics: locators from the metadata store,
    versions from their ledgers (``read_entry``; None: locators only)."""

    def __init__(self, pulsar: PulsarMetadata, base: str, read_entry: EntryReader | None = None):
        self.pulsar = pulsar
        self.base = base.rstrip("/") or "/"
        self.read_entry = read_entry
        self._entries: dict[tuple[int, int], SchemaEntry] = {}

    @classmethod
    def of(
        cls, store: MetadataStore, managed_ledgers: str | None = None, read_entry: EntryReader | None = None
    ) -> SchemaRegistry:
        """The registry beside ``managed_ledgers`` (default: beside the store's ledger root)."""
        return cls(store.pulsar, schemas_base(managed_ledgers or P.managed_ledgers_base(store.root)), read_entry)

    def schema_ids(self) -> list[str]:
        """Every schema id that has a locator, sorted."""
        return self.pulsar.schema_ids(self.base)

    def locator(self, schema_id: str) -> SchemaLocator | None:
        """The locator of ``schema_id`` (None: the topic has no schema)."""
        stored = self.pulsar.schema_locator(self.base, schema_id)
        if stored is None:
            return None
        try:
            return parse_locator(stored.value)
        except PulsarFormatError as exc:
            raise PulsarFormatError(f"{stored.path}: {exc}") from None

    def entry(self, ledger_id: int, entry_id: int = 0) -> SchemaEntry:
        """The ``SchemaEntry`` in a schema ledger: :class:`SchemaUnreadable`
        when the ledger or entry is gone or does not decode."""
        from ..errors import NotFound

        key = (ledger_id, entry_id)
        if key not in self._entries:
            if self.read_entry is None:
                raise SchemaUnreadable(ledger_id, "the bookies were not asked")
            try:
                data = self.read_entry(ledger_id, entry_id)
            except NotFound as exc:
                raise SchemaUnreadable(ledger_id, f"gone ({exc})", missing=True) from None
            except PulsarFormatError:
                raise
            except Exception as exc:  # noqa: BLE001 - any read failure makes the version unreadable
                raise SchemaUnreadable(ledger_id, f"does not read: {exc}") from None
            try:
                self._entries[key] = parse_schema_entry(data)
            except PulsarFormatError as exc:
                raise SchemaUnreadable(ledger_id, str(exc)) from None
        return self._entries[key]

    def version(
        self, schema_id: str, version: int | None = None, locator: SchemaLocator | None = None
    ) -> tuple[int, StoredSchema]:
        """``(version, schema)``: ``version`` of ``schema_id`` (None: the newest).
        :class:`NoSuchSchema` when the topic has no schema or no such version,
        :class:`SchemaUnreadable` when its ledger is gone or does not decode."""
        locator = locator or self.locator(schema_id)
        if locator is None:
            raise NoSuchSchema(f"{schema_id} has no schema (no locator under {self.base})")
        want = locator.info.version if version is None else version
        entry = locator.entry(want)
        if entry is None:
            raise NoSuchSchema(
                f"{schema_id} has no schema version {want} (versions "
                f"{', '.join(str(e.version) for e in locator.index) or 'none'})"
            )
        return want, self.entry(entry.ledger_id, entry.entry_id).schema

    def hash_matches(self, index_hash: bytes, schema: StoredSchema) -> bool:
        """Whether a locator's hash is the SHA-256 of the version's data (a
        deletion marker's hash is empty)."""
        if schema.deleted and not index_hash:
            return True
        return schema_hash(schema.data) == index_hash
