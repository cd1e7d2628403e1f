"""Ledger ids from ZooKeeper sequential nodes, as Java's ZkLedgerIdGenerator and
LongZkLedgerIdGenerator hand them out (``idgen``, then the 63-bit ``idgen-long``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call

if TYPE_CHECKING:
    from bkctl.wire.metadata.zk.cluster import ZKClusterManager

__all__ = ["ZKLedgerIdGenerator"]

#: ZooKeeper's sequence numbers are a signed 32-bit counter; BookKeeper treats
#: anything at or above this as an overflow of the 31-bit id space.
_SEQ_OVERFLOW = 2**31 - 1
_KEEP_HOB_NODES = 3
#: sequential nodes created in one multi by :meth:`ZKLedgerIdGenerator.generate_many`
_BATCH = 500


class ZKLedgerIdGenerator(Manager):
    """New unique ledger ids for the cluster's ledger manager."""

    def __init__(self, session: ZKSession, cluster: ZKClusterManager):
        super().__init__(session)
        self._cluster = cluster
        self._idgen_long_present: bool | None = None

    def forget_cached(self) -> None:
        self._idgen_long_present = None

    @zk_call
    def generate(self) -> int:
        """A new unique ledger id (BookKeeper's scheme for the manager in effect)."""
        manager = self._cluster.manager
        if manager == P.FLAT:
            return self._short_id(self._root)
        idgen = self._session.path(P.IDGEN)
        if manager == P.LEGACY_HIERARCHICAL:
            return self._short_id(idgen)
        # hierarchical / longhierarchical: 31-bit ids until they overflow
        if not self._long_idgen_present():
            short = self._short_id_or_none(idgen)
            if short is not None:
                return short
            self._zk.ensure_path(self._session.path(P.IDGEN_LONG))
            self._idgen_long_present = True
        return self._long_id()

    @zk_call
    def generate_many(self, count: int) -> list[int]:
        """``count`` new ids: one the way :meth:`generate` draws it (the parents made, the scheme
        in effect, an overflow moved past), then up to :data:`_BATCH` more from the same
        sequence at once -- their sequential nodes created in one multi, deleted in another,
        as ZkLedgerIdGenerator's are one at a time.  Ids of a batch that reached the overflow
        are dropped (never handed out); the next :meth:`generate` moves on."""
        ids: list[int] = []
        while len(ids) < count:
            first = self.generate()
            ids.append(first)
            want = min(count - len(ids), _BATCH)
            if not want:
                break
            high = first >> 32
            if high:
                parent = f"{self._session.path(P.IDGEN_LONG)}/{P.hob_name(high)}"
            else:
                parent = self._root if self._cluster.manager == P.FLAT else self._session.path(P.IDGEN)
            ids += [(high << 32) | seq for seq in self._sequential_many(parent, want) if 0 <= seq < _SEQ_OVERFLOW]
        return ids[:count]

    def _sequential_many(self, parent: str, count: int) -> list[int]:
        """Create ``count`` nodes ``parent/ID-<seq>`` (ephemeral, sequential) in one multi, delete
        them in another, return their seqs ascending; none when the multi fails (``parent``
        gone: an old HOB another generator dropped)."""
        create = self._zk.transaction()
        for _ in range(count):
            create.create(f"{parent}/{P.ID_PREFIX}", b"", ephemeral=True, sequence=True)
        created = [c for c in create.commit() if isinstance(c, str)]
        if created:
            delete = self._zk.transaction()
            for path in created:
                delete.delete(path)
            if any(isinstance(r, Exception) for r in delete.commit()):
                for path in created:  # (ephemeral: they go with the session in any case)
                    self._session.delete_quiet(path)
        return sorted(int(path.rsplit("/", 1)[-1][len(P.ID_PREFIX) :]) for path in created)

    def _long_idgen_present(self) -> bool:
        if self._idgen_long_present is None:
            self._idgen_long_present = self._session.exists(self._session.path(P.IDGEN_LONG)) is not None
        return self._idgen_long_present

    def _sequential(self, parent: str) -> int:
        """Create ``parent/ID-<seq>`` (ephemeral, sequential), delete it, return seq."""
        created = self._zk.create(f"{parent}/{P.ID_PREFIX}", b"", ephemeral=True, sequence=True, makepath=True)
        try:
            leaf = created.rsplit("/", 1)[-1][len(P.ID_PREFIX) :]
            seq = int(leaf)  # may be negative once the signed counter wraps
        finally:
            self._session.delete_quiet(created)
        return seq

    def _short_id(self, parent: str) -> int:
        seq = self._short_id_or_none(parent)
        if seq is None:
            raise MetadataStoreError(f"ledger id space of {parent} is exhausted")
        return seq

    def _short_id_or_none(self, parent: str) -> int | None:
        """A 31-bit id from ``parent``'s sequence; None once the sequence overflowed."""
        seq = self._sequential(parent)
        return seq if 0 <= seq < _SEQ_OVERFLOW else None

    def _long_id(self) -> int:
        s = self._session
        base = s.path(P.IDGEN_LONG)
        for _ in range(64):
            highs = []
            for child in s.children_or_empty(base):
                try:
                    highs.append(P.parse_hob_name(child))
                except ValueError:
                    continue
            if not highs:
                s.create_if_missing(f"{base}/{P.hob_name(1)}")
                continue
            highs.sort()
            high = highs[-1]
            seq = self._sequential(f"{base}/{P.hob_name(high)}")
            for old in highs[:-_KEEP_HOB_NODES]:
                s.delete_quiet(f"{base}/{P.hob_name(old)}", 0)
            if 0 <= seq < _SEQ_OVERFLOW:
                return (high << 32) | seq
            s.create_if_missing(f"{base}/{P.hob_name(high + 1)}")
        raise MetadataStoreError(f"could not allocate a 63-bit ledger id below {base}")
