"""The archive's format (``bkctl-archive/1``, described for other readers in docs/backup-format.md):
codecs, with no I/O beyond the object store's interface (a data object is written to a file; it is
read from a :class:`~bkctl.wire.objects.ByteStream` by :mod:`bkctl.wire.backup.data_read`).  What does not read as it should is
:class:`~bkctl.wire.errors.ArchiveDamaged`.

Objects, by name:

* ``archive.json`` -- the marker, ``{"format": "bkctl-archive/1", "created": ms}``
  (:func:`encode_marker`, :func:`check_marker`);
* ``ledgers/<id>/<cluster>-<ctoken>-<entries>.data`` -- a ledger's first ``entries`` entries
  (``cluster``: the first 12 characters of the cluster's INSTANCEID, ``none`` without one):
  the 16-byte header ``BKLEDGR1`` + the ledger id (u64), then for each entry
  ``[u64 entry id][u32 length][u32 CRC32C of the payload][payload]``, all big-endian;
* ``ledgers/<id>/<cluster>-<ctoken>-<entries>.json`` -- that copy's :class:`LedgerRecord`: the
  ledger's metadata znode as stored, what a restore needs of it (quorums, digest,
  password, custom metadata), the data object's size and the SHA-256 of its index.  Written after the
  data object, so a record names a complete copy;
* ``chunks/<id>/<n>.jsonl`` -- a ``bkctl-backup/2`` backup's ledgers, :data:`CHUNK_LEDGERS` a
  chunk, one JSON line a ledger (:class:`ManifestLedger`), ascending ledger ids across the chunks
  (:class:`ChunkWriter`, :func:`decode_chunk`); a ledger with no entries has its record in its
  line (``inline``) and no object of its own;
* ``chunks/<id>/notes-<n>.jsonl`` -- a ``bkctl-backup/3`` backup's notes: the ledgers named
  but gone (``missing``), those that could not be read (``unreadable``) and those of the
  previous backup gone since (``deleted``), one JSON line each (:class:`NoteWriter`,
  :func:`decode_notes`);
* ``backups/<id>.json`` -- a :class:`Manifest`, written last: what one backup holds (since
  ``bkctl-backup/2`` its head: the chunks by name and SHA-256, and the totals).

A ledger's entries never change once confirmed, so a copy is named by what it holds:
a second backup finds ``<cluster>-<ctoken>-<entries>`` there already and copies nothing (the
cluster in the name: two clusters backed up into one archive each have their own ledger 5).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import posixpath
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Protocol

from ..codecs import checksums
from ..codecs.digest import DigestType
from ..errors import ArchiveDamaged
from .json_checks import checked

__all__ = [
    "ARCHIVE_FORMAT",
    "CHUNK_LEDGERS",
    "MANIFEST_FORMAT",
    "MANIFEST_FORMAT_V1",
    "MANIFEST_FORMAT_V2",
    "NOTE_KINDS",
    "MARKER",
    "MAGIC",
    "DATA_HEADER",
    "ENTRY_HEAD",
    "ArchiveParts",
    "DataWriter",
    "WRITE_PIECE",
    "LedgerRecord",
    "Manifest",
    "ChunkRef",
    "ChunkWriter",
    "LedgerNote",
    "ManifestLedger",
    "NoteWriter",
    "TopicRecord",
    "UnreadableLedger",
    "ValueRecord",
    "b64",
    "backup_folders",
    "check_marker",
    "decode_chunk",
    "decode_notes",
    "cluster_tag",
    "encode_marker",
    "ledger_object",
    "manifest_name",
    "parts_twin",
    "py_archive_parts",
    "unb64",
]

ARCHIVE_FORMAT = "bkctl-archive/1"
#: what :class:`Manifest` writes: a head naming chunks of ledger lines and chunks of notes
MANIFEST_FORMAT = "bkctl-backup/3"
#: a head naming chunks of ledger lines, its missing, unreadable and deleted ledgers listed in
#: it (read, never written now)
MANIFEST_FORMAT_V2 = "bkctl-backup/2"
#: the manifest older bkctl wrote, every ledger in the one document (read, never written now)
MANIFEST_FORMAT_V1 = "bkctl-backup/1"
#: ledgers a manifest chunk holds (the last one fewer): what a backup holds in memory of its
#: ledger lines, and what it reads at a time of the previous backup's
CHUNK_LEDGERS = 4096
MAGIC = b"BKLEDGR1"
#: a data object's header: ``BKLEDGR1`` and the ledger id
DATA_HEADER = struct.Struct(">8sQ")
#: an entry's head in a data object: its id, its payload's length and CRC32C
ENTRY_HEAD = struct.Struct(">QII")
#: the archive's marker object
MARKER = "archive.json"


def encode_marker(created_ms: int) -> bytes:
    """The marker object of an archive created at ``created_ms``."""
    return json.dumps({"format": ARCHIVE_FORMAT, "created": created_ms}).encode() + b"\n"


def check_marker(data: bytes) -> None:
    """:class:`ArchiveDamaged` unless ``data`` is a ``bkctl-archive/1`` marker."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ArchiveDamaged(f"{MARKER} is not an archive marker ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != ARCHIVE_FORMAT:
        raise ArchiveDamaged(f"not a {ARCHIVE_FORMAT} archive")


def ledger_object(ledger_id: int, cluster: str, ctoken: int, entries: int) -> str:
    """The name of a ledger copy's objects, without the suffix."""
    return f"ledgers/{ledger_id}/{cluster}-{ctoken}-{entries}"


def cluster_tag(instance_id: str | None) -> str:
    """A cluster in a copy's name: its INSTANCEID's first 12 characters (``none`` without one)."""
    tag = "".join(c for c in (instance_id or "") if c.isalnum())[:12]
    return tag or "none"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


#: bytes of payload :meth:`DataWriter.add_batch` joins into one write (a file without a
#: descriptor; one with is written by ``os.writev``, nothing joined)
WRITE_PIECE = 256 << 10
#: buffers one ``os.writev`` takes (the system's IOV_MAX; 1024 on Linux)
_IOV_MAX = min(1024, os.sysconf("SC_IOV_MAX")) if hasattr(os, "sysconf") else 16


def _descriptor(out: IO[bytes]) -> int | None:
    """The descriptor of a file ``out`` writes to (its buffer flushed: what is written
    from now on goes there), None for one without (a ``BytesIO``)."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is both)
        return None
    out.flush()
    return fd


def _write_all(fd: int, parts: list[bytes]) -> None:
    """``parts`` written to ``fd`` in order, ``os.writev`` of up to :data:`_IOV_MAX` at a time:
    one system call (and one release of the interpreter's lock) for hundreds of entries, no
    copy joining them.  A short write (a signal) has the rest written after it."""
    for start in range(0, len(parts), _IOV_MAX):
        chunk = parts[start : start + _IOV_MAX]
        want = sum(map(len, chunk))
        done = os.writev(fd, chunk)
        if done < want:
            rest = memoryview(b"".join(chunk))[done:]
            while rest:
                rest = rest[os.write(fd, rest) :]


#: a batch's entries as a data object holds them: ``(batch, expected)`` -> the head and the
#: payload of each entry in order from entry id ``expected`` (``[head, payload, head, ...]``, a
#: head ``[u64 entry id][u32 length][u32 CRC32C]``), stopping before the first out of order,
#: and the bytes of those payloads (:func:`py_archive_parts`, and ``_archive``'s C twin)
ArchiveParts = Callable[[list[tuple[int, bytes]], int], tuple[list[bytes], int]]


def py_archive_parts(batch: list[tuple[int, bytes]], expected: int) -> tuple[list[bytes], int]:
    """:data:`ArchiveParts` in Python: the reference (tests/unit/test_archive_parts.py)."""
    parts: list[bytes] = []
    append = parts.append
    pack = ENTRY_HEAD.pack
    crc32c = checksums.crc32c_function()  # (the package imported by the first batch: not by the C twin's)
    size = 0
    for entry_id, payload in batch:
        if entry_id != expected:
            break
        n = len(payload)
        append(pack(entry_id, n, crc32c(payload)))
        append(payload)
        expected += 1
        size += n
    return parts, size


class PartsModule(Protocol):
    """What :func:`parts_twin` takes of ``_archive`` (C): its function given its Python twin
    first (the fallback).  The module's whole slot, its reading too, is
    :class:`~bkctl.wire.backup.data_read.ArchiveModule`."""

    @property
    def archive_parts(self) -> Callable[[ArchiveParts, list[tuple[int, bytes]], int], tuple[list[bytes], int]]: ...


def parts_twin(c: PartsModule | None) -> ArchiveParts:
    """The C twin of the module ``c`` (``_archive``, which the twin selector loads and holds to
    its slot: its checksums made without the interpreter's lock, which the client's thread then
    has), given the Python twin; :func:`py_archive_parts` for None."""
    if c is None:
        return py_archive_parts
    return functools.partial(c.archive_parts, py_archive_parts)


class DataWriter:
    """Writes a data object to a file: :meth:`add` each entry in order.  ``sha`` hashes the
    object's index -- its header and every entry's header, which holds the CRC32C of the
    entry's payload -- so that the SHA-256 and the CRC32Cs together vouch for every byte at
    a CRC's cost per byte (a SHA-256 of every payload byte cost as much as reading them).
    A file with a descriptor is written with ``os.writev`` (``out`` itself not written to,
    nor left holding anything: its buffer is flushed first), any other by ``out.write``."""

    def __init__(
        self,
        out: IO[bytes],
        ledger_id: int,
        grown: Callable[[int], None] | None = None,
        parts: ArchiveParts = py_archive_parts,
    ):
        self.out = out
        #: a batch's heads and payloads (:data:`ArchiveParts`: the twin selector's, ``Twins.archive_parts``)
        self.parts = parts
        self.fd = _descriptor(out)
        #: told the object's size after each batch written by descriptor (a local archive
        #: recycles the page cache behind it: :class:`~bkctl.wire.objects.PageRecycler`)
        self.grown = grown if self.fd is not None else None
        self.sha = hashlib.sha256()
        self.size = 0
        self.entries = 0
        self.payload_bytes = 0
        self._write(DATA_HEADER.pack(MAGIC, ledger_id))

    def _write(self, data: bytes) -> None:
        self._emit([data])
        self.sha.update(data)
        self.size += len(data)

    def _emit(self, parts: list[bytes]) -> None:
        if self.fd is not None:
            _write_all(self.fd, parts)
        else:
            self.out.write(b"".join(parts))

    def add_batch(self, batch: list[tuple[int, bytes]]) -> None:
        """:meth:`add` each ``(entry_id, payload)``: their heads and payloads made at once
        (``parts``: :data:`ArchiveParts`), then to a descriptor ``os.writev`` of
        :data:`_IOV_MAX` buffers at a time (16 writes of 256 KiB a batch of 4 MiB cost a third
        more CPU, and as many hand-overs of the interpreter's lock to the client's thread).
        Else in writes of about :data:`WRITE_PIECE` bytes: a batch of megabytes joined at once
        took fresh memory each time (the allocator maps so large a block anew, and the kernel
        zeroes its pages), a piece of this size reuses the allocator's.  An entry out of order
        is ValueError, those before it written."""
        parts, size = self.parts(batch, self.entries)
        taken = len(parts) // 2
        if self.fd is not None:
            _write_all(self.fd, parts)
        elif parts:
            step = 2 * max(1, WRITE_PIECE * taken // max(1, size))  # parts of about WRITE_PIECE bytes
            for start in range(0, len(parts), step):
                self.out.write(b"".join(parts[start : start + step]))
        expected = self.entries
        self._account(parts[::2], size, expected + taken)
        if taken < len(batch):
            raise ValueError(f"entry {batch[taken][0]} out of order (expected {expected + taken})")
        if self.grown is not None:
            self.grown(self.size)

    def _account(self, heads: list[bytes], size: int, expected: int) -> None:
        """The entries up to ``expected`` written: their heads hashed, the counts moved on."""
        self.sha.update(b"".join(heads))
        self.size += size + ENTRY_HEAD.size * len(heads)
        self.entries = expected
        self.payload_bytes += size

    def add(self, entry_id: int, payload: bytes) -> None:
        if entry_id != self.entries:
            raise ValueError(f"entry {entry_id} out of order (expected {self.entries})")
        head = ENTRY_HEAD.pack(entry_id, len(payload), checksums.crc32c(payload))
        self._emit([head, payload])  # the payload hashed through its CRC32C, in the head
        self.sha.update(head)
        self.size += len(head) + len(payload)
        self.entries += 1
        self.payload_bytes += len(payload)


@dataclass
class LedgerRecord:
    """One copy of a ledger (``ledgers/<id>/<cluster>-<ctoken>-<entries>.json``)."""

    ledger_id: int
    #: :func:`cluster_tag` of the cluster it was copied from
    cluster: str
    ctoken: int
    entries: int
    #: payload bytes of those entries
    payload_bytes: int
    #: the ledger's state when it was copied: CLOSED, OPEN or IN_RECOVERY (then copied up
    #: to the last entry an ack quorum holds, read without fencing)
    state: str
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    digest_type: str
    password_b64: str
    custom_metadata_b64: dict[str, str]
    #: the ledger znode's value as stored (its own format version)
    metadata_b64: str
    data_object: str
    index_sha256: str
    data_size: int
    copied_at: int

    @property
    def name(self) -> str:
        return ledger_object(self.ledger_id, self.cluster, self.ctoken, self.entries) + ".json"

    @property
    def password(self) -> bytes:
        return unb64(self.password_b64)

    @property
    def custom_metadata(self) -> dict[str, bytes]:
        return {k: unb64(v) for k, v in self.custom_metadata_b64.items()}

    def encode(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def decode(cls, data: bytes, name: str = "") -> LedgerRecord:
        try:
            record = cls(**json.loads(data))
        except (ValueError, TypeError) as exc:
            raise ArchiveDamaged(f"{name}: not a ledger record ({exc})") from None
        record = checked(record, f"{name}: not a ledger record")
        wrong = record.nonsense()
        if wrong:
            raise ArchiveDamaged(f"{name}: not a ledger record ({wrong})")
        return record

    def nonsense(self) -> str | None:
        """What no copy's record says, and a damaged one can (records carry no hash: one flipped
        digit is enough), else None: caught here, the ledger is named damaged and a restore with
        --skip-damaged goes on, where a quorum above its ensemble failed later, in the ledger's
        creation, as if the cluster had refused it."""
        if min(self.ledger_id, self.entries, self.payload_bytes, self.data_size) < 0:
            return "a negative id, count or size"
        if not 1 <= self.ack_quorum <= self.write_quorum <= self.ensemble_size:
            return f"ensemble {self.ensemble_size}, write quorum {self.write_quorum}, ack quorum {self.ack_quorum}"
        from ..metadata.ledger import LedgerState  # (protobuf with it: not at this module's import)

        if self.state not in LedgerState.__members__:
            return f"state {self.state!r}"
        if self.digest_type not in DigestType.__members__:
            return f"digest type {self.digest_type!r}"
        return None


@dataclass
class TopicRecord:
    """A managed ledger as backed up: its znode's value and its cursors' (znode name -> value)."""

    managed_ledger: str
    value_b64: str
    cursors_b64: dict[str, str] = field(default_factory=dict)


@dataclass
class ValueRecord:
    """A znode value kept as is: a schema locator (``key`` its schema id) or
    partitioned-topic metadata (``key`` the topic's managed-ledger name)."""

    key: str
    value_b64: str


@dataclass
class ManifestLedger:
    """A ledger of a backup: the record naming its copy, and whether this backup copied it.
    A ledger with no entries has no objects: ``inline`` is its record (``record`` the name
    it would have, by which the next backup knows it)."""

    ledger_id: int
    record: str
    entries: int
    payload_bytes: int
    copied: bool
    inline: LedgerRecord | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ledger_id": self.ledger_id,
            "record": self.record,
            "entries": self.entries,
            "payload_bytes": self.payload_bytes,
            "copied": self.copied,
        }
        if self.inline is not None:
            doc["inline"] = asdict(self.inline)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ManifestLedger:
        inline = doc.pop("inline", None)
        return cls(**doc, inline=None if inline is None else LedgerRecord(**inline))


@dataclass
class ChunkRef:
    """A manifest chunk as its head names it: ``ledgers`` lines, ids ``first`` to ``last``."""

    name: str
    first: int
    last: int
    ledgers: int
    sha256: str


def chunk_name(backup_id: str, seq: int) -> str:
    return f"chunks/{backup_id}/{seq:06d}.jsonl"


def manifest_name(backup_id: str) -> str:
    return f"backups/{backup_id}.json"


def backup_folders(backup_id: str) -> list[str]:
    """The folders backup ``backup_id``'s chunks and its manifest go in."""
    return [posixpath.dirname(chunk_name(backup_id, 0)), posixpath.dirname(manifest_name(backup_id))]


def _store_chunk(put: Callable[[str, bytes], None], name: str, lines: list[bytes], first: int, last: int) -> ChunkRef:
    """Store ``lines`` as chunk ``name`` (one line each) and return what the head says of it:
    the one form of a ledger chunk and a notes chunk alike."""
    data = b"\n".join(lines) + b"\n"
    put(name, data)
    return ChunkRef(name, first, last, len(lines), hashlib.sha256(data).hexdigest())


def decode_chunk(data: bytes, ref: ChunkRef, after: int = -1) -> list[ManifestLedger]:
    """The ledger lines of chunk ``ref`` (:class:`ArchiveDamaged` unless its SHA-256, its count
    and its ids -- ascending, past ``after``, between ``first`` and ``last`` -- are the head's)."""
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ArchiveDamaged(f"{ref.name}: its SHA-256 is not the one its manifest records")
    try:
        out = [ManifestLedger.from_json(json.loads(line)) for line in data.splitlines()]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ArchiveDamaged(f"{ref.name}: not a manifest chunk ({exc})") from None
    for x in out:
        checked(x, f"{ref.name}: not a manifest chunk")
    ids = [x.ledger_id for x in out]
    if len(out) != ref.ledgers or ids[:1] != [ref.first] or ids[-1:] != [ref.last]:
        raise ArchiveDamaged(f"{ref.name}: {len(out)} ledgers, not the {ref.ledgers} its manifest records")
    for x in out:
        if x.ledger_id <= after:
            raise ArchiveDamaged(f"{ref.name}: ledger {x.ledger_id} out of order")
        after = x.ledger_id
        if x.inline is not None and (x.inline.ledger_id, x.inline.entries, x.entries) != (x.ledger_id, 0, 0):
            raise ArchiveDamaged(f"{ref.name}: ledger {x.ledger_id}'s record in its line is not an empty ledger's")
    return out


class ChunkWriter:
    """Writes a backup's ledger lines, in ascending ledger ids, into chunks of ``per_chunk``
    (``put(name, data)`` stores one whole), counting them; :meth:`finish` stores the last and
    returns the chunks for the head.  Holds one chunk's lines at a time."""

    def __init__(self, backup_id: str, put: Callable[[str, bytes], None], per_chunk: int = CHUNK_LEDGERS):
        self.backup_id, self.put, self.per_chunk = backup_id, put, max(1, per_chunk)
        self.refs: list[ChunkRef] = []
        self.lines: list[bytes] = []
        self.first = self.last = -1
        self.counts = {"ledgers": 0, "entries": 0, "bytes": 0, "copied_ledgers": 0, "copied_bytes": 0}

    def add(self, x: ManifestLedger) -> None:
        if x.ledger_id <= self.last:
            raise ValueError(f"ledger {x.ledger_id} after {self.last}: lines go in ascending ids")
        if not self.lines:
            self.first = x.ledger_id
        self.last = x.ledger_id
        self.lines.append(json.dumps(x.to_json(), sort_keys=True, separators=(",", ":")).encode())
        c = self.counts
        c["ledgers"] += 1
        c["entries"] += x.entries
        c["bytes"] += x.payload_bytes
        if x.copied:
            c["copied_ledgers"] += 1
            c["copied_bytes"] += x.payload_bytes
        if len(self.lines) >= self.per_chunk:
            self._flush()

    def _flush(self) -> None:
        if not self.lines:
            return
        name = chunk_name(self.backup_id, len(self.refs))
        self.refs.append(_store_chunk(self.put, name, self.lines, self.first, self.last))
        self.lines = []

    def finish(self) -> list[ChunkRef]:
        self._flush()
        return self.refs


#: what a note says of its ledger (:class:`LedgerNote`)
NOTE_KINDS = ("missing", "unreadable", "deleted")


@dataclass
class LedgerNote:
    """A ledger a backup names without holding it: ``missing`` (named by a topic or a schema,
    gone from the cluster), ``unreadable`` (selected, could not be read: ``error`` why) or
    ``deleted`` (in the previous backup, gone since)."""

    ledger_id: int
    kind: str
    error: str = ""


def notes_name(backup_id: str, seq: int, stem: str = "notes") -> str:
    return f"chunks/{backup_id}/{stem}-{seq:06d}.jsonl"


class NoteWriter:
    """Writes a backup's notes into chunks of ``per_chunk`` lines as they come (in no order:
    ``first`` and ``last`` of a chunk are its first and last lines'), counting each kind;
    :meth:`finish` stores the last chunk and returns them all.  Holds one chunk's lines.
    ``stem`` names its chunks (``chunks/<id>/<stem>-<n>.jsonl``)."""

    def __init__(
        self, backup_id: str, put: Callable[[str, bytes], None], per_chunk: int = CHUNK_LEDGERS, stem: str = "notes"
    ):
        self.backup_id, self.put, self.per_chunk, self.stem = backup_id, put, max(1, per_chunk), stem
        self.refs: list[ChunkRef] = []
        self.lines: list[bytes] = []
        self.ids: list[int] = []
        self.counts = dict.fromkeys(NOTE_KINDS, 0)

    def add(self, note: LedgerNote) -> None:
        if note.kind not in NOTE_KINDS:
            raise ValueError(f"a note of kind {note.kind!r}")
        self.counts[note.kind] += 1
        doc: dict[str, Any] = {"ledger_id": note.ledger_id, "kind": note.kind}
        if note.error:
            doc["error"] = note.error
        self.lines.append(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
        self.ids.append(note.ledger_id)
        if len(self.lines) >= self.per_chunk:
            self._flush()

    def _flush(self) -> None:
        if not self.lines:
            return
        name = notes_name(self.backup_id, len(self.refs), self.stem)
        self.refs.append(_store_chunk(self.put, name, self.lines, self.ids[0], self.ids[-1]))
        self.lines, self.ids = [], []

    def finish(self) -> list[ChunkRef]:
        self._flush()
        return self.refs


def decode_notes(data: bytes, ref: ChunkRef) -> list[LedgerNote]:
    """The notes of chunk ``ref`` (:class:`ArchiveDamaged` unless its SHA-256, its count and
    its first and last ids are the head's, and every line a note)."""
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ArchiveDamaged(f"{ref.name}: its SHA-256 is not the one its manifest records")
    try:
        out = [LedgerNote(**json.loads(line)) for line in data.splitlines()]
    except (ValueError, TypeError) as exc:
        raise ArchiveDamaged(f"{ref.name}: not a chunk of notes ({exc})") from None
    for x in out:
        checked(x, f"{ref.name}: not a chunk of notes")
    ids = [x.ledger_id for x in out]
    if len(out) != ref.ledgers or ids[:1] != [ref.first] or ids[-1:] != [ref.last]:
        raise ArchiveDamaged(f"{ref.name}: {len(out)} notes, not the {ref.ledgers} its manifest records")
    if any(x.kind not in NOTE_KINDS or not isinstance(x.ledger_id, int) for x in out):
        raise ArchiveDamaged(f"{ref.name}: a note of no known kind")
    return out


@dataclass
class UnreadableLedger:
    """A ledger a backup could not copy (an entry no bookie answered for, a digest that did not
    check): named in the manifest, its data not in the backup."""

    ledger_id: int
    error: str


@dataclass
class Manifest:
    """What one backup holds (``backups/<id>.json``).  A manifest read since ``bkctl-backup/2``
    is its head: ``chunks`` name its ledgers (read by :func:`decode_chunk`, ``ledgers`` empty)
    and ``counts`` their totals; one of ``bkctl-backup/1`` has every ledger in ``ledgers``.  In
    ``bkctl-backup/3`` the missing, unreadable and deleted ledgers are in chunks of notes
    (``notes``, :func:`decode_notes`; ``missing``, ``unreadable`` and ``deleted["ledgers"]``
    empty, their numbers in ``counts``); older ones list them in the head."""

    id: str
    started: int
    finished: int
    source: dict[str, Any]
    selection: dict[str, Any]
    ledgers: list[ManifestLedger]
    topics: list[TopicRecord]
    schemas: list[ValueRecord]
    partitioned: list[ValueRecord]
    #: ledgers named by the topics or schemas backed up that were gone from the cluster
    missing: list[int]
    #: ledgers and managed ledgers in the previous backup and gone since
    deleted: dict[str, list[Any]]
    previous: str | None = None
    format: str = MANIFEST_FORMAT
    #: ledgers selected that could not be read (the backup holds everything else): a partial backup
    unreadable: list[UnreadableLedger] = field(default_factory=list)
    #: (since ``bkctl-backup/2``) the chunks of ledger lines, in ascending ledger ids
    chunks: list[ChunkRef] = field(default_factory=list)
    #: (since ``bkctl-backup/2``) the ledger lines' totals (:meth:`totals`); in ``bkctl-backup/3``
    #: the notes' too (``missing``, ``unreadable``, ``deleted``)
    counts: dict[str, int] = field(default_factory=dict)
    #: (``bkctl-backup/3``) the chunks of notes (:class:`LedgerNote`)
    notes: list[ChunkRef] = field(default_factory=list)

    @property
    def name(self) -> str:
        return manifest_name(self.id)

    @property
    def chunked(self) -> bool:
        """Whether its ledgers are in chunks (since ``bkctl-backup/2``), not in ``ledgers``."""
        return self.format != MANIFEST_FORMAT_V1

    @property
    def noted(self) -> bool:
        """Whether its missing, unreadable and deleted ledgers are in chunks of notes (``bkctl-backup/3``)."""
        return self.format == MANIFEST_FORMAT

    def encode(self) -> bytes:
        doc = asdict(self)
        if self.noted:
            del doc["ledgers"], doc["missing"], doc["unreadable"]
            doc["deleted"] = {"topics": self.deleted.get("topics", [])}
        else:
            del doc["notes"]
            if self.chunked:
                del doc["ledgers"]
            else:
                doc["ledgers"] = [x.to_json() for x in self.ledgers]
                del doc["chunks"], doc["counts"]
        return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def decode(cls, data: bytes, name: str = "") -> Manifest:
        known = (MANIFEST_FORMAT, MANIFEST_FORMAT_V2, MANIFEST_FORMAT_V1)
        try:
            doc = json.loads(data)
            if doc.get("format") not in known:
                raise ValueError(f"format {doc.get('format')!r}, not {' or '.join(known)}")
            if doc["format"] == MANIFEST_FORMAT_V1:
                doc["ledgers"] = [ManifestLedger.from_json(x) for x in doc["ledgers"]]
            else:
                doc["ledgers"] = []
                doc["chunks"] = [ChunkRef(**x) for x in doc["chunks"]]
                doc["counts"] = {str(k): int(v) for k, v in doc["counts"].items()}
            if doc["format"] == MANIFEST_FORMAT:
                doc["notes"] = [ChunkRef(**x) for x in doc["notes"]]
                doc["missing"] = []
                doc["deleted"] = {"ledgers": [], "topics": list(doc["deleted"]["topics"])}
            doc["topics"] = [TopicRecord(**x) for x in doc["topics"]]
            doc["schemas"] = [ValueRecord(**x) for x in doc["schemas"]]
            doc["partitioned"] = [ValueRecord(**x) for x in doc["partitioned"]]
            doc["unreadable"] = [UnreadableLedger(**x) for x in doc.get("unreadable", [])]
            manifest = cls(**doc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ArchiveDamaged(f"{name}: not a backup manifest ({exc})") from None
        return checked(manifest, f"{name}: not a backup manifest")

    def note_counts(self) -> dict[str, int]:
        """How many ledgers it names of each :data:`NOTE_KINDS`."""
        if self.noted:
            return {k: self.counts.get(k, 0) for k in NOTE_KINDS}
        return {
            "missing": len(self.missing),
            "unreadable": len(self.unreadable),
            "deleted": len(self.deleted.get("ledgers", [])),
        }

    def totals(self) -> dict[str, int]:
        if self.chunked:
            counts = {
                k: self.counts.get(k, 0) for k in ("ledgers", "entries", "bytes", "copied_ledgers", "copied_bytes")
            }
        else:
            copied = [x for x in self.ledgers if x.copied]
            counts = {
                "ledgers": len(self.ledgers),
                "entries": sum(x.entries for x in self.ledgers),
                "bytes": sum(x.payload_bytes for x in self.ledgers),
                "copied_ledgers": len(copied),
                "copied_bytes": sum(x.payload_bytes for x in copied),
            }
        return {
            **counts,
            "topics": len(self.topics),
            "schemas": len(self.schemas),
            "unreadable_ledgers": self.note_counts()["unreadable"],
        }
