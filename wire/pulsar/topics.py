"""Pulsar topics read from ZooKeeper, read-only.

Managed ledgers live at ``/managed-ledgers/<tenant>/<namespace>/persistent/<encoded
topic>`` (a v1 topic's at ``<tenant>/<cluster>/<namespace>/persistent/...``) beside BookKeeper's root (``/ledgers`` -> ``/managed-ledgers``), each
with its cursors as children.  A partitioned topic is its partitions'
managed ledgers (``<topic>-partition-N``) plus its partition count, JSON at
``/admin/partitioned-topics/<tenant>/<namespace>/persistent/<encoded topic>``
in Pulsar's configuration store -- read beside the managed ledgers (where it
is when the configuration store is the same ZooKeeper); where it is not
found, partitions are found by their managed ledgers' names.  This module
uses only a kazoo client (the metadata store's ``client``) and never writes.
"""
from __future__ import annotations

import difflib
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from ..errors import Unreachable
from .errors import NoSuchTopic, PulsarFormatError
from .managed_ledger import (
    BASE_NODE,
    TopicName,
    decode_local_name,
    encode_local_name,
    parse_cursor_info,
    parse_managed_ledger_info,
)

__all__ = ["ManagedLedger", "TopicReader", "default_base"]


def default_base(ledgers_root: str) -> str:
    """``/managed-ledgers`` next to BookKeeper's root (``/x/ledgers`` -> ``/x/managed-ledgers``)."""
    return posixpath.join(posixpath.dirname(ledgers_root.rstrip("/")) or "/", BASE_NODE)


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


class TopicReader:
    """Lists and reads managed ledgers through ``client`` (a started KazooClient)."""

    def __init__(self, client: Any, base: str = "/" + BASE_NODE):
        self.client = client
        self.base = base.rstrip("/") or "/"
        #: Pulsar's partitioned-topic metadata, beside the managed ledgers
        self.partitioned_base = posixpath.join(posixpath.dirname(self.base), "admin", "partitioned-topics")

    def _call(self, method, *args):
        from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

        try:
            return method(*args)
        except NoNodeError:
            raise
        except (ConnectionLoss, SessionExpiredError) as exc:
            raise Unreachable(f"ZooKeeper unavailable while reading Pulsar metadata: {type(exc).__name__}") from None

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(self._call(self.client.get_children, path))
        except NoNodeError:
            return []

    def topics(self, tenant: str | None = None, namespace: str | None = None) -> list[TopicName]:
        """Every persistent topic with a managed ledger, sorted: v2 names, and v1
        names (their ``namespace`` is ``cluster/namespace``; ``namespace`` may
        name one so)."""
        out: list[TopicName] = []
        for t in [tenant] if tenant else self._children(self.base):
            for ns in [namespace] if namespace else self._namespaces(t):
                for encoded in self._children(f"{self.base}/{t}/{ns}/persistent"):
                    try:
                        out.append(TopicName(t, ns, decode_local_name(encoded)))
                    except ValueError:
                        continue
        return sorted(out, key=str)

    def _namespaces(self, tenant: str) -> list[str]:
        """A tenant's namespaces with managed ledgers: ``ns`` (``<tenant>/ns/persistent``)
        and v1 ``cluster/ns`` (``<tenant>/cluster/ns/persistent``)."""
        out = []
        for name in self._children(f"{self.base}/{tenant}"):
            for child in self._children(f"{self.base}/{tenant}/{name}"):
                if child == "persistent":
                    out.append(name)
                else:
                    out.append(f"{name}/{child}")  # a cluster's namespace (v1), if it has a persistent/
        return out

    def read(self, topic: TopicName | str, cursors: bool = True) -> ManagedLedger:
        """The managed ledger of ``topic``; :class:`NoSuchTopic` (with
        suggestions) when there is none."""
        from kazoo.exceptions import NoNodeError

        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        try:
            return self._read(name.managed_ledger, name, cursors)
        except NoNodeError:
            raise NoSuchTopic(str(name), self.suggest(name)) from None

    def read_named(self, managed_ledger: str) -> ManagedLedger | None:
        """The managed ledger of that name -- a v2 name, or a v1 name
        (``tenant/cluster/namespace/persistent/topic``) that :meth:`topics`
        does not list -- with its cursors; None when there is none."""
        from kazoo.exceptions import NoNodeError

        parts = managed_ledger.split("/")
        if len(parts) not in (4, 5) or parts[-2] != "persistent" or any(p in ("", ".", "..") for p in parts):
            return None  # not a managed-ledger name: nothing Pulsar would have written
        try:
            topic = TopicName.from_managed_ledger(managed_ledger)
        except ValueError:  # its local name does not decode
            topic = None
        try:
            return self._read(managed_ledger, topic, True)
        except NoNodeError:
            return None

    def _read(self, ml_name: str, topic: TopicName | None, cursors: bool) -> ManagedLedger:
        from kazoo.exceptions import NoNodeError

        path = f"{self.base}/{ml_name}"
        data, stat = self._call(self.client.get, path)
        try:
            info = parse_managed_ledger_info(data)
        except PulsarFormatError as exc:
            raise PulsarFormatError(f"{path}: {exc}") from None
        ml = ManagedLedger(ml_name, topic, path, info, stat.version)
        if cursors:
            for child in self._children(path):
                try:
                    value, _ = self._call(self.client.get, f"{path}/{child}")
                except NoNodeError:
                    continue  # deleted meanwhile
                try:
                    ml.cursors[decode_local_name(child)] = parse_cursor_info(value)
                except PulsarFormatError as exc:
                    raise PulsarFormatError(f"{path}/{child}: {exc}") from None
        return ml

    def declared_partitions(self, topic: TopicName) -> int | None:
        """The partition count Pulsar's partitioned-topic metadata gives
        ``topic``; None when it has none here (not partitioned, or the
        configuration store is elsewhere)."""
        from kazoo.exceptions import NoNodeError

        path = f"{self.partitioned_base}/{topic.tenant}/{topic.namespace}/{topic.domain}/" \
               f"{encode_local_name(topic.local)}"
        try:
            data, _stat = self._call(self.client.get, path)
        except NoNodeError:
            return None
        try:
            count = json.loads(data)["partitions"]
        except (ValueError, TypeError, KeyError) as exc:
            raise PulsarFormatError(f"{path}: not partitioned-topic metadata ({type(exc).__name__}: {exc})") from None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise PulsarFormatError(f"{path}: partitions is {count!r}, not a count")
        return count

    def partitions(self, topic: TopicName) -> list[TopicName]:
        """The partitions ``<topic>-partition-N`` that have managed ledgers, by N."""
        prefix = topic.local + "-partition-"
        found = [t for t in self.topics(topic.tenant, topic.namespace)
                 if t.local.startswith(prefix) and t.partition >= 0 and t.partitioned_topic == topic]
        return sorted(found, key=lambda t: t.partition)

    def suggest(self, topic: TopicName, limit: int = 3) -> list[str]:
        """Close names of existing topics: by local name in the same namespace,
        else by full name anywhere."""
        same_ns = {t.local: str(t) for t in self.topics(topic.tenant, topic.namespace)} \
            if self._children(f"{self.base}/{topic.tenant}/{topic.namespace}") else {}
        if same_ns:
            return [same_ns[n] for n in difflib.get_close_matches(topic.local, list(same_ns), n=limit, cutoff=0.6)]
        return difflib.get_close_matches(str(topic), [str(t) for t in self.topics()], n=limit, cutoff=0.6)
