"""The password and digest type a ledger's entries are checked with (Java's
``BookKeeper.openLedger`` checks): the one rule every opener uses."""

from __future__ import annotations

from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.errors import DigestError
from bkctl.wire.metadata.ledger import LedgerMetadata

from .errors import Unauthorized

__all__ = ["ledger_credentials"]


def ledger_credentials(
    ledger_id: int,
    md: LedgerMetadata,
    password: bytes | str | None = None,
    digest_type: DigestType | str | int | None = None,
    *,
    check: bool = True,
) -> tuple[bytes, DigestType]:
    """``(password, digest type)`` for a ledger's entries.

    ``None`` takes the one stored in the metadata (admin use).  A given
    password that differs from the stored one is
    :class:`~bkctl.wire.client.errors.Unauthorized`, a given digest type that
    differs a :class:`~bkctl.wire.errors.DigestError`, unless ``check`` is
    False (then the given ones are used as they are, and a wrong one shows
    up as digest errors on reads).  Format-1 metadata stores neither: the
    given ones, else b"" and CRC32.
    """
    if isinstance(password, str):
        password = password.encode("utf-8")
    if digest_type is not None and not isinstance(digest_type, DigestType):
        digest_type = DigestType.parse(digest_type) if isinstance(digest_type, str) else DigestType(digest_type)
    if md.password is None:  # format-1 metadata stores neither
        return (
            b"" if password is None else bytes(password),
            digest_type if digest_type is not None else DigestType.CRC32,
        )
    if password is None:
        password = md.password
    elif check and bytes(password) != md.password:
        raise Unauthorized(f"wrong password for ledger {ledger_id}")
    if digest_type is None:
        digest_type = md.digest_type
    elif check and digest_type != md.digest_type:
        stored = md.digest_type.name if md.digest_type is not None else None
        raise DigestError(f"ledger {ledger_id} uses digest type {stored}, not {digest_type.name}")
    return bytes(password), digest_type if digest_type is not None else DigestType.CRC32
