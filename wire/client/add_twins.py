"""The add path's twins as two interfaces, each implemented whole in C and whole in Python; the
twin selector records one of each (:mod:`bkctl.wire.fastpath`) and the components are handed it.

:class:`ConnectionAdds` (``Twins.adds``; C: ``_addpath.c``, whose one Python owner is the
connection, through its :class:`~.requests.RequestTable` and :class:`~.entry_requests.EntryRequests`):

* :data:`~ConnectionAdds.add_copies` -- ``(adds, ctxs, slots, on_done, ids, decode, general)`` ->
  ``(reqs, data)``: a connection's v3 copies of a run of encoded adds, each its own txnId from
  ``ids``, and their frames joined (Python: :func:`py_add_copies`, every copy built by
  ``general(add, txn)``, which gives ``(req, data)``);
* :data:`~ConnectionAdds.register_all` -- ``(reqs, start, sent, pending, fast)`` -> the index of
  the first request it did not register;
* :data:`~ConnectionAdds.take_adds` -- ``(payloads, start, fast, pending, sent, table, queue,
  pump, bookie_id)`` -> the index of the first answer it did not take.

The C twins of the last two take the C copies (``AddCopy``) only, whose requests, registration
and answers are theirs; the Python twins take none (the Python twin of a copy is a
:class:`~.requests.Request`, which ``RequestTable`` registers and answers itself), as the C ones
take none of a Request.

:class:`WriterAdds` (``Twins.entries``; C: ``_addentries.c``, whose one Python owner is the
ledger handle, :mod:`.ledger_handle`):

* :data:`~WriterAdds.entries` -- ``(package, add_part, ledger_id, master_key, recovery)`` -> a
  writer's maker of entries encoded at once (:class:`~.pending_add.Entries`);
* :data:`~WriterAdds.address_run` -- :func:`~.pending_add.address_run`;
* :data:`~WriterAdds.acks` -- the acknowledgement counter's class (:class:`~.acks.Acks`).

tests/unit/test_client_add_copies.py, test_client_address_run.py and test_client_acks.py run
the same checks on both twins of each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from . import pending_add
from .acks import Acks

__all__ = ["ConnectionAdds", "WriterAdds", "connection_adds_of", "copies_of", "writer_adds_of"]


def py_add_copies(
    adds: Sequence[Any],
    ctxs: Sequence[Any],
    slots: Sequence[Any],
    on_done: Callable[..., Any],
    ids: Iterator[int],
    decode: Callable[..., Any],
    general: Callable[[Any, int], tuple[Any, bytes | None]],
) -> tuple[list[Any], bytes]:
    """The copies of ``adds``, each ``general(add, next(ids))`` (:func:`copies_of`).
    ``decode`` is what the C twin gives its copies (a general request has its own)."""
    return copies_of(adds, ctxs, slots, on_done, lambda add: general(add, next(ids)))


def copies_of(
    adds: Sequence[Any],
    ctxs: Sequence[Any],
    slots: Sequence[Any],
    on_done: Callable[..., Any],
    build: Callable[[Any], tuple[Any, bytes | None]],
) -> tuple[list[Any], bytes]:
    """The copies of ``adds`` (each ``build(add)``: its request and the bytes to write, or None
    for a request built the general way, whose frame then goes out with the others), completing
    through ``on_done`` with the ``ctxs`` and ``slots`` beside them: the requests, and their
    frames joined.  The Python twin's loop, and a v2 connection's (whose copies take no txnId)."""
    reqs = []
    frames = []
    for add, ctx, slot in zip(adds, ctxs, slots):
        req, data = build(add)
        if data is None:  # built the general way: its frame goes out with the others
            data, req.frame = req.frame, b""
        req.on_done = on_done
        req.ctx = ctx
        req.slot = slot
        reqs.append(req)
        frames.append(data)
    return reqs, b"".join(frames)


def py_register_all(reqs: list[Any], start: int, sent: Any, pending: dict[int, Any], fast: dict[bytes, Any]) -> int:
    """No Python request is a C copy: registers none (``RequestTable`` registers them)."""
    return start


def py_take_adds(
    payloads: list[bytes],
    start: int,
    fast: dict[bytes, Any],
    pending: dict[int, Any],
    sent: Any,
    table: Any,
    queue: Any,
    pump: Callable[[], Any],
    bookie_id: str,
) -> int:
    """No Python request is a C copy: takes no answer (``RequestTable`` takes them)."""
    return start


class ConnectionAdds(NamedTuple):
    """A connection's ADD copies (see the module documentation); ``c`` the C module the twins
    come from, or None for the Python ones."""

    add_copies: Callable[..., tuple[list[Any], bytes]]
    register_all: Callable[[list[Any], int, Any, dict[int, Any], dict[bytes, Any]], int]
    take_adds: Callable[..., int]
    c: ModuleType | None = None


class WriterAdds(NamedTuple):
    """A writer's entries (see the module documentation); ``c`` the C module the twins come
    from, or None for the Python ones."""

    entries: Callable[..., Callable[[int, int, int, bytes, Any], Any]]
    address_run: Callable[..., dict[str, tuple[list[Any], list[Any], list[int]]]]
    acks: Callable[..., Acks]
    c: ModuleType | None = None


#: The Python twins (the reference).
PYTHON_CONNECTION = ConnectionAdds(py_add_copies, py_register_all, py_take_adds)
PYTHON_WRITER = WriterAdds(pending_add.Entries, pending_add.address_run, Acks)


def connection_adds_of(c: ModuleType | None) -> ConnectionAdds:
    """The C twins of the module ``c`` (``_addpath``, loaded by :mod:`bkctl.wire.fastpath`), or
    :data:`PYTHON_CONNECTION` for None."""
    if c is None:
        return PYTHON_CONNECTION
    return ConnectionAdds(c.add_copies, c.register_all, c.take_adds, c)


def writer_adds_of(c: ModuleType | None) -> WriterAdds:
    """The C twins of the module ``c`` (``_addentries``, loaded by :mod:`bkctl.wire.fastpath`),
    or :data:`PYTHON_WRITER` for None."""
    if c is None:
        return PYTHON_WRITER
    return WriterAdds(c.Entries, c.address_run, c.Acks, c)
