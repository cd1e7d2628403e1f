"""What the movers' campaign (``bench/faults_movers.py``) checks after every round, apart from how
the round hurts the cluster: every acknowledged entry byte-equal, every closed ledger's copies read
replica by replica, ensembles, duplicates and leftovers.  Its own module: the checks read the
cluster as a fresh client does, and share nothing with the faults but the harness's book of ledgers.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field

from bkctl.wire import fastpath
from bkctl.wire.client.blocking import BlockingBookKeeper
from bkctl.wire.metadata.zk import ZKMetadataStore

#: how long a ledger marked under-replicated (repair due or under way) is waited for before its
#: copies are read again
REPAIR_WAIT = 60.0
#: how long leftovers (a killed bkctl's ephemeral znodes, a worker's lock) may take to go
LEFTOVER_WAIT = 20.0


@dataclass
class Findings:
    entries_checked: int = 0
    replicas_checked: int = 0
    ledgers_checked: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    copies_short: list[str] = field(default_factory=list)
    ensemble_twice: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def failures(self) -> int:
        return (
            len(self.lost)
            + len(self.duplicated)
            + len(self.copies_short)
            + len(self.ensemble_twice)
            + len(self.left_behind)
        )


def settle(uri: str, timeout: float = 90.0) -> int:
    """Wait until no ledger is marked under-replicated (the autorecovery daemon's repairs done);
    the marks left when ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        try:
            with ZKMetadataStore(uri, timeout=10, twins=fastpath.selected()) as store:
                left = store.underreplication.count()
        except Exception:  # noqa: BLE001 - ZooKeeper coming back
            left = -1
        if left == 0:
            return 0
        time.sleep(1.0)
    return left


def check_round(uri: str, book, seed: int, payload, origin_of, password: bytes, client_options: dict) -> Findings:
    """Every check of a round, on the cluster at ``uri`` (straight to ZooKeeper)."""
    f = Findings()
    with (
        ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store,
        BlockingBookKeeper(uri, **client_options) as bk,
    ):
        with book.lock:
            maybe = set(book.maybe_deleted)
        for lid in sorted(maybe):  # deletes whose answer was lost: done again, checked for nothing
            try:
                bk.delete(lid)
            except Exception:  # noqa: BLE001 - deleted already
                pass
            with book.lock:
                book.maybe_deleted.discard(lid)
        with book.lock:
            known = dict(book.ledgers)
        present = {}
        for read in store.ledgers.walk():
            if isinstance(read.metadata, Exception):
                kind, text = undecodable(read.ledger_id, read.metadata, known)
                getattr(f, kind).append(text)
                continue
            present[read.ledger_id] = read.metadata
        for lid, md in sorted(present.items()):
            f.ensemble_twice += ensembles_naming_twice(lid, md)
        with book.lock:
            known = dict(book.ledgers)
        for lid, expect in sorted(known.items()):
            if lid not in present:
                if expect.acked:
                    f.lost.append(f"ledger {lid} ({len(expect.acked)} acknowledged entries): its metadata is gone")
                continue
            md = present[lid]
            if not md.is_closed:
                if expect.restored:
                    f.left_behind.append(f"restored ledger {lid} (of {book.restores.get(lid)}) left open")
                try:
                    md = bk.recover(lid, password).metadata
                except Exception as e:  # noqa: BLE001
                    f.lost.append(f"ledger {lid}: cannot be recovered: {type(e).__name__}: {e}")
                    continue
            expect.closed = True
            f.ledgers_checked += 1
            check_entries(bk, lid, expect, md, seed, payload, password, f)
            check_copies(bk, store, lid, expect, seed, payload, password, f)
        for lid, md in sorted(present.items()):
            if lid not in known and lid not in maybe:
                judge_unknown(bk, lid, md, known, book, origin_of, password, f)
    f.left_behind += leftovers(uri)
    return f


def undecodable(lid: int, error: Exception, known: dict) -> tuple[str, str]:
    """``(finding kind, text)`` of a ledger whose metadata does not decode: the decoder refuses an
    ensemble naming a bookie twice (as Java does); any other refusal makes a known ledger's entries
    unreadable (lost), an unknown one's a leftover."""
    text = f"ledger {lid}: its metadata does not decode: {error}"
    if "more than once" in str(error):
        return "ensemble_twice", text
    return ("lost" if lid in known else "left_behind"), text


def ensembles_naming_twice(lid: int, md) -> list[str]:
    """The segments of ``md`` whose ensemble names a bookie more than once."""
    return [
        f"ledger {lid} segment {first}: {list(ensemble)}"
        for first, ensemble in md.ensembles
        if len(set(ensemble)) != len(ensemble)
    ]


def check_entries(bk, lid: int, expect, md, seed: int, payload, password: bytes, f: Findings) -> None:
    """Every acknowledged entry (and every other entry the closed ledger holds) byte-equal, read
    through the client as any reader would."""
    last = md.last_entry_id
    got: dict[int, bytes | None] = {}
    if last >= 0:
        h = bk.open(lid, password)
        try:
            got = dict(h.read(0, last))
        except Exception:  # noqa: BLE001 - one by one, to name the entries that fail
            for entry_id in range(last + 1):
                try:
                    got[entry_id] = h.read_entry(entry_id)
                except Exception:  # noqa: BLE001
                    got[entry_id] = None
    for entry_id in sorted(expect.acked):
        f.entries_checked += 1
        if entry_id > last:
            f.lost.append(f"ledger {lid} entry {entry_id}: acknowledged, past the ledger's last entry {last}")
        elif got.get(entry_id) is None:
            f.lost.append(f"ledger {lid} entry {entry_id}: unreadable")
        elif got[entry_id] != payload(seed, expect.origin, entry_id):
            f.lost.append(f"ledger {lid} entry {entry_id}: differs")
    for entry_id, data in sorted(got.items()):
        if entry_id not in expect.acked and data is not None and data != payload(seed, expect.origin, entry_id):
            f.lost.append(f"ledger {lid} entry {entry_id} (not acknowledged, in the closed ledger): differs")


def _read_copies(bk, lid: int, password: bytes):
    """``(metadata, {(bookie, entry_id): status})`` of every copy the write sets name, each read
    straight from its bookie and its bytes returned."""
    from bkctl.ops.replica_read import read_replica
    from bkctl.wire.errors import NotFound

    async def go(client):
        md, _ = await client.run_blocking(client.store.ledgers.read, lid)
        rows = {}
        for bookie in sorted(set(md.bookies)):
            try:
                got = await read_replica(client, lid, bookie, 0, md.last_entry_id, password)
            except NotFound:  # the metadata changed under the read (a repair, a move)
                continue
            for row in got.entries:
                rows[(bookie, row.entry_id)] = (row.status.value, row.payload)
        return md, rows

    return bk.run(go)


def short_of_copies(md, rows, expect, seed: int, payload) -> dict[int, dict[str, str]]:
    """The entries fewer than write-quorum bookies of their write set hold good, with each named copy's state."""
    short = {}
    for entry_id in range(md.last_entry_id + 1):
        want = payload(seed, expect.origin, entry_id)
        states = {}
        for bookie in md.write_set(entry_id):
            status, data = rows.get((bookie, entry_id), ("unread", None))
            states[bookie] = "differs" if status == "ok" and data != want else status
        if sum(s == "ok" for s in states.values()) < md.write_quorum:
            short[entry_id] = states
    return short


def check_copies(bk, store, lid: int, expect, seed: int, payload, password: bytes, f: Findings) -> None:
    """Write-quorum good copies of every entry of the closed ledger, read replica by replica; while
    the ledger is marked under-replicated (or a worker holds its lock) its repair is waited for."""
    md, rows = _read_copies(bk, lid, password)
    f.replicas_checked += len(rows)
    short = short_of_copies(md, rows, expect, seed, payload)
    if not short:
        return
    deadline = time.monotonic() + REPAIR_WAIT
    marked = store.underreplication.get(lid) is not None
    while time.monotonic() < deadline and (
        store.underreplication.get(lid) is not None or store.underreplication.lock_holder(lid) is not None
    ):
        time.sleep(1.0)
    md, rows = _read_copies(bk, lid, password)
    short = short_of_copies(md, rows, expect, seed, payload)
    for entry_id, states in sorted(short.items())[:5]:
        f.copies_short.append(
            f"ledger {lid} entry {entry_id}: copies {states} (Qw {md.write_quorum};"
            f" marked at the first read: {'yes' if marked else 'no'}; ensembles {[list(e) for _, e in md.ensembles]})"
        )
    if len(short) > 5:
        f.copies_short.append(f"ledger {lid}: {len(short) - 5} more entries short of copies")


def judge_unknown(bk, lid: int, md, known: dict, book, origin_of, password: bytes, f: Findings) -> None:
    """A ledger the harness did not write or restore: an empty open one a writer's lost create
    answer left is the harness's (deleted); one holding another ledger's entries is a duplicate;
    any other is left behind.  Each is deleted once judged, so the next rounds start clean."""
    tagged = md.custom_metadata.get("faults-movers") == b"writer"
    if not md.is_closed and tagged:
        _delete(bk, lid)  # the writer's create answered after its timeout
        return
    first = None
    if md.is_closed and md.last_entry_id >= 0:
        try:
            first = origin_of(bk.open(lid, password).read_entry(0))
        except Exception as e:  # noqa: BLE001
            f.left_behind.append(f"ledger {lid}: unknown to the harness, unreadable: {type(e).__name__}: {e}")
            _delete(bk, lid)
            return
    if first is not None:
        origin = first[0]
        copies = sorted(k for k, e in known.items() if e.origin == origin)
        f.duplicated.append(
            f"ledger {lid}: holds ledger {origin}'s entries (0..{md.last_entry_id}) and no one knows it;"
            f" the harness's copies of {origin}: {copies}, custom metadata {dict(md.custom_metadata)}"
        )
    else:
        state = "closed, empty" if md.is_closed else "open"
        f.left_behind.append(
            f"ledger {lid}: unknown to the harness, {state}, custom metadata {dict(md.custom_metadata)}"
        )
    _delete(bk, lid)


def _delete(bk, lid: int) -> None:
    try:
        bk.delete(lid)
    except Exception:  # noqa: BLE001 - seen again next round
        pass


def leftovers(uri: str) -> list[str]:
    """bkctl's znodes beside the cluster root (a kept rebalance plan, a running record, append locks)
    that still hold something, and replication locks whose ledger is not marked, once a killed
    bkctl's session has had time to expire."""
    from common import raw_zookeeper

    deadline = time.monotonic() + LEFTOVER_WAIT
    while True:
        found = []
        with raw_zookeeper(uri) as (zk, root):
            parent = posixpath.dirname(root.rstrip("/")) or "/"
            prefix = posixpath.basename(root.rstrip("/")) + "-bkctl-"
            for name in zk.get_children(parent):
                if not name.startswith(prefix) or name == prefix + "restores":  # journals: below
                    continue
                path = posixpath.join(parent, name)
                data, _ = zk.get(path)
                children = zk.get_children(path)
                if data or children:
                    found.append(f"{path}: {len(data)} bytes, children {sorted(children)[:5]}")
            locks_path = f"{root.rstrip('/')}/underreplication/locks"
            marks_path = f"{root.rstrip('/')}/underreplication/ledgers"
            locks = zk.get_children(locks_path) if zk.exists(locks_path) else []
            if locks and not (zk.exists(marks_path) and _any_mark(zk, marks_path)):
                found.append(f"{locks_path}: {sorted(locks)[:5]} with no ledger marked")
        found += unfinished_restores(uri)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(1.0)


def unfinished_restores(uri: str) -> list[str]:
    """The restore journals kept in the cluster (``<root>-bkctl-restores``) of restores not finished:
    a finished one's journal stays, by design, so that the same command run again does nothing."""
    from bkctl.backup.journal import ClusterPlace

    found = []
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        for key in store.restores.kept():
            try:
                kept = ClusterPlace(store, key).read()
            except ValueError:
                kept = None
            if kept is None or not kept.head.get("finished"):
                done = 0 if kept is None else len(kept.done)
                found.append(f"restore journal {key}: not finished ({done} ledgers done)")
    return found


def _any_mark(zk, path: str) -> bool:
    """Whether any ``urL`` mark lives under the marks' hierarchy."""
    return any(child.startswith("urL") or _any_mark(zk, f"{path}/{child}") for child in zk.get_children(path))
