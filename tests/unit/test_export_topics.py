"""The pieces of ``bkctl export`` of many topics (:mod:`bkctl.export.topics_job`) that need no
cluster: which topics a namespace gives, each topic's folder, the topics file, the exit code, and
a task of a tolerant job failing its own export only on its last attempt (the whole run against
real ZooKeeper, bookieds and Spark: tests/integration/test_export_topics.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bkctl.export.job import TaskFailed, run_export_task, task_attempts
from bkctl.export.topics_job import TopicFailure, TopicsExported, read_topics_file, topic_folder
from bkctl.wire.domain.ledger_plan import SpecError
from bkctl.wire.domain.topic_plan import namespace_topics
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support.fake_store import FakeMetadataStore


def test_a_namespace_gives_its_topics_a_partitioned_one_once():
    store = FakeMetadataStore().start()
    info = ml.ManagedLedgerInfo().SerializeToString()
    for name in ("b", "a", "p-partition-1", "p-partition-0", "x y"):
        store.pulsar.put_managed_ledger(f"t/ns/persistent/{name.replace(' ', '+')}", info)
    store.pulsar.put_managed_ledger("t/other/persistent/c", info)
    store.pulsar.put_managed_ledger("t/cl/old/persistent/v1", info)
    assert namespace_topics(store, "t/ns") == [
        "persistent://t/ns/a",
        "persistent://t/ns/b",
        "persistent://t/ns/p",
        "persistent://t/ns/x y",
    ]
    assert namespace_topics(store, "t/cl/old") == ["persistent://t/cl/old/v1"]  # a v1 name's namespace
    assert namespace_topics(store, "t/none") == []
    for bad in ("t", "t/", "/ns", "a/b/c/d"):
        with pytest.raises(SpecError, match="not a namespace"):
            namespace_topics(store, bad)


def test_each_topic_has_a_folder_of_its_own_that_stays_below_the_root():
    root = Path("/exports")
    assert topic_folder(root, "persistent://t/ns/orders") == root / "t" / "ns" / "orders"
    assert topic_folder(root, "orders") == root / "public" / "default" / "orders"
    assert topic_folder(root, "t/ns/p-partition-2") == root / "t" / "ns" / "p-partition-2"
    assert topic_folder(root, "persistent://t/cl/ns/old") == root / "t" / "cl" / "ns" / "old"
    # the local name as the managed ledger's znode spells it: no slash, no way out
    assert topic_folder(root, "persistent://t/cl/ns/a/../b") == root / "t" / "cl" / "ns" / "a%2F..%2Fb"
    with pytest.raises(ValueError, match="not a folder name"):
        topic_folder(root, "persistent://t/ns/..")


def test_a_topics_file_is_one_a_line_with_comments(tmp_path, monkeypatch):
    f = tmp_path / "topics"
    f.write_text("# nightly\norders\n\n  t/ns/x   # the x\n#t/ns/y\n")
    assert read_topics_file(str(f)) == ["orders", "t/ns/x"]
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\n"))
    assert read_topics_file("-") == ["a", "b"]


def test_the_exit_code_is_the_failures_own_when_they_share_one():
    def done(*codes):
        return TopicsExported("/o", [], [TopicFailure(f"t{i}", "/o", "why", c) for i, c in enumerate(codes)], 1.0, "m")

    assert done().exit_code == 0
    assert done(3, 3).exit_code == 3
    assert done(5).exit_code == 5
    assert done(3, 4).exit_code == 1
    doc = done(4).to_json()
    assert (doc["topics"], doc["exported"], doc["exit_code"]) == (1, 0, 4)
    assert doc["failed"] == [{"topic": "t0", "out": "/o", "error": "why", "exit_code": 4}]


def test_spark_tries_a_task_once_on_local_masters_else_by_its_setting():
    assert task_attempts("local[*]", None) == 1
    assert task_attempts("local", "8") == 1
    assert task_attempts("local[2]", None) == 1
    assert task_attempts("local[2, 3]", None) == 3
    assert task_attempts("local[*,4]", None) == 4
    assert task_attempts("spark://h:7077", None) == 4
    assert task_attempts("yarn", "2") == 2


class _Failing:
    """A source whose every read fails (the rest of the protocol is not reached)."""

    columns = ()
    partition_columns = ()
    dictionary_columns = ()

    def read(self, settings, task, counts):
        from bkctl.wire.errors import NotFound

        raise NotFound(f"ledger {task} is gone")


def test_a_tolerant_tasks_last_attempt_returns_its_failure_and_an_earlier_one_raises(tmp_path, monkeypatch):
    from bkctl.export import job
    from bkctl.export.job import ExportTasks
    from bkctl.export.writing import FileOptions
    from bkctl.wire.errors import NotFound

    jobs = [None, ExportTasks(_Failing(), None, FileOptions(staging=str(tmp_path), job="j"))]
    # a job that is not tolerant raises, as Spark fails the job with it
    with pytest.raises(NotFound):
        run_export_task(jobs, 0, (1, 0, 7))
    monkeypatch.setattr(job, "attempt_number", lambda: 0)
    with pytest.raises(NotFound):  # Spark tries again
        run_export_task(jobs, 2, (1, 0, 7))
    monkeypatch.setattr(job, "attempt_number", lambda: 1)
    assert run_export_task(jobs, 2, (1, 0, 7)) == (1, TaskFailed(0, "bkctl.wire.errors.NotFound: ledger 7 is gone"))
    # the cause's exit code is the category's, as a single export's failed job gives it
    assert job.cause_exit_code("bkctl.wire.errors.NotFound: ledger 7 is gone") == 3


def test_a_topic_summary_is_the_ledger_summary_with_the_topics_keys():
    """``--json``'s document of an export's summary: a ledger export's counts its rows as
    entries; a topic export's has messages (its rows) and entries (read) both, and ``topic``
    only in a run of many."""
    from bkctl.app import encode_json
    from bkctl.export.summary import ExportedTopic, ExportSummary, LeftOut, TopicExportSummary
    from bkctl.ops.results import to_json
    from bkctl.wire.domain.ledger_plan import SkippedLedger

    base = ExportSummary(
        "/o",
        2,
        9,
        100,
        1,
        1.5,
        "local[1]",
        "replace",
        "topic",
        [3, 4],
        [SkippedLedger(4, "why")],
        "/o/m",
        {"plan": 0.1},
    )
    doc = to_json(base)
    assert doc["entries"] == 9 and "messages" not in doc and doc["skipped"] == [{"ledger_id": 4, "reason": "why"}]
    assert json.loads(encode_json(base)) == doc  # what --json prints: the same keys
    gone = SkippedLedger(5, "listed by the managed ledger but deleted", "persistent://t/n/a")
    topic = TopicExportSummary(
        **{**{k: getattr(base, k) for k in doc}, "entries": 3, "skipped": [gone]},
        messages=9,
        topics=["persistent://t/n/a"],
        problems=[],
        read_past_lac=0,
        warnings=[],
        left_out=LeftOut(aborted=2),
        transactions={},
        schema={},
        pushdown=None,
    )
    doc = to_json(topic)
    assert (doc["messages"], doc["entries"], doc["pushdown"]) == (9, 3, None) and "topic" not in doc
    # a topic's skipped ledger names its topic (the manifest's document of it, as --json's)
    assert doc["skipped"] == [
        {"ledger_id": 5, "topic": "persistent://t/n/a", "reason": "listed by the managed ledger but deleted"}
    ]
    assert json.loads(encode_json(topic)) == doc
    assert doc["left_out"] == {"markers": {}, "aborted": 2, "pending": 0, "pending_kept": 0}
    named = ExportedTopic(**{f.name: getattr(topic, f.name) for f in dataclasses.fields(topic)}, topic="t")
    assert to_json(named) == {**doc, "topic": "t"}
    done = to_json(TopicsExported("/o", [named], [], 1.0, "m"))
    assert done["exports"] == [{**doc, "topic": "t"}] and done["exported"] == 1
