"""bookie_only (wire/fsck/bookie_only.py): the ledgers bookies hold walked beside the
metadata's ids, and bookied's listing of what it holds (``/api/v1/bookie/list_ledgers``)."""

from __future__ import annotations

import json

import pytest
from twisted.internet import defer

from bkctl.wire.fsck.bookie_only import BookieLists, check_bookie_only
from bkctl.wire.fsck.check import BookieRequests
from bkctl.wire.fsck.findings import Kind, Severity
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool
from tests.support.http import FakeStatus, body, code, render

A, B, C = (f"10.0.2.{i}:3181" for i in range(1, 4))


def test_ids_a_bookie_holds_that_the_walk_passes_without_meeting_are_named_in_order():
    lists = BookieLists({A: [1, 3, 5, 9], B: [3, 4, 9, 12], C: []})
    walk = [1, 5, 6, 10]  # the metadata's ids, ascending
    named = [x for lid in walk for x in lists.passed(lid)] + list(lists.rest())
    assert named == [(3, [A, B]), (4, [B]), (9, [A, B]), (12, [B])]


def test_a_bookie_holding_only_what_the_metadata_names_gives_nothing():
    lists = BookieLists({A: [2, 7], B: [7]})
    assert [x for lid in (2, 7, 8) for x in lists.passed(lid)] + list(lists.rest()) == []


def test_the_finding_names_the_bookies_and_the_entries_each_holds():
    pool = FakePool(auto=True)
    for e in range(4):
        pool.get(A).stored[(77, e)] = b"x"
    pool.get(B).stored[(77, 2)] = b"x"
    found = successResultOf(defer.ensureDeferred(check_bookie_only(BookieRequests(pool), 77, [A, B])))
    assert (found.kind, found.severity, found.held) == (
        Kind.BOOKIE_ONLY,
        Severity.REPAIRABLE,
        {A: [(0, 3)], B: [(2, 2)]},
    )
    assert found.to_json()["held"] == {A: [[0, 3]], B: [[2, 2]]}
    assert f"{A} (4 entries: 0-3)" in found.text() and f"{B} (1 entry: 2)" in found.text()


def test_bookied_lists_the_ledgers_it_holds_ascending():
    status = FakeStatus()
    status.ledgers = {9, 2, 40}
    encoded = []  # off the reactor: a million ids take a while to encode

    def at_once(fn, *args):
        encoded.append(fn)
        return defer.maybeDeferred(fn, *args)

    req = render(status, "/api/v1/bookie/list_ledgers", run_blocking=at_once)
    assert code(req) == 200 and json.loads(body(req)) == {"ledgers": [2, 9, 40]} and len(encoded) == 1
    assert code(render(status, "/api/v1/bookie/list_ledgers", b"PUT")) == 405


def test_the_bookies_lists_are_read_into_arrays_never_as_lists_of_ints(monkeypatch):
    """At 10^6 ledgers each of 3 bookies lists up to 10^6 ids: decoded as JSON, one bookie's
    answer was its text and a list of ints (~60 MB of fsck's peak, growing with the ledgers);
    each is read into an array (8 bytes an id) as its answer comes, in chunks, taken as is
    when ascending (sorted when not)."""
    import tracemalloc
    from types import SimpleNamespace

    from bkctl.ops import bookie_http, ledger_fsck

    n = 100_000
    texts = {f"h{i}": json.dumps({"ledgers": list(range(i, 3 * n, 3))}).encode() for i in range(3)}
    texts["h3"] = json.dumps({"ledgers": [9, 4, 1]}).encode()  # not ascending: sorted
    texts["h4"] = b'{"ledgers":[1,"x"]}'
    chunk = 64 * 1024

    def read_chunks(address, *_a, **_k):
        text = texts[address]
        return (text[i : i + chunk] for i in range(0, len(text), chunk))

    monkeypatch.setattr(bookie_http, "http_address", lambda _store, bookie: "h" + bookie[-1])
    monkeypatch.setattr(bookie_http, "read_chunks", read_chunks)
    run = ledger_fsck.FsckRun(SimpleNamespace(client=SimpleNamespace(store=None)))
    tracemalloc.start()
    try:
        lists = run.bookie_lists(frozenset({"b0", "b1", "b2", "b3", "b4"}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lists is not None and lists.bookies == ["b0", "b1", "b2", "b3"]
    assert run.totals.not_checked == {"b4": f"{ledger_fsck.LIST_LEDGERS} answered without a list of ledger ids"}
    named = list(lists.rest())
    assert named[:5] == [(0, ["b0"]), (1, ["b1", "b3"]), (2, ["b2"]), (3, ["b0"]), (4, ["b1", "b3"])]
    assert len(named) == 3 * n
    # the arrays (8 bytes an id, one growing) and a chunk's ids: no list of a bookie's ints (36 an id)
    assert peak < 4 * n * 8 + 10 * chunk, peak


def test_a_listing_is_read_in_chunks_split_anywhere_and_anything_else_refused():
    from bkctl.wire.fsck.bookie_only import listed_ids

    def chunks(text: str, size: int) -> list[bytes]:
        data = text.encode()
        return [data[i : i + size] for i in range(0, len(data), size)] or [b""]

    good = [
        json.dumps({"ledgers": list(range(5, 3000, 7))}),
        json.dumps({"ledgers": list(range(5, 300))}, separators=(",", ":")),
        '{"ledgers":[]}',
        '{ "ledgers" : [ 1 , 2 ] }\n',
    ]
    for text in good:
        for size in (1, 2, 3, 7, 100, 1 << 20):
            assert list(listed_ids(chunks(text, size))) == json.loads(text)["ledgers"], (text[:30], size)
    bad = [
        '{"ledgers":[1,"a"]}',
        "[1,2]",
        '{"ledgers":[1,2',
        '{"ledgers":[1,2]}x',
        '{"ledgers":[1,]}',
        '{"ledgers":[,]}',
    ]
    bad += ['{"ledgers":"x"}', '{"ledgers":[1.5]}', "", '{"other":[1]}', '{"ledgers":[99999999999999999999999]}']
    for text in bad:
        for size in (1, 3, 100):
            with pytest.raises((ValueError, OverflowError)):
                listed_ids(chunks(text, size))
