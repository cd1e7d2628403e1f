"""Numbers in words for people: a size in bytes, a count with its noun.

A module of its own, importing nothing, so that the operations (``bkctl/ops``), which compose
the messages they return, need not import :mod:`bkctl.render` -- the output layer built on
:class:`~bkctl.app.App`, which sits above them.
"""

from __future__ import annotations

__all__ = ["human_size", "plural"]


def human_size(n: int | None) -> str:
    """Bytes for people: ``512 B``, ``19.1 MiB`` ("?" when unknown)."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 ledger``, ``2 ledgers``; ``words`` for an irregular plural (``entries``)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
