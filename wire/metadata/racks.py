"""Where bookies' racks come from, as Pulsar brokers and Java clients read them.

* The rack map znode ``/bookies`` at the ZooKeeper root (Pulsar's
  ``BookieRackAffinityMapping``, written by ``pulsar-admin bookies
  set-bookie-rack``): JSON ``{"<group>": {"<bookieId>": {"rack": "/region/rack",
  "hostname": "..."}}}``.  :func:`parse_rack_map` / :func:`serialize_rack_map`
  are the one parser and writer of that format; the store reads and writes the
  node (``ZKMetadataStore.racks``).
* A static map file (:func:`load_rack_file`): the same JSON, or a flat JSON
  object ``{"<bookieId or host>": "/rack"}``, or text lines ``BOOKIE RACK``
  (``#`` starts a comment).
* A topology script (Java's ``networkTopologyScriptFileName``, Hadoop's
  ``ScriptBasedMapping``): run with up to ``networkTopologyScriptNumberArgs``
  host names as arguments, it prints one rack per argument, separated by
  white space (:class:`ScriptRacks`).

A bookie is looked up by its id (``host:port``) first, then by its host.  A
rack without a leading ``/`` gets one, as Pulsar does.  Bookies no source names
are in ``/default-rack`` (:data:`bkctl.wire.client.placement.DEFAULT_RACK`).
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.metadata.store import MetadataStore

from bkctl.wire.errors import CodecError
from bkctl.wire.text import split_host_port

log = logging.getLogger(__name__)

__all__ = [
    "RACK_MAP_PATH",
    "DEFAULT_GROUP",
    "RackMapError",
    "RackSource",
    "ScriptRacks",
    "host_of",
    "build_placement",
    "load_rack_file",
    "normalize_rack",
    "policy_name",
    "parse_rack_map",
    "racks_by_bookie",
    "serialize_rack_map",
]

#: Pulsar's rack map znode (BookieRackAffinityMapping.BOOKIE_INFO_ROOT_PATH), at the ZooKeeper root.
RACK_MAP_PATH = "/bookies"
#: The group pulsar-admin uses when none is given.
DEFAULT_GROUP = "default"


class RackMapError(CodecError):
    """A rack map (znode or file) that is not in a format we read."""


def normalize_rack(rack: str) -> str:
    rack = str(rack).strip()
    if not rack:
        raise RackMapError("a rack name must not be empty")
    return rack if rack.startswith("/") else "/" + rack


def host_of(bookie_id: str) -> str:
    """``host`` of ``host:port`` (the id itself when it is not host:port)."""
    try:
        return split_host_port(bookie_id)[0]
    except ValueError:
        return bookie_id


def parse_rack_map(data: bytes | str | None) -> dict[str, dict[str, dict[str, Any]]]:
    """Pulsar's rack map JSON as ``{group: {bookie: {"rack": ..., "hostname": ...}}}``
    (an empty or missing node is an empty map)."""
    if data is None or not data.strip():
        return {}
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RackMapError(f"the rack map is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RackMapError("the rack map must be a JSON object of groups")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group, bookies in doc.items():
        if not isinstance(bookies, dict):
            raise RackMapError(f"group {group!r} of the rack map must be an object of bookies")
        out[group] = {}
        for bookie, info in bookies.items():
            if not isinstance(info, dict):
                raise RackMapError(f"bookie {bookie!r} in group {group!r} must be an object with a rack")
            out[group][bookie] = dict(info)
    return out


def serialize_rack_map(doc: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bytes:
    return json.dumps(doc, sort_keys=True).encode("utf-8")


def racks_by_bookie(doc: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, str]:
    """Every bookie (and its hostname, if given) -> its rack, over all groups."""
    out: dict[str, str] = {}
    for bookies in doc.values():
        for bookie, info in bookies.items():
            rack = info.get("rack")
            if not rack:
                continue
            rack = normalize_rack(rack)
            out[bookie] = rack
            hostname = info.get("hostname")
            if hostname:
                out.setdefault(str(hostname), rack)
    return out


def load_rack_file(path: str) -> dict[str, str]:
    """A static rack map file as ``{bookie or host: rack}`` (formats: see the module)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise RackMapError(f"cannot read rack map {path}: {exc.strerror or exc}") from None
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError as exc:
            raise RackMapError(f"{path}: not JSON: {exc}") from None
        if all(isinstance(v, str) for v in doc.values()):
            return {k: normalize_rack(v) for k, v in doc.items()}
        return racks_by_bookie(parse_rack_map(stripped))
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise RackMapError(f"{path}:{n}: expected 'BOOKIE RACK', got {line!r}")
        out[parts[0]] = normalize_rack(parts[1])
    return out


class ScriptRacks:
    """Racks from a topology script, asked once per host (answers are cached)."""

    def __init__(self, script: str, max_args: int = 100, timeout: float = 30.0):
        self.script = script
        self.max_args = max(1, int(max_args))
        self.timeout = timeout
        self._cache: dict[str, str] = {}

    def resolve(self, hosts: Iterable[str]) -> dict[str, str]:
        hosts = [h for h in dict.fromkeys(hosts) if h not in self._cache]
        for i in range(0, len(hosts), self.max_args):
            batch = hosts[i : i + self.max_args]
            try:
                done = subprocess.run(
                    [self.script, *batch], capture_output=True, text=True, timeout=self.timeout, check=True
                )
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("topology script %s failed (%s): its hosts stay in the default rack", self.script, exc)
                continue
            racks = done.stdout.split()
            if len(racks) != len(batch):
                log.warning(
                    "topology script %s printed %d racks for %d hosts: ignored", self.script, len(racks), len(batch)
                )
                continue
            for host, rack in zip(batch, racks):
                self._cache[host] = normalize_rack(rack)
        return dict(self._cache)

    def get(self, host: str) -> str | None:
        return self._cache.get(host)


class RackSource:
    """Racks of bookies from a static map, the rack map znode and/or a script.

    ``static``: ``{bookie or host: rack}``; ``store``: a started
    :class:`~bkctl.wire.metadata.zk.ZKMetadataStore` whose rack map znode is watched
    from the first :meth:`refresh` on (Pulsar's rack-aware mapping watches it too): an
    edit is seen once ZooKeeper tells it, and a refresh reads nothing from the store
    after the first; :meth:`close` stops watching.  ``script``: a :class:`ScriptRacks`,
    run by :meth:`refresh` for the hosts of ``bookies`` no other source names.  The
    first source naming a bookie wins: static, then znode, then script.
    :meth:`refresh` blocks (ZooKeeper, the script): run it off the reactor.
    """

    def __init__(
        self,
        *,
        static: Mapping[str, str] | None = None,
        store: MetadataStore | None = None,
        script: ScriptRacks | None = None,
    ):
        self.static = dict(static or {})
        self.store = store
        self.script = script
        self._znode: dict[str, str] = {}
        self._lock = threading.Lock()
        self._setting_up = threading.Lock()
        self._unwatch: Callable[[], None] | None = None
        self._told = False  # whether the watch told a map that parsed

    def refresh(self, bookies: Iterable[str] = ()) -> None:
        if self.store is not None:
            with self._setting_up:  # (the watch tells the map at once, under self._lock)
                if self._unwatch is None:
                    self._unwatch = self.store.racks.watch(self._rack_map)
            if not self._told:  # none parsed yet: the map's own error, as a read gives it
                self._rack_map(self.store.racks.read()[0])
        if self.script is not None:
            self.script.resolve(host_of(b) for b in bookies if self._known(b) is None)

    def _rack_map(self, doc: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        """(From the store's thread, or a refresh.)  The rack map now."""
        znode = racks_by_bookie(doc)
        with self._lock:
            self._znode, self._told = znode, True

    def close(self) -> None:
        """Stop watching the rack map (idempotent)."""
        unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()

    def _known(self, bookie: str) -> str | None:
        for mapping in (self.static, self._znode):
            rack = mapping.get(bookie) or mapping.get(host_of(bookie))
            if rack:
                return rack
        return None

    def __call__(self, bookie: str) -> str | None:
        rack = self._known(bookie)
        if rack is None and self.script is not None:
            rack = self.script.get(host_of(bookie))
        return rack

    def names_any(self, bookies: Iterable[str]) -> bool:
        """Whether any of ``bookies`` has a rack (bkctl's default: rack-aware then)."""
        return any(self(b) is not None for b in bookies)


#: Java's ensemblePlacementPolicy classes (short or fully qualified) -> our policy names
JAVA_POLICIES = {
    "RackawareEnsemblePlacementPolicy": "rack",
    "RegionAwareEnsemblePlacementPolicy": "region",
    "DefaultEnsemblePlacementPolicy": "random",
}


def policy_name(value: str) -> str:
    """``rack``, ``region`` or ``random`` for one of those names or a Java class name."""
    short = value.rsplit(".", 1)[-1]
    if value in ("random", "rack", "region"):
        return value
    if short in JAVA_POLICIES:
        return JAVA_POLICIES[short]
    raise ValueError(f"unsupported ensemblePlacementPolicy {value!r} (one of {', '.join(JAVA_POLICIES)})")


def build_placement(
    name: str,
    *,
    store: MetadataStore | None = None,
    rack_file: str | None = None,
    script: str | None = None,
    script_args: int = 100,
    min_racks: int = 2,
    enforce: bool = False,
    min_regions: int = 2,
) -> RandomPlacement:
    """A placement policy by name (``random``, ``rack``, ``region``) whose racks
    come from ``rack_file``, the rack map znode of ``store`` and ``script``; its
    ``close()`` stops the rack map's watch (set at its first refresh)."""
    from ..client.placement import POLICIES, RackAwarePlacement, RandomPlacement, RegionAwarePlacement

    if name not in POLICIES:
        raise ValueError(f"unknown placement policy {name!r} (one of {', '.join(POLICIES)})")
    if name == "random":
        return RandomPlacement()
    source = RackSource(
        static=load_rack_file(rack_file) if rack_file else None,
        store=store,
        script=ScriptRacks(script, script_args) if script else None,
    )
    if name == "region":
        return RegionAwarePlacement(
            source,
            refresh=source.refresh,
            close=source.close,
            min_racks_per_write_quorum=min_racks,
            enforce=enforce,
            min_regions=min_regions,
        )
    return RackAwarePlacement(
        source, refresh=source.refresh, close=source.close, min_racks_per_write_quorum=min_racks, enforce=enforce
    )
