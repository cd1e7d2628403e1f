"""ZooKeeper znode paths of a BookKeeper cluster (BookKeeper's meta/LedgerLayout.java, util/StringUtils.java's ledger paths,
meta/ZkLedgerUnderreplicationManager.java),
and of what bkctl keeps or reads beside it (its append locks, Pulsar's metadata).

Pure string functions, no I/O.  ``root`` is the ledgers root (default
``/ledgers``).  Ledger managers:

* ``flat``: ``<root>/L%010d``
* ``legacyhierarchical``: ``<root>/xx/xxxx/Lxxxx`` from the 10-digit id
* ``longhierarchical``: ``<root>/xxx/xxxx/xxxx/xxxx/Lxxxx`` from the 19-digit id
* ``hierarchical`` (default): legacy form for ids < 2^31-1, long form above.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator

__all__ = [
    "AVAILABLE",
    "COOKIES",
    "DEFAULT_ROOT",
    "DISABLE_HEALTH_CHECK",
    "FLAT",
    "HIERARCHICAL",
    "HIERARCHICAL_LONG_THRESHOLD",
    "IDGEN",
    "IDGEN_LONG",
    "ID_PREFIX",
    "HOB_PREFIX",
    "INSTANCEID",
    "LAYOUT",
    "LEGACY_HIERARCHICAL",
    "LONG_HIERARCHICAL",
    "MANAGED_LEDGERS",
    "MANAGERS",
    "MAX_LEDGER_ID",
    "READONLY",
    "SPECIAL_ZNODES",
    "UNDERREPLICATION",
    "UR_AUDITOR_ELECTION",
    "UR_CHECK_ALL_LEDGERS_CTIME",
    "UR_CHECK_CTIMES",
    "UR_DISABLE",
    "UR_LAYOUT",
    "UR_LEDGERS",
    "UR_LOCKS",
    "UR_LOST_BOOKIE_RECOVERY_DELAY",
    "UR_PLACEMENT_POLICY_CHECK_CTIME",
    "UR_REPLICAS_CHECK_CTIME",
    "UR_VOTE_PREFIX",
    "URL_PREFIX",
    "append_lock_path",
    "available_path",
    "cookie_path",
    "daemon_status_path",
    "hob_name",
    "idgen_sequence",
    "is_ledger_node_name",
    "is_ledger_parent_name",
    "is_special_znode",
    "ledger_id_from_path",
    "ledger_id_from_underreplication_path",
    "ledger_parent_paths",
    "ledger_path",
    "managed_ledger_path",
    "managed_ledgers_base",
    "parse_hob_name",
    "partitioned_topic_path",
    "parse_urL_name",
    "readonly_path",
    "rebalance_run_path",
    "restore_journals_path",
    "saved_rebalance_path",
    "lost_entries_path",
    "underreplication_base",
    "underreplication_lock_path",
    "underreplication_node",
    "underreplication_parent_paths",
    "underreplication_path",
    "urL_name",
]

DEFAULT_ROOT = "/ledgers"

FLAT = "flat"
HIERARCHICAL = "hierarchical"
LONG_HIERARCHICAL = "longhierarchical"
LEGACY_HIERARCHICAL = "legacyhierarchical"
MANAGERS = (FLAT, HIERARCHICAL, LONG_HIERARCHICAL, LEGACY_HIERARCHICAL)

# Children of the root.
AVAILABLE = "available"
READONLY = "readonly"
COOKIES = "cookies"
LAYOUT = "LAYOUT"
INSTANCEID = "INSTANCEID"
UNDERREPLICATION = "underreplication"
IDGEN = "idgen"
IDGEN_LONG = "idgen-long"
DISABLE_HEALTH_CHECK = "disableHealthCheck"
ID_PREFIX = "ID-"
HOB_PREFIX = "HOB-"

#: Root children that are never ledger nodes (plus anything starting with ``ID-``).
SPECIAL_ZNODES = frozenset({AVAILABLE, COOKIES, LAYOUT, INSTANCEID, UNDERREPLICATION, IDGEN, IDGEN_LONG})

# Under-replication tree (always below <root>/underreplication).
UR_LAYOUT = "LAYOUT"
UR_LEDGERS = "ledgers"
UR_LOCKS = "locks"
UR_DISABLE = "disable"
UR_LOST_BOOKIE_RECOVERY_DELAY = "lostBookieRecoveryDelay"
UR_AUDITOR_ELECTION = "auditorelection"
UR_VOTE_PREFIX = "V_"
UR_CHECK_ALL_LEDGERS_CTIME = "checkallledgersctime"
UR_PLACEMENT_POLICY_CHECK_CTIME = "placementpolicycheckctime"
UR_REPLICAS_CHECK_CTIME = "replicascheckctime"
#: the auditor's periodic checks' last-run nodes (LastRunTimeFormat, ms)
UR_CHECK_CTIMES = (UR_CHECK_ALL_LEDGERS_CTIME, UR_PLACEMENT_POLICY_CHECK_CTIME, UR_REPLICAS_CHECK_CTIME)
#: bkctl's own: the autorecovery daemons' state for operators (ephemeral JSON nodes
#: ``auditor`` and ``workers/<daemon id>``); Java has no such node and never reads it
UR_DAEMON_STATUS = "bkctl-daemons"
URL_PREFIX = "urL"

#: Pulsar's managed ledgers, beside the ledgers root (``/ledgers`` -> ``/managed-ledgers``)
MANAGED_LEDGERS = "managed-ledgers"

#: Ids below this use the legacy (2+4+4 digit) form under the hierarchical manager.
HIERARCHICAL_LONG_THRESHOLD = 2**31 - 1
MAX_LEDGER_ID = 2**63 - 1

_LEGACY_PARENT = re.compile(r"\d{2}")
_LONG_PARENT = re.compile(r"\d{3}")
_FLAT_NODE = re.compile(r"L\d{10,}")
_DIGITS4 = re.compile(r"\d{4}")
_LEAF4 = re.compile(r"L\d{4}")
_URL_NAME = re.compile(r"urL(\d{10,})")
_HEX4 = re.compile(r"[0-9a-f]{4}")


def _check_manager(manager: str) -> str:
    if manager not in MANAGERS:
        raise ValueError(f"unknown ledger manager {manager!r} (one of {', '.join(MANAGERS)})")
    return manager


def _check_id(ledger_id: int) -> int:
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int):
        raise ValueError(f"ledger id must be an integer, got {ledger_id!r}")
    if not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise ValueError(f"ledger id {ledger_id} is out of range [0, 2^63-1]")
    return ledger_id


def _norm_root(root: str) -> str:
    if not root.startswith("/"):
        raise ValueError(f"ZooKeeper root {root!r} must start with '/'")
    root = root.rstrip("/")
    return root or ""


# ---------------------------------------------------------------------------
# Ledger id -> path
# ---------------------------------------------------------------------------
def _legacy_parts(ledger_id: int) -> list[str]:
    if ledger_id > 9_999_999_999:
        raise ValueError(f"ledger id {ledger_id} does not fit the 10-digit legacy hierarchical layout")
    s = "%010d" % ledger_id
    return [s[0:2], s[2:6], "L" + s[6:10]]


def _long_parts(ledger_id: int) -> list[str]:
    s = "%019d" % ledger_id
    return [s[0:3], s[3:7], s[7:11], s[11:15], "L" + s[15:19]]


def _parts(ledger_id: int, manager: str) -> list[str]:
    _check_id(ledger_id)
    _check_manager(manager)
    if manager == FLAT:
        return ["L%010d" % ledger_id]
    if manager == LEGACY_HIERARCHICAL:
        return _legacy_parts(ledger_id)
    if manager == LONG_HIERARCHICAL:
        return _long_parts(ledger_id)
    if ledger_id < HIERARCHICAL_LONG_THRESHOLD:
        return _legacy_parts(ledger_id)
    return _long_parts(ledger_id)


def ledger_path(ledger_id: int, manager: str = HIERARCHICAL, root: str = DEFAULT_ROOT) -> str:
    """The znode holding ledger ``ledger_id``'s metadata.

    >>> ledger_path(1)
    '/ledgers/00/0000/L0001'
    >>> ledger_path(4294967301)
    '/ledgers/000/0000/0042/9496/L7301'
    """
    return _norm_root(root) + "/" + "/".join(_parts(ledger_id, manager))


def ledger_paths(ledger_ids: Iterable[int], manager: str = HIERARCHICAL, root: str = DEFAULT_ROOT) -> Iterator[str]:
    """:func:`ledger_path` of each of *ledger_ids*, for a walk: in the hierarchical layouts
    the ledgers of one leaf znode (10,000 ids) share everything but their ``L####``, which
    is all that is built for each."""
    if manager == FLAT:
        for ledger_id in ledger_ids:
            yield ledger_path(ledger_id, manager, root)
        return
    leaf: tuple[int, bool] | None = None
    prefix = ""
    for ledger_id in ledger_ids:
        # the combined layout turns long at HIERARCHICAL_LONG_THRESHOLD, inside a leaf's range
        here = (ledger_id // 10_000, ledger_id >= HIERARCHICAL_LONG_THRESHOLD)
        if here != leaf or ledger_id < 0:
            whole = ledger_path(ledger_id, manager, root)  # checks the id, as for any path
            leaf, prefix = here, whole[: -len("L0000")]
            yield whole
            continue
        yield "%sL%04d" % (prefix, ledger_id % 10_000)


def ledger_parent_paths(ledger_id: int, manager: str = HIERARCHICAL, root: str = DEFAULT_ROOT) -> list[str]:
    """The intermediate znodes above the ledger node, outermost first (empty for flat)."""
    parts = _parts(ledger_id, manager)
    base = _norm_root(root)
    return [base + "/" + "/".join(parts[: i + 1]) for i in range(len(parts) - 1)]


# ---------------------------------------------------------------------------
# Path -> ledger id
# ---------------------------------------------------------------------------
def _id_from_parts(parts: list[str], manager: str) -> int:
    n = len(parts)
    if manager in (FLAT,) and n == 1 and _FLAT_NODE.fullmatch(parts[0]):
        return int(parts[0][1:])
    legacy_ok = manager in (HIERARCHICAL, LEGACY_HIERARCHICAL)
    long_ok = manager in (HIERARCHICAL, LONG_HIERARCHICAL)
    if (
        legacy_ok
        and n == 3
        and _LEGACY_PARENT.fullmatch(parts[0])
        and _DIGITS4.fullmatch(parts[1])
        and _LEAF4.fullmatch(parts[2])
    ):
        return int(parts[0] + parts[1] + parts[2][1:])
    if (
        long_ok
        and n == 5
        and _LONG_PARENT.fullmatch(parts[0])
        and all(_DIGITS4.fullmatch(p) for p in parts[1:4])
        and _LEAF4.fullmatch(parts[4])
    ):
        value = int("".join(parts[:4]) + parts[4][1:])
        if value > MAX_LEDGER_ID:
            raise ValueError(f"ledger id {value} is out of range")
        return value
    raise ValueError(f"not a {manager} ledger path: /{'/'.join(parts)}")


def ledger_id_from_path(path: str, manager: str = HIERARCHICAL, root: str = DEFAULT_ROOT) -> int:
    """Inverse of :func:`ledger_path`; ``ValueError`` for anything else."""
    _check_manager(manager)
    base = _norm_root(root)
    if not path.startswith(base + "/"):
        raise ValueError(f"{path!r} is not below the ledgers root {root!r}")
    parts = path[len(base) + 1 :].split("/")
    return _id_from_parts(parts, manager)


def is_special_znode(name: str) -> bool:
    """True for root children that are never ledger nodes (``available``, ``ID-...``, ...)."""
    return name in SPECIAL_ZNODES or name.startswith(ID_PREFIX)


def is_ledger_parent_name(name: str, manager: str = HIERARCHICAL) -> bool:
    """Whether a root child named ``name`` holds ledgers under ``manager``.

    ``\\d{2}`` (legacy), ``\\d{3}`` (long), ``\\d{2,3}`` (hierarchical), ``L\\d{10}`` (flat:
    the child *is* the ledger node).
    """
    _check_manager(manager)
    if is_special_znode(name):
        return False
    if manager == FLAT:
        return bool(_FLAT_NODE.fullmatch(name))
    if manager == LEGACY_HIERARCHICAL:
        return bool(_LEGACY_PARENT.fullmatch(name))
    if manager == LONG_HIERARCHICAL:
        return bool(_LONG_PARENT.fullmatch(name))
    return bool(_LEGACY_PARENT.fullmatch(name) or _LONG_PARENT.fullmatch(name))


def is_ledger_node_name(name: str) -> bool:
    """A leaf ledger node name: ``Lxxxx`` (hierarchical leaves) or ``L`` + 10+ digits (flat)."""
    return bool(_LEAF4.fullmatch(name) or _FLAT_NODE.fullmatch(name))


# ---------------------------------------------------------------------------
# Registration, cookies
# ---------------------------------------------------------------------------
def available_path(bookie_id: str, root: str = DEFAULT_ROOT) -> str:
    return f"{_norm_root(root)}/{AVAILABLE}/{bookie_id}"


def readonly_path(bookie_id: str, root: str = DEFAULT_ROOT) -> str:
    return f"{_norm_root(root)}/{AVAILABLE}/{READONLY}/{bookie_id}"


def cookie_path(bookie_id: str, root: str = DEFAULT_ROOT) -> str:
    return f"{_norm_root(root)}/{COOKIES}/{bookie_id}"


# ---------------------------------------------------------------------------
# Id generation
# ---------------------------------------------------------------------------
def idgen_sequence(name: str) -> int:
    """The sequence number of a sequential ``ID-0000000042`` node name (or path)."""
    leaf = name.rsplit("/", 1)[-1]
    if not leaf.startswith(ID_PREFIX) or not leaf[len(ID_PREFIX) :].isdigit() or not leaf.isascii():
        raise ValueError(f"not an id generation node: {name!r}")
    return int(leaf[len(ID_PREFIX) :])


def hob_name(high: int) -> str:
    """``HOB-%010d``: the idgen-long parent node for the high 31 bits of a 63-bit id."""
    return "%s%010d" % (HOB_PREFIX, high)


def parse_hob_name(name: str) -> int:
    leaf = name.rsplit("/", 1)[-1]
    digits = leaf[len(HOB_PREFIX) :]
    if not leaf.startswith(HOB_PREFIX) or not digits.isdigit() or not digits.isascii():
        raise ValueError(f"not an idgen-long HOB node: {name!r}")
    return int(digits)


# ---------------------------------------------------------------------------
# Under-replication
# ---------------------------------------------------------------------------
def underreplication_base(root: str = DEFAULT_ROOT) -> str:
    return f"{_norm_root(root)}/{UNDERREPLICATION}"


def urL_name(ledger_id: int) -> str:
    """``urL%010d``: the name of a ledger's marker and of its replication lock."""
    return "%s%010d" % (URL_PREFIX, _check_id(ledger_id))


def parse_urL_name(name: str) -> int:
    """Ledger id from an ``urL0000000042`` node name (or path)."""
    m = _URL_NAME.fullmatch(name.rsplit("/", 1)[-1])
    if not m:
        raise ValueError(f"not an under-replication node name: {name!r}")
    return int(m.group(1))


def underreplication_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    """``B/ledgers/hhhh/hhhh/hhhh/hhhh/urL%010d``: 16-bit groups of the id, high first, lowercase hex."""
    _check_id(ledger_id)
    groups = "/".join("%04x" % ((ledger_id >> shift) & 0xFFFF) for shift in (48, 32, 16, 0))
    return f"{underreplication_base(root)}/{UR_LEDGERS}/{groups}/{urL_name(ledger_id)}"


def underreplication_parent_paths(ledger_id: int, root: str = DEFAULT_ROOT) -> list[str]:
    """The 4 hex directories above a marker, outermost first."""
    leaf = underreplication_path(ledger_id, root)
    parts = leaf.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 4, len(parts))]


def ledger_id_from_underreplication_path(path: str, root: str = DEFAULT_ROOT) -> int:
    """Inverse of :func:`underreplication_path` (checks the hex dirs agree with the name)."""
    prefix = f"{underreplication_base(root)}/{UR_LEDGERS}/"
    if not path.startswith(prefix):
        raise ValueError(f"{path!r} is not below {prefix}")
    parts = path[len(prefix) :].split("/")
    if len(parts) != 5 or not all(_HEX4.fullmatch(p) for p in parts[:4]):
        raise ValueError(f"not an under-replication marker path: {path!r}")
    ledger_id = parse_urL_name(parts[4])
    if underreplication_path(ledger_id, root) != path:
        raise ValueError(f"marker {path!r}: directories do not match ledger {ledger_id}")
    return ledger_id


def append_lock_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    """bkctl's lock on appending to a ledger (not Java's): a sibling of the cluster root
    (``/ledgers`` -> ``/ledgers-bkctl-locks/L<id>``), so that it never shows up inside
    the layout Java tools walk."""
    return f"{root.rstrip('/')}-bkctl-locks/L{ledger_id}"


def saved_rebalance_path(root: str = DEFAULT_ROOT) -> str:
    """bkctl's own: the moves of a rebalance under way (:mod:`bkctl.wire.rebalance.saved`), a
    sibling of the cluster root (``/ledgers`` -> ``/ledgers-bkctl-rebalance``) as the append
    locks are, so that Java's tools never walk into it; its parts are its children."""
    return f"{root.rstrip('/')}-bkctl-rebalance"


def restore_journals_path(root: str = DEFAULT_ROOT) -> str:
    """bkctl's own: the journals of ``bkctl restore`` into this cluster (one child per backup
    and mode), a sibling of the cluster root as the saved rebalance is (``/ledgers`` ->
    ``/ledgers-bkctl-restores``), so that Java's tools never walk into it."""
    return f"{root.rstrip('/')}-bkctl-restores"


def lost_entries_path(root: str = DEFAULT_ROOT) -> str:
    """bkctl's own: the entries re-replication found no good copy of, one child per ledger
    (``L<id>``; :mod:`bkctl.wire.autorecovery.lostentries`), a sibling of the cluster root
    (``/ledgers`` -> ``/ledgers-bkctl-lost``) so that Java's auditor and workers never see it."""
    return f"{root.rstrip('/')}-bkctl-lost"


def rebalance_run_path(root: str = DEFAULT_ROOT) -> str:
    """bkctl's own: the record of the rebalance or drain running now
    (:mod:`bkctl.wire.rebalance.executor`), an ephemeral sibling of the cluster root
    (``/ledgers`` -> ``/ledgers-bkctl-running``): it goes with its run's session."""
    return f"{root.rstrip('/')}-bkctl-running"


def underreplication_lock_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    return f"{underreplication_base(root)}/{UR_LOCKS}/{urL_name(ledger_id)}"


def underreplication_node(name: str, root: str = DEFAULT_ROOT) -> str:
    """A fixed child of the under-replication base, e.g. ``underreplication_node(UR_DISABLE)``."""
    return f"{underreplication_base(root)}/{name}"


def daemon_status_path(name: str, root: str = DEFAULT_ROOT) -> str:
    """Our daemons' status node ``name`` (``auditor``, ``workers/<id>``: one or two levels)
    below ``B/bkctl-daemons``; a ValueError for any other name."""
    parts = name.split("/")
    if not 1 <= len(parts) <= 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise ValueError(f"daemon status name {name!r}: one or two non-empty levels")
    return f"{underreplication_node(UR_DAEMON_STATUS, root)}/{name}"


# ---------------------------------------------------------------------------
# Beside the cluster: Pulsar's metadata (read, never written)
# ---------------------------------------------------------------------------
def managed_ledgers_base(root: str = DEFAULT_ROOT) -> str:
    """Pulsar's managed-ledger root beside the ledgers root (``/x/ledgers`` -> ``/x/managed-ledgers``)."""
    return posixpath.join(posixpath.dirname(root.rstrip("/")) or "/", MANAGED_LEDGERS)


def managed_ledger_path(base: str, name: str) -> str:
    """The znode of managed ledger ``name`` (``tenant/namespace/persistent/<encoded topic>``,
    v1: ``tenant/cluster/namespace/persistent/...``) below ``base``; its cursors are its children."""
    return posixpath.join(base, name)


def partitioned_topic_path(base: str, name: str) -> str:
    """Pulsar's partitioned-topic metadata of the topic whose managed-ledger name
    would be ``name``: ``admin/partitioned-topics/<name>`` beside ``base`` (in
    Pulsar's configuration store, found here when that is the same ZooKeeper)."""
    return posixpath.join(posixpath.dirname(base.rstrip("/")) or "/", "admin", "partitioned-topics", name)
