"""A restore's journal (bkctl/backup/journal.py) at a cluster's scale: what one write costs does
not grow with the ledgers (issue 74: at 10^5 ledgers the journal was one 1.78 MB document
rewritten whole every second, over ZooKeeper's 1 MB node limit from about 50,000 ledgers);
what a kill leaves reads as the last save; the journals an older bkctl wrote still read."""

from __future__ import annotations

import json

import pytest

from bkctl.backup.journal import ClusterPlace, FilePlace, Journal
from bkctl.backup.storage import LocalStorage
from bkctl.exitcodes import CommandError
from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES
from tests.support.fake_store import FakeMetadataStore

FRESH = {"backup": "b1", "target": "zk://t", "instance_id": "i", "remap": True, "started": 1}


class Recorded:
    """A store's restore journals, every value written through them measured; a save made one
    write at a time, as a store does when it cannot make it at once (any write may fail)."""

    def __init__(self, journals) -> None:
        self.journals = journals
        self.sizes: list[int] = []
        self.failing = ""  # the call that fails, once

    def save(self, key, chunks, head, count):
        for index, data in sorted(chunks.items()):
            self.write_chunk(key, index, data)
        self.write_head(key, head, count)

    def __getattr__(self, name):
        call = getattr(self.journals, name)

        def recorded(*args):
            if name == self.failing:
                self.failing = ""
                raise OSError("ZooKeeper went away")
            self.sizes += [len(a) for a in args if isinstance(a, bytes)]
            return call(*args)

        return recorded


class Store:
    def __init__(self, fake) -> None:
        self.root = fake.root
        self.restores = Recorded(fake.restores)


@pytest.fixture
def archive(tmp_path):
    return LocalStorage(str(tmp_path / "archive"))


def test_a_journal_of_60000_ledgers_never_writes_a_value_over_a_chunk(archive):
    store = Store(FakeMetadataStore().start())
    journal = Journal.open(ClusterPlace(store, "k"), dict(FRESH), archive, "k")
    n = 60_000
    for old in range(n):
        journal.assign(10**12 + old, 2**40 + old)  # wide ids: about 34 bytes a line
    # kept as they are assigned: what waits to be kept stays bounded (8192 lines)
    assert sum(c.count(b"\n") for c in store.restores.read_chunks("k").chunks) >= n - 8192
    journal.save()  # every id before any ledger is created
    for old in range(n):
        journal.finish_ledger(10**12 + old)
        if old % 2000 == 0:
            journal.save()  # a save a second, 2000 ledgers a second
    journal.doc["finished"] = 2
    journal.save()
    sizes = store.restores.sizes
    assert max(sizes) <= RESTORE_CHUNK_BYTES
    kept = sum(len(c) for c in store.restores.read_chunks("k").chunks)
    assert kept > 3 * 2**20  # the whole is over ZooKeeper's node limit three times over
    # each save rewrites the last chunk at most, not the whole: what was written stays near what is kept
    assert sum(sizes) < kept + 40 * RESTORE_CHUNK_BYTES
    again = Journal.open(ClusterPlace(store, "k"), {}, archive, "k")
    assert again.ids == journal.ids and again.done == journal.done and again.doc["finished"] == 2


def test_a_save_that_fails_is_kept_for_the_next_and_a_kill_reads_as_the_last_save(archive, monkeypatch):
    from bkctl.backup import journal as journaling

    monkeypatch.setattr(journaling, "_JOURNAL_EVERY", 3600.0)  # saved when told only
    fake = FakeMetadataStore().start()
    store = Store(fake)
    place = ClusterPlace(store, "k")
    place.limit = 12  # a chunk a line: every save begins a chunk

    def seen() -> Journal:
        return Journal.open(ClusterPlace(Store(fake), "k"), {}, archive, "k")

    journal = Journal.open(place, dict(FRESH), archive, "k")
    for old in range(10):
        journal.assign(old, 100 + old)
    journal.save()
    assert seen().ids == {old: 100 + old for old in range(10)} and seen().done == set()
    journal.finish_ledger(0)
    journal.save()
    for failing in ("write_chunk", "write_head"):
        done = set(journal.done)
        store.restores.failing = failing
        journal.finish_ledger(len(done))
        with pytest.raises(OSError):
            journal.save()
        # killed now: whatever chunk was written, no head counts more than before
        assert seen().done == done and seen().ids == journal.ids
        journal.save()  # the next save keeps what the failed one did not
        assert seen().done == done | {len(done)}
    journal.finish_ledger(3)  # not saved: lost by a kill, so written again
    resumed = seen()
    assert resumed.done == {0, 1, 2}
    resumed.finish_ledger(5)
    resumed.save()  # the resumed journal appends to the last chunk
    assert seen().done == {0, 1, 2, 5} and len(fake.restores.read_chunks("k").chunks) > 3


def _older(ids, done) -> bytes:
    doc = {**FRESH, "ids": {str(k): v for k, v in ids.items()}, "done": sorted(done)}
    return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"


def test_a_journal_an_older_bkctl_wrote_is_read_and_kept_in_chunks_from_then_on(archive, tmp_path):
    ids, done = {5: 50, 6: 60, 7: 70}, {5}
    fake = FakeMetadataStore().start()
    fake.restores.write("k", _older(ids, done))  # in the cluster
    journal = Journal.open(ClusterPlace(fake, "k"), dict(FRESH, started=9), archive, "k")
    assert (journal.ids, journal.done, journal.doc["started"]) == (ids, done, 1)
    assert fake.restores.read("k") is None and fake.restores.read_chunks("k") is not None  # written anew
    journal.finish_ledger(6)
    journal.save()
    assert Journal.open(ClusterPlace(fake, "k"), {}, archive, "k").done == {5, 6}
    # in the archive, as the oldest kept it: read, never written
    archive.put("restores/a.json", _older(ids, done))
    journal = Journal.open(ClusterPlace(fake, "a"), {}, archive, "a")
    assert (journal.ids, journal.done) == (ids, done) and fake.restores.read_chunks("a") is not None
    assert archive.get("restores/a.json") == _older(ids, done)
    # in a file
    path = tmp_path / "journal.json"
    path.write_bytes(_older(ids, done))
    journal = Journal.open(FilePlace(str(path)), {}, archive, "f")
    assert (journal.ids, journal.done) == (ids, done)
    journal.finish_ledger(7)
    journal.save()
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[0])["head"]["backup"] == "b1" and lines[-1] == b'["done",7]'
    assert Journal.open(FilePlace(str(path)), {}, archive, "f").done == {5, 7}


def test_a_journal_file_is_appended_to_and_compacted_when_resumed(archive, tmp_path):
    path = tmp_path / "journal"
    journal = Journal.open(FilePlace(str(path)), dict(FRESH), archive, "k")
    for old in range(1000):
        journal.assign(old, old)
    journal.save()
    size = path.stat().st_size
    journal.finish_ledger(0)
    journal.save()
    assert path.stat().st_size == size + len(b'["done",0]\n')  # a line appended, not the whole again
    journal.doc["finished"] = 3
    journal.save()  # a head line appended: the last one counts
    with open(path, "ab") as f:
        f.write(b'["done",1')  # a line a kill cut short
    resumed = Journal.open(FilePlace(str(path)), {}, archive, "k")
    assert resumed.done == {0} and resumed.doc["finished"] == 3
    text = path.read_bytes()
    assert text.count(b'"head"') == 1 and text.endswith(b'["done",0]\n')  # compacted, the cut line gone
    resumed.finish_ledger(1)
    resumed.save()
    assert Journal.open(FilePlace(str(path)), {}, archive, "k").done == {0, 1}


def test_a_journal_file_that_does_not_read_is_one_line_and_a_usage_error(archive, tmp_path):
    path = tmp_path / "journal"
    path.write_bytes(b'{"head":{}}\n["what",1]\n')
    with pytest.raises(CommandError, match="does not read") as err:
        Journal.open(FilePlace(str(path)), dict(FRESH), archive, "k")
    assert err.value.code == 2
    path.write_bytes(b'{"hea')  # killed before its first line was whole: nothing was kept
    journal = Journal.open(FilePlace(str(path)), dict(FRESH), archive, "k")
    journal.assign(1, 1)
    journal.save()
    assert Journal.open(FilePlace(str(path)), {}, archive, "k").ids == {1: 1}
