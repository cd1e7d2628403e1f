"""The executor side of ``bkctl export``: a Spark task that reads what its
source plans for it and writes it as Parquet itself (:func:`run_task`).

Why the tasks write their own files instead of ``DataFrame.write``: Spark's
writer takes every row from the Python worker, turns the Arrow batches into
JVM rows and encodes those row by row.  Measured with three bookies on the
same 2-core machine, that cost the JVM 6 to 15 µs of CPU per 100-byte entry,
against about 1 µs for Arrow's C++ Parquet writer working on the batches
the reader already made.  With the bookies and the readers needing the same
cores, that difference was most of the gap between the export and a plain
read.  Spark still plans nothing else, schedules and retries the tasks,
runs them where the executors are, and reports their progress; only file
names and counts travel back to the driver.

Files look as Spark's writer makes them: Hive partition folders
(``ledger_id=N``, ``date=YYYY-MM-DD/ledger_id=N`` or a topic's
``topic=T/date=YYYY-MM-DD/ledger_id=N``, the partition columns not repeated
inside the files), ``part-NNNNN-JOB.cNNN.CODEC.parquet``,
timestamps as microseconds since the epoch, UTC.

Commit protocol: every task attempt writes below its own folder,
``STAGING/_attempts/ATTEMPT/``; what the successful attempts report (the
results Spark's ``collect`` hands back, one per task) is moved into place
by :func:`commit_files`, and ``_attempts`` is removed with whatever failed,
killed or speculative attempts left there.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bkctl.wire.text import utc_date

from .columns import file_schema
from .output import NO_DATE
from .source import FileWritten, TaskReport

if TYPE_CHECKING:
    from .executor import ReadSettings
    from .source import ExportSource

__all__ = [
    "ATTEMPTS",
    "FileOptions",
    "RangeWriter",
    "attempt_name",
    "commit_files",
    "leaf_dir",
    "payload_text",
    "remove_files",
    "run_task",
]

#: The folder below the staging directory where task attempts write.
ATTEMPTS = "_attempts"
#: A row group is written once this many bytes of rows are buffered (Spark
#: writes 128 MB row groups; this keeps a task's memory lower).
ROW_GROUP_BYTES = 64 << 20
_CODEC_SUFFIX = {"zstd": ".zstd", "snappy": ".snappy", "none": ""}


@dataclass(frozen=True)
class FileOptions:
    """How the tasks of one export write (picklable)."""

    staging: str
    #: in every file name, so that an --append never reuses a name
    job: str
    compression: str = "zstd"
    partition_by: str = "ledger_id"
    decode: str | None = None
    rows_per_file: int = 0


def leaf_dir(partition_by: str, ledger_id: int, ctime_ms: int | None) -> str:
    """The partition folder of a ledger's rows, relative to the export."""
    if partition_by == "date":
        return f"date={utc_date(ctime_ms) or NO_DATE}/ledger_id={ledger_id}"
    return f"ledger_id={ledger_id}"


def payload_text(payloads):
    """Payloads as UTF-8 text, invalid sequences replaced by U+FFFD (what
    Spark's ``make_valid_utf8`` does; checked against it in the tests)."""
    import pyarrow as pa

    try:
        return payloads.cast(pa.string())  # valid UTF-8: no copy
    except pa.ArrowInvalid:
        return pa.array(
            [None if b is None else b.decode("utf-8", "replace") for b in payloads.to_pylist()], pa.string()
        )


class RangeWriter:
    """Writes record batches of one task into ``directory`` as Parquet
    files named ``part-INDEX-JOB.cNNN.CODEC.parquet``: a new file every
    ``rows_per_file`` rows (0: one file), a row group every
    :data:`ROW_GROUP_BYTES` buffered.  ``schema``: the columns of the files
    (:func:`~bkctl.export.columns.file_schema`); ``dictionary_columns``:
    those to dictionary-encode."""

    def __init__(self, directory: Path, index: int, options: FileOptions, schema, dictionary_columns=()):
        self.directory = Path(directory)
        self.options = options
        self.schema = schema
        self._dictionary_columns = list(dictionary_columns)
        self._source_columns = [name for name in self.schema.names if name != "payload_text"]
        self._prefix = f"part-{index:05d}-{options.job}"
        self._suffix = f"{_CODEC_SUFFIX[options.compression]}.parquet"
        self._pending: list = []
        self._pending_bytes = 0
        self._file_rows = 0
        self._writer: Any = None  # a pyarrow ParquetWriter while a file is open (pyarrow has no types)
        self._name = ""
        #: ``(file name, rows)`` of the files closed so far
        self.files: list[tuple[str, int]] = []

    def write(self, batch) -> None:
        """Add a batch of the source's rows (its partition columns are left out)."""
        import pyarrow as pa

        columns = [batch.column(name) for name in self._source_columns]
        if self.options.decode == "utf8":
            columns.append(payload_text(batch.column("payload")))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        limit = self.options.rows_per_file
        while batch.num_rows:
            take = batch.num_rows if not limit else min(batch.num_rows, limit - self._file_rows)
            part = batch if take == batch.num_rows else batch.slice(0, take)
            self._pending.append(part)
            self._pending_bytes += part.nbytes
            self._file_rows += take
            batch = batch.slice(take)
            if limit and self._file_rows >= limit:
                self._close_file()
            elif self._pending_bytes >= ROW_GROUP_BYTES:
                self._flush()

    def close(self) -> list[tuple[str, int]]:
        """Write what is buffered and close the last file; the files written."""
        if self._file_rows:
            self._close_file()
        return self.files

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._pending:
            return
        writer = self._writer
        if writer is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._name = f"{self._prefix}.c{len(self.files):03d}{self._suffix}"
            writer = self._writer = pq.ParquetWriter(
                self.directory / self._name,
                self.schema,
                compression=self.options.compression,
                use_dictionary=self._dictionary_columns,
            )
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        writer.write_table(table, row_group_size=table.num_rows)
        self._pending = []
        self._pending_bytes = 0

    def _close_file(self) -> None:
        self._flush()
        if self._writer is not None:  # (the flush opened it: the file has rows)
            self._writer.close()
        self._writer = None
        self.files.append((self._name, self._file_rows))
        self._file_rows = 0


def attempt_name() -> str:
    """This task attempt's folder name: Spark's attempt id, unique in the application."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
    except ImportError:
        context = None
    if context is None:  # called outside Spark
        return f"local-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return f"{context.stageId()}-{context.partitionId()}-{context.taskAttemptId()}"


def run_task(source: ExportSource, settings: ReadSettings, options: FileOptions, item: tuple[int, Any]) -> TaskReport:
    """One Spark task: ``item = (index, task)``; the rows ``source`` reads for
    the task go below this attempt's folder, each leaf folder's into files of
    its own.  Returns the files written and the task's counts."""
    index, task = item
    attempt = attempt_name()
    schema = file_schema(source.columns, source.partition_columns, options.decode)
    writers: dict[str, RangeWriter] = {}
    counts: dict[str, Any] = {}
    try:
        for batch in source.read(settings, task, counts):
            for leaf, rows in source.folders(task, batch):
                writer = writers.get(leaf)
                if writer is None:
                    writer = writers[leaf] = RangeWriter(
                        Path(options.staging) / ATTEMPTS / attempt / leaf,
                        index,
                        options,
                        schema,
                        source.dictionary_columns,
                    )
                writer.write(rows)
        files = [
            FileWritten(index, attempt, leaf, name, rows)
            for leaf, writer in writers.items()
            for name, rows in writer.close()
        ]
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    return TaskReport(index, files, counts)


def commit_files(staging: str | os.PathLike, files: Iterable[FileWritten]) -> int:
    """Move the files that successful attempts reported into their partition
    folders below ``staging``; remove every attempt folder.  Returns the
    number of files committed."""
    root = Path(staging)
    count = 0
    for f in files:
        target = root / f.leaf
        target.mkdir(parents=True, exist_ok=True)
        os.replace(root / ATTEMPTS / f.attempt / f.leaf / f.name, target / f.name)
        count += 1
    shutil.rmtree(root / ATTEMPTS, ignore_errors=True)
    return count


def remove_files(staging: str | os.PathLike, files: Iterable[FileWritten]) -> int:
    """Remove the committed ``files`` (a task read again
    writes them anew); returns how many were removed."""
    root = Path(staging)
    count = 0
    for f in files:
        (root / f.leaf / f.name).unlink()
        count += 1
    return count
