"""Pulsar's stored entry format, decoded (pure: bytes in, messages out).

A broker stores what a producer's SEND frame carries after the command,
unchanged, optionally prefixed by its own entry metadata::

    [0x0e02][u32 size][BrokerEntryMetadata]          (only with interceptors)
    [0x0e01][u32 CRC32C of the rest][u32 size][MessageMetadata][payload]

The payload is compressed as a whole (LZ4 raw block, zlib stream, zstd frame,
raw snappy block) with ``uncompressed_size`` in the metadata; a batch is a
sequence of ``[u32 size][SingleMessageMetadata][payload_size bytes]``.  An
encrypted payload cannot be decompressed here: it is returned as stored.
Every way the bytes can be wrong raises :class:`CorruptEntry`.  A batch's
messages are split by :mod:`.rows`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

from ..codecs import checksums
from ..proto import pulsar_api_pb2 as pb
from .errors import CorruptEntry

__all__ = [
    "INT64_MAX",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "MS_MAX",
    "StoredEntry",
    "check_range",
    "check_text",
    "decode_entry",
    "decompress",
    "decompress_whole",
]

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
#: the largest value of an int64 column, and the largest time in ms that fits one in µs
INT64_MAX = 2**63 - 1
MS_MAX = INT64_MAX // 1000
_COMPRESSION_NAMES = {v.number: v.name for v in pb.CompressionType.DESCRIPTOR.values}
#: the tag byte of MessageMetadata.compression (field 8, varint)
_COMPRESSION_TAG = b"\x40"


class StoredEntry:
    """One entry: the broker's and the producer's metadata, and the payload
    after decompression (as stored when encrypted)."""

    __slots__ = ("broker_timestamp", "broker_index", "metadata", "payload", "checksum_verified")

    def __init__(
        self,
        metadata: pb.MessageMetadata,
        payload: bytes,
        broker_timestamp: int | None = None,
        broker_index: int | None = None,
        checksum_verified: bool = True,
    ):
        self.metadata = metadata
        self.payload = payload
        self.broker_timestamp = broker_timestamp
        self.broker_index = broker_index
        self.checksum_verified = checksum_verified

    @property
    def is_batch(self) -> bool:
        """A batch iff the metadata *has* ``num_messages_in_batch`` (even 1)."""
        return self.metadata.HasField("num_messages_in_batch")

    @property
    def encrypted(self) -> bool:
        return len(self.metadata.encryption_keys) > 0

    @property
    def is_chunk(self) -> bool:
        md = self.metadata
        return md.HasField("uuid") and md.HasField("chunk_id") and md.num_chunks_from_msg > 1


def _compression_of(md: pb.MessageMetadata, raw: bytes) -> int:
    if md.HasField("compression"):
        return md.compression
    if _COMPRESSION_TAG in raw:  # maybe a value this proto does not know (kept as an unknown field)
        from google.protobuf.unknown_fields import UnknownFieldSet

        unknown = UnknownFieldSet(md)
        for i in range(len(unknown)):  # (the stubs give it no __iter__)
            field = unknown[i]
            # a varint only: field 8 of another wire type is skipped, as Pulsar's parser skips it
            if field.field_number == 8 and field.wire_type == 0:
                return int(field.data)
    return pb.NONE


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    """``data`` decompressed with Pulsar's ``codec``; its length must be
    ``uncompressed_size``."""
    if codec == pb.NONE:
        out = data
    else:
        try:
            if codec == pb.LZ4:
                import lz4.block

                out = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
            elif codec == pb.ZLIB:
                # no more than the metadata says (and a byte to see that there is more), as
                # Pulsar inflates into a buffer of that size: a small entry can hold gigabytes
                inflater = zlib.decompressobj()
                out = inflater.decompress(data, uncompressed_size + 1)
                if not inflater.eof and len(out) <= uncompressed_size:
                    raise CorruptEntry("ZLIB payload does not decompress: the stream is truncated")
            elif codec == pb.ZSTD:
                import zstandard

                out = zstandard.ZstdDecompressor().decompress(data, max_output_size=max(1, uncompressed_size))
            elif codec == pb.SNAPPY:
                import cramjam

                out = bytes(cramjam.snappy.decompress_raw(data))
            else:
                raise CorruptEntry(f"unknown compression type {codec}")
        except CorruptEntry:
            raise
        except Exception as exc:  # noqa: BLE001 - every codec has its own error class
            name = _COMPRESSION_NAMES.get(codec, str(codec))
            raise CorruptEntry(f"{name} payload does not decompress: {exc}") from None
        if len(out) != uncompressed_size:
            raise CorruptEntry(
                f"{_COMPRESSION_NAMES[codec]} payload decompresses to {len(out)} bytes, "
                f"the metadata says {uncompressed_size}"
            )
    return bytes(out)


def decode_entry(data: bytes | bytearray | memoryview, verify: bool = True) -> StoredEntry:
    """Decode one stored entry; the CRC32C is checked when present."""
    data = bytes(data)
    n = len(data)
    off = 0
    broker_timestamp = broker_index = None
    if n >= 2 and _U16.unpack_from(data, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if n < 6:
            raise CorruptEntry("truncated broker entry metadata")
        size = _U32.unpack_from(data, 2)[0]
        if 6 + size > n:
            raise CorruptEntry(f"broker entry metadata of {size} bytes overruns the {n}-byte entry")
        bem = pb.BrokerEntryMetadata()
        try:
            bem.ParseFromString(data[6 : 6 + size])
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise CorruptEntry(f"broker entry metadata does not parse: {exc}") from None
        broker_timestamp = bem.broker_timestamp if bem.HasField("broker_timestamp") else None
        broker_index = bem.index if bem.HasField("index") else None
        off = 6 + size
    checked = False
    if n - off >= 2 and _U16.unpack_from(data, off)[0] == MAGIC_CRC32C:
        if n - off < 10:
            raise CorruptEntry("truncated entry: no room for checksum and metadata size")
        stored = _U32.unpack_from(data, off + 2)[0]
        off += 6
        if verify:
            computed = checksums.crc32c(memoryview(data)[off:])
            if computed != stored:
                raise CorruptEntry(f"checksum mismatch: stored CRC32C {stored:#010x}, computed {computed:#010x}")
            checked = True
    if n - off < 4:
        raise CorruptEntry("truncated entry: no metadata size")
    size = _U32.unpack_from(data, off)[0]
    off += 4
    if size == 0 or off + size > n:
        raise CorruptEntry(f"metadata of {size} bytes does not fit the {n - off} bytes left")
    raw = data[off : off + size]
    md = pb.MessageMetadata()
    try:
        md.ParseFromString(raw)
    except Exception as exc:  # noqa: BLE001
        raise CorruptEntry(f"message metadata does not parse: {exc}") from None
    if not md.IsInitialized():
        # FindInitializationErrors: the C++ and pure-Python messages' method, not in the stubs' Message
        missing = md.FindInitializationErrors()  # type: ignore[attr-defined]
        raise CorruptEntry("message metadata lacks required fields: " + ", ".join(missing))
    if (
        not isinstance(md.producer_name, str)
        or not isinstance(md.partition_key, str)
        or md.properties
        or md.encryption_keys
        or not isinstance(md.replicated_from, str)
    ):
        check_text(
            "message metadata",
            md.producer_name,
            md.partition_key,
            md.replicated_from,
            md.properties,
            *(k.key for k in md.encryption_keys),
        )
    # a marker (marker_type) is no message: none of its values goes in a column (a
    # transaction marker's sequence id is -1 as a uint64)
    if not md.HasField("marker_type") and (
        md.publish_time > MS_MAX
        or md.event_time > MS_MAX
        or md.sequence_id > INT64_MAX
        or (broker_timestamp or 0) > MS_MAX
        or (broker_index or 0) > INT64_MAX
        or abs(md.deliver_at_time) > MS_MAX
    ):
        check_range(
            "message metadata",
            publish_time=md.publish_time,
            event_time=md.event_time,
            sequence_id=md.sequence_id,
            broker_timestamp=broker_timestamp,
            index=broker_index,
            deliver_at_time=md.deliver_at_time,
        )
    payload = data[off + size :]
    entry = StoredEntry(md, payload, broker_timestamp, broker_index, checked)
    # a chunk holds a slice of the compressed (and maybe encrypted) message: it is
    # decompressed once whole (:func:`decompress_whole`), as Pulsar's consumer does
    if not md.encryption_keys and not entry.is_chunk:
        codec = _compression_of(md, raw)
        if codec != pb.NONE:
            entry.payload = decompress(codec, payload, md.uncompressed_size)
    return entry


def check_text(where: str, *values: str | bytes | Iterable[pb.KeyValue]) -> None:
    """Protobuf hands a proto2 string that is not UTF-8 over as bytes; no
    column takes that (CorruptEntry).  ``values``: strings, or KeyValue lists."""
    for value in values:
        if isinstance(value, bytes):
            raise CorruptEntry(f"{where}: a text field is not UTF-8 ({value[:32]!r})")
        if not isinstance(value, str):
            for p in value:
                check_text(where, p.key, p.value)


def check_range(where: str, **values: int | None) -> None:
    """Times (ms) and ids the row's int64 columns cannot hold: CorruptEntry."""
    for name, value in values.items():
        if value is not None and abs(value) > (
            MS_MAX if name.endswith("time") or name.endswith("timestamp") else INT64_MAX
        ):
            raise CorruptEntry(f"{where}: {name} {value} is out of range")


def decompress_whole(metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    """A reassembled chunked message's payload, decompressed (as stored when encrypted)."""
    if metadata.encryption_keys or metadata.compression == pb.NONE:
        return payload
    return decompress(metadata.compression, payload, metadata.uncompressed_size)
