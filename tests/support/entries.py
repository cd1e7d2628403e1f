"""The kinds of pending add a writer's handle makes, for tests of what reads them: a
:class:`~bkctl.wire.client.pending_add.PendingAdd`, and, with the C twins built, an
``_addentries.Entry`` (made by ``Entries``: read and written in place by the C twins)."""

from __future__ import annotations

from typing import Any

from bkctl.wire import fastpath
from bkctl.wire.client.pending_add import PendingAdd

_C = fastpath.build(True).entries.c


def python_entry(entry_id: int, body: bytes, length: int) -> PendingAdd:
    """A :class:`~bkctl.wire.client.pending_add.PendingAdd` (``body`` as its packaged body, its ADD of its fields)."""
    return PendingAdd(9, entry_id, b"k" * 20, body, False, length)


def c_entry(entry_id: int, body: bytes, length: int) -> Any:
    """An ``_addentries.Entry`` (``body`` as its packaged body, its ADD's parts made up: what reads it does not look at them)."""
    assert _C is not None
    made = _C.Entries(lambda *args: args[4], lambda *args: (b"part", b"tail"), 9, b"k" * 20, False)
    return made(entry_id, -1, length, body, None)


#: python_entry, and c_entry when the C twins are built
MAKERS: list[Any] = [python_entry] + ([c_entry] if _C is not None else [])


def maker_id(make: Any) -> str:
    return "python-entries" if make is python_entry else "c-entries"
