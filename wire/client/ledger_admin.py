"""Administration on top of the client (Twisted): fencing a ledger without closing it, and what a bookie says about itself.
Re-replication (copying a lost bookie's fragments) is :mod:`.rereplication`.

**Fencing** (:func:`fence_ledger`): a fencing read to every bookie of the
last ensemble, the first step of ledger recovery, without touching the
metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer

from bkctl.wire.codecs.digest import DigestManager, master_key
from bkctl.wire.errors import DigestError
from bkctl.wire.metadata.registration_state import Registrations, RegistrationState

from .credentials import ledger_credentials
from .errors import MISSING_ON_BOOKIE, LedgerRecoveryError, Unauthorized, UnknownBookie
from .quorum import QuorumSchedule

__all__ = [
    "Fenced",
    "describe_bookie",
    "fence_ledger",
]


# ----------------------------------------------------------------- fencing


@dataclass(frozen=True)
class Fenced:
    """What :func:`fence_ledger` did: the bookies fenced, those that failed (bookie -> why) and
    the last add confirmed they answered with; a closed ledger is not fenced (``fenced`` False,
    its last entry as the LAC)."""

    ledger_id: int
    state: str  #: the LedgerState's name
    fenced: bool = False
    bookies_fenced: list[str] = field(default_factory=list)
    bookies_failed: dict[str, str] = field(default_factory=dict)
    last_add_confirmed: int | None = None


async def fence_ledger(client: Any, ledger_id: int, password: bytes | str | None = None) -> Fenced:
    """Fence a ledger on the bookies of its last ensemble, leaving its metadata as is.

    Sends a fencing read to each of them; once fenced, a bookie refuses
    normal adds (the writer fails with EFENCED) and accepts only recovery
    adds.  Succeeds when the fenced bookies cover every write quorum (fewer
    than Qa unfenced bookies in each), so no new entry can reach its ack
    quorum; else :class:`~bkctl.wire.client.errors.LedgerRecoveryError`.  A closed
    ledger needs no fencing (``fenced`` False).
    """
    md, _version = await client.run_blocking(client.store.ledgers.read, ledger_id)
    if md.is_closed:
        return Fenced(ledger_id, md.state.name, last_add_confirmed=md.last_entry_id)
    failed: dict[str, str] = {}
    password_bytes, digest_type = ledger_credentials(ledger_id, md, password)
    digest = DigestManager(ledger_id, digest_type, password_bytes)
    key = master_key(password_bytes)
    ensemble = md.last_ensemble
    calls = []
    for bookie in ensemble:
        try:
            calls.append(client.pool.get(bookie).read(ledger_id, -1, fence_master_key=key, high_priority=True))
        except Exception as exc:  # noqa: BLE001
            calls.append(defer.fail(exc))
    answers = await defer.DeferredList(calls, consumeErrors=True)
    fenced: set[int] = set()
    lac = max(-1, md.ensembles[-1][0] - 1)
    for index, (ok, value) in enumerate(answers):
        bookie = ensemble[index]
        if ok:
            fenced.add(index)
            try:
                lac = max(lac, digest.verify(value).lac)
            except DigestError as exc:
                failed[bookie] = str(exc)
                fenced.discard(index)
        elif isinstance(value.value, MISSING_ON_BOOKIE):
            fenced.add(index)  # fenced, holds nothing of the ledger yet
        elif isinstance(value.value, Unauthorized):
            raise Unauthorized(f"ledger {ledger_id}: bookie {bookie} refused the fence: wrong password", bookie=bookie)
        else:
            failed[bookie] = str(value.value)
    if not fenced or not QuorumSchedule.of(md).covered(fenced):
        raise LedgerRecoveryError(
            f"ledger {ledger_id}: only {len(fenced)} of {len(ensemble)} bookies were fenced, too few to stop "
            f"every write quorum ({'; '.join(f'{b}: {e}' for b, e in failed.items())})"
        )
    return Fenced(ledger_id, md.state.name, True, [ensemble[i] for i in sorted(fenced)], failed, lac)


# ----------------------------------------------------------------- bookie info


async def describe_bookie(client: Any, bookie_id: str) -> dict[str, Any]:
    """What ZooKeeper and the bookie itself say about a bookie: registration
    state, cookie, published service info, and GET_BOOKIE_INFO's disk
    figures (v3).  A bookie with neither a registration nor a cookie is
    :class:`UnknownBookie` (not found); one that does not answer is
    described all the same, with ``reachable`` False, ``error`` saying
    why and no disk figures."""
    store = client.store

    def from_zookeeper() -> Any:
        state = Registrations.read(store.registration).state_of(bookie_id)
        return state, store.cookies.get(bookie_id), store.registration.service_info(bookie_id)

    state, cookie, info = await client.run_blocking(from_zookeeper)
    if cookie is None and state is RegistrationState.NOT_REGISTERED:
        raise UnknownBookie(f"bookie {bookie_id} is not registered and has no cookie in this cluster")
    from bkctl.wire.metadata.serviceinfo import parse_bookie_id_address

    try:
        address = info.rpc_address(bookie_id) if info is not None else parse_bookie_id_address(bookie_id)
    except ValueError:
        address = None
    from bkctl.wire.errors import Unreachable

    try:
        total, free = await client.pool.get(bookie_id).bookie_info()
        error = None
    except Unreachable as exc:  # what ZooKeeper knows is still worth showing
        total = free = None
        error = str(exc) or type(exc).__name__
    return {
        "bookie_id": bookie_id,
        "state": state.value,
        "address": None if address is None else f"{address[0]}:{address[1]}",
        "cookie": None
        if cookie is None
        else {
            "bookie_host": cookie[0].bookie_id,
            "journal_dirs": list(cookie[0].journal_dirs),
            "ledger_dirs": list(cookie[0].ledger_dirs),
            "index_dirs": None if cookie[0].index_dirs is None else list(cookie[0].index_dirs),
            "instance_id": cookie[0].instance_id,
            "layout_version": cookie[0].layout_version,
            "version": cookie[1],
        },
        "service_info": None
        if info is None
        else {
            "endpoints": [
                {
                    "id": e.id,
                    "protocol": e.protocol,
                    "host": e.host,
                    "port": e.port,
                    "auth": list(e.auth),
                    "extensions": list(e.extensions),
                }
                for e in info.endpoints
            ],
            "properties": info.property_map,
        },
        "disk": {"total_bytes": total, "free_bytes": free},
        "reachable": error is None,
        "error": error,
    }
