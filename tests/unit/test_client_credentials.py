"""The one credentials rule (wire.client.credentials) every opener of a ledger uses."""

import pytest

from bkctl.wire.client.credentials import ledger_credentials
from bkctl.wire.client.errors import Unauthorized
from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.errors import DigestError
from bkctl.wire.metadata.ledger import LedgerMetadata

A, B, C = "10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"
MD = LedgerMetadata.new([A, B, C], 2, 2, password=b"pw", digest_type=DigestType.MAC)


def test_credentials_come_from_the_metadata():
    assert ledger_credentials(1, MD) == (b"pw", DigestType.MAC)
    assert ledger_credentials(1, MD, "pw") == (b"pw", DigestType.MAC)
    assert ledger_credentials(1, MD, "pw", "mac") == (b"pw", DigestType.MAC)


def test_a_wrong_password_is_unauthorized():
    with pytest.raises(Unauthorized, match="wrong password for ledger 1"):
        ledger_credentials(1, MD, b"nope")


@pytest.mark.parametrize("given", [DigestType.CRC32C, "crc32", int(DigestType.DUMMY)])
def test_a_different_digest_type_is_a_digest_error(given):
    with pytest.raises(DigestError, match="ledger 1 uses digest type MAC"):
        ledger_credentials(1, MD, b"pw", given)


def test_unchecked_credentials_are_used_as_given():
    assert ledger_credentials(1, MD, b"nope", DigestType.CRC32C, check=False) == (b"nope", DigestType.CRC32C)


def test_format_1_metadata_stores_neither():
    v1 = LedgerMetadata.new([A, B, C], 2, 2, format_version=1)
    assert ledger_credentials(1, v1) == (b"", DigestType.CRC32)
    assert ledger_credentials(1, v1, "pw", "crc32c") == (b"pw", DigestType.CRC32C)
