"""``bkctl export`` of many topics in one run (``--topic`` more than once, ``--namespace``,
``--topics-from``): one Spark session, one folder per topic, a failed topic losing no other.

Apart from :mod:`~bkctl.export.job` because it is a driver of its own over the same steps: each
topic is exported as ``bkctl export --topic`` exports one -- its own :class:`~.job.Export`,
folder, lock, staging directory, manifest and summary -- into
``OUT/<tenant>/<namespace>/<topic>/`` (:func:`topic_folder`), but the tasks of every topic run in
one Spark job (:func:`~bkctl.export.job.write_all`, tolerant: a task that fails on its last
attempt fails its own topic), so that Spark's start and a job's scheduling are paid once, not
once per topic.  A topic that fails at any step -- planning (not found, a ledger gone, a schema
that does not read), its folder (another export's, locked), a task, the commit -- is named with
its reason and the exit code it would have had alone (:class:`TopicFailure`); the others are
exported all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from bkctl.wire.domain.topic_plan import TopicSpec

from .job import Export, ExportOptions, ExportProgress, ProgressCallback, cause_exit_code, write_all
from .output import local_path
from .spark_session import spark_session, stop_spark
from .summary import ExportedTopic, TopicExportSummary
from .topic_source import TopicSource

__all__ = ["TopicFailure", "TopicsExported", "read_topics_file", "run_topic_exports", "topic_folder"]


@dataclass(frozen=True)
class TopicFailure:
    """A topic not exported: why (one line), and the exit code its export alone would have had."""

    topic: str
    out: str
    error: str
    exit_code: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "out": self.out, "error": self.error, "exit_code": self.exit_code}


@dataclass(frozen=True)
class TopicsExported:
    """What :func:`run_topic_exports` did: each exported topic's summary (``bkctl export --topic``'s,
    with ``topic``), in the order asked, and the topics that failed."""

    out: str
    exports: list[ExportedTopic]
    failed: list[TopicFailure]
    seconds: float
    master: str

    @property
    def exit_code(self) -> int:
        """0 when every topic was exported; else the failed topics' exit code when they share
        one (every topic unreachable: 5), otherwise 1."""
        from ..exitcodes import FAILED, OK

        codes = {f.exit_code for f in self.failed}
        return OK if not codes else codes.pop() if len(codes) == 1 else FAILED

    def to_json(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "topics": len(self.exports) + len(self.failed),
            "exported": len(self.exports),
            "exports": self.exports,  # (each as the CLI's encoder writes a result)
            "failed": [f.to_json() for f in self.failed],
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "master": self.master,
        }


def topic_folder(root: Path, topic: str) -> Path:
    """A topic's folder below ``root``: ``<tenant>/<namespace>/<topic>`` (a v1 name's namespace
    ``<cluster>/<namespace>``), the topic's local name as its managed ledger's znode spells it
    (URL-encoded: a name that is not a plain word cannot reach outside its folder)."""
    from bkctl.wire.pulsar.managed_ledger import TopicName, encode_local_name

    name = TopicName.parse(topic)
    parts = [name.tenant, *name.namespace.split("/"), encode_local_name(name.local)]
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{topic}: not a folder name below --out")
    return root.joinpath(*parts)


def read_topics_file(path: str) -> list[str]:
    """The topics a ``--topics-from`` file names: one a line, blank lines and ``#`` comments
    left out (``-``: standard input)."""
    import sys

    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def _failure(topic: str, folder: Path | str, exc: BaseException) -> TopicFailure:
    from ..exitcodes import describe, exit_code_for

    return TopicFailure(topic, str(folder), describe(exc), exit_code_for(exc))


def _progress(exports: Iterable[Export]) -> ExportProgress:
    """The plan's progress of ``exports`` together."""
    total = ExportProgress("plan")
    for e in exports:
        p = e.planned()
        total.tasks_total += p.tasks_total
        total.entries_total += p.entries_total
        total.ledgers_done += p.ledgers_done
        total.ledgers_total += p.ledgers_total
    return total


def run_topic_exports(
    store,
    uri: str,
    specs: list[TopicSpec],
    options: ExportOptions,
    *,
    progress: ProgressCallback | None = None,
    info: Callable[[str], None] | None = None,
) -> TopicsExported:
    """Export each topic of ``specs`` into its :func:`topic_folder` below ``options.out`` (see
    the module documentation); returns the topics' summaries and failures."""
    from ..exitcodes import FAILED
    from .executor import LedgerReader

    t0 = time.monotonic()
    say = info or (lambda _msg: None)
    root = local_path(options.out)
    order = {spec.topic: i for i, spec in enumerate(specs)}
    failed: list[TopicFailure] = []
    planned: list[tuple[TopicSpec, Export]] = []
    with LedgerReader.on_driver(options.read_settings(uri), store) as reader:
        for spec in specs:
            folder: Path | str = root
            try:
                folder = topic_folder(root, spec.topic)
                export = Export(TopicSource(spec), replace(options, out=str(folder)), uri)
                export.make_plan(store, reader)
            except Exception as exc:  # noqa: BLE001 - this topic's failure, said with its reason
                failed.append(_failure(spec.topic, folder, exc))
                continue
            planned.append((spec, export))
    summaries: list[ExportedTopic] = []
    master = options.master
    with ExitStack() as stack:
        ready: list[tuple[TopicSpec, Export]] = []
        for spec, export in planned:
            try:
                stack.enter_context(export.out.locked())
                export.check()
            except Exception as exc:  # noqa: BLE001 - another topic's folder, or locked: this topic's failure
                failed.append(_failure(spec.topic, export.out.path, exc))
                continue
            ready.append((spec, export))
        exports = [e for _, e in ready]
        if progress is not None:
            progress(_progress(exports))
        to_read = [e for e in exports if e.to_read]
        if to_read:
            t = time.monotonic()
            say(f"starting Spark ({master})...")
            spark, created = spark_session(master, options.spark_conf, quiet=options.quiet, verbose=options.verbose)
            master = spark.sparkContext.master
            for e in exports:
                e.timings["spark_start"] = time.monotonic() - t
            try:
                say(
                    f"exporting {len(to_read)} topics: {sum(len(e.plan.tasks) for e in to_read)} tasks in one "
                    "Spark job..."
                )
                write_all(spark, exports, progress, say, tolerant=True)
            finally:
                if created:
                    stop_spark(spark)
        for spec, export in ready:
            if export.failure is not None:
                code = cause_exit_code(export.failure) or FAILED
                failed.append(TopicFailure(spec.topic, str(export.out.path), f"a task failed: {export.failure}", code))
                continue
            try:
                done = export.complete(master)
                assert isinstance(done, TopicExportSummary)  # (a TopicSource's)
                summaries.append(
                    ExportedTopic(**{f.name: getattr(done, f.name) for f in fields(done)}, topic=spec.topic)
                )
            except Exception as exc:  # noqa: BLE001 - what its tasks wrote does not check out: this topic's
                failed.append(_failure(spec.topic, export.out.path, exc))
    summaries.sort(key=lambda s: order[s.topic])
    failed.sort(key=lambda f: order[f.topic])
    return TopicsExported(str(root), summaries, failed, time.monotonic() - t0, master)
