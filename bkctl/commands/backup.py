"""``bkctl backup`` and ``bkctl restore``: ledgers and Pulsar topics to an archive and back
(the work is :mod:`bkctl.backup`'s)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import click

from ..app import App, confirm_destructive
from ..completers import complete_topic
from ..exitcodes import FAILED, PARTIAL, USAGE, CommandError
from ..render import emit, emit_rows, human_size, plural
from . import pass_app

if TYPE_CHECKING:
    from ..backup.inspect import BackupShown, DamagedBackup, ListedBackup, VerifyReport

ARCHIVE_HELP = "The archive: a local directory or s3://bucket/prefix."


def _storage(app: App, where: str, endpoint: str | None):
    from ..backup.storage import open_storage

    return open_storage(where, endpoint)


@click.command("backup")
@click.argument("action", required=False, type=click.Choice(["verify", "list", "show"]))
@click.argument("archive", metavar="[ARCHIVE]", required=False)
@click.option("--to", "to", metavar="DIR_OR_URL", help="Back up into this archive (made if missing). " + ARCHIVE_HELP)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC",
    shell_complete=complete_topic,
    help="Only this topic (a partitioned topic: its partitions); repeatable.",
)
@click.option("--namespace", "namespaces", multiple=True, metavar="TENANT/NS", help="Only this namespace's topics.")
@click.option("-l", "--ledgers", "ledger_spec", metavar="SPEC", help="Only these ledgers: 1,2,5-9 (with topics: too).")
@click.option("--backup", "backup_id", metavar="ID", help="show/verify: this backup (default: show the newest).")
@click.option("--parallel", default=4, show_default=True, type=click.IntRange(1, 64), help="Ledgers copied at once.")
@click.option("--s3-endpoint", metavar="URL", help="The S3 server (not AWS: SeaweedFS, MinIO...).")
@pass_app
def backup(
    app: App,
    action: str | None,
    archive: str | None,
    to: str | None,
    topics: tuple[str, ...],
    namespaces: tuple[str, ...],
    ledger_spec: str | None,
    backup_id: str | None,
    parallel: int,
    s3_endpoint: str | None,
):
    """Back ledgers and Pulsar topics up into an archive, or list, show or verify one.

    `bkctl backup --to ARCHIVE` copies the whole cluster: every ledger, and for
    every topic its managed ledger, its cursors (znodes and cursor ledgers), its
    schemas (locators and schema ledgers) and its partitioned-topic metadata;
    --topic, --namespace and --ledgers narrow it.  Read-only towards the
    cluster: nothing is fenced or written.  A closed ledger is copied whole, an
    open one up to its last add confirmed and the entries past it an ack
    quorum holds (what recovery would keep); a topic's znodes are read first,
    then its cursor ledgers, then its data ledgers, so the copy is one
    consistent prefix even while the topic is written.  A copy the archive
    holds already is not copied again (incremental); the backup records the
    ledgers and topics deleted since the previous one.  A ledger that does not
    read (an entry no bookie holds, a digest that does not check) does not
    stop it: every other ledger is copied, the backup is recorded with the
    unreadable ledgers listed, each is named on stderr and the exit code is
    10 (partial).  The archive's format: docs/backup.md.  Progress and ETA on
    a terminal, nothing on a pipe.

    `bkctl backup list ARCHIVE` lists its backups (a damaged manifest as one
    DAMAGED line, hiding none of the others), `show ARCHIVE [--backup ID]`
    says what one holds, `verify ARCHIVE [--backup ID]` re-reads every object
    and checks each entry's CRC32C and each object's index SHA-256 (exit 1 when
    anything is wrong).  --json: the backup's totals (copied_ledgers,
    copied_bytes, ...); list: one line per backup.
    """
    if action is None:
        if archive is not None:
            raise CommandError(f"unexpected {archive!r}: back up with --to ARCHIVE", USAGE)
        if not to:
            raise CommandError("give --to DIR_OR_URL (or list, show or verify ARCHIVE)", USAGE)
        _take(app, to, topics, namespaces, ledger_spec, parallel, s3_endpoint)
        return
    if to or topics or namespaces or ledger_spec:
        raise CommandError(f"backup {action} takes ARCHIVE and --backup only", USAGE)
    if archive is None:
        raise CommandError(f"backup {action}: give the ARCHIVE", USAGE)
    storage = _storage(app, archive, s3_endpoint)
    if action == "list":
        from ..backup.inspect import list_backups

        emit_rows(app, list_backups(storage), lambda rows: _print_list(app, rows))
    elif action == "show":
        from ..backup.inspect import show_backup

        shown = show_backup(storage, backup_id)
        try:
            if app.json:
                _stream_json(shown.to_json())
            else:
                _print_show(app, shown)
        except _damaged() as exc:  # (a chunk changed since show_backup read it)
            raise CommandError(str(exc), FAILED) from None
    else:
        from ..backup.inspect import expected_bytes, verify_archive

        with app.progress(expected_bytes(storage, backup_id), "verifying") as bar:
            report = verify_archive(
                storage, backup_id, parallel=parallel, advance=bar.advance, reader=app.require_twins().archive_reader
            )
        emit(app, report, lambda: _print_verify(app, report))
        if not report.ok:
            raise CommandError(f"{len(report.problems)} problems in {archive}", FAILED)


def _take(app, to, topics, namespaces, ledger_spec, parallel, s3_endpoint) -> None:
    from ..backup.inspect import noted, unreadable
    from ..backup.take import Selection, take_backup

    storage = _storage(app, to, s3_endpoint)
    selection = Selection(list(topics), list(namespaces), ledger_spec)
    store, bk, twins = app.store, app.bk, app.require_twins()  # (connected: not the backup's own time)
    with app.progress(None, "backing up") as bar:
        began = time.monotonic()
        manifest = take_backup(
            store, bk, storage, selection, app.metadata_uri, parallel=parallel, progress=bar, twins=twins
        )
        seconds = time.monotonic() - began  # (the manifest's finished is taken before it is stored)
    counts = manifest.note_counts()
    # the notes read back a chunk at a time as they are written, never held as lists
    doc = {"archive": to, "backup": manifest.id, **manifest.totals(), "missing": noted(storage, manifest, "missing")}
    doc["unreadable"] = unreadable(storage, manifest)
    doc["seconds"] = round(seconds, 3)
    doc["deleted"] = {"ledgers": noted(storage, manifest, "deleted"), "topics": manifest.deleted.get("topics", [])}
    if app.json:
        _stream_json(doc)
    else:
        app.console.print(
            f"backup {manifest.id}: {doc['ledgers']} ledgers ({doc['copied_ledgers']} copied, "
            f"{human_size(doc['copied_bytes'])}), {doc['topics']} topics, {doc['schemas']} schemas -> {to}"
            + (f"; {counts['missing']} ledgers named but gone" if counts["missing"] else ""),
            highlight=False,
        )
    if counts["unreadable"]:
        named: list[str] = []
        for u in unreadable(storage, manifest):
            app.err_console.print(f"bkctl: ledger {u.ledger_id} not backed up: {u.error}", highlight=False)
            if len(named) < _NAMED:
                named.append(str(u.ledger_id))
        more = counts["unreadable"] - len(named)
        ids = ", ".join(named) + (f" and {more} more: backup show {to} --backup {manifest.id}" if more else "")
        raise CommandError(
            f"backup {manifest.id} is partial: {plural(counts['unreadable'], 'ledger')} could not be read "
            f"({ids}); everything else is in it",
            PARTIAL,
        )


#: the unreadable ledgers a partial backup's last line names (stderr names each, ``show`` lists them)
_NAMED = 20


def _print_list(app: App, rows: list[ListedBackup | DamagedBackup]) -> None:
    from ..backup.inspect import DamagedBackup

    if not rows:
        app.console.print("no backups")
    for row in rows:
        if isinstance(row, DamagedBackup):
            app.console.print(f"{row.id}  DAMAGED: {row.damaged}", highlight=False)
            continue
        r = row.summary
        app.console.print(
            f"{r.id}  {r.finished}  {r.ledgers} ledgers  {r.topics} topics  "
            f"{human_size(r.bytes)} ({human_size(r.copied_bytes)} copied)  from {r.source}"
            + (f"  PARTIAL: {plural(r.unreadable_ledgers, 'ledger')} unreadable" if r.unreadable_ledgers else ""),
            highlight=False,
        )


def _damaged() -> type[Exception]:
    from bkctl.wire.errors import ArchiveDamaged

    return ArchiveDamaged


def _stream_json(doc: dict) -> None:
    """``doc`` as one line of JSON, its iterators written as arrays item by item (not held)."""
    import sys

    from ..app import encode_json

    def write(value: object) -> None:
        if isinstance(value, dict):
            sys.stdout.write("{")
            for n, (k, v) in enumerate(value.items()):
                sys.stdout.write(("," if n else "") + encode_json(k) + ":")
                write(v)
            sys.stdout.write("}")
        elif isinstance(value, Iterator):
            sys.stdout.write("[")
            for n, item in enumerate(value):
                sys.stdout.write(("," if n else "") + encode_json(item))
            sys.stdout.write("]")
        else:
            sys.stdout.write(encode_json(value))

    write(doc)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _ids(ids: Iterable[int]) -> str:
    """Ledger ids for people: ``1-4, 7, 9-10`` (ascending ids: their runs held, not the ids)."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)) if not isinstance(ids, Iterator) else ids:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _print_show(app: App, shown: BackupShown) -> None:
    say = lambda text: app.console.print(text, highlight=False, soft_wrap=True)  # noqa: E731
    s = shown.summary
    say(f"backup {s.id} of {s.source} ({s.instance_id}), {s.started} .. {s.finished}")
    say(
        f"{plural(s.ledgers, 'ledger')}, {plural(s.entries, 'entry', 'entries')}, "
        f"{human_size(s.bytes)}; {s.copied_ledgers} copied by this backup ({human_size(s.copied_bytes)})"
        + (f"; after {s.previous}" if s.previous else "")
    )
    chosen = [f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in s.selection.items() if v]
    say(f"selection: {'; '.join(chosen) if chosen else 'the whole cluster'}")
    for t in shown.topics:
        say(f"  topic {t.managed_ledger}: ledgers {_ids(t.ledgers) or '-'}; cursors {', '.join(t.cursors) or '-'}")
    if shown.schemas:
        say(f"schemas: {', '.join(shown.schemas)}")
    if s.ledgers:
        say(f"ledgers: {_ids(x.ledger_id for x in shown.ledgers)}")
    if s.partial:
        say(f"PARTIAL: {plural(s.unreadable_ledgers, 'ledger')} could not be read and are not in it:")
        for u in shown.unreadable:
            say(f"  ledger {u.ledger_id}: {u.error}")
    if s.missing_ledgers:
        say(f"named by topics or schemas but gone when backed up: ledgers {_ids(list(shown.missing))}")
    deleted = shown.deleted
    if s.deleted_ledgers or deleted.topics:
        gone = [f"ledgers {_ids(list(deleted.ledgers))}"] if s.deleted_ledgers else []
        gone += [f"topics {', '.join(deleted.topics)}"] if deleted.topics else []
        say(f"deleted since {s.previous}: {'; '.join(gone)}")


def _print_verify(app: App, report: VerifyReport) -> None:
    for p in report.problems:
        app.console.print(p)
    app.console.print(
        f"{report.backups} backups, {report.ledger_copies} ledger copies, {report.entries} entries, "
        f"{human_size(report.bytes)}: " + ("ok" if report.ok else f"{len(report.problems)} problems")
    )


@click.command("restore")
@click.option("--from", "source", required=True, metavar="DIR_OR_URL", help="The archive. " + ARCHIVE_HELP)
@click.option("--backup", "backup_id", metavar="ID", help="This backup (default: the newest).")
@click.option("--remap", is_flag=True, help="Give every ledger a new id and rewrite every reference to it.")
@click.option(
    "--remap-table", metavar="FILE", type=click.Path(dir_okay=False), help="Write the old id -> new id table here."
)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC",
    help="Only this topic of the backup (a partitioned topic: its partitions), its ledgers and schema; repeatable.",
)
@click.option("--namespace", "namespaces", multiple=True, metavar="TENANT/NS", help="Only this namespace's topics.")
@click.option("-l", "--ledgers", "ledger_spec", metavar="SPEC", help="Only these ledgers: 1,2,5-9 (with topics: too).")
@click.option(
    "--skip-damaged", is_flag=True, help="Restore what is intact and name the ledgers damaged in the archive (exit 10)."
)
@click.option(
    "--journal",
    "journal_path",
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="Keep the restore's journal in this file (default: in the target cluster).",
)
@click.option("--parallel", default=4, show_default=True, type=click.IntRange(1, 64), help="Ledgers written at once.")
@click.option("--s3-endpoint", metavar="URL", help="The S3 server (not AWS: SeaweedFS, MinIO...).")
@click.option("--force", is_flag=True, help="Do not ask.")
@pass_app
def restore(
    app: App,
    source: str,
    backup_id: str | None,
    remap: bool,
    remap_table: str | None,
    topics: tuple[str, ...],
    namespaces: tuple[str, ...],
    ledger_spec: str | None,
    skip_damaged: bool,
    journal_path: str | None,
    parallel: int,
    s3_endpoint: str | None,
    force: bool,
):
    """Write a backup's ledgers and Pulsar topics into this cluster (empty, or another one).

    Each ledger is created with its own id -- refused (exit 4, one line) where
    an id is taken -- or with --remap under a new id, every reference rewritten
    (the managed ledgers' ledger lists, cursor positions and individually
    deleted ranges, cursor ledgers' entries, schema locators and schema
    entries); the table is kept in the journal and written to --remap-table.
    Digest type, password and custom metadata are kept; ensembles are placed
    by this cluster's placement policy.  A ledger that was open is restored
    closed; each topic's managed ledger, cursors, schemas and
    partitioned-topic metadata are written last, so that a broker loads the
    topic with its cursors where they were.  A Pulsar znode that holds other
    metadata refuses the restore (exit 4) before anything is written.
    --topic, --namespace and --ledgers restore only part of the backup (a
    topic: its managed ledger, cursors, ledgers and schema), into a live
    cluster with --remap.

    Nothing is written to the archive (it may be read-only): the journal that
    lets the same command finish a restore stopped midway (kill -9) lives in
    the target cluster, beside its root, or in --journal PATH.  A ledger
    damaged in the archive (a record or data object missing, a CRC32C or hash
    that does not match) stops the restore, or with --skip-damaged is left
    out, named, and the rest restored (exit 10); a ledger being written when
    a restore fails is deleted, never left open, and the error says what the
    cluster then holds.  Asks on a terminal; elsewhere refuses (exit 2)
    without --force.  --json: ledgers, entries, bytes, topics, damaged,
    ledger_ids (old -> new; null above 10,000 ledgers, ledger_ids_count
    says how many and --remap-table writes them all), journal.
    """
    from ..backup.restore import restore_backup
    from ..backup.take import Selection

    storage = _storage(app, source, s3_endpoint)

    def confirm(question: str) -> None:
        confirm_destructive(app, question, force, f"restore into {app.metadata_uri}")

    doc = restore_backup(
        app.store,
        app.bk,
        storage,
        app.require_uri(),
        backup_id=backup_id,
        remap=remap,
        twins=app.require_twins(),
        confirm=confirm,
        parallel=parallel,
        progress=app.progress(None, "restoring"),
        skip_damaged=skip_damaged,
        selection=Selection(list(topics), list(namespaces), ledger_spec),
        journal_path=journal_path,
        remap_table=remap_table,
    )
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"restored backup {doc.backup}: {doc.ledgers} ledgers ({doc.ledgers_written} written, "
            f"{human_size(doc.bytes)}), {doc.topics} topics, {doc.schemas} schemas"
            + (" under new ids" if remap else ""),
            highlight=False,
        ),
    )
    if doc.damaged:
        for d in doc.damaged:
            app.err_console.print(f"bkctl: ledger {d.ledger_id} not restored: {d.why}", highlight=False)
        raise CommandError(
            f"restored all but {plural(len(doc.damaged), 'ledger')} damaged in the archive: "
            + ", ".join(str(d.ledger_id) for d in doc.damaged),
            PARTIAL,
        )
