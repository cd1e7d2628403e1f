"""``bkctl restore`` at a cluster's scale (issue 74): the backup's ledgers are read a chunk at a
time -- once to check every record before anything is written, once to write them, handed to the
writers a window at a time -- so that what a restore holds does not grow with the ledgers
(counted in objects alive, not in RSS); ``--ledgers`` is checked against the chunks as read."""

from __future__ import annotations

import gc
import random

import pytest

from bkctl.backup import restore as restoring
from bkctl.backup.storage import LocalStorage
from bkctl.backup.take import Selection, take_backup
from bkctl.exitcodes import NOT_FOUND, CommandError
from bkctl.wire import fastpath
from bkctl.wire.backup.archive import LedgerRecord, ManifestLedger
from bkctl.wire.backup.data_read import PY_READER
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata
from tests.support.backup_fakes import NoFeed
from tests.support.fake_store import FakeMetadataStore

BOOKIES = ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"]


class NoBookKeeper:
    def open(self, ledger_id: int):
        raise AssertionError(f"ledger {ledger_id} opened")


class CountingBookKeeper:
    """Creates empty ledgers (nothing is added to them), counting the manifest lines and the
    records alive at each."""

    timeout = 5.0

    def __init__(self) -> None:
        self.created: list[int] = []
        self.most_lines = self.most_records = 0

    def create(self, *args, ledger_id: int, **kw):
        self.created.append(ledger_id)
        if len(self.created) % 50 == 1:
            gc.collect()
            alive = gc.get_objects()
            self.most_lines = max(self.most_lines, sum(isinstance(o, ManifestLedger) for o in alive))
            self.most_records = max(self.most_records, sum(isinstance(o, LedgerRecord) for o in alive))
        return self

    def close(self) -> None:
        pass

    def connect(self, bookie_ids) -> None:
        pass


def _backup(tmp_path, n: int) -> tuple[LocalStorage, list[int]]:
    source = FakeMetadataStore().start()
    source.ledgers.parse = parse_ledger_metadata
    ids = [source.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"pw").closed(-1, 0))[0] for _ in range(n)]
    storage = LocalStorage(str(tmp_path / "a"))
    take_backup(source, NoBookKeeper(), storage, Selection(), source.uri, chunk_ledgers=100)
    return storage, ids


def _target() -> FakeMetadataStore:
    target = FakeMetadataStore().start()
    for b in BOOKIES:
        target.registration.register(b)
    return target


def test_a_restore_holds_a_chunk_of_the_backup_not_all_of_it(tmp_path, monkeypatch):
    storage, ids = _backup(tmp_path, 1500)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    bk = CountingBookKeeper()
    doc = restoring.restore_backup(
        _target(), bk, storage, "zk://target", remap=True, parallel=2, journal_path=str(tmp_path / "journal")
    )
    assert doc.ledgers == 1500 and doc.ledgers_written == 1500 and len(bk.created) == 1500
    assert bk.most_lines <= 2 * 100 + 2 * 4 + 2  # a chunk's lines and the window under way, not 1500
    assert bk.most_records <= 2 * 100 + 2 * 4 + 2


def test_a_ledger_spec_is_checked_against_the_chunks(tmp_path, monkeypatch):
    storage, ids = _backup(tmp_path, 250)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    bk = CountingBookKeeper()
    spec = f"{ids[3]},{ids[120]}-{ids[122]},{ids[249]}"
    doc = restoring.restore_backup(
        _target(), bk, storage, "zk://t", remap=True, selection=Selection(ledgers=spec),
        journal_path=str(tmp_path / "j1"),
    )  # fmt: skip
    assert doc.ledgers == 5 and sorted(int(k) for k in doc.ledger_ids) == sorted([ids[3], *ids[120:123], ids[249]])
    for absent, said in ((f"{ids[-1] + 5}", "holds no ledger"), (f"{ids[-1] + 5}-{ids[-1] + 9}", "no ledger in")):
        with pytest.raises(CommandError, match=said) as err:
            restoring.restore_backup(
                _target(), bk, storage, "zk://t", remap=True, selection=Selection(ledgers=absent),
                journal_path=str(tmp_path / "j2"),
            )  # fmt: skip
        assert err.value.code == NOT_FOUND


def test_remap_draws_the_new_ids_many_at_once(tmp_path, monkeypatch):
    storage, _ids = _backup(tmp_path, 1500)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    target = _target()
    drawn: list[int] = []
    many = target.ledger_ids.generate_many
    monkeypatch.setattr(target.ledger_ids, "generate", lambda: pytest.fail("an id drawn alone"))
    monkeypatch.setattr(target.ledger_ids, "generate_many", lambda n: drawn.append(n) or many(n))
    bk = CountingBookKeeper()
    doc = restoring.restore_backup(target, bk, storage, "zk://t", remap=True, journal_path=str(tmp_path / "j"))
    assert drawn == [1000, 500]  # a draw a thousand ledgers, not one a ledger
    assert sorted(bk.created) == sorted(doc.ledger_ids.values()) and len(set(bk.created)) == 1500


class ConnectingBookKeeper(CountingBookKeeper):
    """Records, in order, the bookies it is asked to connect to and the ledgers it creates."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def connect(self, bookie_ids) -> None:
        self.calls.append(("connect", sorted(bookie_ids)))

    def create(self, *args, ledger_id: int, **kw):
        self.calls.append(("create", ledger_id))
        return super().create(*args, ledger_id=ledger_id, **kw)


def test_the_writable_bookies_are_connected_to_before_the_first_ledger_is_created(tmp_path, monkeypatch):
    storage, _ids = _backup(tmp_path, 3)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    target = _target()
    target.registration.register("127.0.0.1:3184", readonly=True)  # not written to: not connected to
    bk = ConnectingBookKeeper()
    restoring.restore_backup(target, bk, storage, "zk://t", remap=True, journal_path=str(tmp_path / "j"))
    assert bk.calls[0] == ("connect", BOOKIES) and [c for c, _ in bk.calls[1:]] == ["create"] * 3
    # a larger cluster: a sample of its writable bookies, the others connected to at their first add
    monkeypatch.setattr(restoring, "_CONNECT_AHEAD", 2)
    bk = ConnectingBookKeeper()
    restoring.restore_backup(_target(), bk, storage, "zk://t", remap=True, journal_path=str(tmp_path / "j2"))
    assert bk.calls[0][0] == "connect" and len(bk.calls[0][1]) == 2 and set(bk.calls[0][1]) <= set(BOOKIES)


def _data_object(tmp_path, sizes: list[int]):
    """A data object of ledger 7 with entries of ``sizes`` bytes in a local archive, and a
    record naming it."""
    import io
    from types import SimpleNamespace

    from bkctl.wire.backup.archive import DataWriter

    buf = io.BytesIO()
    w = DataWriter(buf, 7)
    for i, n in enumerate(sizes):
        w.add(i, bytes([i % 251]) * n)
    storage = LocalStorage(str(tmp_path / "archive"))
    storage.put("data/7", buf.getvalue())
    record = SimpleNamespace(
        ledger_id=7, entries=len(sizes), data_object="data/7", index_sha256=w.sha.hexdigest(), data_size=w.size
    )
    return storage, record


#: how a restore decodes the entries: the Python twin, and the process's (the C twin with fast paths on)
READERS = pytest.mark.parametrize("reader", [PY_READER, fastpath.selected().archive_reader], ids=["python", "selected"])


@READERS
def test_a_ledgers_adds_start_after_a_small_first_chunk_and_chunks_grow(tmp_path, reader):
    storage, record = _data_object(tmp_path, [3] * 5000)
    chunks = list(restoring._entries(storage, record, reader))
    assert [len(c) for c in chunks] == [128, 256, 512, 1024, 2000, 1080]
    assert [e for c in chunks for e in c] == [bytes([i % 251]) * 3 for i in range(5000)]


@READERS
def test_a_chunk_stays_under_its_bytes_however_few_its_entries(tmp_path, monkeypatch, reader):
    monkeypatch.setattr(restoring, "_CHUNK_BYTES", 10_000)
    storage, record = _data_object(tmp_path, [4096] * 20)
    assert [len(c) for c in restoring._entries(storage, record, reader)] == [3, 3, 3, 3, 3, 3, 2]


@READERS
def test_runs_of_mixed_sizes_are_cut_into_the_same_chunks_as_entries_one_by_one(tmp_path, monkeypatch, reader):
    monkeypatch.setattr(restoring, "_CHUNK_BYTES", 50_000)
    sizes = [random.Random(5).choice([0, 10, 700, 4096, 30_000]) for _ in range(3000)]
    storage, record = _data_object(tmp_path, sizes)
    want, chunk, size, limit = [], [], 0, restoring._FIRST_CHUNK
    for i, n in enumerate(sizes):  # the chunks as cut an entry at a time
        chunk.append(bytes([i % 251]) * n)
        size += n
        if len(chunk) >= limit or size >= 50_000:
            want.append(chunk)
            chunk, size, limit = [], 0, min(2 * limit, restoring._CHUNK_ENTRIES)
    want += [chunk] if chunk else []
    assert list(restoring._entries(storage, record, reader)) == want


def test_a_writer_begins_the_next_ledger_while_the_one_before_drains(tmp_path, monkeypatch):
    """With one writer, a ledger's last acknowledgements are waited for by a closer: the next
    ledger is created meanwhile (a writer that waited left the bookies nothing to do), and
    every ledger is closed and done only once its adds are."""
    import threading

    storage, ids = _backup(tmp_path, 3)
    bk = CountingBookKeeper()
    created_next = threading.Event()
    closed: list[int] = []
    create = bk.create

    def counted_create(*args, ledger_id: int, **kw):
        if bk.created:
            created_next.set()
        return create(*args, ledger_id=ledger_id, **kw)

    class DrainingFeed(NoFeed):
        def __init__(self, ledger, timeout) -> None:
            self.first = not bk.created[:-1]

        def finish(self) -> None:  # the first ledger's adds drain until the next one is made
            if self.first:
                assert created_next.wait(10), "the next ledger was not begun while this one drained"

    monkeypatch.setattr(bk, "create", counted_create)
    monkeypatch.setattr(bk, "close", lambda: closed.append(bk.created[len(closed)]), raising=False)
    monkeypatch.setattr(restoring, "ChunkFeed", DrainingFeed)
    doc = restoring.restore_backup(_target(), bk, storage, "zk://t", parallel=1, journal_path=str(tmp_path / "j"))
    assert doc.ledgers_written == 3 and sorted(bk.created) == sorted(ids) and len(closed) == 3
