"""``bkctl cluster backup|restore``: the cluster's metadata in one file (Java's shell
has it ledger by ledger only, ``ledgermetadata -dumptofile``).

The file is one JSON document (``format``: :data:`FORMAT`):

* ``ledgers``: ``{id: base64}``, each the ledger znode's value byte for byte
  (its own format v1/v2/v3, as ``ledger metadata dump`` writes it and Java's
  ``-restorefromfile`` reads it);
* ``cookies``: ``{bookie id: base64}``, each bookie's cookie (a bookie whose
  cookie is missing refuses to start);
* ``instance_id``: INSTANCEID, which every cookie and every bookie's disks
  carry (a formatted cluster gets a new one: its old bookies would refuse it);
* ``layout``: LAYOUT's text, ``autorecovery``: the switch and
  ``lostBookieRecoveryDelay``; ``created`` (ms) and ``metadata_uri``.

Left out, on purpose: registrations (ephemeral: the bookies write them),
under-replication marks and locks (an auditor marks again what is missing),
the auditor election, the rack map, and Pulsar's managed-ledger znodes
(Pulsar's own metadata, outside the ledger root: back them up with Pulsar's).

A restore writes the ledgers and cookies into the cluster (initialising it
first when its root is gone, after ``cluster nuke``), puts INSTANCEID back, and moves the ledger id
generator past the highest restored id so that new ledgers do not collide
with restored ones.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import BadInput, Conflict

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

#: the ``format`` field of a backup file
FORMAT = "bkctl-cluster-metadata/1"

#: at most this many ids are drawn to move the id generator past the restored ledgers
MAX_IDS_DRAWN = 200_000


@dataclass(frozen=True)
class BackedUp:
    """``cluster backup-metadata``: the file written, what it holds, and its size."""

    file: str
    ledgers: int
    cookies: int
    bytes: int
    instance_id: str | None


@dataclass(frozen=True)
class BackupFile:
    """A backup file as read back, checked: the instance, the autorecovery settings (``enabled``,
    ``lost_bookie_recovery_delay``) and each ledger's metadata and bookie's cookie, as bytes."""

    instance_id: str | None
    autorecovery: dict[str, Any]
    ledgers: dict[int, bytes]
    cookies: dict[str, bytes]


@dataclass(frozen=True)
class Restored:
    """``cluster restore-metadata``: what was written, what it replaced, whether the cluster or its
    instance id was made anew, and the id the generator was moved above (None: it could not be)."""

    file: str
    ledgers: int
    replaced_ledgers: list[int]
    cookies: int
    replaced_cookies: list[str]
    instance_id: str | None
    instance_id_replaced: bool
    cluster_created: bool
    next_ledger_id_above: int | None


def backup(store: MetadataStore, path: str, uri: str, overwrite: bool = False) -> BackedUp:
    """Write the backup file; an existing ``path`` is refused unless ``overwrite``
    (exit 4).  Returns ``file``, ``ledgers``, ``cookies``, ``bytes``, ``instance_id``."""
    from bkctl.wire.metadata.errors import NoSuchLedger

    if os.path.exists(path) and not overwrite:
        raise Conflict(f"{path} exists: give --force to replace it")
    ledgers = {}
    for ledger_id in store.ledgers.ids():
        try:
            data, _version = store.ledgers.read_bytes(ledger_id)
        except NoSuchLedger:
            continue  # deleted meanwhile
        ledgers[str(ledger_id)] = _b64(data)
    cookies = {}
    for bookie_id in store.registration.all_bookies():
        found = store.cookies.get(bookie_id)
        if found is not None:
            cookies[bookie_id] = _b64(found[0].serialize())
    layout = store.cluster.layout()
    store_instance = store.cluster.instance_id()
    doc = {
        "format": FORMAT,
        "created": int(time.time() * 1000),
        "metadata_uri": uri,
        "instance_id": store_instance,
        "layout": layout.serialize().decode() if layout else None,
        "autorecovery": {
            "enabled": store.underreplication.is_enabled(),
            "lost_bookie_recovery_delay": store.underreplication.lost_bookie_recovery_delay(),
        },
        "ledgers": ledgers,
        "cookies": cookies,
    }
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return BackedUp(path, len(ledgers), len(cookies), len(text), store_instance)


def read_backup(path: str, parse: Callable[[bytes, int | None], Any] | None = None) -> BackupFile:
    """The backup document; a file that is not one: exit 2.  Each ledger's metadata is checked
    with ``parse`` (a store's decoder, ``store.ledgers.parse``; None: the general path)."""
    from bkctl.wire.metadata.ledger import parse_ledger_metadata

    check = parse_ledger_metadata if parse is None else parse
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: not a bkctl cluster backup ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BadInput(f"{path}: not a bkctl cluster backup (format {FORMAT} expected)")
    try:
        ledgers = {int(k): base64.b64decode(v, validate=True) for k, v in doc["ledgers"].items()}
        cookies = {str(k): base64.b64decode(v, validate=True) for k, v in doc["cookies"].items()}
        for _ledger_id, data in ledgers.items():
            check(data, None)
    except Exception as exc:  # noqa: BLE001 - any damage is the same answer
        raise BadInput(f"{path}: damaged backup ({exc})") from None
    return BackupFile(doc.get("instance_id"), doc.get("autorecovery") or {}, ledgers, cookies)


def restore(
    store: MetadataStore, path: str, confirm_overwrite: Callable[[list[int], list[str], bool], None]
) -> Restored:
    """Write the backup's ledgers and cookies, INSTANCEID and the autorecovery
    settings into the cluster (initialised first if its root is gone).  Ledgers or cookies that exist, or
    another INSTANCEID, are replaced only after ``confirm_overwrite(ledgers,
    cookies, instance_id_differs)`` (which raises to refuse).  Returns ``file``,
    ``ledgers``, ``replaced_ledgers``, ``cookies``, ``replaced_cookies``,
    ``instance_id``, ``instance_id_replaced``, ``cluster_created``, ``next_ledger_id_above``."""
    doc = read_backup(path)
    created = not store.cluster.exists()
    if created:  # nuked: made again (Java's initnewcluster), then given the backup's INSTANCEID
        store.cluster.init()
    existing_ledgers = [lid for lid in sorted(doc.ledgers) if store.ledgers.exists(lid)]
    current = set(store.registration.all_bookies())
    existing_cookies = sorted(b for b in doc.cookies if b in current)
    instance_differs = bool(doc.instance_id) and store.cluster.instance_id() != doc.instance_id
    if existing_ledgers or existing_cookies or (instance_differs and not created):
        confirm_overwrite(existing_ledgers, existing_cookies, instance_differs)
    if instance_differs:
        assert doc.instance_id is not None  # (it differs)
        store.cluster.set_instance_id(doc.instance_id)
    for ledger_id, data in sorted(doc.ledgers.items()):
        store.ledgers.restore_bytes(ledger_id, data, overwrite=ledger_id in existing_ledgers)
    for bookie_id, data in sorted(doc.cookies.items()):
        found = store.cookies.get(bookie_id)
        store.cookies.put(bookie_id, data, version=None if found is None else found[1])
    settings = doc.autorecovery
    if settings.get("lost_bookie_recovery_delay") is not None:
        store.underreplication.set_lost_bookie_recovery_delay(int(settings["lost_bookie_recovery_delay"]))
    if settings.get("enabled") is False:
        store.underreplication.disable()
    elif settings.get("enabled") is True:
        store.underreplication.enable()
    highest = max(doc.ledgers, default=None)
    above = move_id_generator_past(store, highest) if highest is not None else None
    return Restored(
        path,
        len(doc.ledgers),
        existing_ledgers,
        len(doc.cookies),
        existing_cookies,
        doc.instance_id,
        instance_differs,
        created,
        above,
    )


def move_id_generator_past(store: MetadataStore, highest: int) -> int | None:
    """Draw ledger ids until one is above ``highest`` (ZooKeeper's sequence counter
    cannot be set); the last drawn, or None when that would take more than
    :data:`MAX_IDS_DRAWN` (then a new ledger may be given a restored id, and fail).
    After the first, as many at once as the gap left (``generate_many``: 500 a ZooKeeper
    multi), not one a round trip: 10^5 ids one at a time took most of a restore's time."""
    drawn = store.ledger_ids.generate()
    count = 1
    while drawn <= highest and count < MAX_IDS_DRAWN:
        want = min(highest - drawn, MAX_IDS_DRAWN - count, _DRAWN_AT_ONCE)
        many = store.ledger_ids.generate_many(max(1, want))
        count += len(many)
        drawn = max(drawn, *many)
    return drawn if drawn > highest else None


#: ids drawn a call while the generator is moved past a restore's ledgers
_DRAWN_AT_ONCE = 10_000


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
