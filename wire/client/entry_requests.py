"""A connection's ADD and READ requests (the hot ones), built the general
way or the fast way (:mod:`bkctl.wire.fastpath`).

:class:`EntryRequests` is the builder one connection keeps: its protocol
version, its fast-path switch, the reused v3 request encoder and the
connection's txnId counter are its own state.  It only builds
:class:`~bkctl.wire.client.requests.Request` objects (and, on the fast
paths, the bytes to write at once); when and how they go out is the
connection's business.  The fast paths write frames encoded by hand (a v3
READ, an ADD encoded once for its write set:
:class:`~bkctl.wire.codecs.add_frames.EncodedAdd`) and mark requests whose
EOK answers are recognized without being parsed (``req.fast``, ``req.ok``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence

from bkctl.wire.codecs import answers, v2, v3, v3_fast
from bkctl.wire.codecs.add_frames import AddFields, EncodedAdd
from bkctl.wire.codecs.framing import frame, length_prefix
from bkctl.wire.codecs.protocol import MASTER_KEY_LENGTH, V2_CURRENT_VERSION, Flag, OpCode, OperationType
from bkctl.wire.fastpath import Twins

from .add_twins import copies_of
from .channel import AddDone, ReadDone
from .requests import Request

__all__ = ["EntryRequests", "check_master_key"]

_IDS = struct.Struct(">qq")
_OP_ADD = int(OperationType.ADD_ENTRY)
_OP_READ = int(OperationType.READ_ENTRY)
_OPC_ADD = int(OpCode.ADD_ENTRY)
_OPC_READ = int(OpCode.READ_ENTRY)
_FLAG_RECOVERY_ADD = int(Flag.RECOVERY_ADD)
_FLAG_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)


def check_master_key(master_key: bytes) -> None:
    """ValueError unless ``master_key`` has the 20 bytes of a SHA-1."""
    if len(master_key) != MASTER_KEY_LENGTH:
        raise ValueError(f"master key must be {MASTER_KEY_LENGTH} bytes, not {len(master_key)}")


class EntryRequests:
    """Builds the ADD and READ requests of one connection (``use_v3``, with
    the fast paths when ``twins.enabled``: :mod:`bkctl.wire.fastpath`), taking
    txnIds from ``txn_ids``."""

    __slots__ = ("use_v3", "fastpaths", "_ids", "_encoder", "_read_frame", "_add_frame", "_add_copies", "encoded_add")

    def __init__(self, use_v3: bool, twins: Twins, txn_ids: Iterator[int]):
        self.use_v3 = use_v3
        self.fastpaths = twins.enabled
        self._ids = txn_ids
        #: the reused v3 request encoder (a v2 connection has one too, never used: one type)
        self._encoder = v3_fast.RequestEncoder()
        #: a plain READ's frame and an ADD copy's (the fast paths): the twins of the client's
        #: codecs in use (``Twins.codec``)
        self._read_frame = twins.codec.read_frame
        self._add_frame = twins.codec.add_frame
        #: :meth:`encoded_adds` over v3 with fast paths on: the twin in use (``Twins.adds``)
        self._add_copies = twins.adds.add_copies
        #: ``encoded_add(add)`` -> ``(req, data)``: the request of an ADD encoded once for its whole
        #: write set, for a connection with room on the wire, ``data`` the bytes to write at once
        #: (the shared bytes with this connection's v3 header, or the v2 frame as it is: a fast
        #: path; :meth:`fast_add`), or None for a request built the general way, its frame in
        #: ``req.frame`` (:meth:`general_add`: the only way with fast paths off, bound here so
        #: that the general path's every copy is one call)
        self.encoded_add: Callable[[AddFields], tuple[Request, bytes | None]] = (
            self.fast_add if self.fastpaths else self.general_add
        )

    def general_add(self, add: AddFields, txn: int | None = None) -> tuple[Request, None]:
        """``(req, None)``: the request of ``add`` built the general way, its frame in ``req.frame``
        (:attr:`encoded_add` of any ADD with fast paths off, of one the fast path does not send
        as encoded with them on); v3: with ``txn``, else the next txnId.  Only an EncodedAdd of its fields carries DEFERRED_SYNC (a writer's entries,
        the C twin's too, never do).  Argument errors raise ValueError (DEFERRED_SYNC over v2
        too: the connection refuses it first)."""
        ledger_id = add.ledger_id  # one by one: four names at once would build and unpack a tuple
        entry_id = add.entry_id
        master_key = add.master_key
        body = add.body
        recovery = add.recovery
        high_priority = add.high_priority
        deferred_sync = add.deferred_sync if type(add) is EncodedAdd else False
        if len(master_key) != MASTER_KEY_LENGTH:
            check_master_key(master_key)
        if self.use_v3:
            if txn is None:
                txn = next(self._ids)
            if not self.fastpaths:
                payload = v3.serialize(
                    v3.add_request(
                        txn,
                        ledger_id,
                        entry_id,
                        master_key,
                        body,
                        recovery=recovery,
                        high_priority=high_priority,
                        deferred_sync=deferred_sync,
                    )
                )
                ok = None
            elif recovery or high_priority or deferred_sync:
                payload = self._encoder.add(
                    txn,
                    ledger_id,
                    entry_id,
                    master_key,
                    body,
                    recovery=recovery,
                    high_priority=high_priority,
                    deferred_sync=deferred_sync,
                )
                ok = None
            else:
                payload, ok = self._encoder.add_and_reply(txn, ledger_id, entry_id, master_key, body)
            req = Request(None, txn, frame(payload), answers.v3_add)
            req.op = _OP_ADD
            if ok is not None:
                head = payload[: 2 + payload[1]]
                req.fast = head
                req.ok = ok[len(head) :]
        else:
            if deferred_sync:
                raise ValueError("DEFERRED_SYNC is not carried over protocol v2")
            if type(body) is not bytes:
                body = bytes(body)
            if len(body) < _IDS.size or _IDS.unpack_from(body) != (ledger_id, entry_id):
                raise ValueError("a v2 ADD body must start with the same ledger and entry ids")
            flags = (_FLAG_RECOVERY_ADD if recovery else 0) | (_FLAG_HIGH_PRIORITY if high_priority else 0)
            req = Request(
                None,
                (ledger_id, entry_id, _OPC_ADD),
                answers.v2_add_frame(flags, bytes(master_key), body),
                answers.v2_add,
            )
        req.ids = (ledger_id, entry_id)
        return req, None

    def fast_add(self, add: AddFields) -> tuple[Request, bytes | None]:
        """:attr:`encoded_add` with fast paths on: the shared bytes with this connection's v3
        header, or the v2 frame as it is; :meth:`general_add` for an encoding for the other
        protocol."""
        if self.use_v3:
            return self._encoded_v3(add, next(self._ids))
        data = add.v2_frame
        if data is None:
            return self.general_add(add)
        req = Request(None, (add.ledger_id, add.entry_id, _OPC_ADD), b"", answers.v2_add)
        req.ids = (add.ledger_id, add.entry_id)
        return req, data

    def _encoded_v3(self, add: AddFields, txn: int) -> tuple[Request, bytes | None]:
        """:meth:`encoded_add` over v3 with the txnId ``txn`` (fast paths on)."""
        part = add.v3_part
        if part is None:  # encoded for v2
            return self.general_add(add, txn)
        framed = _priority_frame(txn, part) if add.high_priority else self._add_frame(txn, part)
        if framed is None:  # a txnId upb has its own say about
            return self.general_add(add, txn)
        data, answer_head = framed
        return _v3_add_request(txn, answer_head, add), data

    def encoded_adds(
        self, adds: Sequence[AddFields], slots: list[int], on_done: AddDone
    ) -> tuple[list[Request], bytes]:
        """:meth:`encoded_add` of each of ``adds`` for a connection with room on
        the wire for all of them, each completing through ``on_done`` with itself as ``ctx``
        and the ``slots`` beside it: the requests, and their frames joined
        (v3 with fast paths on: by the twin in use, ``Twins.adds.add_copies``, whose C one
        makes its copies ``AddCopy``)."""
        if self.use_v3 and self.fastpaths:
            return self._add_copies(adds, slots, on_done, self._ids, answers.v3_add, self._encoded_v3)
        # v2, or fast paths off: each copy is encoded_add's (a v2 ADD has no txnId; a v3 one built
        # the general way takes its own)
        return copies_of(adds, slots, on_done, self.encoded_add)

    def plain_read(self, ledger_id: int, entry_id: int) -> tuple[Request, bytes | None]:
        """A plain READ for a connection with room on the wire: ``(req,
        data)`` with the v3 frame encoded by hand to write at once (a fast
        path), or ``(req, None)``: built by :meth:`read`, its frame in
        ``req.frame``."""
        if not (self.use_v3 and self.fastpaths):
            return self.read(ledger_id, entry_id, None, False), None
        reqs, data = self.plain_reads(ledger_id, (entry_id,), None)
        return reqs[0], data

    def plain_reads(
        self, ledger_id: int, entry_ids: Iterable[int], on_done: ReadDone | None
    ) -> tuple[list[Request], bytes]:
        """The plain READs of ``entry_ids`` with their v3 frames encoded by
        hand (v3, fast paths on), each completing through ``on_done`` with its
        entry id as ``ctx`` and slot 0: the requests, and their frames joined."""
        ids = self._ids
        read_frame = self._read_frame
        reqs = []
        frames = []
        for entry_id in entry_ids:
            txn = next(ids)
            data, head = read_frame(txn, ledger_id, entry_id)
            req = Request(None, txn, b"", answers.v3_read)
            req.op = _OP_READ
            req.fast = head
            req.ids = (ledger_id, entry_id)
            req.verb = "READ"
            req.on_done = on_done
            req.ctx = entry_id
            req.slot = 0
            reqs.append(req)
            frames.append(data)
        return reqs, frames[0] if len(frames) == 1 else b"".join(frames)

    def read(self, ledger_id: int, entry_id: int, fence_master_key: bytes | None, high_priority: bool) -> Request:
        """The request of a READ (with ``fence_master_key``: fencing)."""
        plain = fence_master_key is None and not high_priority
        what = None if fence_master_key is None else f"READ ledger {ledger_id} entry {entry_id} (fencing)"
        if self.use_v3:
            txn = next(self._ids)
            if plain and self.fastpaths:
                payload = self._encoder.read(txn, ledger_id, entry_id)
                req = Request(None, txn, frame(payload), answers.v3_read)
                req.fast = payload[: 2 + payload[1]]
            else:
                payload = v3.serialize(
                    v3.read_request(
                        txn, ledger_id, entry_id, fence_master_key=fence_master_key, high_priority=high_priority
                    )
                )
                req = Request(what, txn, frame(payload), answers.v3_read)
            req.op = _OP_READ
        elif plain and self.fastpaths:
            req = Request(
                None,
                (ledger_id, entry_id, _OPC_READ),
                answers.v2_plain_read_frame(ledger_id, entry_id),
                answers.v2_read,
            )
        else:
            flags = (Flag.DO_FENCING if fence_master_key is not None else 0) | (
                Flag.HIGH_PRIORITY if high_priority else 0
            )
            payload = v2.ReadRequest(
                V2_CURRENT_VERSION,
                int(flags),
                ledger_id,
                entry_id,
                None if fence_master_key is None else bytes(fence_master_key),
            ).encode()
            req = Request(what, (ledger_id, entry_id, _OPC_READ), frame(payload), answers.v2_read)
        req.ids = (ledger_id, entry_id)
        req.verb = "READ"
        return req


def _priority_frame(txn: int, part: bytes) -> tuple[bytes, bytes] | None:
    """A high-priority copy of an ADD whose addRequest field is ``part``: its frame and the
    header field of its answer; None for a txnId that is not a uint64."""
    heads = v3_fast.add_header_fields(txn, True)
    if heads is None:
        return None
    head, answer_head = heads
    return b"".join((length_prefix(len(head) + len(part)), head, part)), answer_head


def _v3_add_request(txn: int, answer_head: bytes, add: AddFields) -> Request:
    """The request of a v3 ADD copy on the fast path, whose EOK answer is its
    header field ``answer_head`` followed by the add's ``v3_tail``."""
    req = Request(None, txn, b"", answers.v3_add)
    req.op = _OP_ADD
    req.fast = answer_head
    req.ok = add.v3_tail
    req.ids = (add.ledger_id, add.entry_id)
    return req
