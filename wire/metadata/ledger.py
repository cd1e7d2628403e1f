"""Ledger metadata: the value of a ledger znode (BookKeeper's meta/LedgerMetadataSerDe.java,
DataFormats.proto's LedgerMetadataFormat).

Pure codecs, no I/O.  A ledger znode holds the ASCII header
``BookieMetadataFormatVersion\\t<N>\\n`` followed by a body whose shape
depends on N:

* 1 - hand-written text lines (BookKeeper <= 4.1),
* 2 - protobuf *text format* of ``LedgerMetadataFormat`` (4.2 - 4.8),
* 3 - varint32 length, then the binary ``LedgerMetadataFormat`` (4.9+).

:func:`parse_ledger_metadata` reads all three and raises only
:class:`~bkctl.wire.errors.CodecError`; :func:`serialize_ledger_metadata` writes
all three, byte-identical to what the Java client writes for the same
metadata.  Updates keep the format a ledger was created with
(``LedgerMetadata.format_version``).

Format 2's text is read and written by :mod:`.protobuf_text`.
"""

from __future__ import annotations

import bisect
import enum
import functools
import re
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from bkctl.wire.codecs import varint
from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.errors import CodecError, MetadataError
from bkctl.wire.metadata.protobuf_text import message_to_text, parse_text_message
from bkctl.wire.proto import formats_pb2

__all__ = [
    "CURRENT_FORMAT_VERSION",
    "CustomMetadata",
    "HEADER_PREFIX",
    "INVALID_ENTRY_ID",
    "LedgerMetadata",
    "LedgerMetadataTwins",
    "LedgerpbModule",
    "LedgerState",
    "parse_ledger_metadata",
    "read_format_version",
    "serialize_ledger_metadata",
    "write_set_indices",
]

HEADER_PREFIX = b"BookieMetadataFormatVersion\t"
CURRENT_FORMAT_VERSION = 3
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
INVALID_ENTRY_ID = -1
#: Format 1 marks an in-recovery ledger with this pseudo last entry id.
V1_IN_RECOVERY_ENTRY_ID = -102
_V1_CLOSED_TAG = "CLOSED"
_MAX_VERSION_DIGITS = 10
_V1_LINE_BREAK = re.compile(r"\r\n|\r|\n")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_PB = formats_pb2.LedgerMetadataFormat


class LedgerState(enum.IntEnum):
    """Valued as ``LedgerMetadataFormat.State``."""

    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


# ---------------------------------------------------------------------------
# Custom metadata: an immutable, hashable, ordered str -> bytes mapping
# ---------------------------------------------------------------------------
class CustomMetadata(Mapping[str, bytes]):
    """Immutable ``str -> bytes`` mapping that keeps insertion order and is hashable.

    ``LedgerMetadata.custom_metadata`` is always one of these (a plain dict is
    converted on construction), so ``LedgerMetadata`` stays hashable.  It compares
    equal to any mapping with the same items, whatever their order; the order
    is only used when serializing (Java writes its map's iteration order, we
    write the order we parsed or were given).
    """

    __slots__ = ("_items", "_index")

    def __init__(self, items: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = (), *, decoded: bool = False):
        """``decoded``: *items* is a dict of ``str`` keys and ``bytes`` values a decoder has
        just built and holds no longer, taken as it is, without the checks and the copy (a
        walk decodes a million of them)."""
        if decoded and type(items) is dict:
            self._index: dict[str, bytes] = items
            self._items = tuple(items.items())
            return
        pairs = items.items() if isinstance(items, Mapping) else items
        index: dict[str, bytes] = {}
        for key, value in pairs:
            if not isinstance(key, str):
                raise MetadataError(f"custom metadata key {key!r} is not a string")
            if isinstance(value, str):
                value = value.encode("utf-8")
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise MetadataError(f"custom metadata value for {key!r} is not bytes")
            index[key] = bytes(value)
        self._index = index
        self._items = tuple(index.items())

    def __getitem__(self, key: str) -> bytes:
        return self._index[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def items(self) -> ItemsView[str, bytes]:
        # the dict's own view: Mapping's generic one costs a generator per ledger of a walk
        return self._index.items()

    def __hash__(self) -> int:
        return hash(frozenset(self._items))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._index == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"CustomMetadata({self._index!r})"

    def to_dict(self) -> dict[str, bytes]:
        return dict(self._index)


# ---------------------------------------------------------------------------
# Striping
# ---------------------------------------------------------------------------
def _java_int32(value: int) -> int:
    """Java's ``(int)`` cast of a long: keep the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def write_set_indices(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes holding copies 0..Qw-1 of ``entry_id`` (round-robin striping).

    Java computes ``(int)(entryId + i) % ensembleSize``: the sum is truncated to
    a signed 32-bit int *before* the modulo (spec README point 10).  Below 2^31
    that equals ``(entryId + i) % ensembleSize``; above it the truncated value
    decides which bookie Java wrote to, so we reproduce it.  Where the
    truncated value is negative Java would index out of bounds (it cannot write
    such an entry at all); we take the non-negative (floor) remainder instead so
    the function is total.
    """
    if ensemble_size < 1:
        raise MetadataError(f"ensemble size must be >= 1, got {ensemble_size}")
    return [_java_int32(entry_id + i) % ensemble_size for i in range(write_quorum)]


# ---------------------------------------------------------------------------
# The metadata object
# ---------------------------------------------------------------------------
Ensemble = tuple[str, ...]


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if type(value) is int and lo <= value <= hi:  # the common case, first and cheap
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise MetadataError(f"{name} {value} is out of range [{lo}, {hi}]")
    return int(value)


def _normalize_ensemble(members: Iterable[str], ensemble_size: int, first: int) -> Ensemble:
    if isinstance(members, (str, bytes)):
        raise MetadataError(f"ensemble starting at entry {first} must be a sequence of bookie ids, not a string")
    ens = tuple(members)
    if not all(type(b) is str and b for b in ens):
        bad = next(b for b in ens if not isinstance(b, str) or not b)
        raise MetadataError(f"ensemble starting at entry {first} has an invalid bookie id {bad!r}")
    if len(ens) != ensemble_size:
        raise MetadataError(
            f"ensemble starting at entry {first} has {len(ens)} bookies, expected ensemble size {ensemble_size}"
        )
    if len(set(ens)) != len(ens):
        dup = next(b for b in ens if ens.count(b) > 1)
        raise MetadataError(f"ensemble starting at entry {first} lists bookie {dup} more than once")
    return ens


@dataclass(frozen=True)
class LedgerMetadata:
    """Immutable ledger metadata.

    * ``last_entry_id``/``length``: -1 and 0 unless CLOSED (Java ignores the stored
      values of a non-closed ledger, and so does the parser).
    * ``ensembles``: tuple of ``(first_entry_id, (bookie_id, ...))``, strictly
      ascending, the first starting at entry 0.  Lists are accepted and
      converted.
    * ``digest_type``/``password``: ``None`` only for format-1 ledgers (no
      password stored); Java always stores both otherwise, the password raw
      (``b""`` if none).
    * ``ctime``: creation time in ms *as stored in the value*; ``None`` when the
      creator did not store it (Java's ``storeSystemtimeAsLedgerCreationTime``
      off).  Keep it ``None`` in that case so rewrites stay byte-identical; a
      store should report the znode ctime instead (see :meth:`creation_time`).
    * ``custom_metadata``: a :class:`CustomMetadata` (dicts are converted), so
      the object is hashable.
    * ``ctoken``: format-3 creator token; transitions reset it to 0 like Java's
      ``LedgerMetadataBuilder.from()`` does (the golden closed ledgers show 0).
    * ``format_version``: 1, 2 or 3; transitions keep it.
    """

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: LedgerState
    last_entry_id: int
    length: int
    ensembles: tuple[tuple[int, Ensemble], ...]
    digest_type: DigestType | None = None
    password: bytes | None = None
    ctime: int | None = None
    custom_metadata: CustomMetadata = field(default_factory=CustomMetadata)
    ctoken: int = 0
    format_version: int = CURRENT_FORMAT_VERSION

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        e = _check_int("ensemble size", self.ensemble_size, _INT32_MIN, _INT32_MAX)
        qw = _check_int("write quorum", self.write_quorum, _INT32_MIN, _INT32_MAX)
        qa = _check_int("ack quorum", self.ack_quorum, _INT32_MIN, _INT32_MAX)
        if not e >= qw >= qa >= 1:
            raise MetadataError(
                f"invalid quorum sizes: ensemble size {e}, write quorum {qw}, ack quorum {qa} "
                "(need ensemble size >= write quorum >= ack quorum >= 1)"
            )
        if type(self.state) is not LedgerState:
            try:
                setattr_(self, "state", LedgerState(self.state))
            except ValueError:
                raise MetadataError(f"unknown ledger state {self.state!r}") from None
        _check_int("last entry id", self.last_entry_id, INVALID_ENTRY_ID, _INT64_MAX)
        _check_int("length", self.length, 0, _INT64_MAX)
        if self.state is not LedgerState.CLOSED and (self.last_entry_id != INVALID_ENTRY_ID or self.length):
            raise MetadataError(
                f"a {self.state.name} ledger has no last entry id or length yet "
                f"(got last entry id {self.last_entry_id}, length {self.length}); only CLOSED sets them"
            )
        _check_int("ctoken", self.ctoken, _INT64_MIN, _INT64_MAX)
        if self.format_version not in SUPPORTED_FORMAT_VERSIONS:
            raise MetadataError(f"unsupported metadata format version {self.format_version!r} (1, 2 or 3)")
        if self.ctime is not None:
            _check_int("ctime", self.ctime, _INT64_MIN, _INT64_MAX)

        segments = []
        prev = None
        for seg in self.ensembles:
            try:
                first, members = seg
            except (TypeError, ValueError):
                raise MetadataError(f"ensemble entry {seg!r} is not a (first_entry_id, bookies) pair") from None
            first = _check_int("ensemble first entry id", first, 0, _INT64_MAX)
            if prev is None and first != 0:
                raise MetadataError(f"the first ensemble must start at entry 0, not {first}")
            if prev is not None and first <= prev:
                raise MetadataError(f"ensemble first entry ids must ascend: {first} follows {prev}")
            segments.append((first, _normalize_ensemble(members, e, first)))
            prev = first
        if not segments:
            raise MetadataError("ledger metadata needs at least one ensemble")
        setattr_(self, "ensembles", tuple(segments))

        if self.digest_type is not None and type(self.digest_type) is not DigestType:
            try:
                setattr_(self, "digest_type", DigestType(self.digest_type))
            except ValueError:
                raise MetadataError(f"unknown digest type {self.digest_type!r}") from None
        if self.password is not None:
            if isinstance(self.password, str):
                setattr_(self, "password", self.password.encode("utf-8"))
            elif isinstance(self.password, (bytearray, memoryview)):
                setattr_(self, "password", bytes(self.password))
            elif not isinstance(self.password, bytes):
                raise MetadataError("password must be bytes")
        if not isinstance(self.custom_metadata, CustomMetadata):
            setattr_(self, "custom_metadata", CustomMetadata(self.custom_metadata or ()))

    # -- construction --------------------------------------------------------
    @classmethod
    def new(
        cls,
        ensemble: Sequence[str],
        write_quorum: int | None = None,
        ack_quorum: int | None = None,
        *,
        digest_type: DigestType | None = DigestType.CRC32C,
        password: bytes | None = b"",
        ctime: int | None = None,
        custom_metadata: Mapping[str, bytes] | None = None,
        ctoken: int = 0,
        format_version: int = CURRENT_FORMAT_VERSION,
    ) -> LedgerMetadata:
        """Metadata of a freshly created, OPEN ledger whose first ensemble starts at entry 0.

        ``write_quorum`` defaults to the ensemble size, ``ack_quorum`` to the write quorum.
        Format 1 cannot store a digest type or password: both become ``None`` there.
        """
        ens = tuple(ensemble)
        if format_version == 1:
            digest_type, password = None, None
        qw = len(ens) if write_quorum is None else write_quorum
        qa = qw if ack_quorum is None else ack_quorum
        return cls(
            ensemble_size=len(ens),
            write_quorum=qw,
            ack_quorum=qa,
            state=LedgerState.OPEN,
            last_entry_id=INVALID_ENTRY_ID,
            length=0,
            ensembles=((0, ens),),
            digest_type=digest_type,
            password=password,
            ctime=ctime,
            custom_metadata=CustomMetadata(custom_metadata or ()),
            ctoken=ctoken,
            format_version=format_version,
        )

    # -- queries ---------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def is_in_recovery(self) -> bool:
        return self.state is LedgerState.IN_RECOVERY

    @property
    def is_open(self) -> bool:
        return self.state is LedgerState.OPEN

    @property
    def bookies(self) -> tuple[str, ...]:
        """Every distinct bookie of every ensemble, in order of first appearance."""
        return tuple(dict.fromkeys(b for _, ens in self.ensembles for b in ens))

    @property
    def last_ensemble(self) -> Ensemble:
        return self.ensembles[-1][1]

    @property
    def first_entry_ids(self) -> tuple[int, ...]:
        return tuple(first for first, _ in self.ensembles)

    def ensemble_at(self, entry_id: int) -> Ensemble:
        """The ensemble of the segment with the largest first entry id <= ``entry_id``."""
        if entry_id < 0:
            raise MetadataError(f"no ensemble for negative entry id {entry_id}")
        i = bisect.bisect_right(self.first_entry_ids, entry_id) - 1
        return self.ensembles[i][1]

    def write_set(self, entry_id: int) -> list[str]:
        """Bookies holding copies 0..Qw-1 of ``entry_id`` (see :func:`write_set_indices`)."""
        ens = self.ensemble_at(entry_id)
        return [ens[i] for i in write_set_indices(entry_id, self.ensemble_size, self.write_quorum)]

    def segment_ranges(self) -> list[tuple[int, int | None, Ensemble]]:
        """``(first_entry_id, last_entry_id_or_None, ensemble)`` per segment.

        The last segment ends at ``last_entry_id`` when closed, else ``None`` (open-ended).
        A segment may be empty (last < first) when a closed ledger's final ensemble got no entries.
        """
        out = []
        for i, (first, ens) in enumerate(self.ensembles):
            if i + 1 < len(self.ensembles):
                last: int | None = self.ensembles[i + 1][0] - 1
            else:
                last = self.last_entry_id if self.is_closed else None
            out.append((first, last, ens))
        return out

    def creation_time(self, znode_ctime: int | None = None) -> int | None:
        """The stored ctime, else the znode's creation time (what Java reports)."""
        return self.ctime if self.ctime is not None else znode_ctime

    # -- transitions (new objects; cToken reset like Java's builder) -----------
    def _derive(self, **changes: Any) -> LedgerMetadata:
        changes.setdefault("ctoken", 0)
        return replace(self, **changes)

    def with_ensemble_change(self, first_entry_id: int, new_ensemble: Sequence[str]) -> LedgerMetadata:
        """Start a new ensemble at ``first_entry_id`` (the first unacknowledged entry).

        If ``first_entry_id`` equals the first entry of the current last segment
        (nothing was written to it yet), that segment is replaced instead of
        adding an empty one.  Not allowed on a closed ledger.
        """
        if self.is_closed:
            raise MetadataError("cannot change the ensemble of a closed ledger")
        last_first = self.ensembles[-1][0]
        if first_entry_id < last_first:
            raise MetadataError(
                f"ensemble change at entry {first_entry_id} precedes the current segment starting at {last_first}"
            )
        segs = list(self.ensembles)
        if first_entry_id == last_first:
            segs[-1] = (first_entry_id, tuple(new_ensemble))
        else:
            segs.append((first_entry_id, tuple(new_ensemble)))
        return self._derive(ensembles=tuple(segs))

    def closed(self, last_entry_id: int, length: int) -> LedgerMetadata:
        """CLOSED at ``last_entry_id`` (-1 = empty) with total ``length`` bytes."""
        if self.is_closed:
            raise MetadataError(f"ledger is already closed (last entry {self.last_entry_id}, length {self.length})")
        return self._derive(state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def in_recovery(self) -> LedgerMetadata:
        """IN_RECOVERY (written before fencing); not allowed once closed."""
        if self.is_closed:
            raise MetadataError("cannot put a closed ledger in recovery")
        return self._derive(state=LedgerState.IN_RECOVERY, last_entry_id=INVALID_ENTRY_ID, length=0)

    def replace_bookie(self, first_entry_id: int, old: str, new: str) -> LedgerMetadata:
        """Swap ``old`` for ``new`` in the segment starting at ``first_entry_id`` (any state)."""
        segs = list(self.ensembles)
        i = next((n for n, (first, _) in enumerate(segs) if first == first_entry_id), None)
        if i is None:
            raise MetadataError(f"no ensemble starts at entry {first_entry_id}")
        first, ens = segs[i]
        if old not in ens:
            raise MetadataError(f"bookie {old} is not in the ensemble starting at entry {first_entry_id}")
        if new != old and new in ens:
            raise MetadataError(f"bookie {new} is already in the ensemble starting at entry {first_entry_id}")
        segs[i] = (first, tuple(new if b == old else b for b in ens))
        return self._derive(ensembles=tuple(segs))

    def with_format_version(self, format_version: int) -> LedgerMetadata:
        """The same metadata to be written in another format (keeps the cToken)."""
        return replace(self, format_version=format_version)


# ---------------------------------------------------------------------------
# Serialization
# ---------------------------------------------------------------------------
def _header(version: int) -> bytes:
    return HEADER_PREFIX + str(version).encode("ascii") + b"\n"


def _to_proto(md: LedgerMetadata, with_ctoken: bool) -> formats_pb2.LedgerMetadataFormat:
    pb = _PB()
    pb.quorumSize = md.write_quorum
    pb.ensembleSize = md.ensemble_size
    pb.length = md.length
    pb.lastEntryId = md.last_entry_id
    pb.state = int(md.state)  # type: ignore[assignment]  # protoc types enum fields as their class
    for first, ens in md.ensembles:
        seg = pb.segment.add()
        seg.ensembleMember.extend(ens)
        seg.firstEntryId = first
    if md.digest_type is not None:
        pb.digestType = int(md.digest_type)  # type: ignore[assignment]
    if md.password is not None:
        pb.password = md.password
    pb.ackQuorumSize = md.ack_quorum
    if md.ctime is not None:
        pb.ctime = md.ctime
    for key, value in md.custom_metadata.items():
        entry = pb.customMetadata.add()
        entry.key = key
        entry.value = value
    if with_ctoken:
        pb.cToken = md.ctoken
    return pb


def _serialize_v1(md: LedgerMetadata) -> bytes:
    lines = [f"{md.write_quorum}\n{md.ensemble_size}\n{md.length}\n"]
    for first, ens in md.ensembles:
        lines.append(str(first) + "".join("\t" + b for b in ens) + "\n")
    if md.state is LedgerState.IN_RECOVERY:
        lines.append(f"{V1_IN_RECOVERY_ENTRY_ID}\t{_V1_CLOSED_TAG}")
    elif md.state is LedgerState.CLOSED:
        lines.append(f"{md.last_entry_id}\t{_V1_CLOSED_TAG}")
    return _header(1) + "".join(lines).encode("utf-8")


def serialize_ledger_metadata(md: LedgerMetadata, format_version: int | None = None) -> bytes:
    """The znode value for ``md`` in ``format_version`` (default: ``md.format_version``).

    Format 3 always writes lastEntryId, ackQuorumSize and cToken; formats 2
    and 3 write ctime only when set, digestType/password unless they are
    ``None``.  Format 1 (like Java) silently drops what it cannot hold:
    ack quorum, digest, password, ctime, custom metadata and cToken.
    """
    version = md.format_version if format_version is None else format_version
    if version == 3:
        body = _to_proto(md, with_ctoken=True).SerializeToString()
        return _header(3) + varint.encode(len(body)) + body
    if version == 2:
        return _header(2) + message_to_text(_to_proto(md, with_ctoken=False)).encode("utf-8")
    if version == 1:
        return _serialize_v1(md)
    raise MetadataError(f"unsupported metadata format version {version!r} (1, 2 or 3)")


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------
def read_format_version(data: bytes) -> tuple[int, int]:
    """``(format_version, body_offset)`` from the ``BookieMetadataFormatVersion`` header."""
    data = bytes(data)
    if not data.startswith(HEADER_PREFIX):
        raise CodecError("ledger metadata header corrupt: missing 'BookieMetadataFormatVersion\\t'")
    start = len(HEADER_PREFIX)
    end = data.find(b"\n", start, start + _MAX_VERSION_DIGITS + 1)
    if end < 0:
        raise CodecError("ledger metadata header corrupt: no end of the version number")
    digits = data[start:end]
    if not digits or not digits.isdigit():
        raise CodecError(f"ledger metadata header corrupt: bad version number {digits!r}")
    return int(digits), end + 1


def _decode_varint32(data: bytes, pos: int) -> tuple[int, int]:
    if pos + 1 < len(data) and data[pos] & 0x80 and not data[pos + 1] & 0x80:  # 128..16383 bytes: most
        return (data[pos] & 0x7F) | (data[pos + 1] << 7), pos + 2
    result = 0
    for shift in range(0, 35, 7):
        if pos >= len(data):
            raise CodecError("ledger metadata truncated inside the length prefix")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
    raise CodecError("ledger metadata length prefix is not a valid varint32")


_STATES = {s.value: s for s in LedgerState}
_DIGESTS = {d.value: d for d in DigestType}


class ProtoFields(NamedTuple):
    """A LedgerMetadataFormat's fields as protobuf's message gives them, before the checks
    of :class:`LedgerMetadata` (the general path's, :func:`_proto_fields`).  Absent optional
    fields are None, or protobuf's defaults where the message has them (``last_entry_id``
    0, ``digest_type`` 1: CRC32, ``ctoken`` 0)."""

    ensemble_size: int
    quorum: int
    ack_quorum: int | None
    state: int
    last_entry_id: int
    length: int
    segments: tuple[tuple[int, tuple[str, ...]], ...]
    digest_type: int
    password: bytes | None
    ctime: int | None
    custom: dict[str, bytes]
    ctoken: int


def _proto_fields(pb: formats_pb2.LedgerMetadataFormat) -> ProtoFields:
    """The general path of the decoding: the fields of protobuf's decoded message."""
    return ProtoFields(
        pb.ensembleSize,
        pb.quorumSize,
        pb.ackQuorumSize if pb.HasField("ackQuorumSize") else None,
        pb.state,
        pb.lastEntryId,
        pb.length,
        tuple([(s.firstEntryId, tuple(s.ensembleMember)) for s in pb.segment]),
        pb.digestType,
        pb.password if pb.HasField("password") else None,
        pb.ctime if pb.HasField("ctime") else None,
        {e.key: e.value for e in pb.customMetadata},
        pb.cToken,
    )


def _from_fields(fields: ProtoFields, format_version: int, znode_ctime: int | None) -> LedgerMetadata:
    # Enums looked up in a dict, and the positional constructor (whose checks judge a
    # value the dicts lack).
    ensemble_size, quorum, ack, state_value, last, length, segments, digest, password, ctime, custom, ctoken = fields
    state: Any = _STATES.get(state_value, state_value)
    digest_type: Any = _DIGESTS.get(digest, digest) if password is not None else None
    closed = state is LedgerState.CLOSED
    return LedgerMetadata(
        ensemble_size,
        quorum,
        quorum if ack is None else ack,
        state,
        # Like Java, lastEntryId and length only count for a closed ledger.
        last if closed else INVALID_ENTRY_ID,
        length if closed else 0,
        segments,
        # digestType and password are read only when a password is present.
        digest_type,
        password,
        znode_ctime if ctime is None else ctime,
        CustomMetadata(custom, decoded=True),
        ctoken if format_version == 3 else 0,
        format_version,
    )


class CheckedMetadata(NamedTuple):
    """What the C twin of the decoding (``_ledgerpb.metadata``: header, length prefix and
    protobuf, :attr:`bkctl.wire.fastpath.Twins.ledger_metadata`) gives of a format-3 value:
    a :class:`LedgerMetadata`'s values, already judged by its checks.  ``state`` and
    ``digest_type`` are the enums' numbers (``digest_type`` 0 where no password is
    stored), ``ack_quorum`` the write quorum where none is stored, ``last_entry_id`` and
    ``length`` -1 and 0 unless CLOSED."""

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: int
    last_entry_id: int
    length: int
    ensembles: tuple[tuple[int, Ensemble], ...]
    digest_type: int
    password: bytes | None
    ctime: int | None
    custom: dict[str, bytes]
    ctoken: int


def _from_checked(values: CheckedMetadata | tuple[Any, ...], znode_ctime: int | None) -> LedgerMetadata:
    """The LedgerMetadata of values the C twin decoded and checked: built without checking
    them again (the dataclass's checks were a fifth of a walk's time), as equal to the
    general path's object as tests/unit/test_ledger_metadata_twins.py holds it."""
    ensemble_size, write_quorum, ack_quorum, state, last, length, ensembles, digest, password, ctime, custom, ctoken = (
        values
    )
    md = object.__new__(LedgerMetadata)
    md.__dict__.update(
        ensemble_size=ensemble_size,
        write_quorum=write_quorum,
        ack_quorum=ack_quorum,
        state=_STATES[state],
        last_entry_id=last,
        length=length,
        ensembles=ensembles,
        digest_type=None if password is None else _DIGESTS[digest],
        password=password,
        ctime=znode_ctime if ctime is None else ctime,
        custom_metadata=CustomMetadata(custom, decoded=True),
        ctoken=ctoken,
        format_version=3,
    )
    return md


def _parse_v3(body: bytes, znode_ctime: int | None) -> LedgerMetadata:
    """The general path of format 3: protobuf's message, and its judgement of odd values."""
    size, pos = _decode_varint32(body, 0)
    if pos + size != len(body):
        raise CodecError(f"ledger metadata length prefix says {size} bytes but {len(body) - pos} follow")
    pb = _PB()
    try:
        pb.ParseFromString(body[pos:])
    except Exception as exc:
        raise CodecError(f"malformed ledger metadata protobuf: {exc}") from None
    if not pb.IsInitialized():
        missing = ", ".join(pb.FindInitializationErrors())  # type: ignore[attr-defined]
        raise CodecError(f"ledger metadata lacks required field(s) {missing}")
    return _from_fields(_proto_fields(pb), 3, znode_ctime)


def _parse_v2(body: bytes) -> LedgerMetadata:
    pb = parse_text_message(body, _PB, "ledger metadata (format 2)")
    return _from_fields(_proto_fields(pb), 2, None)


def _parse_v1_int(text: str | None, what: str) -> int:
    if text is None:
        raise CodecError(f"format-1 ledger metadata truncated before the {what}")
    t = text.strip()
    if not t or not (t.isdigit() or (t[0] in "+-" and t[1:].isdigit())) or not t.isascii():
        raise CodecError(f"format-1 ledger metadata has a bad {what}: {text!r}")
    return int(t)


def _parse_v1(body: bytes) -> LedgerMetadata:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"format-1 ledger metadata is not UTF-8: {exc}") from None
    lines = _V1_LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    it = iter(lines)
    quorum = _parse_v1_int(next(it, None), "quorum size")
    ensemble_size = _parse_v1_int(next(it, None), "ensemble size")
    length = _parse_v1_int(next(it, None), "length")
    segments = []
    state, last_entry_id, closed_length = LedgerState.OPEN, INVALID_ENTRY_ID, 0
    for line in it:
        parts = line.split("\t")
        while len(parts) > 1 and parts[-1] == "":
            parts.pop()  # Java's String.split drops trailing empty strings
        if len(parts) < 2:
            raise CodecError(f"format-1 ledger metadata has a malformed line {line!r}")
        if parts[1] == _V1_CLOSED_TAG:
            last = _parse_v1_int(parts[0], "last entry id")
            if last == V1_IN_RECOVERY_ENTRY_ID:
                state = LedgerState.IN_RECOVERY
            else:
                state, last_entry_id, closed_length = LedgerState.CLOSED, last, length
            break
        segments.append((_parse_v1_int(parts[0], "first entry id"), tuple(parts[1:])))
    return LedgerMetadata(
        ensemble_size=ensemble_size,
        write_quorum=quorum,
        ack_quorum=quorum,
        state=state,
        last_entry_id=last_entry_id,
        length=closed_length,
        ensembles=tuple(segments),
        format_version=1,
    )


def parse_ledger_metadata(data: bytes, znode_ctime: int | None = None) -> LedgerMetadata:
    """Decode a ledger znode value of format 1, 2 or 3: the general path (protobuf's message and
    LedgerMetadata's own checks), the Python twin of :class:`LedgerMetadataTwins`'s decoder.

    Raises :class:`CodecError` (only) for anything that is not valid metadata,
    including structurally valid values that break the metadata invariants.
    ``ctime`` is ``None`` when the value does not store one -- or *znode_ctime*
    where the caller gives it: metadata as a store reads it, a ledger written
    without a ctime showing its znode's
    (:func:`~bkctl.wire.metadata.store.with_znode_ctime`, in one pass: Java
    clients store none by default, and a walk would build each one twice).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"ledger metadata must be bytes, not {type(data).__name__}")
    data = bytes(data)
    version, offset = read_format_version(data)
    body = data[offset:]
    try:
        if version == 3:
            return _parse_v3(body, znode_ctime)
        if version == 2:
            md = _parse_v2(body)
        elif version == 1:
            md = _parse_v1(body)
        else:
            raise CodecError(f"ledger metadata format version {version} is not supported (expected 1 to 3)")
        return md if md.ctime is not None or znode_ctime is None else replace(md, ctime=znode_ctime)
    except MetadataError as exc:
        raise CodecError(f"invalid ledger metadata: {exc}") from None


#: a decoder of ledger znode values, ``(data, znode_ctime)`` -> the metadata (a C twin's ``fallback``),
#: and what builds it of the values the C twin decoded (its ``build``)
Parse = Callable[[bytes, int | None], LedgerMetadata]
Build = Callable[[tuple[Any, ...], int | None], LedgerMetadata]


class LedgerMetadataTwins(NamedTuple):
    """The decoder of ledger znode values a metadata store uses (``parse(data, znode_ctime)``,
    as :func:`parse_ledger_metadata`), C or Python: :attr:`bkctl.wire.fastpath.Twins.ledger_metadata`.
    ``c``: the ``_ledgerpb`` module its decoder comes from, or None for :data:`PYTHON`."""

    parse: Parse
    c: LedgerpbModule | None = None


class LedgerpbModule(Protocol):
    """The slot ``_ledgerpb`` (C) fills, what :func:`twins_of` takes: ``metadata(fallback, build,
    data, znode_ctime)``; the twin selector holds the C module's stub to it (under TYPE_CHECKING)."""

    @property
    def metadata(self) -> Callable[[Parse, Build, bytes, int | None], LedgerMetadata]: ...


#: The Python twin (the reference): the general path alone.
PYTHON = LedgerMetadataTwins(parse_ledger_metadata)


def twins_of(c: LedgerpbModule | None) -> LedgerMetadataTwins:
    """The C twin of the module ``c`` (``_ledgerpb``, which the twin selector loads): it decodes
    what it covers (built by :func:`_from_checked`) and hands the rest to the general path
    itself; :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    return LedgerMetadataTwins(functools.partial(c.metadata, parse_ledger_metadata, _from_checked), c)
