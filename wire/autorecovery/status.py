"""What the autorecovery daemons are doing, for operators (``bkctl autorecovery status``
and ``query-status``), kept in ZooKeeper rather than only in the daemons' logs.

Java has no such znode.  Each daemon writes ephemeral JSON nodes under
``B/bkctl-daemons/`` (``B`` = ``<root>/underreplication``), a name no Java tool
reads or lists (Java's under-replication manager reads only its own children
of ``B``), and that vanish with the daemon's ZooKeeper session:

* ``auditor`` -- the elected auditor: the lost bookies and since when, when
  each is due (``lostBookieRecoveryDelay``) or why it is not waited for,
  and whether marking is held back while autorecovery is disabled.
* ``workers/<daemon id>`` -- each replication worker (its daemon's bookie id,
  or ``--bookie-id`` of ``bkctl autorecovery run``): its host, the ledger it
  re-replicates now and the last failure with its reason.

Writes are best effort: a daemon that cannot write its status goes on.

Each node is a named frozen type here (:class:`AuditorStatus`, :class:`WorkerStatus` and
their parts), with its one encoder (``to_json``) and decoder (``from_json``): this module
is the one parser of the format.  The JSON keys and values are those daemons of earlier
releases wrote and read.  A document from another version is read as far as it goes: a
missing or ill-typed field is None (or empty), an unreadable entry is left out, and a node
that is not a JSON object is no status at all -- never an exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bkctl.wire.metadata.store import MetadataStore

__all__ = [
    "AUDITOR",
    "WORKERS",
    "AuditedBookie",
    "AuditorStatus",
    "DaemonStatuses",
    "FailedAttempt",
    "FinishedRepair",
    "Hold",
    "WorkerFailure",
    "WorkerStatus",
    "encode",
    "publish",
    "read_daemon_status",
]

log = logging.getLogger(__name__)

AUDITOR = "auditor"
WORKERS = "workers"


# -- reading a field of another version's document: what is not of its type is None ----------
def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _ledger_id(key: str) -> int | None:
    try:
        return int(key)
    except ValueError:
        return None


def _by_ledger(value: object) -> dict[int, Any]:
    """A JSON object keyed by ledger id (as text): its entries with a readable key."""
    out: dict[int, Any] = {}
    for key, item in _object(value).items():
        ledger_id = _ledger_id(key)
        if ledger_id is not None:
            out[ledger_id] = item
    return out


# -- the auditor's node ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AuditedBookie:
    """A lost bookie as the auditor sees it (``lost`` of :class:`AuditorStatus`); times in ms."""

    bookie_id: str
    #: when this auditor first saw it lost
    lost_since: int | None
    #: when ``lostBookieRecoveryDelay`` makes it due (None: its ledgers are marked already)
    due: int | None
    #: why the delay was not waited for (several lost at once, a triggered audit), or None
    not_waited: str | None
    #: the ledgers naming it at the last audit (None: not known)
    named_by: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "bookie_id": self.bookie_id,
            "lost_since": self.lost_since,
            "due": self.due,
            "not_waited": self.not_waited,
            "named_by": self.named_by,
        }

    @classmethod
    def from_json(cls, doc: object) -> AuditedBookie | None:
        """None for an entry without a bookie id."""
        d = _object(doc)
        bookie_id = _str(d.get("bookie_id"))
        if bookie_id is None:
            return None
        return cls(
            bookie_id, _int(d.get("lost_since")), _int(d.get("due")), _str(d.get("not_waited")), _int(d.get("named_by"))
        )


@dataclass(frozen=True, slots=True)
class AuditorStatus:
    """The elected auditor's node: what it waits for (times in ms, by its host's clock)."""

    #: the daemon's id
    auditor: str | None
    updated: int | None
    #: ``lostBookieRecoveryDelay`` (s) as it read it
    delay: int | None
    #: autorecovery is disabled
    disabled: bool
    #: ledgers that needed marking while autorecovery was disabled
    held_back: int
    lost: tuple[AuditedBookie, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "auditor": self.auditor,
            "updated": self.updated,
            "delay": self.delay,
            "disabled": self.disabled,
            "held_back": self.held_back,
            "lost": [b.to_json() for b in self.lost],
        }

    @classmethod
    def from_json(cls, doc: object) -> AuditorStatus | None:
        """None when ``doc`` is not a JSON object, or an empty one (no status, as the
        readers of before took it)."""
        if not isinstance(doc, dict) or not doc:
            return None
        lost = (AuditedBookie.from_json(b) for b in _list(doc.get("lost")))
        return cls(
            auditor=_str(doc.get("auditor")),
            updated=_int(doc.get("updated")),
            delay=_int(doc.get("delay")),
            disabled=doc.get("disabled") is True,
            held_back=_int(doc.get("held_back")) or 0,
            lost=tuple(b for b in lost if b is not None),
        )


# -- a replication worker's node ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hold:
    """Why a worker keeps a ledger's lock: ``why`` ``grace`` (an open ledger's writer is
    waited for) or ``failed`` (after a failed attempt), from ``since`` until ``until`` (ms)."""

    why: str | None
    since: int | None
    until: int | None

    def to_json(self) -> dict[str, Any]:
        return {"why": self.why, "since": self.since, "until": self.until}

    @classmethod
    def from_json(cls, doc: object) -> Hold | None:
        if not isinstance(doc, dict):
            return None
        return cls(_str(doc.get("why")), _int(doc.get("since")), _int(doc.get("until")))


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """A failed attempt on a ledger: its reason (cut to ``REASON_CHARS``), when (ms), when the
    lock is let go (ms), and its cause (:data:`~bkctl.wire.client.rereplication.CAUSES`; None:
    not known, and no ``cause`` key)."""

    reason: str | None
    at: int | None
    retry_at: int | None
    cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"reason": self.reason, "at": self.at, "retry_at": self.retry_at}
        if self.cause is not None:
            doc["cause"] = self.cause
        return doc

    @classmethod
    def from_json(cls, doc: object) -> FailedAttempt | None:
        if not isinstance(doc, dict):
            return None
        return cls(_str(doc.get("reason")), _int(doc.get("at")), _int(doc.get("retry_at")), _str(doc.get("cause")))


@dataclass(frozen=True, slots=True)
class FinishedRepair:
    """A ledger a worker finished lately: when (ms), ``result`` (``replicated``, ``clean``,
    ``deleted``, ``remarked``) and how many entries it found lost (None: none; no key)."""

    ledger_id: int | None
    at: int | None
    result: str | None
    lost_entries: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ledger_id": self.ledger_id, "at": self.at, "result": self.result}
        if self.lost_entries is not None:
            doc["lost_entries"] = self.lost_entries
        return doc

    @classmethod
    def from_json(cls, doc: object) -> FinishedRepair | None:
        if not isinstance(doc, dict):
            return None
        return cls(
            _int(doc.get("ledger_id")), _int(doc.get("at")), _str(doc.get("result")), _int(doc.get("lost_entries"))
        )


@dataclass(frozen=True, slots=True)
class WorkerFailure:
    """A worker's last failed re-replication: the ledger, the whole reason, when (ms), and how
    long its lock is kept (s; 0: let go at once)."""

    ledger_id: int | None
    reason: str | None
    at: int | None
    lock_kept: float | None

    def to_json(self) -> dict[str, Any]:
        return {"ledger_id": self.ledger_id, "reason": self.reason, "at": self.at, "lock_kept": self.lock_kept}

    @classmethod
    def from_json(cls, doc: object) -> WorkerFailure | None:
        if not isinstance(doc, dict):
            return None
        return cls(
            _int(doc.get("ledger_id")), _str(doc.get("reason")), _int(doc.get("at")), _number(doc.get("lock_kept"))
        )


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A replication worker's node: what it does with each ledger it holds, its recent failed
    attempts and the ledgers it finished lately (times in ms, by its host's clock)."""

    #: its lock holder: the daemon's bookie id (or its host name)
    worker: str | None
    host: str | None
    #: the ledger its loop re-replicates now
    current: int | None
    #: every ledger being re-replicated now -> since when
    active: Mapping[int, int | None]
    #: the ledgers whose lock it keeps for a while
    held: tuple[int, ...]
    #: why each held ledger is held (None: a daemon of before holds were kept; no key)
    holds: Mapping[int, Hold] | None
    #: ledger id -> its failed attempts, oldest first (None: a daemon of before they were kept; no key)
    attempts: Mapping[int, tuple[FailedAttempt, ...]] | None
    done: tuple[FinishedRepair, ...]
    last_failure: WorkerFailure | None
    updated: int | None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "worker": self.worker,
            "host": self.host,
            "current": self.current,
            "active": {str(lid): since for lid, since in sorted(self.active.items())},
            "held": list(self.held),
            "done": [d.to_json() for d in self.done],
            "last_failure": None if self.last_failure is None else self.last_failure.to_json(),
            "updated": self.updated,
        }
        if self.holds is not None:
            doc["holds"] = {str(lid): h.to_json() for lid, h in sorted(self.holds.items())}
        if self.attempts is not None:
            doc["attempts"] = {str(lid): [a.to_json() for a in tries] for lid, tries in sorted(self.attempts.items())}
        return doc

    @classmethod
    def from_json(cls, doc: object) -> WorkerStatus | None:
        """None when ``doc`` is not a JSON object."""
        if not isinstance(doc, dict):
            return None
        holds: dict[int, Hold] | None = None
        if "holds" in doc:
            holds = {}
            for lid, item in _by_ledger(doc["holds"]).items():
                hold = Hold.from_json(item)
                if hold is not None:
                    holds[lid] = hold
        attempts: dict[int, tuple[FailedAttempt, ...]] | None = None
        if "attempts" in doc:
            attempts = {}
            for lid, items in _by_ledger(doc["attempts"]).items():
                tries = (FailedAttempt.from_json(a) for a in _list(items))
                attempts[lid] = tuple(a for a in tries if a is not None)
        done = (FinishedRepair.from_json(d) for d in _list(doc.get("done")))
        held = (_int(lid) for lid in _list(doc.get("held")))
        return cls(
            worker=_str(doc.get("worker")),
            host=_str(doc.get("host")),
            current=_int(doc.get("current")),
            active={lid: _int(since) for lid, since in _by_ledger(doc.get("active")).items()},
            held=tuple(lid for lid in held if lid is not None),
            holds=holds,
            attempts=attempts,
            done=tuple(d for d in done if d is not None),
            last_failure=WorkerFailure.from_json(doc.get("last_failure")),
            updated=_int(doc.get("updated")),
        )


# -- the nodes in ZooKeeper -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DaemonStatuses:
    """What :func:`read_daemon_status` reads: the auditor's status (None: none
    published or unreadable) and each worker's, by daemon id."""

    auditor: AuditorStatus | None
    workers: Mapping[str, WorkerStatus]


def publish(store: MetadataStore, name: str, status: AuditorStatus | WorkerStatus) -> None:
    """Write ``status`` as the ephemeral node ``name`` (``auditor``, ``workers/<id>``) of
    this store's session (blocking)."""
    store.underreplication.publish_daemon_status(name, encode(status))


def encode(status: AuditorStatus | WorkerStatus) -> bytes:
    """A status node's bytes (keys sorted)."""
    return json.dumps(status.to_json(), sort_keys=True).encode("utf-8")


def _load(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def read_daemon_status(store: MetadataStore) -> DaemonStatuses:
    """The auditor's node and every worker's (blocking); an unreadable one is left out."""
    nodes = store.underreplication.daemon_statuses()
    workers: dict[str, WorkerStatus] = {}
    prefix = f"{WORKERS}/"
    for name, data in sorted(nodes.items()):
        status = WorkerStatus.from_json(_load(data)) if name.startswith(prefix) else None
        if status is not None:
            workers[name[len(prefix) :]] = status
    return DaemonStatuses(auditor=AuditorStatus.from_json(_load(nodes.get(AUDITOR))), workers=workers)
