"""Planning and copying for re-replication (wire.client.rereplication), with the fake bookies
(tests/support/fake_bookie.py) and the fake store."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer

from bkctl.ops.bench import percentile
from bkctl.ops.ledgers import entry_doc, entry_line, parse_custom_metadata
from bkctl.ops.results import to_json
from bkctl.wire import fastpath
from bkctl.wire.client.errors import EntryUnrecoverable, LedgerFencedError, NotEnoughBookies, TargetUnusable
from bkctl.wire.client.fragments import Fragment, choose_replacements, fragments_to_rereplicate
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.client.rereplication import replace_in_metadata, replicate_fragment
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.metadata.ledger import LedgerMetadata, write_set_indices
from tests.support.deferreds import failureResultOf, successResultOf
from tests.support.fake_bookie import FakePool
from tests.support.fake_store import FakeMetadataStore

A, B, C, D, E, F = (f"10.0.0.{i}:3181" for i in range(1, 7))


def brute_force(first, last, ensemble, lost, qw):
    positions = {i for i, b in enumerate(ensemble) if b in lost}
    return [e for e in range(first, last + 1) if positions.intersection(write_set_indices(e, len(ensemble), qw))]


# -- which entries a lost bookie held -------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 7), data=st.data())
def test_entries_and_count_match_the_write_sets(size, data):
    qw = data.draw(st.integers(1, size))
    ensemble = tuple(f"b{i}:1" for i in range(size))
    lost = tuple(data.draw(st.sets(st.sampled_from(ensemble), min_size=1)))
    lost = tuple(b for b in ensemble if b in lost)
    first = data.draw(st.integers(0, 50))
    last = data.draw(st.integers(first - 1, first + 80))
    frag = Fragment(7, first, last, ensemble, lost, qw)
    expected = brute_force(first, last, ensemble, lost, qw)
    assert list(frag.entries()) == expected
    assert frag.entry_count() == len(expected)


def test_one_lost_bookie_of_three_with_qw_2_held_two_thirds():
    frag = Fragment(1, 0, 299, (A, B, C), (B,), 2)
    assert frag.entry_count() == 200
    # entry e lives on (e, e+1) mod 3: position 1 holds e = 0, 1 (mod 3)
    assert list(frag.entries())[:4] == [0, 1, 3, 4]
    assert frag.copies_on_lost(0) == [1] and frag.copies_on_lost(2) == []


def test_counting_across_the_java_int32_wrap():
    first = 2**31 - 10
    frag = Fragment(1, first, first + 30, (A, B, C, D), (C,), 2)
    expected = brute_force(first, first + 30, frag.ensemble, frag.lost, 2)
    assert list(frag.entries()) == expected and frag.entry_count() == len(expected)


def test_open_ended_fragment_has_no_count():
    frag = Fragment(1, 10, None, (A, B, C), (A,), 2)
    assert frag.entry_count() is None
    with pytest.raises(ValueError):
        list(frag.entries())


# -- fragments of a ledger ------------------------------------------------------------


def two_segments(closed_at=None):
    md = LedgerMetadata.new([A, B, C], 2, 2).with_ensemble_change(100, [A, D, C])
    return md.closed(closed_at, 1000) if closed_at is not None else md


def test_fragments_of_a_closed_ledger():
    md = two_segments(closed_at=149)
    frags = fragments_to_rereplicate(5, md, [C])
    assert [(f.first_entry_id, f.last_entry_id, f.lost) for f in frags] == [(0, 99, (C,)), (100, 149, (C,))]
    assert [(f.first_entry_id, f.last_entry_id) for f in fragments_to_rereplicate(5, md, [B])] == [(0, 99)]
    assert [(f.first_entry_id, f.last_entry_id) for f in fragments_to_rereplicate(5, md, [D])] == [(100, 149)]
    assert fragments_to_rereplicate(5, md, [E]) == []
    both = fragments_to_rereplicate(5, md, [A, C])
    assert [f.lost for f in both] == [(A, C), (A, C)]


def test_fragments_of_an_open_ledger_end_at_the_given_lac_or_are_open():
    md = two_segments()
    [f1, f2] = fragments_to_rereplicate(5, md, [A])
    assert (f1.last_entry_id, f2.last_entry_id) == (99, None)
    [_, f2] = fragments_to_rereplicate(5, md, [A], last_entry_id=120)
    assert f2.last_entry_id == 120


def test_an_empty_last_segment_of_a_closed_ledger_is_listed_with_no_entries():
    md = two_segments(closed_at=99)  # nothing written to the segment from 100
    frags = fragments_to_rereplicate(5, md, [D])
    assert [(f.first_entry_id, f.last_entry_id, f.entry_count()) for f in frags] == [(100, 99, 0)]


# -- replacements -------------------------------------------------------------------------


def test_random_replacement_avoids_the_ensemble_lost_and_readonly_bookies():
    frag = Fragment(1, 0, 9, (A, B, C), (B,), 2)
    placement = RandomPlacement(random.Random(1))
    for _ in range(30):
        chosen = choose_replacements(frag, [A, B, C, D, E, F], readonly=[E], exclude=[B, F], placement=placement)
        assert chosen == {B: D}


def test_two_lost_bookies_get_two_distinct_replacements():
    frag = Fragment(1, 0, 9, (A, B, C), (A, C), 2)
    chosen = choose_replacements(frag, [A, B, C, D, E], exclude=[A, C])
    assert set(chosen) == {A, C} and set(chosen.values()) == {D, E}


def test_target_is_used_first_and_checked():
    frag = Fragment(1, 0, 9, (A, B, C), (B,), 2)
    assert choose_replacements(frag, [A, C, D, E], target=E, exclude=[B]) == {B: E}
    with pytest.raises(TargetUnusable, match="already in the ensemble"):
        choose_replacements(frag, [A, C, D], target=C, exclude=[B])
    with pytest.raises(TargetUnusable, match="not a writable"):
        choose_replacements(frag, [A, C, D], target=E, exclude=[B])
    with pytest.raises(TargetUnusable, match="not a writable"):
        choose_replacements(frag, [A, C, D, E], readonly=[E], target=E, exclude=[B])
    two = Fragment(1, 0, 9, (A, B, C), (A, B), 2)
    chosen = choose_replacements(two, [C, D, E], target=E, exclude=[A, B])
    assert chosen == {A: E, B: D}


def test_not_enough_bookies():
    frag = Fragment(1, 0, 9, (A, B, C), (B,), 2)
    with pytest.raises(NotEnoughBookies):
        choose_replacements(frag, [A, B, C], exclude=[B])


def test_a_writable_lost_bookie_keeps_its_place_only_when_no_other_bookie_is_free():
    from bkctl.wire.client.rereplication import _replacements

    placement = RandomPlacement(random.Random(1))
    frag = Fragment(1, 0, 9, (A, B, C), (B,), 3)
    assert _replacements(frag, [A, B, C, D], [], None, (B,), {B}, placement) == {B: D}  # moved when it can be
    assert _replacements(frag, [A, B, C], [], None, (B,), {B}, placement) == {B: B}
    with pytest.raises(NotEnoughBookies):  # not writable, or not offered: no place kept
        _replacements(frag, [A, B, C], [B], None, (B,), {B}, placement)
    with pytest.raises(NotEnoughBookies):
        _replacements(frag, [A, B, C], [], None, (B,), set(), placement)
    two = Fragment(1, 0, 9, (A, B, C), (A, B), 3)  # one free bookie for two: the writable one stays
    assert _replacements(two, [A, B, C, D], [], None, (A, B), {B}, placement) == {A: D, B: B}


# -- copying with fake bookies --------------------------------------------------------------


class FakeClient:
    """What re-replication uses of a client: the fake bookies (one per id, acknowledging
    adds at once unless a test holds them) and the in-memory metadata store."""

    def __init__(self, md=None):
        self.pool = FakePool(auto=True)
        self.store = FakeMetadataStore().start()
        self.twins = fastpath.selected()
        if md is not None:
            self.store.ledgers.create(md, 5)

    def run_blocking(self, fn, *args, **kw):
        return defer.maybeDeferred(fn, *args, **kw)


LEDGER = 3


def write_ledger(client, ensemble, qw, n, digest, first=0):
    for e in range(first, first + n):
        body = digest.package(e, e - 1, e + 1, b"x")
        for i in write_set_indices(e, len(ensemble), qw):
            client.pool.get(ensemble[i]).stored[(LEDGER, e)] = body


def entries_on(client, bookie) -> dict[int, bytes]:
    return {e: body for (lid, e), body in client.pool.get(bookie).stored.items() if lid == LEDGER}


def entries_read(client) -> list[int]:
    return sorted(e for conn in client.pool.conns.values() for _lid, e, _fence in conn.reads)


def adds_sent(client) -> list[tuple[str, int, bool]]:
    return [(b, e, recovery) for b, conn in client.pool.conns.items() for e, _body, recovery in conn.sent]


def test_replicate_copies_exactly_what_the_lost_bookie_held_from_survivors():
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    write_ledger(client, (A, B, C), 2, 30, digest)
    lost_data = entries_on(client, B)
    client.pool.get(B).stored.clear()
    frag = Fragment(LEDGER, 0, 29, (A, B, C), (B,), 2)
    seen = []
    copied = successResultOf(
        replicate_fragment(client, frag, {B: D}, digest, master_key(b""), window=4, on_entry=seen.append)
    )
    assert copied == 20 == len(seen)
    assert entries_on(client, D) == lost_data
    assert client.pool.get(B).reads == []  # never read from the lost bookie
    assert all(recovery for _b, _e, recovery in adds_sent(client))


def test_replicate_across_the_java_int32_wrap_copies_what_java_placed():
    """Below the wrap an entry's route is its stripe position's (kept once per position),
    above it the truncated write set decides, as for the writer."""
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    first, ensemble = 2**31 - 10, (A, B, C)  # 2**32 % 3 != 0: the wrap shifts the stripe
    write_ledger(client, ensemble, 2, 30, digest, first=first)
    lost_data = entries_on(client, C)  # (B, not C, holds both copies of entry 2**31 - 1)
    client.pool.get(C).stored.clear()
    frag = Fragment(LEDGER, first, first + 29, ensemble, (C,), 2)
    copied = successResultOf(replicate_fragment(client, frag, {C: D}, digest, master_key(b""), window=4))
    assert copied == len(lost_data) and entries_on(client, D) == lost_data
    assert {e for e in lost_data if e > frag.schedule.striped_until} and {e for e in lost_data if e < 2**31 - 2}


def test_replicate_skips_a_corrupt_replica_and_fails_when_none_is_left():
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    write_ledger(client, (A, B, C), 3, 5, digest)
    a, c = client.pool.get(A), client.pool.get(C)
    a.stored[(LEDGER, 2)] = a.stored[(LEDGER, 2)][:-1] + b"y"  # corrupt copy on A
    frag = Fragment(LEDGER, 0, 4, (A, B, C), (B,), 3)
    assert successResultOf(replicate_fragment(client, frag, {B: D}, digest, master_key(b""))) == 5
    assert entries_on(client, D)[2] == c.stored[(LEDGER, 2)]
    del c.stored[(LEDGER, 4)]
    a.stored[(LEDGER, 4)] = b"garbage" * 10
    failure = failureResultOf(replicate_fragment(client, frag, {B: E}, digest, master_key(b"")), EntryUnrecoverable)
    assert "entry 4" in str(failure.value)


def held(conn) -> list[int]:
    return sorted(e for e in conn.adds if conn.outstanding(e))


def test_the_copy_keeps_at_most_window_adds_in_flight_and_reads_a_window_ahead():
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    write_ledger(client, (A, B, C), 3, 12, digest)
    client.pool.get(B).stored.clear()
    target = client.pool.get(D)
    target.auto = False  # its adds wait for the test
    frag = Fragment(LEDGER, 0, 11, (A, B, C), (B,), 3)
    d = defer.ensureDeferred(replicate_fragment(client, frag, {B: D}, digest, master_key(b""), window=3))
    # three entries being added, the next three already read and waiting for a slot
    assert held(target) == [0, 1, 2] and entries_read(client) == [0, 1, 2, 3, 4, 5]
    target.ack(1)  # entry 1 copied: entry 3, read already, is added at once, and entry 6 is read
    assert held(target) == [0, 2, 3] and entries_read(client) == list(range(7)) and not d.called
    target.auto = True
    for e in held(target):
        target.ack(e)
    assert successResultOf(d) == 12 and sorted(entries_on(client, D)) == list(range(12))


def test_an_add_that_fails_stops_the_copy():
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    write_ledger(client, (A, B, C), 3, 10, digest)
    target = client.pool.get(D)
    target.auto = False
    frag = Fragment(LEDGER, 0, 9, (A, B, C), (B,), 3)
    d = defer.ensureDeferred(replicate_fragment(client, frag, {B: D}, digest, master_key(b""), window=2))
    target.fail(0, LedgerFencedError("EFENCED", bookie=D))
    failureResultOf(d, LedgerFencedError)
    target.ack(1)  # a late acknowledgement changes nothing
    assert entries_read(client) == [0, 1, 2, 3]


def test_the_byte_rate_limit_holds_each_entry_back_before_its_adds():
    client = FakeClient()
    digest = DigestManager(LEDGER, DigestType.CRC32C, b"")
    write_ledger(client, (A, B, C), 3, 3, digest)
    asked, gates = [], []

    def throttle(nbytes, add, *args):
        asked.append(nbytes)
        gates.append(lambda: add(*args))  # held: let go when the test says
        return False

    frag = Fragment(LEDGER, 0, 2, (A, B, C), (B,), 3)
    d = defer.ensureDeferred(
        replicate_fragment(client, frag, {B: D}, digest, master_key(b""), window=8, throttle=throttle)
    )
    body = len(entries_on(client, A)[0])
    assert asked == [body] * 3 and adds_sent(client) == []
    gates[1]()
    assert adds_sent(client) == [(D, 1, True)] and not d.called
    gates[0]()
    gates[2]()
    assert successResultOf(d) == 3


def test_metadata_update_retries_on_conflict_and_is_idempotent():
    md = two_segments(closed_at=149)
    client = FakeClient(md)
    store = client.store

    def another_writer(ledger_id, *_):
        store.ledgers.update(ledger_id, store.ledgers.read(ledger_id)[0], -1)

    store.before("ledgers.update", another_writer)
    store.before("ledgers.update", another_writer)
    new_md, version = successResultOf(replace_in_metadata(client, 5, 0, {B: E}))
    assert new_md.ensembles[0][1] == (A, E, C) and new_md.ensembles[1][1] == (A, D, C)
    assert store.ledgers.read(5) == (new_md, version) and version == 3  # two writes by the other, then ours
    assert len(store.called("ledgers.update")) == 5  # ours lost twice, then won
    again, version_again = successResultOf(replace_in_metadata(client, 5, 0, {B: F}))  # B is gone already: no change
    assert again == new_md and version_again == version


# -- small helpers of the commands ------------------------------------------------------


def test_percentile_nearest_rank():
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.99) == 99 and percentile(values, 0.999) == 100
    assert percentile([], 0.5) == 0.0 and percentile([3.0], 0.999) == 3.0


def test_entry_rendering_and_metadata_pairs():
    assert parse_custom_metadata(["a=b", "c=d=e", "empty="]) == {"a": b"b", "c": b"d=e", "empty": b""}
    with pytest.raises(ValueError):
        parse_custom_metadata(["novalue"])
    assert to_json(entry_doc(1, 2, b"h\xffi", "text")) == {
        "ledger_id": 1,
        "entry_id": 2,
        "length": 3,
        "encoding": "base64",
        "payload": "aP9p",
    }  # never mangled
    assert to_json(entry_doc(1, 3, "hé".encode(), "text"))["payload"] == "hé"
    assert to_json(entry_doc(1, 2, b"\x00\x01", "hex"))["payload"] == "0001"
    assert to_json(entry_doc(1, 2, b"\x00\x01", "raw")) == {
        "ledger_id": 1,
        "entry_id": 2,
        "length": 2,
        "encoding": "base64",
        "payload": "AAE=",
    }
    assert entry_line(4, b"a\nb\\", "text") == "4\ta\\nb\\\\"
    assert entry_line(4, b"ab", "hex") == "4\t6162"
