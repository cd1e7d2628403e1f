"""A connection's requests other than ADD and READ: the long-poll READ, BATCH_READ,
READ_LAC, WRITE_LAC, FORCE_LEDGER, GET_BOOKIE_INFO and GET_LIST_OF_ENTRIES_OF_LEDGER.

:class:`OpRequests` is the builder one connection keeps (its protocol version and
txnId counter): each operation becomes an :class:`OpRequest` -- what the errors call
it, the key its answer is matched by, its payload, the decoder of its answer and its
v3 operation -- or, for one its protocol version cannot carry, an :class:`OpRequest`
without a payload.  When and how it goes out, and with which timeout, is the
connection's business (:meth:`~.connection.BookieConnection.read_lac`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from bkctl.wire.codecs import answers, v2, v3
from bkctl.wire.codecs.protocol import LAST_ADD_CONFIRMED, V2_CURRENT_VERSION, Flag, OpCode, OperationType

from .entry_requests import check_master_key

__all__ = ["OpRequest", "OpRequests"]

_OP_READ = int(OperationType.READ_ENTRY)
_OP_READ_LAC = int(OperationType.READ_LAC)
_OP_WRITE_LAC = int(OperationType.WRITE_LAC)
_OP_FORCE = int(OperationType.FORCE_LEDGER)
_OP_BOOKIE_INFO = int(OperationType.GET_BOOKIE_INFO)
_OP_LIST_ENTRIES = int(OperationType.GET_LIST_OF_ENTRIES_OF_LEDGER)
_OPC_BATCH_READ = int(OpCode.BATCH_READ_ENTRY)
_WRITE_LAC_ANSWER = answers.v3_expect("writeLacResponse")
_FORCE_ANSWER = answers.v3_expect("forceLedgerResponse")


class OpRequest(NamedTuple):
    """One operation's request (see the module); ``payload`` None: not over this protocol."""

    what: str
    key: Any = None
    payload: bytes | None = None
    decode: Callable[[Any], tuple[int, Any]] | None = None
    op: int | None = None
    is_batch: bool = False


class OpRequests:
    """The builder of one connection's other requests (``use_v3``: its protocol; ``ids``: its
    txnId and v2 requestId counter, shared with its ADDs and READs)."""

    __slots__ = ("use_v3", "ids")

    def __init__(self, use_v3: bool, ids: Iterator[int]) -> None:
        self.use_v3 = use_v3
        self.ids = ids

    def _v3(
        self, what: str, build: Callable[[int], Any], decode: Callable[[Any], tuple[int, Any]], op: int
    ) -> OpRequest:
        if not self.use_v3:
            return OpRequest(what)
        txn = next(self.ids)
        return OpRequest(what, txn, v3.serialize(build(txn)), decode, op)

    def long_poll(self, ledger_id: int, previous_lac: int, timeout_ms: int, piggyback: bool) -> OpRequest:
        what = f"long-poll READ ledger {ledger_id} after LAC {previous_lac}"
        if not self.use_v3:
            return OpRequest(what)
        if timeout_ms < 0:
            raise ValueError("timeout_ms must not be negative")
        return self._v3(
            what,
            lambda txn: v3.read_request(
                txn,
                ledger_id,
                LAST_ADD_CONFIRMED,
                previous_lac=previous_lac,
                timeout_ms=timeout_ms,
                piggyback=piggyback,
            ),
            answers.v3_long_poll,
            _OP_READ,
        )

    def batch_read(
        self,
        what: str,
        ledger_id: int,
        start_entry_id: int,
        max_count: int,
        max_size: int,
        fence_master_key: bytes | None,
    ) -> OpRequest:
        """A v2 BATCH_READ (the caller checked that the protocol is v2 and the key)."""
        request_id = next(self.ids)
        flags = Flag.DO_FENCING if fence_master_key is not None else 0
        payload = v2.BatchReadRequest(
            V2_CURRENT_VERSION,
            int(flags),
            ledger_id,
            start_entry_id,
            request_id,
            max_count,
            max_size,
            None if fence_master_key is None else bytes(fence_master_key),
        ).encode()
        return OpRequest(what, (_OPC_BATCH_READ, request_id), payload, answers.v2_batch_read, is_batch=True)

    def read_lac(self, ledger_id: int) -> OpRequest:
        return self._v3(
            f"READ_LAC ledger {ledger_id}",
            lambda txn: v3.read_lac_request(txn, ledger_id),
            answers.v3_read_lac,
            _OP_READ_LAC,
        )

    def write_lac(self, ledger_id: int, lac: int, master_key: bytes, body: bytes) -> OpRequest:
        check_master_key(master_key)
        return self._v3(
            f"WRITE_LAC ledger {ledger_id} lac {lac}",
            lambda txn: v3.write_lac_request(txn, ledger_id, lac, master_key, body),
            _WRITE_LAC_ANSWER,
            _OP_WRITE_LAC,
        )

    def force_ledger(self, ledger_id: int) -> OpRequest:
        return self._v3(
            f"FORCE_LEDGER ledger {ledger_id}",
            lambda txn: v3.force_ledger_request(txn, ledger_id),
            _FORCE_ANSWER,
            _OP_FORCE,
        )

    def bookie_info(self, requested: int) -> OpRequest:
        return self._v3(
            "GET_BOOKIE_INFO",
            lambda txn: v3.get_bookie_info_request(txn, requested),
            answers.v3_bookie_info,
            _OP_BOOKIE_INFO,
        )

    def entry_availability(self, ledger_id: int) -> OpRequest:
        return self._v3(
            f"GET_LIST_OF_ENTRIES_OF_LEDGER ledger {ledger_id}",
            lambda txn: v3.get_list_of_entries_request(txn, ledger_id),
            answers.v3_entry_list,
            _OP_LIST_ENTRIES,
        )
