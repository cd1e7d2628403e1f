"""The topic export's pure parts: folder names, partitions, options."""

import pytest

from bkctl.export.columns import TOPIC_COLUMNS, arrow_schema, file_schema
from bkctl.export.output import leaf_partitions
from bkctl.export.topic_source import TopicSource, escape_partition_value
from bkctl.wire.domain.ledger_plan import SpecError


def test_topic_folders_are_escaped_as_spark_writes_them_and_read_back_by_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    topic = "persistent://public/default/a b=c%d"
    folder = f"topic={escape_partition_value(topic)}"
    assert folder == "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fa b%3Dc%25d"
    leaf = tmp_path / folder / "date=2026-11-21" / "ledger_id=7"
    leaf.mkdir(parents=True)
    pq.write_table(pa.table({"entry_id": [1]}), leaf / "part-0.parquet")
    (tmp_path / "ledger_id=8").mkdir()
    assert leaf_partitions(tmp_path) == {f"{folder}/date=2026-11-21/ledger_id=7": 7, "ledger_id=8": 8}
    part = ds.partitioning(
        pa.schema([("topic", pa.string()), ("date", pa.date32()), ("ledger_id", pa.int64())]), flavor="hive"
    )
    table = ds.dataset(str(tmp_path / folder), format="parquet", partitioning=part).to_table()
    assert table.num_rows == 1
    rows = (
        ds.dataset(str(tmp_path), format="parquet", partitioning=part, exclude_invalid_files=True)
        .to_table()
        .to_pylist()
    )
    assert [r["topic"] for r in rows if r["ledger_id"] == 7] == [topic]


def test_files_leave_out_the_partition_columns():
    pytest.importorskip("pyarrow")
    names = file_schema(TOPIC_COLUMNS, TopicSource.partition_columns).names
    assert "topic" not in names and "ledger_id" not in names
    assert set(arrow_schema(TOPIC_COLUMNS).names) - set(names) == {"topic", "ledger_id"}
    assert file_schema(TOPIC_COLUMNS, TopicSource.partition_columns, "utf8").names[-1] == "payload_text"


def test_topic_export_options():
    from bkctl.export.job import ExportOptions
    from bkctl.export.ledger_source import LedgerSelection
    from bkctl.wire.domain.topic_plan import TopicSpec

    source = TopicSource(TopicSpec("persistent://a/b/c"))
    assert source.partition_by == "topic"
    described = ExportOptions(out="x").describe(source)
    assert described["topic"] == "persistent://a/b/c" and described["partition_by"] == "topic"
    with pytest.raises(SpecError, match="--unacked-only needs --subscription"):
        TopicSpec("persistent://a/b/c", unacked_only=True)
    with pytest.raises(SpecError, match="on corrupt entries: row or skip"):
        TopicSpec("persistent://a/b/c", on_corrupt="drop")
    with pytest.raises(SpecError, match="partition by ledger_id or date"):
        LedgerSelection(partition_by="topic")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topic", "persistent://a/b/c", "--unacked-only"], "--unacked-only needs --subscription"),
        (
            ["--ledgers", "1", "--subscription", "s"],
            "--subscription, --unacked-only, --strict, --from, --to, "
            "--skip-missing, --include-pending, --raw and --schema-version go "
            "with --topic",
        ),
        (["--ledgers", "1", "--include-pending"], "--schema-version go with --topic"),
        (["--ledgers", "1", "--raw"], "--raw and --schema-version go with --topic"),
        (
            ["--topic", "persistent://a/b/c", "--raw", "--schema-version", "1"],
            "--schema-version reads values by a schema; --raw reads none",
        ),
        (["--ledgers", "1", "--topic", "persistent://a/b/c"], "give exactly one of --ledgers SPEC, --all and --topic"),
    ],
)
def test_topic_export_options_are_checked_before_anything_runs(args, message, capsys, tmp_path):
    pytest.importorskip("pyspark")
    from bkctl.cli import run

    code = run(["-m", "zk+hierarchical://127.0.0.1:1/ledgers", "export", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_the_data_source_takes_short_topic_names_and_the_strict_option():
    pytest.importorskip("pyspark")
    from bkctl.export.datasource import ReadOptions

    base = {"metadataServiceUri": "zk+hierarchical://127.0.0.1:1/ledgers"}
    spec = ReadOptions({**base, "topic": "orders", "subscription": "billing", "Strict": "true"}).source.spec
    assert (spec.topic, spec.subscription, spec.strict) == ("persistent://public/default/orders", "billing", True)
    assert ReadOptions({**base, "topic": "acme/prod/pay"}).source.spec.topic == "persistent://acme/prod/pay"
    assert ReadOptions({**base, "topic": "acme/prod/pay"}).source.spec.strict is False
    with pytest.raises(SpecError, match="not a topic name"):
        ReadOptions({**base, "topic": "ns/half"})
    with pytest.raises(SpecError, match="strict"):
        ReadOptions({**base, "topic": "orders", "strict": "maybe"})


class _DownBookies:
    """A BlockingBookKeeper whose ledgers' bookies are all down: a read fails as the real client's does."""

    def open(self, ledger_id, password):
        return self

    def read_entry(self, entry_id):
        from bkctl.wire.client.errors import BookieUnavailable

        raise BookieUnavailable("127.0.0.1:3181: connection refused")


class _Reader:
    client = staticmethod(_DownBookies)


def _schema_store(case: str):
    from bkctl.wire.pulsar.registry import schemas_base
    from tests.support import pulsar_entries as pe
    from tests.support.fake_store import FakeMetadataStore

    c = pe.schema_case(case)
    store = FakeMetadataStore().start()
    managed = f"{store.root.rsplit('/', 1)[0]}/managed-ledgers"
    store.pulsar.put_schema_locator(c["expected"]["schema_id"], c["locator"], base=schemas_base(managed))
    return store, c["expected"]["topic"]


def test_a_typed_export_whose_schema_does_not_read_refuses_instead_of_dropping_value():
    """Its only schema ledger on a bookie that is down: no rows without the
    ``value`` column a nightly job expects, but an error naming the ledger and the way out."""
    from bkctl.exitcodes import FAILED, exit_code_for
    from bkctl.export.topic_source import topic_typing
    from bkctl.wire.domain.topic_plan import TopicSpec
    from bkctl.wire.pulsar.errors import SchemaUnreadable

    store, topic = _schema_store("s_avro")
    with pytest.raises(SchemaUnreadable, match="cannot be typed; nothing exported .*--raw") as got:
        topic_typing(store, TopicSpec(topic), _Reader())
    assert "connection refused" in str(got.value) and exit_code_for(got.value) == FAILED
    # --raw is the partial result asked for: rows without `value`, said in the manifest
    view, doc = topic_typing(store, TopicSpec(topic, raw=True), _Reader())
    assert view is None and doc["why_not"] == "--raw"


def test_pushed_filters_narrow_a_window_that_holds_every_row_they_keep():
    """Spark gives timestamps in microseconds, a publish time is in milliseconds: the window
    read always holds the rows the filter keeps (Spark checks each row again)."""
    pytest.importorskip("pyspark")
    import datetime as dt

    from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThan, LessThanOrEqual, Not

    from bkctl.export.pushdown import Narrowing
    from bkctl.wire.domain.topic_plan import TopicSpec

    t = dt.datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=dt.UTC)
    ms = 1_767_225_600_123
    n = Narrowing()
    assert n.take(GreaterThan(("publish_time",), t)) and n.take(
        LessThan(("publish_time",), t + dt.timedelta(seconds=1))
    )
    assert (n.publish_from, n.publish_to) == (ms, ms + 1000 + 1)  # 123.456 ms: from 123, to before 1124
    spec = n.narrowed_spec(TopicSpec("persistent://a/b/c", from_ms=ms + 500))
    assert (spec.from_ms, spec.to_ms) == (ms + 500, ms + 1001)  # the options' window, intersected
    e = Narrowing()
    assert e.take(EqualTo(("publish_time",), t)) and (e.publish_from, e.publish_to) == (ms, ms + 1)
    assert e.take(LessThanOrEqual(("publish_time",), t)) and e.publish_to == ms + 1
    ids = Narrowing()
    assert ids.take(In(("ledger_id",), (3, 5, 7))) and ids.take(GreaterThan(("ledger_id",), 3))
    assert [i for i in range(10) if ids.keeps(i)] == [5, 7]
    assert not ids.take(Not(EqualTo(("ledger_id",), 5)))
    assert not ids.take(EqualTo(("payload_size",), 1)) and [i for i in range(10) if ids.keeps(i)] == [5, 7]
