"""A live subscription's position as its broker would recover it (``bkctl pulsar
topic show``, ``export --subscription``): the shared vector k_cursor_unconfirmed
(a cursor ledger left open, whose newest PositionInfo lies past the LAC readers
see) loaded into fake bookies as its broker wrote it, and read by the real
client code without fencing anything."""

from __future__ import annotations

import json

import pytest

from bkctl.ops import pulsar as ops
from bkctl.ops.results import to_json
from bkctl.wire.domain.topic_state import CursorFallback, cursor_state
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support import pulsar_entries as pe
from tests.support.deferreds import successResultOf
from tests.support.ledger_client import (
    B,
    create,
    forget_reactors,  # noqa: F401 (an autouse fixture)
    make_client,
    settled,
)

CASE = "k_cursor_unconfirmed"
SUB = "sub-live"


def result(d):
    """What a settled Deferred fired with, raised when it is a failure (as the blocking client does)."""
    got = []
    settled(d).addBoth(got.append)
    assert got, "the Deferred did not fire"
    if hasattr(got[0], "raiseException"):
        got[0].raiseException()
    return got[0]


class SyncHandle:
    """The blocking handle ops use (BlockingLedger's reads), over the Twisted one."""

    def __init__(self, handle):
        self.handle = handle
        self.is_closed = handle.is_closed

    def read_tail(self):
        return result(self.handle.read_tail())

    def read_entry(self, entry_id, allow_unconfirmed=False):
        return result(self.handle.read_entry(entry_id, allow_unconfirmed=allow_unconfirmed))

    def read(self, first, last, allow_unconfirmed=False):
        return result(self.handle.read_entries(first, last, allow_unconfirmed=allow_unconfirmed))


class SyncBK:
    def __init__(self, client):
        self.client = client
        self.opened = []

    def open(self, ledger_id):
        self.opened.append(ledger_id)
        return SyncHandle(result(self.client.open_ledger(ledger_id)))


def _rewrite(position, ids):
    """A PositionInfo / ManagedCursorInfo of the vector, its ledger ids made ours."""
    for r in position.individualDeletedMessages:
        r.lowerEndpoint.ledgerId = ids[r.lowerEndpoint.ledgerId]
        r.upperEndpoint.ledgerId = ids[r.upperEndpoint.ledgerId]
    return position


def load_case(close_cursor_ledger=False):
    """The case as its broker left it: the topic ledger (closed), the cursor
    ledger written and left open, the managed ledger and cursor znodes."""
    doc = json.loads((pe.vectors_dir() / "expected" / f"{CASE}.json").read_text())
    client, store, pool = make_client()
    for b in B[:4]:
        pool.get(b).auto = True
    custom = {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": doc["managed_ledger_name"].encode(),
    }
    data = create(client, custom_metadata=custom)
    for entry in pe.case_entries(CASE):
        successResultOf(settled(data.add_entry(entry)))
    successResultOf(settled(data.close()))
    writer = create(client, custom_metadata={**custom, "pulsar/cursor": SUB.encode()})
    ids = {1000: data.ledger_id, 1001: writer.ledger_id}
    folder = pe.vectors_dir() / "cursors" / CASE / SUB
    for f in sorted((folder / "ledger").glob("*.bin"), key=lambda p: int(p.stem)):
        position = _rewrite(ml.PositionInfo.FromString(f.read_bytes()), ids)
        position.ledgerId = ids[position.ledgerId]
        successResultOf(settled(writer.add_entry(position.SerializeToString())))
    if close_cursor_ledger:
        successResultOf(settled(writer.close()))
    info = _rewrite(ml.ManagedCursorInfo.FromString((folder / "managed_cursor_info.bin").read_bytes()), ids)
    info.cursorsLedgerId = ids[info.cursorsLedgerId]
    info.markDeleteLedgerId = ids[info.markDeleteLedgerId]
    mli = ml.ManagedLedgerInfo()
    mli.ledgerInfo.add(ledgerId=data.ledger_id, entries=10, size=sum(map(len, pe.case_entries(CASE))), timestamp=1)
    store.pulsar.put_managed_ledger(
        doc["managed_ledger_name"], mli.SerializeToString(), {SUB: info.SerializeToString()}
    )
    return doc, client, store, pool, data.ledger_id, writer


def test_the_newest_position_is_the_cursor_ledgers_last_entry_past_the_lac_and_nothing_is_fenced():
    doc, client, store, pool, data_id, writer = load_case()
    sub = doc["subscriptions"][SUB]
    bk = SyncBK(client)
    info = ml.ManagedCursorInfo.FromString(
        store.pulsar.managed_ledger("/managed-ledgers", doc["managed_ledger_name"], True).cursors[SUB]
    )
    state, source = cursor_state(info, lambda: bk)
    assert state.mark_delete == (
        data_id,
        sub["newest_position"]["mark_delete"][1],
    )  # 6, not the LAC's 4 or the znode's 1
    assert state.ranges == []
    assert (source.kind, source.ledger, source.entry, source.lac, source.fallback) == (
        "beyond-lac",
        writer.ledger_id,
        3,
        sub["cursor_ledger"]["lac_seen_by_readers"],
        None,
    )
    assert str(source) == f"cursor ledger {writer.ledger_id} entry 3 (beyond the LAC 2)"
    # nothing fenced, nothing closed: the broker's next mark-delete goes in
    assert not any(conn.fenced for conn in pool.conns.values())
    md, _ = store.ledgers.read(writer.ledger_id)
    assert not md.is_closed
    assert successResultOf(settled(writer.add_entry(b"next mark-delete"))) == 4


def test_topic_show_gives_the_vectors_backlog_in_entries_messages_and_bytes():
    doc, client, store, pool, data_id, writer = load_case()
    sub = doc["subscriptions"][SUB]
    bk = SyncBK(client)
    shown = to_json(ops.show_topic(store, doc["topic"], bk=lambda: bk))
    [cursor] = shown["partitions"][0]["cursors"]
    entries = pe.case_entries(CASE)
    unacked = [e for _, e in sub["unacked_entries"]]
    assert (cursor["mark_delete"], cursor["position_source"], cursor["fallback"]) == (
        f"{data_id}:6",
        "beyond-lac",
        None,
    )
    assert (cursor["backlog_entries"], cursor["backlog_messages"]) == (sub["backlog_entries"], sub["backlog_messages"])
    assert cursor["backlog_bytes"] == sum(len(entries[e]) for e in unacked) and cursor["backlog_bytes_exact"]
    assert shown["warnings"] == []


def test_short_topic_names_resolve_to_the_same_topic():
    doc, client, store, pool, data_id, writer = load_case()
    short = doc["topic"].removeprefix("persistent://public/default/")
    assert to_json(ops.show_topic(store, short))["topic"] == doc["topic"]
    assert to_json(ops.show_topic(store, "public/default/" + short))["topic"] == doc["topic"]


def test_a_closed_cursor_ledger_gives_its_last_entry():
    doc, client, store, pool, data_id, writer = load_case(close_cursor_ledger=True)
    bk = SyncBK(client)
    shown = to_json(ops.show_topic(store, doc["topic"], bk=lambda: bk))
    [cursor] = shown["partitions"][0]["cursors"]
    assert (cursor["mark_delete"], cursor["position_source"]) == (f"{data_id}:6", "cursor-ledger")
    assert cursor["position_from"] == f"cursor ledger {writer.ledger_id} entry 3"


def test_a_cursor_ledger_that_is_gone_falls_back_to_the_znode_with_a_warning_and_strict_refuses():
    doc, client, store, pool, data_id, writer = load_case(close_cursor_ledger=True)
    store.ledgers.delete(writer.ledger_id)
    bk = SyncBK(client)
    shown = to_json(ops.show_topic(store, doc["topic"], bk=lambda: bk))
    [cursor] = shown["partitions"][0]["cursors"]
    assert (cursor["mark_delete"], cursor["position_source"]) == (f"{data_id}:1", "znode")
    assert cursor["fallback"] == f"cursor ledger {writer.ledger_id} is gone"
    assert shown["warnings"] == [
        f"{doc['topic']} cursor {SUB}: position from its znode (cursor ledger "
        f"{writer.ledger_id} is gone), which is older than the position its broker holds"
    ]
    with pytest.raises(CursorFallback, match="is gone"):
        ops.show_topic(store, doc["topic"], bk=lambda: bk, strict=True)


def test_a_cursor_without_a_ledger_is_read_from_its_znode_without_a_warning():
    doc, client, store, pool, data_id, writer = load_case()
    info = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=data_id, markDeleteEntryId=8)
    store.pulsar.put_managed_ledger(
        doc["managed_ledger_name"],
        store.pulsar.managed_ledger("/managed-ledgers", doc["managed_ledger_name"], False).value,
        {SUB: info.SerializeToString()},
    )
    bk = SyncBK(client)
    shown = to_json(ops.show_topic(store, doc["topic"], bk=lambda: bk))
    [cursor] = shown["partitions"][0]["cursors"]
    assert (cursor["position_source"], cursor["fallback"], cursor["backlog_entries"]) == ("znode", None, 1)
    assert shown["warnings"] == []
