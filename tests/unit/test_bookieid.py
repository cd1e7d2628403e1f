"""One bookie-id rule (bkctl.wire.metadata.bookieid), used by bookied's config, the metadata store and bkctl."""

from __future__ import annotations

import re

import pytest

from bkctl.bookied.config import ConfigError, load_config, validate_bookie_id
from bkctl.wire.metadata.bookieid import bookie_id_problem, check_bookie_id, is_valid_bookie_id
from bkctl.wire.metadata.bookieid import is_valid_bookie_id as store_rule

# Java's BookieId: [a-zA-Z0-9:-_.\-]+ (":-_" is the range ':'..'_'), and never "readonly".
VALID = [
    "bookie-1",
    "10.0.0.1:3181",
    "bk_1.example.com:3181",
    "fe80::1:3181",
    "BK@[zone]",
    "a\\b",
    "read-only",
    "readonly1",
    "a;b",
    "<=>?^",
    "_",
    ".",
]
INVALID = [
    ("", "is not a valid bookie id"),
    ("readonly", "is reserved"),
    ("READONLY", "is reserved"),
    ("ReadOnly", "is reserved"),
    ("a b", "is not a valid bookie id"),
    ("a/b", "is not a valid bookie id"),  # would be a znode path
    ("a,b", "is not a valid bookie id"),
    ("a#b", "is not a valid bookie id"),
    ("a`b", "is not a valid bookie id"),  # just past '_'
    ("a{b}", "is not a valid bookie id"),
    ("caf\u00e9", "is not a valid bookie id"),
    ("bk1:3181\n", "is not a valid bookie id"),
]


@pytest.mark.parametrize("ident", VALID)
def test_valid_ids(ident):
    assert bookie_id_problem(ident) is None
    assert is_valid_bookie_id(ident) and store_rule(ident)
    assert check_bookie_id(ident) == ident
    assert validate_bookie_id(ident) == ident
    assert load_config(overrides={"bookieId": ident}).bookie_id == ident


@pytest.mark.parametrize("ident, problem", INVALID)
def test_invalid_ids(ident, problem):
    assert problem in bookie_id_problem(ident)
    assert not is_valid_bookie_id(ident) and not store_rule(ident)
    with pytest.raises(ValueError, match="^" + re.escape(f"{ident!r} {problem}")):
        check_bookie_id(ident)
    with pytest.raises(ConfigError, match="bookieId"):
        validate_bookie_id(ident)


def test_non_strings_are_not_ids():
    assert bookie_id_problem(3181) == "is not a string"
    assert not is_valid_bookie_id(None)


# (the config strips values, and an empty one means "unset")
@pytest.mark.parametrize("ident, problem", [i for i in INVALID if i[0] and i[0] == i[0].strip()])
def test_bookied_refuses_an_invalid_bookie_id_in_its_config(ident, problem):
    with pytest.raises(ConfigError, match=re.escape(f"bookieId: {ident!r} {problem}")):
        load_config(overrides={"bookieId": ident})
