"""``bkctl export``: ledgers to Spark-ready Parquet through PySpark."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from ..app import App
from ..completers import complete_subscription, complete_topic
from ..exitcodes import FAILED, USAGE, CommandError
from ..render import human_size, plural
from . import pass_app
from .offload_options import offload_options, offload_settings

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from ..export.source import ExportSource
    from ..export.summary import ExportSummary

EPILOG = """\b
Output: Hive-style folders ledger_id=N/ (or date=YYYY-MM-DD/ledger_id=N/ with
--partition-by date, the UTC day of the ledger's ctime) of Parquet files with
the columns ledger_id, entry_id, payload, payload_size, ledger_ctime,
ledger_state, ledger_metadata (and payload_text with --decode utf8), plus
_manifest.json and _SUCCESS.  Each Spark task reads a range of entries and
writes its Parquet files itself (no rows pass through the JVM) into a staging
folder next to DIR that replaces DIR only when everything was written and
checked, so a failed export leaves the previous one untouched.

\b
Re-exporting: by default the partitions of the exported ledgers are replaced
and every other ledger's partitions are kept (re-running is idempotent);
--overwrite replaces the whole folder, --append adds rows to what is there.
One folder holds one topic with one set of columns: another topic, or the
same topic with another `value` type (--raw, a changed schema), into a
folder that holds an export is refused (exit 4) naming the folder to use.

\b
Pulsar topics: --topic persistent://tenant/ns/topic exports one row per
message (columns topic, partition, base_topic, ledger_id, entry_id,
batch_index, message_id, publish_time, event_time, producer_name,
sequence_id, key, key_base64_encoded, ordering_key, properties, schema_version, payload,
payload_size, encrypted, encryption_keys, encryption_key_values,
encryption_algo, encryption_param, encryption_compression,
encryption_uncompressed_size, encryption_batch_size, index,
broker_timestamp, replicated_from, deliver_at_time, txn_id, pending, error;
schema_version is the registry's version number, null without one;
base_topic the partitioned topic a partition belongs to, else the topic)
into topic=T/date=YYYY-MM-DD/ledger_id=N/ (the UTC day of the publish time),
from the ledgers the topic's managed ledger lists: closed ledgers to their
last entry, the open one to its newest entry that an ack quorum of its
bookies holds -- past its last add confirmed, as its broker would recover
it, read without fencing anything (the summary and the manifest's
read_past_lac count those entries).  --subscription reads the cursor's
position the same way from its cursor ledger; when it can only come from
the cursor's znode (an older position) that is a warning, and with --strict
exit 1.  Batches are split, compressed payloads decompressed, chunked
messages joined; encrypted ones are kept as stored, with their encryption
context (what decrypting them later takes).  A corrupt entry or an
incomplete chunked message is a warning and an error row (or skipped with
--on-corrupt skip).

\b
Many topics: --topic more than once, --namespace TENANT/NS and --topics-from
FILE export each topic as --topic alone does, into DIR/TENANT/NS/TOPIC/ (a
folder, manifest and dataset each; spark.read.parquet of that folder), all
their tasks in one Spark job.  A topic that fails is named on stderr with its
reason and exit code, and the others are exported all the same; the exit
code is 0 when all were exported, else the failed topics' shared code, else
1.  --json: exports (each topic's summary) and failed (topic, out, error,
exit_code).

\b
Offloaded ledgers: a ledger Pulsar offloaded to tiered storage (S3 or an
S3-compatible store, or the filesystem offloader's MapFiles) is read from
there -- its bucket, region and endpoint (or base path) from its managed
ledger's offload context, credentials from the standard AWS chain
(AWS_ACCESS_KEY_ID..., AWS_PROFILE, a role; never printed) -- by default
whenever its offload is complete, as a broker does (--offload-read
bookkeeper-first: from BookKeeper while it still has it); each ledger is
read once.  --s3-endpoint replaces the recorded endpoint, --offload-root
the filesystem's base path.  Refused credentials exit 6, a missing object
3, a store that does not answer within --offload-timeout 5.

\b
Typed values: a topic with a schema (in Pulsar's registry, read from its
ledgers as a broker reads it: `bkctl pulsar schema`) gets a `value` column
after these, each message decoded by the schema version it carries -- AVRO,
JSON (by its Avro definition), PROTOBUF_NATIVE (by its descriptor),
KEY_VALUE (INLINE or SEPARATED: a struct of key and value) and the
primitive types -- as typed Spark columns: records as structs, arrays,
maps, enums as strings, dates, timestamps and decimals.  Messages of older
versions are read by Avro's resolution rules as the newest readable version
(added fields take their defaults); --schema-version N reads every message
as version N instead.  A message that does not decode (its version's ledger
gone, a version that cannot be resolved, bad bytes) keeps its row with
`value` null and `error` naming the topic, the message id and why, and is
counted in the summary and the manifest's `schema` section.  A topic without
a schema, or with BYTES, gets no `value` (its payload is the value); --raw
leaves `value` out whatever the schema.  A topic with a schema none of whose
versions reads (their ledgers' bookies down) exports nothing (exit 1, the
ledger named): its `value` column is never dropped without --raw.  `SELECT value.amount FROM t`, or
`value.*`, in Spark SQL.

\b
--from/--to are pushed down, as Pulsar SQL's __publish_time__ was: ledgers
wholly outside the window by the managed ledger's timestamps are not read
(closed before --from; created, when the ledger before closed, after --to),
and inside a ledger the first and last entries of the window are found by
bisecting on the entries' publish times, a minute of slack either side for
clocks and batching; every message read is still checked against the window
exactly.  The summary and the manifest's pushdown section count the entries
read and skipped and the bisection's reads.

\b
The rows are what a consumer of the topic receives, by Pulsar's rules: marker
entries (replicated-subscription snapshots, transaction commit/abort) are
never rows; a transaction's messages are rows once it committed (txn_id
says which) and never when it aborted; a transaction still open holds back
every message from its first one on (Pulsar's maxReadPosition): the export
stops there and says so, or with --include-pending exports them with
pending = true.  A line counts what was left out and why.  The tasks find
the transactions' outcomes as they read; only the ranges whose rows that
changes (messages of aborted transactions, what an open one holds back) are
read again.

\b
Clusters: --master spark://host:7077 (or yarn, k8s://...) runs the reads on
the executors, which need `pip install 'bkctl[spark]'`, must reach ZooKeeper
and the bookies, and must see DIR at the same path (a shared mount); set
PYSPARK_PYTHON to that Python if it is not the executors' python3.

\b
A failed export is one line on stderr (-v: the traceback and Spark's logs of
the failed tasks); with --json stdout gets a document then too: out, error
(that line), exported (false).
"""


def _ctime(ctx, param, value):
    if value is None:
        return None
    from ..wire.domain.ledger_plan import SpecError, parse_ctime

    try:
        return parse_ctime(value)
    except SpecError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("export", epilog=EPILOG)
@click.option(
    "-o",
    "--out",
    required=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Output folder (created if missing).",
)
@click.option("-l", "--ledgers", "ledger_spec", metavar="SPEC", help="Ledger ids and ranges: 1,2,5-9.")
@click.option("--all", "all_ledgers", is_flag=True, help="Every ledger of the cluster.")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC",
    shell_complete=complete_topic,
    help="A Pulsar topic (persistent://tenant/ns/topic, tenant/ns/topic, or a bare name in public/default; "
    "every partition of a partitioned one): one row per message, from the ledgers its managed ledger "
    "lists.  Given more than once: each topic into DIR/TENANT/NS/TOPIC/, in one Spark job.",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="TENANT/NS",
    help="Every topic of the namespace (a partitioned one whole), each into DIR/TENANT/NS/TOPIC/, in one "
    "Spark job (repeatable; with --topic and --topics-from too).",
)
@click.option(
    "--topics-from",
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The topics named in FILE, one a line (# comments; - reads stdin), each into DIR/TENANT/NS/TOPIC/, "
    "in one Spark job.",
)
@click.option(
    "--subscription",
    metavar="SUB",
    shell_complete=complete_subscription,
    help="With --topic: the subscription whose cursor --unacked-only uses.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="With --subscription: exit 1 when the subscription's position can only be read from its znode "
    "although it keeps a cursor ledger (else a warning).",
)
@click.option("--unacked-only", is_flag=True, help="With --subscription: only the messages it has not acknowledged.")
@click.option(
    "--from",
    "from_time",
    callback=_ctime,
    metavar="TIME",
    help="With --topic: only messages published at or after TIME (ledgers wholly before it are not read).",
)
@click.option(
    "--to",
    "to_time",
    callback=_ctime,
    metavar="TIME",
    help="With --topic: only messages published before TIME (ledgers wholly after it are not read).",
)
@click.option(
    "--skip-missing",
    is_flag=True,
    help="With --topic: export the rest when ledgers the managed ledger lists are deleted (else exit 3).",
)
@click.option(
    "--on-corrupt",
    type=click.Choice(["row", "skip"]),
    default="row",
    show_default=True,
    help="With --topic: a corrupt entry becomes a row with `error` set, or is skipped (reported either way).",
)
@click.option(
    "--include-pending",
    is_flag=True,
    help="With --topic: also the messages an open transaction holds back from consumers (its own and "
    "every later one), with pending = true; by default the export stops at the open transaction's "
    "first message.",
)
@click.option("--raw", is_flag=True, help="With --topic: no `value` column typed by the topic's schema.")
@click.option(
    "--schema-version",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --topic: read every message's value as schema version N (default: the newest readable).",
)
@click.option(
    "--managed-ledgers",
    metavar="PATH",
    help="With --topic: Pulsar's managed-ledger root in ZooKeeper (default: beside the ledger root).",
)
@click.option(
    "--since",
    callback=_ctime,
    metavar="CTIME",
    help="Only ledgers created at or after CTIME (2026-11-21, 2026-11-21T10:00Z, epoch ms, 7d).",
)
@click.option("--until", callback=_ctime, metavar="CTIME", help="Only ledgers created before CTIME.")
@click.option(
    "--partition-by",
    type=click.Choice(["ledger_id", "date"]),
    default="ledger_id",
    show_default=True,
    help="Folder layout.",
)
@click.option(
    "--compression",
    type=click.Choice(["zstd", "snappy", "none"]),
    default="zstd",
    show_default=True,
    help="Parquet compression codec.",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    metavar="URL",
    help="Spark master: local[N], spark://host:7077, yarn, ...",
)
@click.option(
    "--rows-per-file",
    type=click.IntRange(0),
    default=0,
    metavar="N",
    help="At most N rows per Parquet file (0: no limit).",
)
@click.option("--overwrite", is_flag=True, help="Replace everything in DIR.")
@click.option("--append", is_flag=True, help="Add rows to DIR, keeping what is there.")
@click.option("--decode", type=click.Choice(["utf8"]), help="Add payload_text (invalid UTF-8 becomes U+FFFD).")
@click.option("--include-open", is_flag=True, help="Also ledgers that are not closed, up to their last add confirmed.")
@click.option(
    "--split-entries",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    metavar="N",
    help="Entries per Spark task at most (larger ledgers are read by several tasks; a topic's ledger "
    "of known size also by tasks of about 128 MiB).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    metavar="N",
    help="Entries per read batch inside a task.",
)
@click.option(
    "--protocol",
    type=click.Choice(["v3", "v2"]),
    help="Bookie protocol of the readers (default: bkctl's --protocol). Over v2, ledgers whose "
    "ensemble size equals their write quorum are read with batch reads (bookies 4.17+; "
    "older ones fall back).",
)
@click.option("--password", metavar="TEXT", help="Ledger password (default: the one stored in the metadata).")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark configuration.")
@click.option(
    "--offload-read",
    type=click.Choice(["tiered-storage-first", "bookkeeper-first"]),
    default="tiered-storage-first",
    show_default=True,
    help="With --topic: where a ledger both offloaded and still in BookKeeper is read (Pulsar's "
    "managedLedgerDataReadPriority).",
)
@offload_options
@pass_app
def export(
    app: App,
    out,
    ledger_spec,
    all_ledgers,
    topics,
    namespaces,
    topics_from,
    subscription,
    strict,
    unacked_only,
    from_time,
    to_time,
    skip_missing,
    on_corrupt,
    include_pending,
    raw,
    schema_version,
    managed_ledgers,
    since,
    until,
    partition_by,
    compression,
    master,
    rows_per_file,
    overwrite,
    append,
    decode,
    include_open,
    split_entries,
    batch_size,
    protocol,
    password,
    spark_conf,
    offload_read,
    s3_endpoint,
    offload_root,
    offload_timeout,
):
    """Export ledgers, or Pulsar topics' messages, to Parquet that Spark, pyarrow and friends read directly."""
    topic = bool(topics or namespaces or topics_from)
    many = len(topics) > 1 or bool(namespaces or topics_from)  # a folder per topic below DIR
    if sum(map(bool, (ledger_spec, all_ledgers, topic))) != 1:
        raise CommandError(
            "give exactly one of --ledgers SPEC, --all and --topic TOPIC (or --namespace, --topics-from)", USAGE
        )
    if not topic and (
        subscription
        or unacked_only
        or from_time is not None
        or to_time is not None
        or skip_missing
        or strict
        or include_pending
        or raw
        or schema_version is not None
    ):
        raise CommandError(
            "--subscription, --unacked-only, --strict, --from, --to, --skip-missing, "
            "--include-pending, --raw and --schema-version go with --topic",
            USAGE,
        )
    if overwrite and append:
        raise CommandError("--overwrite and --append cannot be used together", USAGE)
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise CommandError(
            f"bkctl export needs PySpark and pyarrow ({exc}): pip install 'bkctl[spark]'", FAILED
        ) from None
    from ..export.job import ExportOptions, run_export
    from ..export.ledger_source import LedgerSelection, LedgerSource
    from ..export.output import local_path
    from ..export.topic_source import TopicSource
    from ..wire.domain.ledger_plan import SpecError, parse_ledger_spec
    from ..wire.domain.topic_plan import TopicSpec

    conf = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--conf {item!r}: want KEY=VALUE", USAGE)
        conf[key.strip()] = value
    source: ExportSource
    try:
        local_path(out)
        spec = functools.partial(
            TopicSpec,
            subscription=subscription,
            unacked_only=unacked_only,
            from_ms=from_time,
            to_ms=to_time,
            skip_missing=skip_missing,
            on_corrupt=on_corrupt,
            managed_ledgers=managed_ledgers,
            strict=strict,
            include_pending=include_pending,
            raw=raw,
            schema_version=schema_version,
            offload_read=offload_read,
            scan_first=False,
        )
        if topic and not many:
            source = TopicSource(spec(topic=topics[0]))
        elif not topic:
            source = LedgerSource(
                LedgerSelection(
                    spec=parse_ledger_spec("all" if all_ledgers else ledger_spec),
                    since_ms=since,
                    until_ms=until,
                    include_open=include_open,
                    partition_by=partition_by,
                )
            )
        options = ExportOptions(
            out=out,
            compression=compression,
            master=master,
            rows_per_file=rows_per_file,
            mode="overwrite" if overwrite else "append" if append else "replace",
            decode=decode,
            split_entries=split_entries,
            batch_size=batch_size,
            protocol=protocol or app.protocol,
            password=password,
            spark_conf=conf,
            quiet=app.quiet,
            verbose=app.verbose > 0,
            bookie_tls=app.bookie_tls or None,
            offload=offload_settings(s3_endpoint, offload_root, offload_timeout),
        )
    except (SpecError, ValueError) as exc:
        raise CommandError(str(exc), USAGE) from None
    uri = app.require_uri()
    store = app.store
    if many:
        _export_topics(app, store, uri, spec, options, topics, namespaces, topics_from, managed_ledgers)
        return
    from bkctl.wire.domain.topic_state import CursorFallback

    with _progress_display(app) as progress:
        try:
            summary = run_export(store, uri, source, options, progress=progress, info=app.info)
        except CursorFallback as exc:
            _failed_json(app, out, str(exc))
            raise CommandError(str(exc), FAILED) from None
        except Exception as exc:
            from ..exitcodes import describe

            _failed_json(app, out, describe(exc))
            raise
    _say_warnings(app, summary)
    if app.json:
        app.emit_json(summary)
        return
    if not app.quiet:
        _say_summary(app, summary)


def _say_warnings(app: App, summary: ExportSummary) -> None:
    """What a topic export's summary says on stderr: a subscription's position older than its
    broker's, and (without -q) corrupt entries, incomplete chunked messages, values that do not
    decode (a ledger export's: nothing)."""
    from ..export.summary import TopicExportSummary

    if not isinstance(summary, TopicExportSummary):
        return
    for warning in summary.warnings:  # a subscription's position older than its broker's
        app.err_console.print(f"bkctl: warning: {warning}", highlight=False, soft_wrap=True)
    if not app.quiet:  # corrupt entries and incomplete chunked messages: never silent
        for p in summary.problems[:20]:
            app.err_console.print(
                f"bkctl: warning: {p['topic']} ledger {p['ledger_id']} entry {p['entry_id']}: {p['reason']}",
                highlight=False,
                soft_wrap=True,
            )
        typed = summary.schema
        for f in typed.get("first_decode_errors") or []:  # messages that do not decode by their schema: error rows
            app.err_console.print(
                f"bkctl: warning: {f['topic']} message {f['message_id']}: does not decode by its schema: {f['reason']}",
                highlight=False,
                soft_wrap=True,
            )
        if typed.get("decode_errors", 0) > len(typed.get("first_decode_errors") or []):
            app.err_console.print(
                f"bkctl: warning: ... and more messages that do not decode (see {summary.manifest})",
                highlight=False,
                soft_wrap=True,
            )
        if len(summary.problems) > 20:
            app.err_console.print(
                f"bkctl: warning: ... and {len(summary.problems) - 20} more problems (see {summary.manifest})",
                highlight=False,
                soft_wrap=True,
            )


def _say_summary(app: App, summary: ExportSummary) -> None:
    """The lines of an export's summary on stdout."""
    from ..export.summary import TopicExportSummary

    skipped = summary.skipped
    if isinstance(summary, TopicExportSummary):
        app.console.print(
            f"exported {plural(summary.messages, 'message')} ({human_size(summary.bytes)}) from "
            f"{plural(summary.entries, 'entry', 'entries')} of {plural(summary.ledgers, 'ledger')} of "
            f"{', '.join(summary.topics)} to {summary.out} in {summary.seconds:.1f}s: "
            f"{plural(summary.files, 'file')}, master {summary.master}",
            highlight=False,
        )
        if summary.read_past_lac:
            app.console.print(
                f"  {plural(summary.read_past_lac, 'entry', 'entries')} of open ledgers read "
                "past their last add confirmed (held by an ack quorum of their bookies; see "
                "read_past_lac in the manifest)",
                highlight=False,
            )
    else:
        app.console.print(
            f"exported {plural(summary.entries, 'entry', 'entries')} ({human_size(summary.bytes)}) of "
            f"{plural(summary.ledgers, 'ledger')} to {summary.out} in {summary.seconds:.1f}s: "
            f"{plural(summary.files, 'file')}, master {summary.master}"
        )
    if isinstance(summary, TopicExportSummary):
        push = summary.pushdown
        if push:
            app.console.print(
                f"  --from/--to: {plural(push['entries_read'], 'entry', 'entries')} read, "
                f"{plural(push['entries_skipped'], 'entry', 'entries')} and "
                f"{plural(push['ledgers_skipped'], 'whole ledger')} skipped "
                f"({plural(push['bisection_reads'], 'entry', 'entries')} read to find the edges)",
                highlight=False,
                soft_wrap=True,
            )
        typed = summary.schema
        if typed.get("typed"):
            app.console.print(
                f"  values typed by schema version {typed['reader_version']} ({typed['type']})"
                + (
                    f"; {plural(typed['decode_errors'], 'message')} did not decode (error rows)"
                    if typed["decode_errors"]
                    else ""
                ),
                highlight=False,
                soft_wrap=True,
            )
        from ..export.topic_transactions import left_out_text

        line = left_out_text(summary.left_out, summary.transactions)
        if line:
            app.console.print(f"  {line}", highlight=False, soft_wrap=True)
    for s in skipped[:20]:
        app.console.print(f"  skipped ledger {s.ledger_id}: {s.reason}")
    if len(skipped) > 20:
        app.console.print(f"  ... and {len(skipped) - 20} more skipped (see {summary.manifest})")


def _export_topics(app: App, store, uri: str, spec, options, topics, namespaces, topics_from, managed_ledgers) -> None:
    """``bkctl export`` of many topics (``--topic`` more than once, ``--namespace``,
    ``--topics-from``): each into DIR/TENANT/NS/TOPIC/ in one Spark job; a topic that fails is
    named with its reason, the others exported all the same; exit code: 0, else the failed
    topics' shared code, else 1 (:attr:`~bkctl.export.topics_job.TopicsExported.exit_code`)."""
    from ..exitcodes import NOT_FOUND
    from ..export.topics_job import read_topics_file, run_topic_exports
    from ..wire.domain.ledger_plan import SpecError
    from ..wire.domain.topic_plan import namespace_topics

    names = list(topics)
    try:
        for namespace in namespaces:
            found = namespace_topics(store, namespace, managed_ledgers)
            if not found:
                raise CommandError(f"namespace {namespace} has no topics (no managed ledger below it)", NOT_FOUND)
            names += found
        if topics_from:
            names += read_topics_file(topics_from)
        specs = list({s.topic: s for s in map(lambda name: spec(topic=name), names)}.values())
    except SpecError as exc:
        raise CommandError(str(exc), USAGE) from None
    except OSError as exc:
        raise CommandError(f"--topics-from {topics_from}: {exc.strerror or exc}", USAGE) from None
    if not specs:
        raise CommandError(f"--topics-from {topics_from} names no topics", USAGE)
    with _progress_display(app) as progress:
        try:
            done = run_topic_exports(store, uri, specs, options, progress=progress, info=app.info)
        except Exception as exc:
            from ..exitcodes import describe

            _failed_json(app, options.out, describe(exc))
            raise
    for summary in done.exports:
        _say_warnings(app, summary)
    for failure in done.failed:
        app.err_console.print(
            f"bkctl: error: {failure.topic}: {failure.error} (exit {failure.exit_code})",
            highlight=False,
            soft_wrap=True,
        )
    if app.json:
        app.emit_json(done.to_json())
    elif not app.quiet:
        for summary in done.exports:
            _say_summary(app, summary)
        app.console.print(
            f"exported {len(done.exports)} of {plural(len(specs), 'topic')} to {done.out} in {done.seconds:.1f}s, "
            f"one folder each (TENANT/NS/TOPIC), master {done.master}"
            + (f"; {len(done.failed)} failed" if done.failed else ""),
            highlight=False,
            soft_wrap=True,
        )
    if done.failed:
        raise CommandError(
            f"{len(done.failed)} of {plural(len(specs), 'topic')} not exported: "
            + ", ".join(f.topic for f in done.failed[:5])
            + (", ..." if len(done.failed) > 5 else ""),
            done.exit_code,
        )


def _failed_json(app: App, out: str, error: str) -> None:
    """With --json, a document on failure too (as decommission prints its own): where the export
    was going and the one line stderr gets."""
    if app.json:
        app.emit_json({"out": str(out), "error": error, "exported": False})


class _progress_display:
    """A rich progress bar on stderr, only when it is a terminal (and not --json/-q)."""

    def __init__(self, app: App):
        self.app = app
        self.bar: Progress | None = None
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self):
        app = self.app
        if app.json or app.quiet or not app.err_console.is_terminal:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=app.err_console,
            transient=True,
        )
        bar.start()
        self.tasks["ledgers"] = bar.add_task("ledgers", total=None)
        self.tasks["entries"] = bar.add_task("entries", total=None)
        return self.update

    def update(self, p) -> None:
        if self.bar is None:
            return
        self.bar.update(self.tasks["ledgers"], completed=p.ledgers_done, total=p.ledgers_total or None)
        self.bar.update(self.tasks["entries"], completed=p.entries_done, total=p.entries_total or None)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
