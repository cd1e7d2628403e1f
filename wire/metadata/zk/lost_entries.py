"""bkctl's records of lost entries (:class:`~bkctl.wire.metadata.store.LostEntryRecords`) on
ZooKeeper: ``<root>-bkctl-lost/L<ledger id>``, one persistent node per ledger holding its record's
bytes, beside the cluster root as the kept rebalance is, where no Java tool looks."""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.zk.session import Manager, zk_call

__all__ = ["ZKLostEntryRecords"]


class ZKLostEntryRecords(Manager):
    """Read, write, list and forget the records of lost entries."""

    @property
    def _path(self) -> str:
        return P.lost_entries_path(self._root)

    def _node(self, ledger_id: int) -> str:
        return f"{self._path}/L{int(ledger_id)}"

    @zk_call
    def read(self, ledger_id: int) -> bytes | None:
        try:
            return bytes(self._session.get(self._node(ledger_id))[0])
        except NoNodeError:
            return None

    @zk_call
    def write(self, ledger_id: int, data: bytes) -> None:
        path = self._node(ledger_id)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                self._zk.set(path, data)

    @zk_call
    def all(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for child in self._session.children_or_empty(self._path):
            if not (child.startswith("L") and child[1:].isdigit()):
                continue
            try:
                out[int(child[1:])] = bytes(self._session.get(f"{self._path}/{child}")[0])
            except NoNodeError:
                continue  # forgotten meanwhile
        return out

    @zk_call
    def forget(self, ledger_id: int) -> None:
        self._session.delete_quiet(self._node(ledger_id))
