"""Pulsar's rack map (``/bookies`` at the ZooKeeper root, outside the ledgers root),
which rack-aware placement reads; the format is :mod:`bkctl.wire.metadata.racks`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bkctl.wire.metadata.errors import VersionConflict
from bkctl.wire.metadata.racks import RACK_MAP_PATH, RackMapError, parse_rack_map, serialize_rack_map
from bkctl.wire.metadata.store import RackMapDoc, Unwatch
from bkctl.wire.metadata.zk.session import Manager, zk_call

__all__ = ["ZKRackMap"]

log = logging.getLogger(__name__)


class ZKRackMap(Manager):
    """Read and compare-and-set the rack map."""

    @zk_call
    def read(self) -> tuple[dict[str, Any], int | None]:
        """The rack map and its version; ``({}, None)`` when there is none."""
        try:
            data, stat = self._session.get(RACK_MAP_PATH)
        except NoNodeError:
            return {}, None
        return parse_rack_map(data), stat.version

    @zk_call
    def watch(self, listener: Callable[[RackMapDoc], None]) -> Unwatch:
        """A data watch on the rack map znode (kazoo's, set again after every event and
        session); parsed on the store's thread (a small JSON document)."""

        def changed(data: bytes | None, _stat: object) -> None:
            try:
                doc = parse_rack_map(data)
            except RackMapError as exc:
                log.warning("the rack map %s changed and does not parse (%s): the last one stays", RACK_MAP_PATH, exc)
                return
            listener(doc)

        return self._session.watch_data(RACK_MAP_PATH, changed)

    @zk_call
    def write(self, doc: Mapping[str, Mapping[str, Mapping[str, Any]]], version: int | None) -> int:
        """Create (``version=None``) or compare-and-set the rack map; returns
        the new version (:class:`VersionConflict` when it changed meanwhile)."""
        data = serialize_rack_map(doc)
        try:
            if version is None:
                self._zk.create(RACK_MAP_PATH, data)
                return 0
            return int(self._zk.set(RACK_MAP_PATH, data, version=version).version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            current, current_version = self.read()
            raise VersionConflict(
                "the rack map " + RACK_MAP_PATH,
                -1 if version is None else version,
                current,
                -1 if current_version is None else current_version,
            ) from None
