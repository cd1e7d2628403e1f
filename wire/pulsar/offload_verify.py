"""One offloaded ledger checked as a broker would read it (``bkctl pulsar offload verify``): a
module of its own because it joins the codecs (:mod:`.offload_format`), the reader
(:mod:`.offload_reader`) and the ledger's znode, which neither of them knows.

:func:`verify_ledger` checks one ledger's objects against what its managed ledger records
(entries, size), their user metadata (format version, role), the index's ledger metadata against
the ledger's znode while BookKeeper still has it, every block's header, entry chain and padding
(or every MapFile record), and with ``entries`` every entry decoded as a Pulsar entry, checksum
and all.  A ledger whose objects are missing or wrong gives its problems, one line each; a store
that refuses access or does not answer raises (``ObjectDenied``, ``ObjectUnreachable``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CorruptEntry, OffloadFormatError, OffloadMissing, OffloadUnlocated
from .offload_format import OffloadedMetadata, check_blob_metadata, iter_block_entries
from .offload_reader import OffloadedLedger

if TYPE_CHECKING:
    from ..metadata.ledger import LedgerMetadata
    from .offload_store import OffloadRecord, OffloadSettings

__all__ = ["verify_ledger"]


def verify_ledger(
    record: OffloadRecord, settings: OffloadSettings, zk_md: LedgerMetadata | None, entries: bool = False
) -> list[str]:
    """The problems of one offloaded ledger (empty: it checks out); ``zk_md`` its znode's
    metadata while BookKeeper still has it (None: deleted).  An offload not complete is not
    checked (a reader may not use it yet)."""
    location = record.location
    if not location.complete:
        return []
    try:
        ledger = OffloadedLedger(location, settings)
        if location.is_filesystem:
            return _verify_mapfile(record, ledger, zk_md, entries)
        return _verify_objects(record, ledger, zk_md, entries)
    except OffloadUnlocated as exc:
        return [str(exc)]
    except OffloadMissing as exc:
        return [f"missing: {exc}"]
    except OffloadFormatError as exc:
        return [str(exc)]


def _metadata_problems(index_md: OffloadedMetadata, zk_md: LedgerMetadata) -> list[str]:
    """Where the offloaded copy's ledger metadata disagrees with the ledger's znode."""
    if index_md.state != "CLOSED":
        return [f"the offloaded copy's metadata says {index_md.state}, not CLOSED"]
    ours: dict[str, Any] = {
        "ensemble size": index_md.ensemble_size,
        "write quorum": index_md.write_quorum,
        "ack quorum": index_md.ack_quorum,
        "last entry": index_md.last_entry_id,
        "length": index_md.length,
        "ensembles": tuple((first, tuple(members)) for first, members in index_md.ensembles),
        "custom metadata": dict(index_md.custom_metadata),
    }
    theirs: dict[str, Any] = {
        "ensemble size": zk_md.ensemble_size,
        "write quorum": zk_md.write_quorum,
        "ack quorum": zk_md.ack_quorum,
        "last entry": zk_md.last_entry_id,
        "length": zk_md.length,
        "ensembles": tuple((first, tuple(members)) for first, members in zk_md.ensembles),
        "custom metadata": dict(zk_md.custom_metadata),
    }
    if zk_md.digest_type is not None:  # format-1 metadata keeps none
        from ..codecs.digest import DigestType

        ours["digest"] = DigestType.parse(index_md.digest_type)
        theirs["digest"] = zk_md.digest_type
    return [
        f"{what}: offloaded copy {ours[what]!r}, ZooKeeper {theirs[what]!r}"
        for what in ours
        if ours[what] != theirs[what]
    ]


def _entry_problem(data: bytes | memoryview, entry_id: int) -> str | None:
    from .entry import decode_entry

    try:
        decode_entry(bytes(data), verify=True)
    except CorruptEntry as exc:
        return f"entry {entry_id} does not decode as a Pulsar entry: {exc.reason}"
    return None


def _counts(record: OffloadRecord, last_entry_id: int, length: int) -> list[str]:
    problems = []
    if last_entry_id + 1 != record.entries:
        problems.append(
            f"the offloaded copy holds {last_entry_id + 1} entries, the managed ledger says {record.entries}"
        )
    if length != record.size:
        problems.append(f"the offloaded copy's length is {length} bytes, the managed ledger says {record.size}")
    return problems


def _verify_objects(
    record: OffloadRecord, ledger: OffloadedLedger, zk_md: LedgerMetadata | None, entries: bool
) -> list[str]:
    location, store = record.location, ledger.store
    problems = []
    sizes = {}
    for key, role in ((location.data_key, "data"), (location.index_key, "index")):
        head = store.head(key)
        sizes[role] = head.size
        why = check_blob_metadata(head.metadata, role, key)
        if why:
            problems.append(why)
    index = ledger.index()
    if index.data_object_length != sizes["data"]:
        problems.append(
            f"{location.data_key} is {sizes['data']} bytes, its index says {index.data_object_length} (truncated?)"
        )
    if index.metadata is not None:
        problems += _counts(record, index.metadata.last_entry_id, index.metadata.length)
        if zk_md is not None:
            problems += _metadata_problems(index.metadata, zk_md)
    if problems:
        return problems
    expect = 0
    for block, length in index.block_spans():
        data = store.get(location.data_key, block.offset, block.offset + length)
        where = f"{location.data_key} block {block.part_id} at {block.offset}"
        for entry_id, payload in iter_block_entries(data, where, location.ledger_id):
            if entry_id != expect:
                return [f"{where}: entry {entry_id} where {expect} was due"]
            if entries:
                why = _entry_problem(payload, entry_id)
                if why:
                    problems.append(f"{where}: {why}")
            expect += 1
    if expect != record.entries:
        problems.append(f"the blocks hold entries 0..{expect - 1}, the managed ledger says {record.entries}")
    return problems


def _verify_mapfile(
    record: OffloadRecord, ledger: OffloadedLedger, zk_md: LedgerMetadata | None, entries: bool
) -> list[str]:
    md, stored = ledger.mapfile()
    problems = _counts(record, md.last_entry_id, md.length)
    if zk_md is not None:
        problems += _metadata_problems(md, zk_md)
    if len(stored) != md.last_entry_id + 1:
        problems.append(f"the MapFile holds {len(stored)} entries, its metadata says {md.last_entry_id + 1}")
    if entries:
        problems += [why for entry_id, data in stored if (why := _entry_problem(data, entry_id))]
    return problems
