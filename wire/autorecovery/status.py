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

from bkctl.wire.metadata import paths as P

__all__ = ["publish", "read_daemon_status", "AUDITOR", "WORKERS"]

log = logging.getLogger(__name__)

AUDITOR = "auditor"
WORKERS = "workers"


def _base(root: str) -> str:
    return P.underreplication_node(P.UR_DAEMON_STATUS, root)


def publish(store, name: str, doc: dict) -> None:
    """Write ``doc`` as the ephemeral node ``name`` (``auditor``, ``workers/<id>``) of
    this store's session (blocking)."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    zk = store.client
    path = f"{_base(store.root)}/{name}"
    data = json.dumps(doc, sort_keys=True).encode("utf-8")
    try:
        zk.set(path, data)
        return
    except NoNodeError:
        pass
    try:
        zk.create(path, data, ephemeral=True, makepath=True)
    except NodeExistsError:  # another session's node (a daemon that just died): replace it
        zk.delete(path)
        zk.create(path, data, ephemeral=True, makepath=True)


def _read(zk, path: str) -> dict | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(path)
        doc = json.loads(data.decode("utf-8"))
    except (NoNodeError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def read_daemon_status(store) -> dict:
    """``{"auditor": doc or None, "workers": {daemon id: doc}}`` (blocking)."""
    from kazoo.exceptions import NoNodeError

    zk = store.client
    base = _base(store.root)
    workers = {}
    try:
        names = zk.get_children(f"{base}/{WORKERS}")
    except NoNodeError:
        names = []
    for name in sorted(names):
        doc = _read(zk, f"{base}/{WORKERS}/{name}")
        if doc is not None:
            workers[name] = doc
    return {"auditor": _read(zk, f"{base}/{AUDITOR}"), "workers": workers}
