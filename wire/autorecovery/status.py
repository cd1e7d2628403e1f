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
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypedDict

from bkctl.wire.metadata.store import MetadataStore

__all__ = ["publish", "read_daemon_status", "AUDITOR", "WORKERS", "DaemonStatuses", "StatusDoc"]

log = logging.getLogger(__name__)

AUDITOR = "auditor"
WORKERS = "workers"

#: one daemon's status: the JSON object it published (its fields are the daemon's own)
StatusDoc = dict[str, Any]


class DaemonStatuses(TypedDict):
    """What :func:`read_daemon_status` reads: the auditor's status (None: none
    published or unreadable) and each worker's, by daemon id."""

    auditor: StatusDoc | None
    workers: dict[str, StatusDoc]


def publish(store: MetadataStore, name: str, doc: StatusDoc) -> None:
    """Write ``doc`` as the ephemeral node ``name`` (``auditor``, ``workers/<id>``) of
    this store's session (blocking)."""
    store.underreplication.publish_daemon_status(name, json.dumps(doc, sort_keys=True).encode("utf-8"))


def _decode(data: bytes | None) -> StatusDoc | None:
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def read_daemon_status(store: MetadataStore) -> DaemonStatuses:
    """``{"auditor": doc or None, "workers": {daemon id: doc}}`` (blocking)."""
    nodes = store.underreplication.daemon_statuses()
    workers: dict[str, StatusDoc] = {}
    prefix = f"{WORKERS}/"
    for name, data in sorted(nodes.items()):
        doc = _decode(data) if name.startswith(prefix) else None
        if doc is not None:
            workers[name[len(prefix) :]] = doc
    return {"auditor": _decode(nodes.get(AUDITOR)), "workers": workers}
