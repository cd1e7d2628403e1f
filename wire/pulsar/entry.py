"""Pulsar's stored entry format, decoded (pure: bytes in, messages out).

A broker stores what a producer's SEND frame carries after the command,
unchanged, optionally prefixed by its own entry metadata::

    [0x0e02][u32 size][BrokerEntryMetadata]          (only with interceptors)
    [0x0e01][u32 CRC32C of the rest][u32 size][MessageMetadata][payload]

The payload is compressed as a whole (LZ4 raw block, zlib stream, zstd frame,
raw snappy block) with ``uncompressed_size`` in the metadata; a batch is a
sequence of ``[u32 size][SingleMessageMetadata][payload_size bytes]``.  An
encrypted payload cannot be decompressed nor split here: it is returned as
stored.  Every way the bytes can be wrong raises :class:`CorruptEntry`.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

from crc32c import crc32c as _crc32c

from ..proto import pulsar_api_pb2 as pb
from .errors import CorruptEntry

__all__ = ["MAGIC_BROKER_ENTRY_METADATA", "MAGIC_CRC32C", "MESSAGE_FIELDS", "Message", "StoredEntry",
           "decode_entry", "decompress", "decompress_whole", "message_columns", "messages_of"]

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
#: the largest value of an int64 column, and the largest time in ms that fits one in µs
_INT64_MAX = 2**63 - 1
_MS_MAX = _INT64_MAX // 1000
_COMPRESSION_NAMES = {v.number: v.name for v in pb.CompressionType.DESCRIPTOR.values}
#: the tag byte of MessageMetadata.compression (field 8, varint)
_COMPRESSION_TAG = b"\x40"


class StoredEntry:
    """One entry: the broker's and the producer's metadata, and the payload
    after decompression (as stored when encrypted)."""

    __slots__ = ("broker_timestamp", "broker_index", "metadata", "payload", "checksum_verified")

    def __init__(self, metadata: Any, payload: bytes, broker_timestamp: int | None = None,
                 broker_index: int | None = None, checksum_verified: bool = True):
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


class Message:
    """One message of an entry.  ``batch_index`` is -1 outside a batch;
    ``key`` is None when the message has none; ``event_time`` None when unset."""

    __slots__ = ("batch_index", "payload", "key", "key_b64", "ordering_key", "properties", "event_time",
                 "sequence_id", "null_value", "compacted_out")

    def __init__(self, batch_index, payload, key, key_b64, ordering_key, properties, event_time, sequence_id,
                 null_value, compacted_out):
        self.batch_index = batch_index
        self.payload = payload
        self.key = key
        self.key_b64 = key_b64
        self.ordering_key = ordering_key
        self.properties = properties
        self.event_time = event_time
        self.sequence_id = sequence_id
        self.null_value = null_value
        self.compacted_out = compacted_out

    def __repr__(self) -> str:
        return f"Message(batch_index={self.batch_index}, key={self.key!r}, {len(self.payload or b'')} bytes)"


def _compression_of(md: Any, raw: bytes) -> int:
    if md.HasField("compression"):
        return md.compression
    if _COMPRESSION_TAG in raw:  # maybe a value this proto does not know (kept as an unknown field)
        from google.protobuf.unknown_fields import UnknownFieldSet

        for field in UnknownFieldSet(md):
            if field.field_number == 8:
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
                out = zlib.decompress(data)
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
            raise CorruptEntry(f"{_COMPRESSION_NAMES[codec]} payload decompresses to {len(out)} bytes, "
                               f"the metadata says {uncompressed_size}")
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
            bem.ParseFromString(data[6:6 + size])
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
            computed = _crc32c(memoryview(data)[off:])
            if computed != stored:
                raise CorruptEntry(f"checksum mismatch: stored CRC32C {stored:#010x}, computed {computed:#010x}")
            checked = True
    if n - off < 4:
        raise CorruptEntry("truncated entry: no metadata size")
    size = _U32.unpack_from(data, off)[0]
    off += 4
    if size == 0 or off + size > n:
        raise CorruptEntry(f"metadata of {size} bytes does not fit the {n - off} bytes left")
    raw = data[off:off + size]
    md = pb.MessageMetadata()
    try:
        md.ParseFromString(raw)
    except Exception as exc:  # noqa: BLE001
        raise CorruptEntry(f"message metadata does not parse: {exc}") from None
    if not md.IsInitialized():
        raise CorruptEntry("message metadata lacks required fields: " + ", ".join(md.FindInitializationErrors()))
    if not isinstance(md.producer_name, str) or not isinstance(md.partition_key, str) or md.properties \
            or md.encryption_keys:
        _check_text("message metadata", md.producer_name, md.partition_key, md.properties,
                    *(k.key for k in md.encryption_keys))
    if md.publish_time > _MS_MAX or md.event_time > _MS_MAX or md.sequence_id > _INT64_MAX \
            or (broker_timestamp or 0) > _MS_MAX or (broker_index or 0) > _INT64_MAX:
        _check_range("message metadata", publish_time=md.publish_time, event_time=md.event_time,
                     sequence_id=md.sequence_id, broker_timestamp=broker_timestamp, index=broker_index)
    payload = data[off + size:]
    entry = StoredEntry(md, payload, broker_timestamp, broker_index, checked)
    # a chunk holds a slice of the compressed (and maybe encrypted) message: it is
    # decompressed once whole (:func:`decompress_whole`), as Pulsar's consumer does
    if not md.encryption_keys and not entry.is_chunk:
        codec = _compression_of(md, raw)
        if codec != pb.NONE:
            entry.payload = decompress(codec, payload, md.uncompressed_size)
    return entry


def _check_text(where: str, *values) -> None:
    """Protobuf hands a proto2 string that is not UTF-8 over as bytes; no
    column takes that (CorruptEntry).  ``values``: strings, or KeyValue lists."""
    for value in values:
        if isinstance(value, bytes):
            raise CorruptEntry(f"{where}: a text field is not UTF-8 ({value[:32]!r})")
        if not isinstance(value, str):
            for p in value:
                _check_text(where, p.key, p.value)


def _check_range(where: str, **values) -> None:
    """Times (ms) and ids the row's int64 columns cannot hold: CorruptEntry."""
    for name, value in values.items():
        if value is not None and value > (_MS_MAX if name.endswith("time") or name.endswith("timestamp")
                                          else _INT64_MAX):
            raise CorruptEntry(f"{where}: {name} {value} is out of range")


def decompress_whole(metadata, payload: bytes) -> bytes:
    """A reassembled chunked message's payload, decompressed (as stored when encrypted)."""
    if metadata.encryption_keys or metadata.compression == pb.NONE:
        return payload
    return decompress(metadata.compression, payload, metadata.uncompressed_size)


def _key(has_key: bool, key: str, null_key: bool) -> str | None:
    return key if has_key and not null_key else None


#: The per-message columns :func:`message_columns` returns, in order.
MESSAGE_FIELDS = ("batch_index", "payload", "key", "key_b64", "ordering_key", "properties", "event_time",
                  "sequence_id", "null_value", "compacted_out")


def message_columns(entry: StoredEntry) -> tuple[list, ...]:
    """The messages of a decoded entry as one list per field of
    :data:`MESSAGE_FIELDS` (storage order): the fast path of the export.

    A batch is split by its ``SingleMessageMetadata``; an encrypted entry is one
    message holding the payload as stored (it cannot be split without the key).
    """
    md = entry.metadata
    if not entry.is_batch or entry.encrypted:
        return ([-1], [None if md.null_value else entry.payload],
                [_key(md.HasField("partition_key"), md.partition_key, md.null_partition_key)],
                [md.partition_key_b64_encoded], [md.ordering_key if md.HasField("ordering_key") else None],
                [[(p.key, p.value) for p in md.properties]], [md.event_time or None], [md.sequence_id],
                [md.null_value], [False])
    return _split_batch(entry.payload, md.num_messages_in_batch, md.sequence_id)


def messages_of(entry: StoredEntry) -> list[Message]:
    """The messages of a decoded entry, in storage order (see :func:`message_columns`)."""
    return [Message(*fields) for fields in zip(*message_columns(entry))]


def _split_batch(payload: bytes, count: int, base_sequence: int) -> tuple[list, ...]:
    n = len(payload)
    off = 0
    view = memoryview(payload)
    unpack = _U32.unpack_from
    smd = pb.SingleMessageMetadata()  # one message object, parsed again for each message (parsing clears it)
    has = smd.HasField
    payloads: list = []
    keys: list = []
    keys_b64: list = []
    ordering: list = []
    props: list = []
    events: list = []
    sequences: list = []
    nulls: list = []
    compacted: list = []
    for index in range(count):
        if off + 4 > n:
            raise CorruptEntry(f"batch truncated at message {index} of {count}")
        size = unpack(payload, off)[0]
        off += 4
        if off + size > n:
            raise CorruptEntry(f"batch message {index}: metadata of {size} bytes overruns the payload")
        try:
            smd.ParseFromString(view[off:off + size])
        except Exception as exc:  # noqa: BLE001
            raise CorruptEntry(f"batch message {index}: metadata does not parse: {exc}") from None
        off += size
        if not has("payload_size"):
            raise CorruptEntry(f"batch message {index}: metadata has no payload_size")
        length = smd.payload_size
        if length < 0 or off + length > n:
            raise CorruptEntry(f"batch message {index}: payload of {length} bytes overruns the batch")
        if not isinstance(smd.partition_key, str) or smd.properties:
            _check_text(f"batch message {index}", smd.partition_key, smd.properties)
        null_value = smd.null_value
        payloads.append(None if null_value else payload[off:off + length])
        off += length
        keys.append(smd.partition_key if has("partition_key") and not smd.null_partition_key else None)
        keys_b64.append(smd.partition_key_b64_encoded)
        ordering.append(smd.ordering_key if has("ordering_key") else None)
        properties = smd.properties
        props.append([(p.key, p.value) for p in properties] if properties else [])
        sequence = smd.sequence_id if has("sequence_id") else base_sequence + index
        if smd.event_time > _MS_MAX or sequence > _INT64_MAX:
            _check_range(f"batch message {index}", event_time=smd.event_time, sequence_id=sequence)
        events.append(smd.event_time or None)
        sequences.append(sequence)
        nulls.append(null_value)
        compacted.append(smd.compacted_out)
    if off != n:
        raise CorruptEntry(f"batch of {count} messages leaves {n - off} bytes unread")
    return (list(range(count)), payloads, keys, keys_b64, ordering, props, events, sequences, nulls, compacted)
