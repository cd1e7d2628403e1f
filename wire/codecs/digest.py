"""Entry and LAC digests (DUMMY, CRC32, CRC32C, HMAC-SHA1) and the master key.

A packaged entry is ``ledgerId | entryId | lac | length`` (4 x i64 BE), the
digest, then the payload; the digest covers the 32 header bytes followed by
the payload.  A LAC body is ``ledgerId | lac`` and a digest over those 16
bytes.  Bookies never look at digests; clients build and check them.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from bkctl.wire.codecs import checksums
from bkctl.wire.codecs.protocol import ENTRY_HEADER_LENGTH
from bkctl.wire.errors import CodecError, DigestError

if TYPE_CHECKING:
    from bkctl.wire.codecs.codec_twins import CodecTwins

#: a packaged entry's header (then its digest, then the payload): ledger id, entry id, the
#: writer's LAC, the ledger's length with this entry -- the one definition of it
ENTRY_HEADER = struct.Struct(">qqqq")
_HEADER = ENTRY_HEADER
_IDS_LAC = struct.Struct(">qqq")
_LAC_HEADER = struct.Struct(">qq")
_IDS = _LAC_HEADER  # ledgerId, entryId: also the start of an entry's header
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class DigestType(enum.IntEnum):
    """Valued as in ledger metadata (``LedgerMetadataFormat.DigestType``)."""

    CRC32 = 1
    MAC = 2  # HMAC in the metadata enum
    CRC32C = 3
    DUMMY = 4

    @classmethod
    def parse(cls, name: str) -> DigestType:
        """Accept client API names and metadata names, any case (``hmac`` = ``mac``)."""
        key = name.strip().upper()
        if key == "HMAC":
            key = "MAC"
        try:
            return cls[key]
        except KeyError:
            raise ValueError(f"unknown digest type {name!r} (crc32, crc32c, mac, dummy)") from None

    @property
    def metadata_name(self) -> str:
        """The name used in protobuf text format ledger metadata."""
        return "HMAC" if self is DigestType.MAC else self.name


DIGEST_LENGTH = {DigestType.DUMMY: 0, DigestType.CRC32: 8, DigestType.CRC32C: 4, DigestType.MAC: 20}


def master_key(password: bytes) -> bytes:
    """The 20-byte key a writer presents to bookies: SHA-1(b"ledger" + password)."""
    return hashlib.sha1(b"ledger" + password).digest()


def mac_key(password: bytes) -> bytes:
    return hashlib.sha1(b"mac" + password).digest()


class DigestManager:
    """Builds and verifies packaged entries and LAC bodies of one ledger (in Python; a writer's
    and a reader's hot paths take the twins of the client's codecs, :meth:`packager` and
    :meth:`payload_checker`)."""

    __slots__ = ("ledger_id", "digest_type", "digest_length", "_mac_key")

    def __init__(self, ledger_id: int, digest_type: DigestType, password: bytes = b""):
        self.ledger_id = ledger_id
        self.digest_type = DigestType(digest_type)
        self.digest_length = DIGEST_LENGTH[self.digest_type]
        self._mac_key = mac_key(password) if self.digest_type is DigestType.MAC else None

    def _digest(self, first: bytes, rest: bytes = b"") -> bytes:
        dt = self.digest_type
        if dt is DigestType.CRC32C:
            return _U32.pack(checksums.crc32c(rest, checksums.crc32c(first)))
        if dt is DigestType.CRC32:
            return _U64.pack(zlib.crc32(rest, zlib.crc32(first)))
        if dt is DigestType.MAC:
            mac = hmac.new(self._mac_key or b"", first, hashlib.sha1)
            mac.update(rest)
            return mac.digest()
        return b""

    # -- entries -----------------------------------------------------------
    def package(self, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        """The bytes sent to bookies for one entry; ``length`` includes this payload."""
        return self.package_of(self.ledger_id, entry_id, lac, length, payload)

    def package_of(self, ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        """:meth:`package` with the ledger id given (:meth:`packager`'s signature)."""
        header = _HEADER.pack(ledger_id, entry_id, lac, length)
        return b"".join((header, self._digest(header, payload), payload))

    def packager(self, codec: CodecTwins) -> Callable[[int, int, int, int, bytes], bytes]:
        """A writer's packaging of an entry, ``(ledger_id, entry_id, lac, length, payload)`` ->
        its bytes (as :meth:`package`): for CRC32C the twin of the client's codecs in use
        (``codec``: ``Twins.codec`` of :mod:`bkctl.wire.fastpath`), else :meth:`package_of`."""
        if self.digest_type is DigestType.CRC32C:
            return codec.crc32c_package
        return self.package_of

    def verify(self, entry: bytes, entry_id: int | None = None) -> VerifiedEntry:
        """Check an entry read back from a bookie; ``entry_id=None`` skips the id check (LAC reads)."""
        entry = bytes(entry)
        payload = self.payload(entry, entry_id)
        ledger_id, got_entry, lac, length = _HEADER.unpack_from(entry)
        return VerifiedEntry(ledger_id, got_entry, lac, length, payload)

    def payload(self, entry: bytes, entry_id: int | None = None) -> bytes:
        """:meth:`verify` for a reader that only wants the payload (the same
        checks, the same errors, without building the header tuple)."""
        if type(entry) is not bytes:
            entry = bytes(entry)
        d = self.digest_length
        start = ENTRY_HEADER_LENGTH + d
        if len(entry) < start:
            raise DigestError(f"entry of {len(entry)} bytes is shorter than its header and digest")
        payload = entry[start:]
        dt = self.digest_type
        if dt is DigestType.CRC32C:  # not a secret: compared as numbers
            good = _U32.unpack_from(entry, ENTRY_HEADER_LENGTH)[0] == checksums.crc32c(
                payload, checksums.crc32c(entry[:ENTRY_HEADER_LENGTH])
            )
        elif dt is DigestType.CRC32:
            good = _U64.unpack_from(entry, ENTRY_HEADER_LENGTH)[0] == zlib.crc32(
                payload, zlib.crc32(entry[:ENTRY_HEADER_LENGTH])
            )
        elif d:
            good = hmac.compare_digest(
                self._digest(entry[:ENTRY_HEADER_LENGTH], payload), entry[ENTRY_HEADER_LENGTH:start]
            )
        else:
            good = True
        if not good:
            raise DigestError(f"digest mismatch on ledger {self.ledger_id}")
        ledger_id, got_entry = _IDS.unpack_from(entry)
        if ledger_id != self.ledger_id:
            raise DigestError(f"entry belongs to ledger {ledger_id}, expected {self.ledger_id}")
        if entry_id is not None and got_entry != entry_id:
            raise DigestError(f"got entry {got_entry}, expected {entry_id}")
        return payload

    def payload_checker(self, codec: CodecTwins, fastpaths: bool) -> Callable[[bytes, int], bytes]:
        """:meth:`payload` as a function of ``(entry, entry_id)``, for a reader that checks many
        entries: with ``fastpaths`` (``Twins.enabled`` of :mod:`bkctl.wire.fastpath`), for CRC32C
        the twin of the client's codecs in use (``codec.crc32c_checker``: ``Twins.codec``) and for
        CRC32 :func:`~.codec_twins.sum_checker`, which check a well-formed entry with one slice and
        two checksum calls (in C: one call), handing anything else (a short entry, a mismatch) to
        :meth:`payload` for its error; :meth:`payload` itself otherwise."""
        dt = self.digest_type
        if not fastpaths or dt not in (DigestType.CRC32C, DigestType.CRC32):
            return self.payload
        if dt is DigestType.CRC32C:
            return codec.crc32c_checker(self.ledger_id, self.payload)
        from bkctl.wire.codecs.codec_twins import sum_checker  # (its module imports the v3 codecs)

        return sum_checker(self.ledger_id, self.payload, zlib.crc32, _U64, self.digest_length)

    # -- LAC bodies --------------------------------------------------------
    def package_lac(self, lac: int) -> bytes:
        header = _LAC_HEADER.pack(self.ledger_id, lac)
        return header + self._digest(header)

    def verify_lac(self, body: bytes) -> int:
        body = bytes(body)
        d = self.digest_length
        if len(body) < 16 + d:
            raise DigestError(f"LAC body of {len(body)} bytes is too short")
        header = body[:16]
        if d and not hmac.compare_digest(self._digest(header), body[16 : 16 + d]):
            raise DigestError(f"LAC digest mismatch on ledger {self.ledger_id}")
        ledger_id, lac = _LAC_HEADER.unpack(header)
        if ledger_id != self.ledger_id:
            raise DigestError(f"LAC belongs to ledger {ledger_id}, expected {self.ledger_id}")
        return int(lac)


class VerifiedEntry(NamedTuple):
    """A checked entry."""

    ledger_id: int
    entry_id: int
    lac: int
    length: int
    payload: bytes


class EntryHeader(NamedTuple):
    """A packaged entry's header (:data:`ENTRY_HEADER`)."""

    ledger_id: int
    entry_id: int
    lac: int
    length: int


def entry_header(data: bytes | bytearray | memoryview) -> EntryHeader:
    """The header of a packaged entry, without checking its digest."""
    if len(data) < ENTRY_HEADER.size:
        raise CodecError(f"entry of {len(data)} bytes is shorter than its 32-byte header")
    ledger_id, entry_id, lac, length = ENTRY_HEADER.unpack_from(data, 0)
    return EntryHeader(ledger_id, entry_id, lac, length)


def entry_ids(entry: bytes) -> tuple[int, int, int]:
    """(ledgerId, entryId, lac) from a packaged entry's header, without checking its digest."""
    if len(entry) < 24:
        raise DigestError(f"entry of {len(entry)} bytes has no ledger/entry header")
    ledger_id, entry_id, lac = _IDS_LAC.unpack_from(entry, 0)
    return ledger_id, entry_id, lac
