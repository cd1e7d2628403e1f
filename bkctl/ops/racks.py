"""The rack map (Pulsar's ``/bookies`` znode), as ``pulsar-admin bookies`` edits it.

Every change re-reads the znode and writes it back with compare-and-set, so
concurrent editors (bkctl, pulsar-admin) do not lose each other's changes.
A bookie is in one group at a time: setting its rack in a group removes it
from the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bkctl.wire.errors import NotFound
from bkctl.wire.metadata.registration_state import Registrations, RegistrationState

from .errors import BadInput, OpFailed
from .results import omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore


@dataclass(frozen=True)
class RackPlacement:
    """A bookie's entry in the rack map: its group, and what Pulsar's BookieInfo holds (its rack,
    a host name when one was given)."""

    bookie_id: str
    group: str
    rack: str | None = omitted_when_none()
    hostname: str | None = omitted_when_none()


def _placement(bookie: str, group: str, info: dict[str, Any]) -> RackPlacement:
    return RackPlacement(bookie, group, info.get("rack"), info.get("hostname"))


@dataclass(frozen=True)
class RackRow:
    """A line of ``rack list``."""

    group: str
    rack: str | None
    bookie_id: str
    hostname: str | None
    state: RegistrationState


def _check(bookie: str) -> str:
    from bkctl.wire.metadata.bookieid import is_valid_bookie_id

    if not is_valid_bookie_id(bookie):
        raise BadInput(f"invalid bookie id {bookie!r} (expected host:port or a custom id)")
    return bookie


def _update(store: MetadataStore, change: Callable[[dict], RackPlacement]) -> RackPlacement:
    from bkctl.wire.metadata.errors import VersionConflict

    for _ in range(20):
        doc, version = store.racks.read()
        result = change(doc)
        try:
            store.racks.write(doc, version)
        except VersionConflict:
            continue
        return result
    raise OpFailed("the rack map keeps changing; try again")


def set_rack(
    store: MetadataStore,
    bookie: str,
    rack: str,
    group: str = "default",
    hostname: str | None = None,
    allow_unknown: bool = False,
) -> RackPlacement:
    """Put ``bookie`` in ``rack``; a bookie the cluster does not know (not
    registered, no cookie) only with ``allow_unknown`` (exit 3 otherwise)."""
    from bkctl.wire.metadata.racks import RackMapError, normalize_rack

    from .recovery import require_known_bookie

    _check(bookie)
    if not allow_unknown:
        require_known_bookie(store, bookie, "--allow-unknown-id", "check the id (`bkctl bookie list`)")
    try:
        rack = normalize_rack(rack)
    except RackMapError as e:
        raise BadInput(str(e)) from None

    def change(doc: dict) -> RackPlacement:
        for members in doc.values():
            members.pop(bookie, None)
        info = {"rack": rack}
        if hostname:
            info["hostname"] = hostname
        doc.setdefault(group, {})[bookie] = info
        for name in [g for g, members in doc.items() if not members]:
            del doc[name]
        return _placement(bookie, group, info)

    return _update(store, change)


def get_rack(store: MetadataStore, bookie: str) -> RackPlacement:
    _check(bookie)
    doc, _ = store.racks.read()
    for group, members in doc.items():
        if bookie in members:
            return _placement(bookie, group, members[bookie])
    raise NotFound(f"bookie {bookie} is not in the rack map")


def delete_rack(store: MetadataStore, bookie: str) -> RackPlacement:
    _check(bookie)

    def change(doc: dict) -> RackPlacement:
        found = None
        for group, members in list(doc.items()):
            if bookie in members:
                found = _placement(bookie, group, members.pop(bookie))
                if not members:
                    del doc[group]
        if found is None:
            raise NotFound(f"bookie {bookie} is not in the rack map")
        return found

    return _update(store, change)


def list_racks(store: MetadataStore) -> list[RackRow]:
    """One row per bookie: group, rack, bookie_id, hostname, state (writable,
    read-only, or not registered), sorted by rack."""
    doc, _ = store.racks.read()
    regs = Registrations.read(store.registration)
    rows = []
    for group, members in doc.items():
        for bookie, info in members.items():
            rows.append(RackRow(group, info.get("rack"), bookie, info.get("hostname"), regs.state_of(bookie)))
    return sorted(rows, key=lambda r: (str(r.rack), r.bookie_id))
