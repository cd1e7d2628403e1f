"""Pulsar topics as their metadata describes them, read-only.

Managed ledgers live at ``/managed-ledgers/<tenant>/<namespace>/persistent/<encoded
topic>`` (a v1 topic's at ``<tenant>/<cluster>/<namespace>/persistent/...``)
beside BookKeeper's root (``/ledgers`` -> ``/managed-ledgers``), each with its
cursors as children.  A partitioned topic is its partitions' managed ledgers
(``<topic>-partition-N``) plus its partition count, JSON at
``/admin/partitioned-topics/<tenant>/<namespace>/persistent/<encoded topic>``
in Pulsar's configuration store -- read beside the managed ledgers (where it
is when the configuration store is the same ZooKeeper); where it is not
found, partitions are found by their managed ledgers' names.

The metadata store's :class:`~bkctl.wire.metadata.store.PulsarMetadata`
(``store.pulsar``) reads the values; :mod:`.managed_ledger` decodes them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..metadata import paths as P
from .errors import NoSuchTopic, PulsarFormatError
from .managed_ledger import (
    TopicName,
    decode_local_name,
    parse_cursor_info,
    parse_managed_ledger_info,
    parse_partitioned_topic_metadata,
)

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore, PulsarMetadata, StoredManagedLedger

__all__ = ["ManagedLedger", "TopicMetadataReader"]


@dataclass
class ManagedLedger:
    """One topic's managed ledger: its name (``tenant/namespace/persistent/topic``,
    or a v1 name with the cluster), info, znode version and cursors; ``topic``
    is None for a name whose topic part does not decode."""

    name: str
    topic: TopicName | None
    path: str
    info: Any
    version: int
    cursors: dict[str, Any] = field(default_factory=dict)

    @property
    def ledger_ids(self) -> list[int]:
        return [li.ledgerId for li in self.info.ledgerInfo]

    @property
    def listed(self) -> set[int]:
        """The ledgers it lists: its data ledgers and its cursors' ledgers."""
        return set(self.ledger_ids) | {info.cursorsLedgerId for info in self.cursors.values()}

    @property
    def terminated(self) -> tuple[int, int] | None:
        if not self.info.HasField("terminatedPosition"):
            return None
        return self.info.terminatedPosition.ledgerId, self.info.terminatedPosition.entryId


class TopicMetadataReader:
    """Pulsar's topics, read through a metadata store's Pulsar manager
    (``store.pulsar``) and decoded: managed ledgers below ``base``, their
    cursors, partitioned-topic metadata."""

    def __init__(self, pulsar: PulsarMetadata, base: str = "/" + P.MANAGED_LEDGERS):
        self.pulsar = pulsar
        self.base = base.rstrip("/") or "/"

    @classmethod
    def of(cls, store: MetadataStore, base: str | None = None) -> TopicMetadataReader:
        """The reader of ``store``'s cluster; ``base`` defaults to ``/managed-ledgers``
        beside its ledger root."""
        return cls(store.pulsar, base or P.managed_ledgers_base(store.root))

    def topics(self, tenant: str | None = None, namespace: str | None = None) -> list[TopicName]:
        """Every persistent topic with a managed ledger, sorted: v2 names, and v1
        names (their ``namespace`` is ``cluster/namespace``; ``namespace`` may
        name one so)."""
        out: list[TopicName] = []
        for name in self.pulsar.managed_ledger_names(self.base, tenant, namespace):
            try:
                out.append(TopicName.from_managed_ledger(name))
            except ValueError:  # its local name does not decode
                continue
        return sorted(out, key=str)

    def read(self, topic: TopicName | str, cursors: bool = True) -> ManagedLedger:
        """The managed ledger of ``topic``; :class:`NoSuchTopic` (with
        suggestions) when there is none."""
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        ml = self._read(name.managed_ledger, name, cursors)
        if ml is None:
            raise NoSuchTopic(str(name), self.suggest(name))
        return ml

    def read_named(self, managed_ledger: str) -> ManagedLedger | None:
        """The managed ledger of that name -- a v2 name, or a v1 name
        (``tenant/cluster/namespace/persistent/topic``) that :meth:`topics`
        does not list -- with its cursors; None when there is none."""
        return next(self.read_all_named([managed_ledger]), None)

    def read_all(self, topics: Iterable[TopicName], cursors: bool = True) -> Iterator[ManagedLedger]:
        """The managed ledger of each of *topics*, in order, streaming (read in pipelined
        steps: ``PulsarMetadata.managed_ledgers``); a topic deleted meanwhile is left out."""
        return self._read_stream(((t.managed_ledger, t) for t in topics), cursors)

    def read_all_named(self, managed_ledgers: Iterable[str]) -> Iterator[ManagedLedger]:
        """:meth:`read_named` of each name, in order, streaming and pipelined as
        :meth:`read_all`; names that are no managed ledger's, or gone, are left out."""

        def named() -> Iterator[tuple[str, TopicName | None]]:
            for name in managed_ledgers:
                parts = name.split("/")
                if len(parts) not in (4, 5) or parts[-2] != "persistent" or any(p in ("", ".", "..") for p in parts):
                    continue  # not a managed-ledger name: nothing Pulsar would have written
                try:
                    yield name, TopicName.from_managed_ledger(name)
                except ValueError:  # its local name does not decode
                    yield name, None

        return self._read_stream(named(), True)

    def _read_stream(self, names: Iterable[tuple[str, TopicName | None]], cursors: bool) -> Iterator[ManagedLedger]:
        asked: dict[str, tuple[str, TopicName | None]] = {}  # path -> name and topic, not answered yet

        def asking() -> Iterator[str]:
            for name, topic in names:
                asked[P.managed_ledger_path(self.base, name)] = (name, topic)
                yield name

        for stored in self.pulsar.managed_ledgers(self.base, asking(), cursors):
            name, topic = asked.pop(stored.path)
            yield self._decoded(stored, name, topic)

    def _read(self, ml_name: str, topic: TopicName | None, cursors: bool) -> ManagedLedger | None:
        stored = self.pulsar.managed_ledger(self.base, ml_name, cursors)
        if stored is None:
            return None
        return self._decoded(stored, ml_name, topic)

    def _decoded(self, stored: StoredManagedLedger, ml_name: str, topic: TopicName | None) -> ManagedLedger:
        try:
            info = parse_managed_ledger_info(stored.value)
        except PulsarFormatError as exc:
            raise PulsarFormatError(f"{stored.path}: {exc}") from None
        ml = ManagedLedger(ml_name, topic, stored.path, info, stored.version)
        for child, value in stored.cursors.items():
            try:
                ml.cursors[decode_local_name(child)] = parse_cursor_info(value)
            except PulsarFormatError as exc:
                raise PulsarFormatError(f"{stored.path}/{child}: {exc}") from None
        return ml

    def declared_partitions(self, topic: TopicName) -> int | None:
        """The partition count Pulsar's partitioned-topic metadata gives
        ``topic``; None when it has none here (not partitioned, or the
        configuration store is elsewhere)."""
        stored = self.pulsar.partitioned_topic(self.base, topic.managed_ledger)
        if stored is None:
            return None
        try:
            return parse_partitioned_topic_metadata(stored.value)
        except PulsarFormatError as exc:
            raise PulsarFormatError(f"{stored.path}: {exc}") from None

    def partitions(self, topic: TopicName) -> list[TopicName]:
        """The partitions ``<topic>-partition-N`` that have managed ledgers, by N."""
        prefix = topic.local + "-partition-"
        found = [
            t
            for t in self.topics(topic.tenant, topic.namespace)
            if t.local.startswith(prefix) and t.partition >= 0 and t.partitioned_topic == topic
        ]
        return sorted(found, key=lambda t: t.partition)

    def suggest(self, topic: TopicName, limit: int = 3) -> list[str]:
        """Close names of existing topics: by local name in the same namespace,
        else by full name anywhere."""
        same_ns = {t.local: str(t) for t in self.topics(topic.tenant, topic.namespace)}
        if same_ns:
            return [same_ns[n] for n in difflib.get_close_matches(topic.local, list(same_ns), n=limit, cutoff=0.6)]
        return difflib.get_close_matches(str(topic), [str(t) for t in self.topics()], n=limit, cutoff=0.6)
