"""Hadoop's SequenceFile and MapFile as Pulsar's filesystem offloader writes them (pure codecs).

``FileSystemManagedLedgerOffloader`` puts each offloaded ledger in a MapFile directory
``<storageBasePath>/<managed ledger>/<ledgerId>-<uuid>`` (tests/vectors/offload/FACTS.md #27-#32,
H1-H8): ``data`` is a SequenceFile of ``LongWritable`` entry id -> ``BytesWritable`` entry, the
first record key -1 holding the ledger's metadata (``LedgerMetadataFormat``, as in a jclouds
index); ``index`` maps every 128th key to its position in ``data``.  A SequenceFile is::

    "SEQ" 6, key class, value class (Hadoop Text: vint length + UTF-8), compressed, block
    compressed (one byte each), the codec's class name when compressed, metadata
    (int32 count of Text pairs), a 16-byte sync marker; then records

* uncompressed or RECORD-compressed: ``[int32 record length][int32 key length][key][value]``, the
  value a zlib stream of the serialised value when RECORD-compressed; a record length of -1 is a
  sync escape (the 16-byte sync follows);
* BLOCK-compressed: ``[int32 -1][sync][vint records]`` and four ``[vint length][zlib]`` buffers:
  key lengths (vints), keys, value lengths (vints), values.

Only ``org.apache.hadoop.io.compress.DefaultCodec`` (zlib) is read, the codec Pulsar's
profiles and Hadoop's defaults give; ``.crc`` sidecar files are not Hadoop data and are ignored.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from .errors import OffloadFormatError

__all__ = ["SequenceFileHeader", "iter_records", "long_key", "parse_header", "read_vlong", "bytes_writable"]

MAGIC = b"SEQ"
VERSION = 6
SYNC_SIZE = 16
ZLIB_CODEC = "org.apache.hadoop.io.compress.DefaultCodec"
LONG_WRITABLE = "org.apache.hadoop.io.LongWritable"
BYTES_WRITABLE = "org.apache.hadoop.io.BytesWritable"


@dataclass(frozen=True)
class SequenceFileHeader:
    key_class: str
    value_class: str
    compressed: bool
    block_compressed: bool
    codec: str | None
    metadata: tuple[tuple[str, str], ...]
    sync: bytes
    #: where the first record starts
    end: int


def read_vlong(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Hadoop's ``WritableUtils.readVLong``: the value and the position after it."""
    if pos >= len(data):
        raise OffloadFormatError("a variable-length integer runs past the end")
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = ((-119 - first) if negative else (-111 - first)) - 1  # the bytes that follow the first
    if pos + 1 + size > len(data):
        raise OffloadFormatError("a variable-length integer runs past the end")
    value = 0
    for b in bytes(data[pos + 1 : pos + 1 + size]):
        value = (value << 8) | b
    return (~value if negative else value), pos + 1 + size


def _text(data: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_vlong(data, pos)
    if n < 0 or pos + n > len(data):
        raise OffloadFormatError("a class name runs past the end of the header")
    return data[pos : pos + n].decode("utf-8"), pos + n


def parse_header(data: bytes, where: str = "SequenceFile") -> SequenceFileHeader:
    if data[:3] != MAGIC:
        raise OffloadFormatError(f"{where}: does not start with 'SEQ' (not a Hadoop SequenceFile)")
    if len(data) < 4 or data[3] != VERSION:
        raise OffloadFormatError(f"{where}: SequenceFile version {data[3] if len(data) > 3 else None}, not {VERSION}")
    try:
        key_class, pos = _text(data, 4)
        value_class, pos = _text(data, pos)
        compressed, block = bool(data[pos]), bool(data[pos + 1])
        pos += 2
        codec = None
        if compressed:
            codec, pos = _text(data, pos)
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        meta = []
        for _ in range(count):
            k, pos = _text(data, pos)
            v, pos = _text(data, pos)
            meta.append((k, v))
        sync = data[pos : pos + SYNC_SIZE]
    except (IndexError, struct.error):
        raise OffloadFormatError(f"{where}: the header is truncated") from None
    if len(sync) != SYNC_SIZE:
        raise OffloadFormatError(f"{where}: the header is truncated")
    if compressed and codec != ZLIB_CODEC:
        raise OffloadFormatError(f"{where}: compressed with {codec}; only {ZLIB_CODEC} (zlib) is read")
    return SequenceFileHeader(key_class, value_class, compressed, block, codec, tuple(meta), sync, pos + SYNC_SIZE)


def _inflate(data: bytes | memoryview, where: str) -> bytes:
    try:
        return zlib.decompress(bytes(data))
    except zlib.error as exc:
        raise OffloadFormatError(f"{where}: a zlib stream does not inflate: {exc}") from None


def iter_records(data: bytes, where: str = "SequenceFile") -> Iterator[tuple[bytes, bytes]]:
    """Every ``(key bytes, value bytes)`` of a whole SequenceFile, in order; values
    decompressed, as their Writable serialised them."""
    header = parse_header(data, where)
    pos = header.end
    n = len(data)
    try:
        while pos < n:
            (length,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if length == -1:
                if data[pos : pos + SYNC_SIZE] != header.sync:
                    raise OffloadFormatError(f"{where}: a sync marker at {pos} differs from the header's")
                pos += SYNC_SIZE
                if header.block_compressed:
                    pos = yield from _block(data, pos, where)
                continue
            if header.block_compressed:
                raise OffloadFormatError(f"{where}: a block-compressed file has a record at {pos - 4} without sync")
            (key_length,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if length < key_length or key_length < 0 or pos + length > n:
                raise OffloadFormatError(f"{where}: record at {pos - 8} of {length} bytes runs past the end")
            key = data[pos : pos + key_length]
            value = data[pos + key_length : pos + length]
            pos += length
            yield key, (_inflate(value, where) if header.compressed else value)
    except struct.error:
        raise OffloadFormatError(f"{where}: truncated at byte {pos} of {n}") from None


def _block(data: bytes, pos: int, where: str) -> Generator[tuple[bytes, bytes], None, int]:
    count, pos = read_vlong(data, pos)
    buffers = []
    for _ in range(4):
        size, pos = read_vlong(data, pos)
        if size < 0 or pos + size > len(data):
            raise OffloadFormatError(f"{where}: a compressed block's buffer runs past the end")
        buffers.append(_inflate(data[pos : pos + size], where))
        pos += size
    key_lengths, keys, value_lengths, values = buffers
    kp = vp = klp = vlp = 0
    for _ in range(count):
        kl, klp = read_vlong(key_lengths, klp)
        vl, vlp = read_vlong(value_lengths, vlp)
        if kp + kl > len(keys) or vp + vl > len(values):
            raise OffloadFormatError(f"{where}: a compressed block's lengths overrun its keys or values")
        yield keys[kp : kp + kl], values[vp : vp + vl]
        kp += kl
        vp += vl
    return pos


def long_key(key: bytes, where: str = "SequenceFile") -> int:
    """A ``LongWritable``'s value."""
    if len(key) != 8:
        raise OffloadFormatError(f"{where}: a LongWritable key of {len(key)} bytes")
    return int(struct.unpack(">q", key)[0])


def bytes_writable(value: bytes, where: str = "SequenceFile") -> bytes:
    """A ``BytesWritable``'s bytes (``[int32 length][bytes]``)."""
    if len(value) < 4:
        raise OffloadFormatError(f"{where}: a BytesWritable of {len(value)} bytes")
    (size,) = struct.unpack_from(">i", value)
    if size != len(value) - 4:
        raise OffloadFormatError(f"{where}: a BytesWritable says {size} bytes, holds {len(value) - 4}")
    return bytes(value[4:])
