"""The one rule for bookie ids as Java's ``BookieId`` checks them
(BookKeeper's net/BookieId.java).

A bookie id is one or more of: ASCII letters and digits, the ASCII range
``:`` to ``_`` (which holds ``: ; < = > ? @ [ \\ ] ^ _`` besides the
upper-case letters), ``.`` and ``-``; and never ``readonly`` in any case,
which would collide with the ``available/readonly`` znode.  The id names the
bookie's znodes (``available/<id>``, ``cookies/<id>``), so the rule keeps
``/`` and blanks out.  bookied's config, the metadata store and bkctl all
check ids here.
"""

from __future__ import annotations

import re

__all__ = ["bookie_id_problem", "check_bookie_id", "is_valid_bookie_id"]

_ALLOWED = re.compile(r"[A-Za-z0-9\x3a-\x5f.\-]+")
_RESERVED = "readonly"


def bookie_id_problem(value: object) -> str | None:
    """None for a valid bookie id, else why not, as a phrase that follows the
    quoted id (``'a b' is not a valid bookie id (...)``)."""
    if not isinstance(value, str):
        return "is not a string"
    if not _ALLOWED.fullmatch(value):
        return "is not a valid bookie id (allowed: letters, digits, ASCII ':' to '_', '.' and '-')"
    if value.lower() == _RESERVED:
        return "is reserved and cannot be a bookie id"
    return None


def is_valid_bookie_id(value: object) -> bool:
    """Whether ``value`` is a bookie id Java would accept."""
    return bookie_id_problem(value) is None


def check_bookie_id(value: str) -> str:
    """``value`` if it is a valid bookie id, else ValueError saying why."""
    problem = bookie_id_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return value
