"""An offloaded ledger read from its store as a broker reads it, with no broker.

:class:`OffloadedLedger` gives a ledger's index (``OffloadIndex``; for a MapFile, the key -1
record's metadata) and its entries ``first..last`` in batches, as the BookKeeper reader gives
them: jclouds objects through ranged GETs of the blocks that hold the range (the block of entry
``e`` is the one with the greatest first entry id not above ``e``, FACTS #18), streamed
:attr:`~.offload_store.OffloadSettings.read_buffer` bytes at a time; a MapFile read whole.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .errors import OffloadFormatError, OffloadMissing
from .offload_format import (
    BLOCK_HEADER_LENGTH,
    OffloadedMetadata,
    OffloadIndex,
    parse_block_header,
    parse_index,
    parse_offloaded_metadata,
)
from .offload_store import ByteStream, ObjectStore, OffloadLocation, OffloadSettings, store_for
from .sequence_file import bytes_writable, iter_records, long_key

__all__ = ["OffloadedLedger", "mapfile_records"]

_ENTRY = struct.Struct(">iq")


def mapfile_records(data: bytes, where: str) -> tuple[OffloadedMetadata, list[tuple[int, bytes]]]:
    """A MapFile's ``data``: the metadata (key -1) and the entries, checked to run 0, 1, 2..."""
    records = iter_records(data, where)
    first = next(records, None)
    if first is None or long_key(first[0], where) != -1:
        raise OffloadFormatError(f"{where}: the first record is not the ledger metadata (key -1)")
    metadata = parse_offloaded_metadata(bytes_writable(first[1], where), where)
    entries = []
    for expect, (key, value) in enumerate(records):
        entry_id = long_key(key, where)
        if entry_id != expect:
            raise OffloadFormatError(f"{where}: entry {entry_id} where {expect} was due")
        entries.append((entry_id, bytes_writable(value, where)))
    return metadata, entries


class OffloadedLedger:
    """One offloaded ledger in its store (see the module documentation)."""

    def __init__(self, location: OffloadLocation, settings: OffloadSettings, store: ObjectStore | None = None):
        self.location = location
        self.settings = settings
        self.store = store if store is not None else store_for(location, settings)
        self._index: OffloadIndex | None = None
        self._mapfile: tuple[OffloadedMetadata, list[tuple[int, bytes]]] | None = None

    @property
    def ledger_id(self) -> int:
        return self.location.ledger_id

    def index(self) -> OffloadIndex:
        """The jclouds index object, parsed (read once)."""
        if self._index is None:
            if self.location.segments > 1:
                raise OffloadFormatError(
                    f"ledger {self.ledger_id} is spread over {self.location.segments} streaming offload segments; "
                    "this reader reads a ledger offloaded in one"
                )
            key = self.location.index_key
            self._index = parse_index(self.store.get(key), self.ledger_id, f"{self.store.name}: {key}")
        return self._index

    def mapfile(self) -> tuple[OffloadedMetadata, list[tuple[int, bytes]]]:
        """The MapFile's metadata and entries (read once)."""
        if self._mapfile is None:
            key = f"{self.location.mapfile}/data"
            self._mapfile = mapfile_records(self.store.get(key), f"{self.store.name}/{key}")
        return self._mapfile

    def metadata(self) -> OffloadedMetadata | None:
        """The ledger metadata the offloader stored (None: a version 2 index keeps none of it)."""
        if self.location.is_filesystem:
            return self.mapfile()[0]
        return self.index().metadata

    def last_entry_id(self) -> int:
        md = self.metadata()
        if md is not None:
            return md.last_entry_id
        index = self.index()  # version 2: by the LedgerInfo it keeps, else at least its last block's first entry
        entries = index.ledger_entries()
        if entries is not None:
            return entries - 1
        return index.entries[-1].first_entry_id if index.entries else -1

    def entries(self, first: int, last: int, batch: int = 1000) -> Iterator[list[tuple[int, bytes]]]:
        """Entries ``first..last`` in lists of up to ``batch``; a missing one is an error."""
        if last < first:
            return
        source = self._mapfile_entries(first, last) if self.location.is_filesystem else self._s3_entries(first, last)
        out: list[tuple[int, bytes]] = []
        expect = first
        for entry_id, data in source:
            if entry_id != expect:
                raise OffloadFormatError(f"ledger {self.ledger_id}: entry {entry_id} read where {expect} was due")
            out.append((entry_id, data))
            expect += 1
            if len(out) >= batch:
                yield out
                out = []
        if out:
            yield out
        if expect != last + 1:
            raise OffloadMissing(
                f"ledger {self.ledger_id}: its offloaded copy ends at entry {expect - 1}, entries up to {last} planned"
            )

    def _mapfile_entries(self, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        entries = self.mapfile()[1]
        yield from entries[first : last + 1]

    def _s3_entries(self, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        index = self.index()
        spans = index.block_spans()
        i = index.block_of(first)
        while i < len(spans):
            block, length = spans[i]
            if block.first_entry_id > last:
                return
            for entry_id, data in self._block(block.offset, length, block.first_entry_id):
                if entry_id > last:
                    return
                if entry_id >= first:
                    yield entry_id, data
            i += 1

    def _block(self, offset: int, length: int, first_entry_id: int) -> Iterator[tuple[int, bytes]]:
        """One block's entries: one ranged GET of the block, its body consumed ``read_buffer``
        bytes at a time as the entries are."""
        key = self.location.data_key
        stream = self.store.open(key, offset, offset + length)
        try:
            yield from self._block_entries(stream, key, offset, length, first_entry_id)
        finally:
            stream.close()

    def _block_entries(
        self, stream: ByteStream, key: str, offset: int, length: int, first_entry_id: int
    ) -> Iterator[tuple[int, bytes]]:
        """The entries of the block at ``offset``, read ``read_buffer`` bytes at a time: each
        entry is sliced out of the chunk that holds it (one copy); only an entry that runs on
        into the next chunk is put together from both."""
        where = f"{self.store.name}: {key} block at {offset}"
        end = offset + length
        chunk = max(self.settings.read_buffer, 64 << 10)
        buf = self._read(stream, key, offset, min(length, chunk))
        fetched = offset + len(buf)
        header = parse_block_header(buf, where, self.ledger_id)
        if header.block_length != length or header.first_entry_id != first_entry_id:
            raise OffloadFormatError(
                f"{where}: header says {header.block_length} bytes from entry {header.first_entry_id}, the index "
                f"{length} from entry {first_entry_id}"
            )
        pos = BLOCK_HEADER_LENGTH
        expect = first_entry_id
        unpack = _ENTRY.unpack_from
        head = _ENTRY.size
        while True:
            n = len(buf)
            while pos + head <= n:  # the entries this chunk holds whole
                size, entry_id = unpack(buf, pos)
                if size < 0:  # padding
                    return
                if entry_id != expect:
                    raise OffloadFormatError(f"{where}: entry id {entry_id} where {expect} was due")
                stop = pos + head + size
                if stop > n:
                    break
                yield entry_id, buf[pos + head : stop]
                pos = stop
                expect += 1
            if fetched >= end:
                if pos + head <= n:
                    raise OffloadFormatError(f"{where}: entry {expect} runs past the block")
                return  # what is left is shorter than an entry's header: padding
            if pos + head > n:  # the next header runs on into the next chunk
                buf = buf[pos:] + self._read(stream, key, fetched, min(end - fetched, chunk))
                fetched += len(buf) - (n - pos)
                pos = 0
                continue
            # an entry that runs on into the next chunk(s): put together from the pieces
            size = unpack(buf, pos)[0]
            if fetched - (n - pos) + head + size > end:
                raise OffloadFormatError(f"{where}: entry {expect} of {size} bytes runs past the block")
            pieces = [buf[pos + head :]]
            have = n - pos - head
            while True:
                more = self._read(stream, key, fetched, min(end - fetched, max(chunk, size - have)))
                fetched += len(more)
                if have + len(more) >= size:
                    break
                pieces.append(more)
                have += len(more)
            pieces.append(more[: size - have])
            yield expect, b"".join(pieces)
            expect += 1
            buf, pos = more, size - have

    def _read(self, stream: ByteStream, key: str, at: int, n: int) -> bytes:
        """The next ``n`` bytes (at least one) of ``key``, which is at ``at``."""
        data = stream.read(n)
        if not data:
            raise OffloadFormatError(f"{self.store.name}: {key} ends at {at}, before its block's end")
        return data
