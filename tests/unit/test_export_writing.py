"""The export tasks' Parquet writing and commit (bkctl.export.writing), without Spark or a cluster."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")

from bkctl.export import writing  # noqa: E402
from bkctl.export.columns import LEDGER_COLUMNS, file_schema  # noqa: E402
from bkctl.export.ledger_source import LedgerBatchBuilder, LedgerSelection, LedgerSource  # noqa: E402
from bkctl.export.output import data_files, leaf_partitions  # noqa: E402
from bkctl.export.writing import NO_DATE, FileOptions, RangeWriter, commit_files, leaf_dir, run_task  # noqa: E402
from bkctl.wire.domain.ledger_plan import EntryRange  # noqa: E402

CTIME_MS = 1_763_900_000_123  # 2025-11-23


def body(i: int) -> bytes:
    text = f"entry {i:05d}|".encode()
    return text + b"\xff\xfe" if i % 4 == 3 else text


def batches(partition: EntryRange, size: int):
    builder = LedgerBatchBuilder(partition, size)
    for start in range(partition.first, partition.last + 1, size):
        stop = min(start + size, partition.last + 1)
        yield builder.build([(i, body(i)) for i in range(start, stop)])


def partition(first=0, last=999, ledger_id=42, ctime_ms=CTIME_MS):
    return EntryRange(ledger_id, first, last, ctime_ms, "CLOSED", {"app": "tests"})


def writer(directory, index, options, decode=None):
    """A ledger export's writer (its files' columns, its dictionary columns)."""
    return RangeWriter(
        directory,
        index,
        options,
        file_schema(LEDGER_COLUMNS, LedgerSource.partition_columns, decode),
        LedgerSource.dictionary_columns,
    )


def read_files(directory):
    files = sorted(data_files(directory))
    tables = [pq.read_table(p) for p in files]
    return files, pa.concat_tables(tables) if tables else None


def test_rows_per_file_cuts_files_across_batches(tmp_path):
    options = FileOptions(staging=str(tmp_path), job="j0b", compression="zstd", rows_per_file=600)
    w = writer(tmp_path / "leaf", 7, options)
    for batch in batches(partition(0, 1999), 250):
        w.write(batch)
    assert w.close() == [
        ("part-00007-j0b.c000.zstd.parquet", 600),
        ("part-00007-j0b.c001.zstd.parquet", 600),
        ("part-00007-j0b.c002.zstd.parquet", 600),
        ("part-00007-j0b.c003.zstd.parquet", 200),
    ]
    files, table = read_files(tmp_path / "leaf")
    assert [pq.read_metadata(p).num_rows for p in files] == [600, 600, 600, 200]
    assert table.schema == file_schema(LEDGER_COLUMNS, ["ledger_id"]) and "ledger_id" not in table.schema.names
    assert table.column("entry_id").to_pylist() == list(range(2000))
    assert table.column("payload").to_pylist() == [body(i) for i in range(2000)]
    assert table.column("payload_size").to_pylist() == [len(body(i)) for i in range(2000)]
    assert set(table.column("ledger_state").to_pylist()) == {"CLOSED"}
    assert table.column("ledger_metadata").to_pylist()[0] == [("app", "tests")]
    group = pq.read_metadata(files[0]).row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert group.column(0).compression == "ZSTD"
    assert "RLE_DICTIONARY" in encodings["ledger_state"] and "RLE_DICTIONARY" in encodings["ledger_ctime"]
    assert "RLE_DICTIONARY" in encodings["ledger_metadata.key_value.value"]
    assert not {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & set(encodings["payload"] + encodings["entry_id"])


def test_row_groups_are_cut_by_buffered_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "ROW_GROUP_BYTES", 20_000)
    w = writer(tmp_path, 0, FileOptions(staging=str(tmp_path), job="j", compression="snappy"))
    for batch in batches(partition(0, 2999), 100):
        w.write(batch)
    assert w.close() == [("part-00000-j.c000.snappy.parquet", 3000)]
    meta = pq.read_metadata(tmp_path / "part-00000-j.c000.snappy.parquet")
    assert meta.num_row_groups > 3 and meta.num_rows == 3000
    assert pq.read_table(tmp_path / "part-00000-j.c000.snappy.parquet").column("entry_id").to_pylist() == list(
        range(3000)
    )


def test_decode_replaces_invalid_utf8_and_uncompressed_names(tmp_path):
    options = FileOptions(staging=str(tmp_path), job="j", compression="none", decode="utf8")
    w = writer(tmp_path, 3, options, decode="utf8")
    for batch in batches(partition(0, 9), 5):
        w.write(batch)
    assert w.close() == [("part-00003-j.c000.parquet", 10)]
    table = pq.read_table(tmp_path / "part-00003-j.c000.parquet")
    assert table.schema.names[-1] == "payload_text" and table.schema.field("payload_text").type == pa.string()
    assert table.column("payload_text").to_pylist() == [body(i).decode("utf-8", "replace") for i in range(10)]
    assert "\ufffd" in table.column("payload_text").to_pylist()[3]
    assert pq.read_metadata(tmp_path / "part-00003-j.c000.parquet").row_group(0).column(0).compression == "UNCOMPRESSED"


def test_nothing_written_nothing_reported(tmp_path):
    w = writer(tmp_path / "leaf", 0, FileOptions(staging=str(tmp_path), job="j"))
    assert w.close() == [] and not (tmp_path / "leaf").exists()


def test_leaf_dirs_and_a_ledger_without_ctime(tmp_path):
    assert leaf_dir("ledger_id", 5, CTIME_MS) == "ledger_id=5"
    assert leaf_dir("date", 5, CTIME_MS) == "date=2025-11-23/ledger_id=5"
    assert leaf_dir("date", 6, None) == f"date={NO_DATE}/ledger_id=6"
    for leaf in ("date=2025-11-23/ledger_id=5", f"date={NO_DATE}/ledger_id=6"):
        (tmp_path / leaf).mkdir(parents=True)
    assert leaf_partitions(tmp_path) == {"date=2025-11-23/ledger_id=5": 5, f"date={NO_DATE}/ledger_id=6": 6}


def test_only_the_reported_attempt_is_committed(tmp_path, monkeypatch):
    """A first attempt dies after writing a row group; the retry's files are
    the ones committed, and nothing of the first is left."""
    monkeypatch.setattr(writing, "ROW_GROUP_BYTES", 10_000)
    part = partition(0, 1999, ledger_id=9)
    fail = {"after": 4}

    def read_ledger_range(_reader, p):
        for n, batch in enumerate(batches(p, 100)):
            if fail["after"] is not None and n == fail["after"]:
                raise OSError("bookie gone")
            yield batch

    monkeypatch.setattr("bkctl.export.ledger_source.read_ledger_range", read_ledger_range)
    source = LedgerSource(LedgerSelection(partition_by="date"))
    options = FileOptions(staging=str(tmp_path), job="jj", partition_by="date")
    with pytest.raises(OSError):
        run_task(source, None, options, (2, part))
    attempts = tmp_path / writing.ATTEMPTS
    assert [p.name for p in data_files_anywhere(attempts)] == ["part-00002-jj.c000.zstd.parquet"]  # a partial file
    fail["after"] = None
    report = run_task(source, None, options, (2, part))
    assert report.task == 2 and report.counts == {"ledger_id": 9, "first": 0, "last": 1999, "entries": 2000}
    assert [(f.task, f.leaf, f.name, f.rows) for f in report.files] == [
        (2, "date=2025-11-23/ledger_id=9", "part-00002-jj.c000.zstd.parquet", 2000)
    ]
    assert commit_files(tmp_path, report.files) == 1
    assert not attempts.exists()
    files, table = read_files(tmp_path / "date=2025-11-23" / "ledger_id=9")
    assert [p.name for p in files] == ["part-00002-jj.c000.zstd.parquet"]
    assert table.column("entry_id").to_pylist() == list(range(2000))


def data_files_anywhere(root):
    return sorted(p for p in root.rglob("*.parquet") if p.is_file())
