"""What Pulsar's jclouds offloader (S3, GCS, Azure, ...) writes to the object store (pure codecs).

A ledger offloaded by a broker is two objects in the bucket, keyed by the offload's uuid
(``docs/pulsar-offload.md``; the facts in tests/vectors/offload/FACTS.md, from Pulsar's
``tiered-storage/jcloud/.../impl/`` classes):

* the **data object** ``<uuid>-ledger-<ledgerId>``: one multipart part per *block*; each block is
  a 128-byte header (:class:`BlockHeader`: magic ``0xFBDBABCB``, header length, block length,
  first entry id), then whole entries ``[i32 length][i64 entry id][bytes]`` in id order, then
  padding ``FE DC DE AD`` repeated up to the block length (``DataBlockHeaderImpl``,
  ``BlockAwareSegmentInputStreamImpl``);
* the **index object** ``<uuid>-ledger-<ledgerId>-index`` (:class:`OffloadIndex`): version 1
  (magic ``0xDE47DE47``) with the ledger's BookKeeper metadata (``LedgerMetadataFormat``, no
  password) and one entry per block (first entry id, part id, offset); version 2 of streaming
  offload (magic ``0x3D1FB0BC``, keys ``<uuid>`` / ``<uuid>-index``) holds several ledgers
  (``OffloadIndexBlockImpl``, ``OffloadIndexBlockV2Impl``);
* both carry user metadata: ``role`` (data/index), ``ManagedLedgerName`` and the format version
  ``s3managedledgeroffloaderformatversion`` = ``1`` (:func:`check_blob_metadata`); what makes an
  object the offloader's whatever its key is :func:`is_offloader_metadata`.

All integers are big-endian.  Nothing here does I/O: :mod:`.offload_store` reads the bytes.
"""

from __future__ import annotations

import bisect
import re
import struct
import uuid as _uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..proto import formats_pb2
from .errors import OffloadFormatError

__all__ = [
    "BLOCK_HEADER_LENGTH",
    "BlockHeader",
    "IndexEntry",
    "OffloadIndex",
    "OffloadKey",
    "OffloadedMetadata",
    "PADDING",
    "check_blob_metadata",
    "check_padding",
    "OFFLOADER_METADATA_KEYS",
    "data_key",
    "index_key",
    "is_offloader_metadata",
    "iter_block_entries",
    "parse_block_header",
    "parse_index",
    "parse_mapfile_folder",
    "parse_object_key",
    "parse_offloaded_metadata",
    "streaming_data_key",
    "streaming_index_key",
    "uuid_of",
]

BLOCK_MAGIC = 0xFBDBABCB
STREAMING_BLOCK_MAGIC = 0x26A66D32
BLOCK_HEADER_LENGTH = 128
INDEX_V1_MAGIC = 0xDE47DE47
INDEX_V2_MAGIC = 0x3D1FB0BC
#: the padding pattern after a block's last entry (starting with FE at the first padding byte)
PADDING = bytes.fromhex("FEDCDEAD")
#: user metadata on both objects (S3 returns the keys lower-cased)
VERSION_KEY = "s3managedledgeroffloaderformatversion"
CURRENT_VERSION = "1"
ROLE_KEY = "role"
MANAGED_LEDGER_KEY = "managedledgername"
#: user-metadata keys (lower-cased, as S3 returns them) only Pulsar's offloaders write: the format
#: version every blob gets from ``DataBlockUtils.addVersionInfo`` (data, index, and a streaming
#: segment's both), the broker's software version and git sha (``LedgerOffloader``'s
#: ``METADATA_SOFTWARE_VERSION_KEY``/``METADATA_SOFTWARE_GITSHA_KEY``, which the broker hands the
#: offloader as its user metadata) and the ``ManagedLedgerName`` the broker passes as extra
#: metadata (tests/vectors/offload/FACTS.md #2-#4; ``role`` alone is too common a word to tell)
OFFLOADER_METADATA_KEYS = frozenset(
    {
        VERSION_KEY,
        "s3managedledgeroffloadersoftwareversion",
        "s3managedledgeroffloadersoftwaregitsha",
        MANAGED_LEDGER_KEY,
    }
)

_BLOCK_HEADER = struct.Struct(">Iqqq")  # magic, header length, block length, first entry id
_STREAMING_HEADER = struct.Struct(">Iqqqq")  # ... and the ledger id after the first entry id
_ENTRY_HEADER = struct.Struct(">iq")
_INDEX_V1_HEAD = struct.Struct(">iiqqii")
_INDEX_ENTRY = struct.Struct(">qiq")
_INDEX_V2_HEAD = struct.Struct(">iiqq")
_INDEX_V2_LEDGER = struct.Struct(">qii")


def uuid_of(msb: int, lsb: int) -> str:
    """``UUID(msb, lsb).toString()`` of the signed halves ``OffloadContext`` stores."""
    return str(_uuid.UUID(int=((msb & (1 << 64) - 1) << 64) | (lsb & (1 << 64) - 1)))


def data_key(offload_uuid: str, ledger_id: int) -> str:
    return f"{offload_uuid}-ledger-{ledger_id}"


def index_key(offload_uuid: str, ledger_id: int) -> str:
    return f"{offload_uuid}-ledger-{ledger_id}-index"


def streaming_data_key(offload_uuid: str) -> str:
    """A streaming offload segment's data object (FACTS #1, #26): several ledgers' blocks."""
    return offload_uuid


def streaming_index_key(offload_uuid: str) -> str:
    """A streaming offload segment's index object (version 2: each ledger's blocks)."""
    return f"{offload_uuid}-index"


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: the keys the offloaders write: :func:`data_key`, :func:`index_key`, and streaming offload's
#: :func:`streaming_data_key` and :func:`streaming_index_key`
_OBJECT_KEY = re.compile(rf"({_UUID})(?:-ledger-(\d+))?(-index)?")
#: a filesystem offload's MapFile folder below the base path: ``<managed ledger>/<ledger id>-<uuid>``
_MAPFILE_FOLDER = re.compile(rf"(.+)/(\d+)-({_UUID})")


@dataclass(frozen=True)
class OffloadKey:
    """What an object key (or MapFile folder) in Pulsar's form says: the offload's uuid, the
    ledger (None: a streaming segment's object), whether it is an index."""

    uuid: str
    ledger_id: int | None
    index: bool


def parse_object_key(key: str) -> OffloadKey | None:
    """The parts of a key the offloaders write (None: not one of theirs -- another tool's
    object sharing the bucket, a backup archive, a file someone put there)."""
    m = _OBJECT_KEY.fullmatch(key)
    if m is None:
        return None
    return OffloadKey(m.group(1), int(m.group(2)) if m.group(2) else None, bool(m.group(3)))


def parse_mapfile_folder(folder: str) -> OffloadKey | None:
    """The parts of a filesystem offload's MapFile folder (None: not one)."""
    m = _MAPFILE_FOLDER.fullmatch(folder)
    return None if m is None else OffloadKey(m.group(3), int(m.group(2)), False)


# ---------------------------------------------------------------- blocks


@dataclass(frozen=True)
class BlockHeader:
    header_length: int
    block_length: int
    first_entry_id: int
    #: streaming offload's blocks name their ledger (None in version 1 blocks)
    ledger_id: int | None = None


def parse_block_header(
    data: bytes | bytearray | memoryview, where: str = "block", ledger_id: int | None = None
) -> BlockHeader:
    """The header at the start of ``data`` (a block, or at least its first 128 bytes); a streaming
    block's (FACTS #26) that names another ledger than ``ledger_id`` (when given) is an error:
    its segment's index pointed at another ledger's block."""
    if len(data) < BLOCK_HEADER_LENGTH:
        raise OffloadFormatError(f"{where}: {len(data)} bytes, shorter than a block header ({BLOCK_HEADER_LENGTH})")
    magic = struct.unpack_from(">I", data)[0]
    if magic == BLOCK_MAGIC:
        _, header_length, block_length, first = _BLOCK_HEADER.unpack_from(data)
        ledger = None
    elif magic == STREAMING_BLOCK_MAGIC:
        _, header_length, block_length, first, ledger = _STREAMING_HEADER.unpack_from(data)
    else:
        raise OffloadFormatError(f"{where}: magic {magic:#010x} is not a data block header's ({BLOCK_MAGIC:#010x})")
    if header_length != BLOCK_HEADER_LENGTH or block_length < header_length:
        raise OffloadFormatError(f"{where}: header length {header_length}, block length {block_length}")
    if ledger is not None and ledger_id is not None and ledger != ledger_id:
        raise OffloadFormatError(f"{where}: a block of ledger {ledger}, read as ledger {ledger_id}'s")
    return BlockHeader(header_length, block_length, first, ledger)


def iter_block_entries(
    block: bytes | memoryview, where: str = "block", ledger_id: int | None = None
) -> Iterator[tuple[int, memoryview]]:
    """``(entry id, bytes)`` of each entry of one whole block, in order; the padding after the
    last one is checked (:func:`check_padding`), and a streaming block's ledger against
    ``ledger_id`` (:func:`parse_block_header`)."""
    header = parse_block_header(block, where, ledger_id)
    view = memoryview(block)
    if len(view) != header.block_length:
        raise OffloadFormatError(f"{where}: {len(view)} bytes where its header says {header.block_length} (truncated?)")
    pos = header.header_length
    expect = header.first_entry_id
    end = header.block_length
    while pos + _ENTRY_HEADER.size <= end:
        length, entry_id = _ENTRY_HEADER.unpack_from(view, pos)
        if length < 0:  # the padding word read as an int: the block's entries are over
            break
        if entry_id != expect or pos + _ENTRY_HEADER.size + length > end:
            raise OffloadFormatError(
                f"{where}: entry at offset {pos} says id {entry_id} and {length} bytes (want id {expect},"
                f" at most {end - pos - _ENTRY_HEADER.size})"
            )
        start = pos + _ENTRY_HEADER.size
        yield entry_id, view[start : start + length]
        pos = start + length
        expect += 1
    check_padding(view[pos:end], f"{where} padding at offset {pos}")


def check_padding(tail: bytes | memoryview, where: str = "padding") -> None:
    """``tail`` is ``FE DC DE AD`` repeated (its end may cut the pattern)."""
    n = len(tail)
    if n == 0:
        return
    want = (PADDING * (n // 4 + 1))[:n]
    if bytes(tail) != want:
        at = next(i for i in range(n) if tail[i] != want[i])
        raise OffloadFormatError(f"{where}: byte {at} of {n} is {tail[at]:#04x}, not the padding pattern")


# ---------------------------------------------------------------- the index


@dataclass(frozen=True)
class IndexEntry:
    """One block: its first entry id, multipart part id and offset in the data object."""

    first_entry_id: int
    part_id: int
    offset: int


@dataclass(frozen=True)
class OffloadedMetadata:
    """The ledger's BookKeeper metadata as the index (or MapFile) keeps it (no password)."""

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: str
    last_entry_id: int
    length: int
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    digest_type: str
    ctime: int | None
    custom_metadata: tuple[tuple[str, bytes], ...]


def parse_offloaded_metadata(raw: bytes | memoryview, where: str = "index") -> OffloadedMetadata:
    """A ``LedgerMetadataFormat`` message as ``OffloadUtils.buildLedgerMetadataFormat`` writes it."""
    pb = formats_pb2.LedgerMetadataFormat()
    try:
        pb.ParseFromString(bytes(raw))
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and its kin
        raise OffloadFormatError(f"{where}: the ledger metadata does not parse: {exc}") from None
    if not pb.IsInitialized():
        missing = ", ".join(pb.FindInitializationErrors())  # type: ignore[attr-defined]
        raise OffloadFormatError(f"{where}: the ledger metadata lacks {missing}")
    states = formats_pb2.LedgerMetadataFormat.State
    digests = formats_pb2.LedgerMetadataFormat.DigestType
    return OffloadedMetadata(
        pb.ensembleSize,
        pb.quorumSize,
        pb.ackQuorumSize if pb.HasField("ackQuorumSize") else pb.quorumSize,
        states.Name(pb.state),
        pb.lastEntryId,
        pb.length,
        tuple((s.firstEntryId, tuple(s.ensembleMember)) for s in pb.segment),
        digests.Name(pb.digestType) if pb.HasField("digestType") else "CRC32",
        pb.ctime if pb.HasField("ctime") else None,
        tuple((e.key, bytes(e.value)) for e in pb.customMetadata),
    )


@dataclass(frozen=True)
class OffloadIndex:
    """An index object: the data object's length and one :class:`IndexEntry` per block, for one
    ledger (version 1) -- or, of a version 2 index, for the ledger asked for."""

    version: int
    data_object_length: int
    data_header_length: int
    metadata: OffloadedMetadata | None
    entries: tuple[IndexEntry, ...]
    #: the raw metadata bytes (version 2 keeps a LedgerInfo there)
    metadata_bytes: bytes = b""
    #: where each block ends (version 2, whose data object holds other ledgers' blocks between
    #: and after this one's: the next block of any ledger); empty: the next entry's block
    ends: tuple[int, ...] = ()

    @property
    def entry_count(self) -> int:
        """Entries of the ledger by its metadata (last entry id + 1)."""
        return 0 if self.metadata is None else self.metadata.last_entry_id + 1

    def ledger_entries(self) -> int | None:
        """Entries of the ledger by a version 2 index's ``LedgerInfo`` (None: it names none)."""
        if self.version != 2 or not self.metadata_bytes:
            return None
        from ..proto import pulsar_ml_pb2

        info = pulsar_ml_pb2.ManagedLedgerInfo.LedgerInfo()
        try:
            info.ParseFromString(self.metadata_bytes)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise OffloadFormatError("a version 2 index's ledger info does not parse") from None
        return info.entries if info.HasField("entries") else None

    def block_spans(self) -> list[tuple[IndexEntry, int]]:
        """Each block with its length (the next block's offset, or the object's end, minus its own)."""
        spans = []
        for i, e in enumerate(self.entries):
            if self.ends:
                end = self.ends[i]
            else:
                end = self.entries[i + 1].offset if i + 1 < len(self.entries) else self.data_object_length
            spans.append((e, end - e.offset))
        return spans

    def block_of(self, entry_id: int) -> int:
        """The index (into :attr:`entries`) of the block holding ``entry_id``: the greatest first
        entry id not above it."""
        lo, hi = 0, len(self.entries) - 1
        if hi < 0 or entry_id < self.entries[0].first_entry_id:
            raise OffloadFormatError(f"entry {entry_id} is before the index's first block")
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.entries[mid].first_entry_id <= entry_id:
                lo = mid
            else:
                hi = mid - 1
        return lo


def parse_index(data: bytes | memoryview, ledger_id: int | None = None, where: str = "index") -> OffloadIndex:
    """An index object, version 1 or 2 (by its magic); ``ledger_id`` picks the ledger of a
    version 2 index."""
    data = bytes(data)
    if len(data) < 4:
        raise OffloadFormatError(f"{where}: {len(data)} bytes, too short for an index")
    magic = struct.unpack_from(">I", data)[0]
    try:
        if magic == INDEX_V1_MAGIC:
            return _parse_v1(data, where)
        if magic == INDEX_V2_MAGIC:
            return _parse_v2(data, ledger_id, where)
    except struct.error:
        raise OffloadFormatError(f"{where}: truncated ({len(data)} bytes)") from None
    raise OffloadFormatError(f"{where}: magic {magic:#010x} is not an offload index's")


def _check_entries(entries: list[IndexEntry], data_length: int, header_length: int, where: str) -> None:
    previous = None
    for e in entries:
        if e.offset < 0 or e.offset + header_length > data_length:
            raise OffloadFormatError(f"{where}: block at offset {e.offset} lies outside the data ({data_length} bytes)")
        if previous is not None and (e.first_entry_id <= previous.first_entry_id or e.offset <= previous.offset):
            raise OffloadFormatError(f"{where}: blocks out of order ({previous} then {e})")
        previous = e


def _parse_v1(data: bytes, where: str) -> OffloadIndex:
    _, block_length, data_length, header_length, count, md_length = _INDEX_V1_HEAD.unpack_from(data)
    if block_length != len(data):
        raise OffloadFormatError(f"{where}: says {block_length} bytes, is {len(data)} (truncated?)")
    pos = _INDEX_V1_HEAD.size
    if md_length < 0 or count < 0 or pos + md_length + count * _INDEX_ENTRY.size > len(data):
        raise OffloadFormatError(f"{where}: {count} blocks and {md_length} metadata bytes do not fit")
    raw_md = data[pos : pos + md_length]
    metadata = parse_offloaded_metadata(raw_md, where)
    pos += md_length
    entries = [IndexEntry(*_INDEX_ENTRY.unpack_from(data, pos + i * _INDEX_ENTRY.size)) for i in range(count)]
    _check_entries(entries, data_length, header_length, where)
    return OffloadIndex(1, data_length, header_length, metadata, tuple(entries), raw_md)


def _parse_v2(data: bytes, ledger_id: int | None, where: str) -> OffloadIndex:
    _, block_length, data_length, header_length = _INDEX_V2_HEAD.unpack_from(data)
    if block_length != len(data):
        raise OffloadFormatError(f"{where}: says {block_length} bytes, is {len(data)} (truncated?)")
    pos = _INDEX_V2_HEAD.size
    found: list[tuple[int, bytes, list[IndexEntry]]] = []
    while pos < len(data):
        lid, count, md_length = _INDEX_V2_LEDGER.unpack_from(data, pos)
        pos += _INDEX_V2_LEDGER.size
        if md_length < 0 or count < 0 or pos + md_length + count * _INDEX_ENTRY.size > len(data):
            raise OffloadFormatError(
                f"{where}: ledger {lid}'s {count} blocks and {md_length} metadata bytes do not fit"
            )
        raw_md = data[pos : pos + md_length]
        pos += md_length
        entries = [IndexEntry(*_INDEX_ENTRY.unpack_from(data, pos + i * _INDEX_ENTRY.size)) for i in range(count)]
        pos += count * _INDEX_ENTRY.size
        found.append((lid, raw_md, entries))
    if pos != len(data):
        raise OffloadFormatError(f"{where}: ends inside a ledger's entries")
    chosen = [f for f in found if ledger_id is None or f[0] == ledger_id]
    if not chosen:
        raise OffloadFormatError(f"{where}: holds ledgers {[f[0] for f in found]}, not {ledger_id}")
    _, raw_md, entries = chosen[0]
    _check_entries(entries, data_length, header_length, where)
    starts = sorted({e.offset for f in found for e in f[2]} | {data_length})
    ends = tuple(starts[bisect.bisect_right(starts, e.offset)] for e in entries)
    return OffloadIndex(2, data_length, header_length, None, tuple(entries), raw_md, ends)


# ---------------------------------------------------------------- blob metadata


def is_offloader_metadata(metadata: Mapping[str, str]) -> bool:
    """Whether an object's user metadata is what Pulsar's offloader writes on its objects (one of
    :data:`OFFLOADER_METADATA_KEYS`, any case): such an object is Pulsar's whatever its key."""
    return any(k.lower() in OFFLOADER_METADATA_KEYS for k in metadata)


def check_blob_metadata(metadata: Mapping[str, str], role: str, where: str) -> str | None:
    """The problem with an object's user metadata (None: fine), as a broker checks it on read
    (``DataBlockUtils.VERSION_CHECK``: the format version must be ``1``) plus the role the
    offloader sets.  Keys compare lower-cased (S3 returns them so)."""
    lowered = {k.lower(): v for k, v in metadata.items()}
    version = lowered.get(VERSION_KEY)
    if version is None:
        return f"{where}: no {VERSION_KEY} in its metadata (not written by Pulsar's offloader?)"
    if version != CURRENT_VERSION:
        return f"{where}: offloader format version {version!r}, not {CURRENT_VERSION!r}"
    if lowered.get(ROLE_KEY, role) != role:
        return f"{where}: its role is {lowered.get(ROLE_KEY)!r}, not {role!r}"
    return None
