"""Bookie cookies: ``/ledgers/cookies/<bookieId>`` and every ``current/VERSION`` file.

Pure codecs, no I/O (BookKeeper's bookie/Cookie.java).  The first
line is the layout version:

* **3**: four lines - ``3``, bookie id, journal dirs, ledger dirs (each ``\\n``-terminated);
* **4, 5**: the protobuf text format of ``CookieFormat`` follows (5 may add ``indexDirs``).

Journal dirs are stored joined with ``,``; ledger and index dirs as
``"<count>\\t<dir1>\\t<dir2>..."`` (the configured dirs, not their ``current``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bkctl.wire.errors import BKError, CodecError
from bkctl.wire.metadata.protobuf_text import message_to_text, parse_text_message
from bkctl.wire.proto import formats_pb2

__all__ = [
    "CURRENT_COOKIE_LAYOUT",
    "Cookie",
    "CookieMismatch",
    "decode_dirs",
    "encode_dirs",
    "parse_cookie",
]

#: The layout written since BookKeeper 4.16 (4.14/4.15 write 4).
CURRENT_COOKIE_LAYOUT = 5
SUPPORTED_COOKIE_LAYOUTS = (3, 4, 5)
_DIR_SEPARATOR = "\t"


class CookieMismatch(BKError):
    """A bookie's configuration (or a directory) does not match its stored cookie."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def encode_dirs(dirs: Sequence[str]) -> str:
    """``"<count>\\t<dir1>\\t<dir2>..."`` as stored for ledger and index dirs."""
    return str(len(dirs)) + "".join(_DIR_SEPARATOR + d for d in dirs)


def decode_dirs(value: str) -> tuple[str, ...]:
    """Inverse of :func:`encode_dirs`; the count must match the number of dirs."""
    count, sep, rest = value.partition(_DIR_SEPARATOR)
    if not count.isascii() or not count.isdigit():
        raise CodecError(f"malformed cookie directory list {value!r}: no leading count")
    dirs = tuple(rest.split(_DIR_SEPARATOR)) if sep else ()
    if int(count) != len(dirs):
        raise CodecError(f"malformed cookie directory list {value!r}: count {count} but {len(dirs)} dirs")
    return dirs


def _dirs_tuple(value: str | Iterable[str] | None, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    dirs = tuple(value)
    for d in dirs:
        if not isinstance(d, str):
            raise TypeError(f"{name} must hold strings, got {d!r}")
    return dirs


@dataclass(frozen=True)
class Cookie:
    """A bookie cookie.

    ``journal_dirs``, ``ledger_dirs`` and ``index_dirs`` are tuples of the
    configured directories (a single string is accepted for one dir).
    ``index_dirs`` is ``None`` unless index directories are configured; it is
    then written as ``indexDirs`` (layout 5).  ``instance_id`` is ``None`` when
    absent (an empty stored value reads as absent, like Java).
    """

    bookie_id: str
    journal_dirs: tuple[str, ...]
    ledger_dirs: tuple[str, ...]
    instance_id: str | None = None
    index_dirs: tuple[str, ...] | None = None
    layout_version: int = CURRENT_COOKIE_LAYOUT

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "journal_dirs", _dirs_tuple(self.journal_dirs, "journal_dirs"))
        setattr_(self, "ledger_dirs", _dirs_tuple(self.ledger_dirs, "ledger_dirs"))
        setattr_(self, "index_dirs", _dirs_tuple(self.index_dirs, "index_dirs"))
        if self.instance_id == "":
            setattr_(self, "instance_id", None)
        if self.layout_version not in SUPPORTED_COOKIE_LAYOUTS:
            raise ValueError(f"unsupported cookie layout {self.layout_version!r} (3, 4 or 5)")
        if self.layout_version == 3 and (self.instance_id is not None or self.index_dirs is not None):
            raise ValueError("a layout-3 cookie cannot hold an instance id or index dirs")

    # -- encoded forms -------------------------------------------------------
    @property
    def journal_dir_text(self) -> str:
        """The stored ``journalDir`` value: the journal dirs joined with ``,``."""
        return ",".join(self.journal_dirs)

    @property
    def ledger_dirs_text(self) -> str:
        return encode_dirs(self.ledger_dirs)

    @property
    def index_dirs_text(self) -> str | None:
        return None if self.index_dirs is None else encode_dirs(self.index_dirs)

    @property
    def effective_index_dirs(self) -> tuple[str, ...]:
        """Index dirs default to the ledger dirs."""
        return self.ledger_dirs if self.index_dirs is None else self.index_dirs

    def serialize(self) -> bytes:
        """The cookie text (ZK node data and VERSION file contents), UTF-8."""
        if self.layout_version == 3:
            return "".join(
                line + "\n" for line in ("3", self.bookie_id, self.journal_dir_text, self.ledger_dirs_text)
            ).encode("utf-8")
        pb = formats_pb2.CookieFormat(
            bookieHost=self.bookie_id, journalDir=self.journal_dir_text, ledgerDirs=self.ledger_dirs_text
        )
        if self.instance_id is not None:
            pb.instanceId = self.instance_id
        if self.index_dirs is not None:
            pb.indexDirs = encode_dirs(self.index_dirs)
        return (f"{self.layout_version}\n" + message_to_text(pb)).encode("utf-8")

    def __bytes__(self) -> bytes:
        return self.serialize()

    @classmethod
    def parse(cls, data: bytes) -> Cookie:
        return parse_cookie(data)

    # -- verification ----------------------------------------------------------
    def verify_against(self, stored: Cookie, allow_expansion: bool = False) -> None:
        """Check that ``stored`` (ZK cookie or a VERSION file) matches this one (from the config).

        Rules (Cookie.verify and verifyIsSuperSet in BookKeeper's bookie/Cookie.java): the stored layout is >= 3; bookie id and
        journal dirs are equal; ledger dirs and index dirs (defaulting to the
        ledger dirs) are equal - or, with ``allow_expansion``, this cookie's
        dirs are a superset of the stored ones; instance ids are equal (both
        absent counts as equal).  Raises :class:`CookieMismatch` naming the
        first differing field.
        """
        if stored.layout_version < 3:
            raise CookieMismatch(f"stored cookie layout {stored.layout_version} is too old", "layout_version")
        if self.bookie_id != stored.bookie_id:
            raise CookieMismatch(
                f"bookie_id mismatch: configured {self.bookie_id!r}, stored {stored.bookie_id!r}", "bookie_id"
            )
        if self.journal_dirs != stored.journal_dirs:
            raise CookieMismatch(
                f"journal_dirs mismatch: configured {self.journal_dir_text!r}, stored {stored.journal_dir_text!r}",
                "journal_dirs",
            )
        for name, mine, theirs in (
            ("ledger_dirs", self.ledger_dirs, stored.ledger_dirs),
            ("index_dirs", self.effective_index_dirs, stored.effective_index_dirs),
        ):
            if allow_expansion:
                if not set(mine) >= set(theirs):
                    missing = sorted(set(theirs) - set(mine))
                    raise CookieMismatch(
                        f"{name} mismatch: configured {list(mine)} is not a superset of stored {list(theirs)}"
                        f" (missing {missing})",
                        name,
                    )
            elif mine != theirs:
                raise CookieMismatch(f"{name} mismatch: configured {list(mine)}, stored {list(theirs)}", name)
        if self.instance_id != stored.instance_id:
            raise CookieMismatch(
                f"instance_id mismatch: configured {self.instance_id!r}, stored {stored.instance_id!r}",
                "instance_id",
            )


def _parse_layout_line(line: str) -> int:
    token = line.strip()
    if not token.isascii() or not token.isdigit():
        raise CodecError(f"cookie does not start with a layout version: {line!r}")
    return int(token)


def parse_cookie(data: bytes) -> Cookie:
    """Decode cookie text of layout 3, 4 or 5; raises only :class:`CodecError`."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"cookie must be bytes, not {type(data).__name__}")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"cookie is not UTF-8: {exc}") from None
    first, newline, rest = text.partition("\n")
    if not newline and not first.strip():
        raise CodecError("empty cookie")
    layout = _parse_layout_line(first)
    try:
        if layout == 3:
            lines = rest.split("\n")
            if len(lines) < 3:
                raise CodecError("layout-3 cookie is truncated (needs bookie id, journal dirs, ledger dirs)")
            bookie_id, journal, ledgers = (ln.rstrip("\r") for ln in lines[:3])
            if any(ln.strip() for ln in lines[3:]):
                raise CodecError("layout-3 cookie has trailing data")
            return Cookie(bookie_id, tuple(journal.split(",")), decode_dirs(ledgers), layout_version=3)
        if layout in (4, 5):
            pb = parse_text_message(rest, formats_pb2.CookieFormat, f"layout-{layout} cookie")
            return Cookie(
                bookie_id=pb.bookieHost,
                journal_dirs=tuple(pb.journalDir.split(",")),
                ledger_dirs=decode_dirs(pb.ledgerDirs),
                instance_id=pb.instanceId or None,
                index_dirs=decode_dirs(pb.indexDirs) if pb.HasField("indexDirs") else None,
                layout_version=layout,
            )
    except (ValueError, TypeError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"invalid cookie: {exc}") from None
    raise CodecError(f"unsupported cookie layout version {layout} (3, 4 or 5)")
