"""The add path's twins as two interfaces, each implemented whole in C and whole in Python; the
twin selector records one of each (:mod:`bkctl.wire.fastpath`) and the components are handed it.

:class:`ConnectionAdds` (``Twins.adds``; C: ``_addpath.c``, whose one Python owner is the
connection, through its :class:`~.requests.RequestTable` and :class:`~.entry_requests.EntryRequests`):

* :data:`~ConnectionAdds.add_copies` -- ``(adds, slots, on_done, ids, decode, general)`` ->
  ``(reqs, data)``: a connection's v3 copies of a run of encoded adds (each its copy's ``ctx``),
  each its own txnId from ``ids``, and their frames joined (Python: :func:`py_add_copies`, every copy built by
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

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from bkctl.wire.codecs.add_frames import AddFields

from . import pending_add
from .acks import AckCounter, Acks, AckSink
from .channel import AddDone
from .pending_add import PendingEntry, WriteSets

if TYPE_CHECKING:
    from twisted.internet import defer

__all__ = [
    "AddEntriesModule",
    "AddPathModule",
    "ConnectionAdds",
    "WriterAdds",
    "connection_adds_of",
    "copies_of",
    "writer_adds_of",
]


class AnsweredTable(Protocol):
    """What ``take_adds`` reads of the connection's :class:`~.requests.RequestTable`: whether a
    callback emptied it (its generation moves when the connection went away)."""

    generation: int


#: a copy's request (:class:`~.requests.Request`, or the C twin's ``AddCopy``, which keeps to its
#: interface) and the bytes to write (None: built the general way, its frame in ``req.frame``)
Copy = tuple[Any, "bytes | None"]
#: an answer's decoder: ``msg`` -> ``(rc, value)``
Decode = Callable[[Any], tuple[int, Any]]
#: ``(add, txn)`` -> the copy built the general way (``EntryRequests``' own)
GeneralCopy = Callable[[AddFields, int], Copy]
#: ``add_copies(adds, slots, on_done, ids, decode, general)`` -> ``(reqs, data)``
AddCopies = Callable[
    [Sequence[AddFields], list[int], AddDone, Iterator[int], Decode, GeneralCopy], tuple[list[Any], bytes]
]
#: ``register_all(reqs, start, sent, pending, fast)`` -> the first request not registered
RegisterAll = Callable[[list[Any], int, dict[Any, None], dict[int, Any], dict[bytes, Any]], int]
#: ``take_adds(payloads, start, fast, pending, sent, table, queue, pump, bookie_id)`` -> the first
#: answer not taken
TakeAdds = Callable[
    [
        list[bytes],
        int,
        dict[bytes, Any],
        dict[int, Any],
        dict[Any, None],
        "AnsweredTable",
        deque[Any],
        Callable[[], object],
        str,
    ],
    int,
]
#: packages an entry: ``(ledger_id, entry_id, lac, length, payload)`` -> its bytes
Package = Callable[[int, int, int, int, bytes], bytes]
#: an ADD's shared v3 bytes: ``(ledger_id, entry_id, master_key, body, recovery)`` -> ``(part, tail)``
AddPart = Callable[[int, int, bytes, bytes, bool], tuple[bytes, bytes]]
#: a writer's maker of entries: ``(entry_id, lac, length, payload, deferred)`` -> the entry
MakeEntry = Callable[[int, int, int, bytes, "defer.Deferred[int] | None"], PendingEntry]
#: ``entries(package, add_part, ledger_id, master_key, recovery)`` -> a :data:`MakeEntry`
MakeEntries = Callable[[Package, AddPart, int, bytes, bool], MakeEntry]
#: ``address_run(run, cursor)`` -> ``{bookie: (entries, slots)}``
AddressRun = Callable[[list[PendingEntry], WriteSets], dict[str, tuple[list[PendingEntry], list[int]]]]
#: ``acks(sink, ack_quorum, max_inflight, resume_at)`` -> the counter
MakeAcks = Callable[[AckSink, int, int, int], AckCounter]


class AddPathModule(Protocol):
    """The slot ``_addpath`` (C) fills: what :func:`connection_adds_of` takes; the twin selector
    holds the C module's stub to it (``bkctl.wire.fastpath``, under TYPE_CHECKING: mypy fails when
    the stub does not fit)."""

    @property
    def add_copies(self) -> AddCopies: ...

    @property
    def register_all(self) -> RegisterAll: ...

    @property
    def take_adds(self) -> TakeAdds: ...


class AddEntriesModule(Protocol):
    """The slot ``_addentries`` (C) fills: what :func:`writer_adds_of` takes (held to it as
    :class:`AddPathModule` is)."""

    @property
    def Entries(self) -> MakeEntries: ...  # noqa: N802 - the C module's class

    @property
    def address_run(self) -> AddressRun: ...

    @property
    def Acks(self) -> MakeAcks: ...  # noqa: N802 - the C module's class


def py_add_copies(
    adds: Sequence[AddFields],
    slots: list[int],
    on_done: AddDone,
    ids: Iterator[int],
    decode: Decode,
    general: GeneralCopy,
) -> tuple[list[Any], bytes]:
    """The copies of ``adds``, each ``general(add, next(ids))`` (:func:`copies_of`).
    ``decode`` is what the C twin gives its copies (a general request has its own)."""
    return copies_of(adds, slots, on_done, lambda add: general(add, next(ids)))


def copies_of(
    adds: Sequence[AddFields], slots: list[int], on_done: AddDone, build: Callable[[AddFields], Copy]
) -> tuple[list[Any], bytes]:
    """The copies of ``adds`` (each ``build(add)``: its request and the bytes to write, or None
    for a request built the general way, whose frame then goes out with the others), completing
    through ``on_done`` with the add as ``ctx`` and the ``slots`` beside them: the requests, and
    their frames joined.  The Python twin's loop, and a v2 connection's (whose copies take no txnId)."""
    reqs = []
    frames = []
    for add, slot in zip(adds, slots):
        req, data = build(add)
        if data is None:  # built the general way: its frame goes out with the others
            data, req.frame = req.frame, b""
        req.on_done = on_done
        req.ctx = add
        req.slot = slot
        reqs.append(req)
        frames.append(data)
    return reqs, b"".join(frames)


def py_register_all(
    reqs: list[Any], start: int, sent: dict[Any, None], pending: dict[int, Any], fast: dict[bytes, Any]
) -> int:
    """No Python request is a C copy: registers none (``RequestTable`` registers them)."""
    return start


def py_take_adds(
    payloads: list[bytes],
    start: int,
    fast: dict[bytes, Any],
    pending: dict[int, Any],
    sent: dict[Any, None],
    table: AnsweredTable,
    queue: deque[Any],
    pump: Callable[[], object],
    bookie_id: str,
) -> int:
    """No Python request is a C copy: takes no answer (``RequestTable`` takes them)."""
    return start


class ConnectionAdds(NamedTuple):
    """A connection's ADD copies (see the module documentation); ``c`` the C module the twins
    come from, or None for the Python ones."""

    add_copies: AddCopies
    register_all: RegisterAll
    take_adds: TakeAdds
    c: AddPathModule | None = None


class WriterAdds(NamedTuple):
    """A writer's entries (see the module documentation); ``c`` the C module the twins come
    from, or None for the Python ones."""

    entries: MakeEntries
    address_run: AddressRun
    acks: MakeAcks
    c: AddEntriesModule | None = None


#: The Python twins (the reference).
PYTHON_CONNECTION = ConnectionAdds(py_add_copies, py_register_all, py_take_adds)
PYTHON_WRITER = WriterAdds(pending_add.Entries, pending_add.address_run, Acks)


def connection_adds_of(c: AddPathModule | None) -> ConnectionAdds:
    """The C twins of the module ``c`` (``_addpath``, loaded by :mod:`bkctl.wire.fastpath`), or
    :data:`PYTHON_CONNECTION` for None."""
    if c is None:
        return PYTHON_CONNECTION
    return ConnectionAdds(c.add_copies, c.register_all, c.take_adds, c)


def writer_adds_of(c: AddEntriesModule | None) -> WriterAdds:
    """The C twins of the module ``c`` (``_addentries``, loaded by :mod:`bkctl.wire.fastpath`),
    or :data:`PYTHON_WRITER` for None."""
    if c is None:
        return PYTHON_WRITER
    return WriterAdds(c.Entries, c.address_run, c.Acks, c)
