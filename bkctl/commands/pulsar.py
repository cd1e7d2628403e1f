"""``bkctl pulsar ...``: Pulsar topics straight from ZooKeeper and the bookies (read-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..app import App
from ..completers import complete_ledger_id, complete_topic
from ..exitcodes import FAILED, USAGE, CommandError
from ..render import emit, emit_rows, fields, human_size, plural, table
from . import LEDGER_ID, pass_app

if TYPE_CHECKING:
    from ..ops.pulsar import CursorShown


@click.group()
@click.option(
    "--managed-ledgers",
    "base",
    metavar="PATH",
    help="Pulsar's managed-ledger root in ZooKeeper (default: managed-ledgers beside the ledger "
    "root, /managed-ledgers for /ledgers).",
)
@click.pass_context
def pulsar(ctx, base):
    """Pulsar topics as stored: managed ledgers, cursors, which topic owns a ledger.

    Read-only: Pulsar's managed-ledger znodes (ManagedLedgerInfo,
    ManagedCursorInfo; binary, compressed or text) and BookKeeper's ledger
    metadata; the bookies are asked only for the last add confirmed of a
    topic's open ledger and the newest position in a cursor ledger.  To
    export a topic's messages, see `bkctl export --topic`.
    """
    ctx.meta["pulsar_base"] = base


def _base() -> str | None:
    return click.get_current_context().meta.get("pulsar_base")


def _topic_name(name: str) -> str:
    """A topic argument in full (short names as pulsar-admin takes them); exit 2 if it is none."""
    from bkctl.wire.pulsar.managed_ledger import TopicName

    try:
        return str(TopicName.parse(name))
    except ValueError as exc:
        raise CommandError(str(exc), USAGE) from None


@pulsar.group()
def topic():
    """Topics: list them, show one."""


@topic.command("list")
@click.option("--tenant", metavar="T", help="Only this tenant's topics.")
@click.option(
    "--namespace", metavar="NS", help="Only this namespace's topics (NS, TENANT/NS, or TENANT/CLUSTER/NS for v1 names)."
)
@pass_app
def topic_list(app: App, tenant, namespace):
    """List persistent topics that have a managed ledger (each partition its own row).

    v1 topics (persistent://tenant/cluster/namespace/topic, from brokers
    before Pulsar 2) are listed too.  Entries and size are what the managed
    ledgers record, read from ZooKeeper alone: a managed ledger records a
    ledger's entries and size when it closes it, so the ledger a broker is
    writing counts 0 here -- such a row's entries end in "+" -- where
    `pulsar topic show` asks the bookies and counts it.  When no managed
    ledger is found at all, a hint names the path looked at and
    --managed-ledgers.

    --json: one line per topic: topic, managed_ledger, partition (-1: not a
    partition), ledgers, entries, size, uncounted_ledgers (the ledgers
    counted 0: not closed yet), cursors, terminated.
    """
    from bkctl.wire.domain.topic_state import topic_reader as reader

    from ..ops.pulsar import list_topics

    if namespace and "/" in namespace:
        t, _, namespace = namespace.partition("/")
        if tenant and tenant != t:
            raise CommandError(f"--tenant {tenant} and --namespace {t}/{namespace} disagree", USAGE)
        tenant = t
    rows = list_topics(app.store, tenant, namespace, _base())
    if not rows and not tenant and not namespace:
        _hint_no_managed_ledgers(app, reader(app.store, _base()).base)

    def human(rows):
        table(
            app,
            ["topic", "ledgers", "entries", "size", "cursors", "terminated"],
            [
                (
                    r.topic,
                    r.ledgers,
                    f"{r.entries}{'+' if r.uncounted_ledgers else ''}",
                    human_size(r.size),
                    ",".join(r.cursors),
                    "yes" if r.terminated else "",
                )
                for r in rows
            ],
        )
        if any(r.uncounted_ledgers for r in rows):
            app.console.print(
                "+: and the entries of a ledger not closed yet, which the managed ledger does not "
                "record (`pulsar topic show TOPIC` counts them)",
                highlight=False,
            )

    emit_rows(app, rows, human)


def _hint_no_managed_ledgers(app: App, base: str) -> None:
    """On stderr: no managed ledger was found where Pulsar keeps them."""
    if app.quiet:
        return
    app.err_console.print(
        f"bkctl: hint: no managed ledgers under {base}; if Pulsar's metadata is elsewhere in "
        "this ZooKeeper, name it with `bkctl pulsar --managed-ledgers PATH`",
        highlight=False,
        soft_wrap=True,
    )


def _position(c: CursorShown) -> str:
    """Where a cursor's position came from, briefly."""
    from bkctl.wire.domain.topic_state import PositionKind

    kind = c.position_source
    if kind is PositionKind.ZNODE:
        return "znode (fallback)" if c.fallback else "znode"
    entry = c.position_from.split(" entry ", 1)[1].split(" ", 1)[0]
    return f"ledger entry {entry}" + (" (beyond LAC)" if kind is PositionKind.BEYOND_LAC else "")


@topic.command("show")
@click.argument("name", metavar="TOPIC", shell_complete=complete_topic)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when a cursor's position can only be read from its znode although it keeps a ledger.",
)
@pass_app
def topic_show(app: App, name, strict):
    """Show a topic's ledgers and cursors (every partition of a partitioned topic).

    TOPIC is persistent://tenant/namespace/topic, tenant/namespace/topic or
    a bare topic name (persistent://public/default/TOPIC), as pulsar-admin
    takes them (a v1 name is persistent://tenant/cluster/namespace/topic).

    Ledgers: entries, size, created (BookKeeper ctime), closed (the managed
    ledger's timestamp), bookies.  The open ledger is read as its broker
    would recover it, without fencing anything: its entries run to the
    newest one past the last add confirmed that an ack quorum of its bookies
    holds (a writer's newest entry always lies past the LAC readers see;
    with fewer copies the writer cannot have had it acknowledged), and its
    size is the ledger length that entry carries; "past LAC" counts them.

    Cursors: the mark-delete position and where it came from -- the newest
    entry of the cursor's ledger (past the LAC of an open one by the same
    rule), or the znode, which is the position when the cursor keeps no
    ledger (closed cleanly) and otherwise an older one: then a warning on
    stderr, and with --strict exit 1.  Individually deleted ranges
    ((a, b] acknowledged beyond the mark-delete position); the backlog in
    entries, in messages and bytes (counted by reading the unacknowledged
    entries when there are at most 1,000: a batch's messages not
    acknowledged, a chunked message once, a marker none; beyond that
    bytes at each ledger's mean entry size and messages "?"), the open
    ledger counted like its size.

    The schema line: none, or the newest version and its type, or why it
    does not read (a broker cannot load the topic then).

    A partitioned topic shows every partition its partitioned-topic metadata
    counts (read beside the managed ledgers, under
    admin/partitioned-topics), those no broker has loaded yet without a
    managed ledger.  Exit 3 if there is no such topic (with suggestions).
    --json: topic, partitioned, declared_partitions (null: no metadata
    found), partitions[] with ledgers[] (lac, beyond_lac for the open one)
    and cursors[] (mark_delete, individually_deleted, position_from,
    position_source: cursor-ledger, beyond-lac or znode, fallback: why the
    znode was read or null, backlog_entries, backlog_messages (null: not
    counted), backlog_bytes, backlog_bytes_exact), schema (null: none;
    newest, versions, type, problem: why the newest version does not read,
    and then the topic cannot load), warnings[].
    """
    from bkctl.wire.domain.topic_state import CursorFallback

    from ..ops.pulsar import show_topic

    name = _topic_name(name)
    try:
        doc = show_topic(app.store, name, _base(), bk=lambda: app.bk, strict=strict)
    except CursorFallback as exc:
        raise CommandError(f"{exc} (--strict)", FAILED) from None
    for warning in doc.warnings:
        app.err_console.print(f"bkctl: warning: {warning}", highlight=False, soft_wrap=True)

    def human():
        if doc.declared_partitions is not None:
            app.console.print(
                f"{doc.topic}: partitioned, {plural(doc.declared_partitions, 'partition')}", highlight=False
            )
        schema = doc.schema
        state = (
            "none"
            if schema is None
            else f"version {schema.newest}"
            + (f" ({schema.type})" if schema.type else "")
            + (f": {schema.problem}" if schema.problem else "")
        )
        app.console.print(f"schema: {state}", highlight=False, markup=False, soft_wrap=True)
        for part in doc.partitions:
            if part.managed_ledger is None:
                fields(app, [("topic", part.topic), ("managed ledger", "none (no broker has loaded it: no data)")])
                continue
            entries = f"{part.entries}" + (f" ({part.beyond_lac} past the LAC)" if part.beyond_lac else "")
            fields(
                app,
                [
                    ("topic", part.topic),
                    ("managed ledger", part.managed_ledger),
                    ("entries", entries),
                    ("size", human_size(part.size)),
                    ("terminated at", part.terminated_at or "no"),
                ],
            )
            table(
                app,
                ["ledger", "state", "entries", "past LAC", "size", "created", "closed", "bookies"],
                [
                    (
                        ls["ledger_id"],
                        ls["state"],
                        ls["entries"],
                        ls["beyond_lac"] if ls["lac"] is not None else "",
                        human_size(ls["size"]) if ls["size"] is not None else "",
                        ls["created"],
                        ls["closed"],
                        ",".join(ls["bookies"]),
                    )
                    for ls in (ledger.to_json() for ledger in part.ledgers)  # wire's document of it
                ],
            )
            if part.cursors:
                table(
                    app,
                    [
                        "cursor",
                        "mark-delete",
                        "from",
                        "individually deleted",
                        "backlog entries",
                        "backlog messages",
                        "backlog bytes",
                        "cursor ledger",
                        "last active",
                    ],
                    [
                        (
                            c.name,
                            c.mark_delete,
                            _position(c),
                            " ".join(c.individually_deleted),
                            c.backlog_entries,
                            "?" if c.backlog_messages is None else c.backlog_messages,
                            human_size(c.backlog_bytes) + ("" if c.backlog_bytes_exact else " (est.)"),
                            "none" if c.cursor_ledger == -1 else c.cursor_ledger,
                            c.last_active,
                        )
                        for c in part.cursors
                    ],
                )

    emit(app, doc, human)


@pulsar.command("ledger-owner")
@click.argument("ledger_id", type=LEDGER_ID, metavar="LEDGER", shell_complete=complete_ledger_id)
@pass_app
def ledger_owner(app: App, ledger_id):
    """Which topic or cursor owns LEDGER, or "orphan".

    owner is topic (a data ledger its managed ledger lists), cursor (a
    cursor's ledger), orphan (Pulsar's custom metadata, but nothing lists it:
    what to look for when disks fill; `pulsar orphans` lists them all) or
    not-pulsar.  A ledger of another Pulsar component -- schema (a schema
    registry ledger), compacted-ledger (a topic compaction's output),
    delayed-index-bucket, ... -- is named by its custom metadata's component
    and not checked against the cursors that list it: never called an
    orphan; a schema ledger is named by its topic, and as the version its
    schema's locator (/schemas) gives it, or as named by none.  An orphan created less than an hour ago comes with a
    caution: a broker creates a ledger before its managed ledger lists it
    (`pulsar orphans` leaves such ledgers out).  Exit 3 if the ledger does
    not exist.  --json: ledger_id, owner, topic, cursor, managed_ledger,
    custom_metadata, listed (false: no list was found or checked that names
    it), created, age_seconds, caution (null, or why "orphan" may be early),
    schema_version (a schema ledger's version, null otherwise).
    """
    from ..ops.pulsar import ledger_owner as owner

    doc = owner(app.store, ledger_id, _base())

    def human():
        owner_topic = doc.topic or f"of managed ledger {doc.managed_ledger}"  # its topic part does not decode
        where = {
            "topic": f"topic {owner_topic}",
            "cursor": f"cursor {doc.cursor} of topic {owner_topic}",
            "orphan": "orphan (no managed ledger lists it"
            + (f"; it names {doc.managed_ledger}" if doc.managed_ledger else "")
            + ")",
            "not-pulsar": "not a Pulsar ledger (no Pulsar custom metadata, no managed ledger lists it)",
            "schema": f"schema registry ledger of {doc.topic or doc.custom_metadata.get('pulsar/schemaId')}"
            + (
                f", version {doc.schema_version}"
                if doc.listed
                else ": no schema locator names it (an orphan schema ledger; see `pulsar schema check`)"
            ),
            "compacted-ledger": f"compacted ledger of topic {doc.topic} "
            "(by its custom metadata; the __compaction cursor not checked)",
        }
        owner = doc.owner
        text = where.get(owner or "", f"{owner} ledger (by its custom metadata; not checked)")
        app.console.print(f"ledger {ledger_id}: {text}", highlight=False)
        if doc.caution:
            app.console.print(f"caution: {doc.caution}", highlight=False)

    emit(app, doc, human)


@pulsar.command("orphans")
@click.option(
    "--older-than",
    metavar="AGE",
    default="1h",
    show_default=True,
    help="Only ledgers created more than AGE ago (90s, 30m, 1h, 7d): a broker creates a ledger "
    "before its managed ledger lists it.",
)
@pass_app
def orphans(app: App, older_than):
    """List every orphan: a ledger Pulsar made for a topic that nothing lists.

    `pulsar ledger-owner`'s question for every ledger of the cluster:
    ledgers whose custom metadata says a managed ledger made them
    (application=pulsar, component=managed-ledger) that no managed ledger
    lists as a data ledger and no cursor as its ledger -- left behind by a
    broker that failed between creating a ledger and recording it, or by a
    deleted topic.  Each candidate is checked again before it is listed.
    Ledgers of Pulsar's other components (schema, compacted-ledger, ...) are
    never listed.  Read-only: look at a ledger with `pulsar ledger-owner`
    before `ledger delete`.  Exit 0 whether or not there are orphans.
    --json: one line per orphan: ledger_id, managed_ledger, cursor, state,
    entries and size (closed ledgers), created, bookies.
    """
    from bkctl.wire.domain.orphans import OrphanSweep

    from ..ops.ledger_meta import parse_duration

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        raise CommandError(f"--older-than: {exc}", USAGE) from None
    with app.walk_progress("reading ledger metadata") as progress:
        sweep = OrphanSweep(app.store, _base(), older_than=age, progress=progress)
        _show_orphans(app, sweep, older_than)


def _show_orphans(app: App, sweep, older_than: str) -> None:

    def human(rows):
        if rows:
            table(
                app,
                ["ledger", "managed ledger", "cursor", "state", "entries", "size", "created", "bookies"],
                [
                    (
                        r["ledger_id"],
                        r["managed_ledger"] or "",
                        r["cursor"] or "",
                        r["state"],
                        "" if r["entries"] is None else r["entries"],
                        human_size(r["size"]),
                        r["created"],
                        ",".join(r["bookies"]),
                    )
                    for r in rows
                ],
            )
        app.console.print(
            f"{plural(sweep.orphans, 'orphan')} ({human_size(sweep.orphan_bytes)} in closed ones) among "
            f"{plural(sweep.pulsar, 'Pulsar ledger')} of {plural(sweep.checked, 'ledger')}; not judged: "
            f"{sweep.young} younger than {older_than}, {sweep.unchecked} of Pulsar's other components"
            + (f", {sweep.unreadable} whose metadata does not decode" if sweep.unreadable else ""),
            highlight=False,
        )

    emit_rows(app, (orphan.to_json() for orphan in sweep), human)


@pulsar.group()
def schema():
    """The schema registry as stored: versions, definitions, and its doctor.

    Read-only, without a broker: the locators a broker keeps under /schemas
    (beside the managed ledgers: /schemas for /managed-ledgers) and the
    ledger of each schema version (one entry: the version's type, time,
    properties and definition), opened as a broker opens it.  Partitions
    share their base topic's schema; a v1 topic's schema id leaves out its
    cluster, as Pulsar's does.
    """


@schema.command("list")
@pass_app
def schema_list(app: App):
    """List every topic's schema versions with their type and time.

    One row per topic with a schema (a partitioned topic once); each
    version's type and time are read from its ledger, and a version whose
    ledger is gone or does not read says so (`pulsar schema check` says what
    that means).  --json: one line per topic: schema_id, topic, newest,
    versions[] (version, ledger_id, entry_id, hash, type, timestamp, deleted,
    problem: null or why the version cannot be read), problem.
    """
    from ..ops.pulsar_schema import list_schemas

    rows = list_schemas(app.store, _base(), bk=lambda: app.bk)

    def lines(r):  # a schema whose locator does not read: one line, its problem
        if not r.versions:
            return [(r.topic, "", "?", "", "", r.problem or "")]
        return [
            (r.topic, v.version, v.type or "?", v.timestamp or "", v.ledger_id, v.problem or r.problem or "")
            for v in r.versions
        ]

    def human(rows):
        table(
            app,
            ["topic", "version", "type", "registered", "ledger", "problem"],
            [line for r in rows for line in lines(r)],
        )

    emit_rows(app, rows, human)


@schema.command("show")
@click.argument("name", metavar="TOPIC", shell_complete=complete_topic)
@click.option(
    "--version", "version", type=click.IntRange(min=0), metavar="N", help="This version (default: the newest)."
)
@pass_app
def schema_show(app: App, name, version):
    """Show one version of TOPIC's schema: type, time, properties, definition.

    The definition is pretty JSON for AVRO and JSON (the Avro definition the
    producer sent), the message types of the descriptor for PROTOBUF_NATIVE,
    both sides for KEY_VALUE (and its INLINE or SEPARATED encoding), the data
    as text otherwise.  A partition shows its base topic's schema.  Without
    --version, a newest version whose ledger does not read is said first
    (a warning; --json: problem) and the newest that reads is shown.  Exit 3
    when the topic has no schema (naming the topics with one it may mean)
    or no such version, 1 when the version asked for (or every version)
    does not read.  --json: problem, topic, schema_id, version,
    newest, versions, type, timestamp, user, deleted, properties, ledger_id,
    hash, hash_ok, definition.
    """
    import json

    from bkctl.wire.pulsar.errors import SchemaUnreadable

    from ..ops.pulsar_schema import show_schema

    name = _topic_name(name)
    try:
        doc = show_schema(app.store, name, version, _base(), bk=lambda: app.bk)
    except SchemaUnreadable as exc:
        raise CommandError(f"{name}: {exc} (`bkctl pulsar schema check` says what it means)", FAILED) from None

    def human():
        if doc.problem:
            app.err_console.print(f"bkctl: warning: {doc.problem}", markup=False, highlight=False, soft_wrap=True)
        fields(
            app,
            [
                ("topic", doc.topic),
                ("schema id", doc.schema_id),
                ("version", f"{doc.version} of {', '.join(map(str, doc.versions))}"),
                ("type", doc.type + (" (deleted)" if doc.deleted else "")),
                ("registered", doc.timestamp or "?"),
                ("ledger", doc.ledger_id),
                ("hash", doc.hash + ("" if doc.hash_ok else " (does not match the data)")),
            ]
            + [(f"property {k}", v) for k, v in sorted(doc.properties.items())],
        )
        definition = doc.definition
        if isinstance(definition, dict) and isinstance(definition.get("fileDescriptorSet"), list):
            app.console.print(f"root message: {definition.get('rootMessageTypeName')}", highlight=False)
            app.console.print("\n".join(definition["fileDescriptorSet"]), highlight=False, markup=False)
        elif definition is not None:
            text = definition if isinstance(definition, str) else json.dumps(definition, indent=2, ensure_ascii=False)
            app.console.print(text, highlight=False, markup=False)

    emit(app, doc, human)


@schema.command("check")
@click.option(
    "--older-than",
    metavar="AGE",
    default="1h",
    show_default=True,
    help="Call a schema ledger no locator names an orphan only when created more than AGE ago: a "
    "broker writes the ledger before the locator.",
)
@pass_app
def schema_check(app: App, older_than):
    """Find what stops topics loading their schema, and schema ledgers leaked or at risk.

    Each finding comes with its consequence in one line: missing-ledger (a
    locator names a schema ledger that does not exist: the topic cannot load,
    and a producer with a new schema makes the broker delete the whole
    schema), unreadable-ledger (it exists but does not read or decode),
    locator-unreadable, hash-mismatch (the version's data does not hash to
    the locator's SHA-256), orphan (a ledger with component=schema that no
    locator names: leaked space; younger than --older-than is not judged),
    under-replicated (fewer copies on live bookies than its write quorum),
    no-live-copy (every bookie holding it is down: the topic cannot load
    until one returns; said instead of the two findings above).  One
    finding per cause, grouped by kind, its consequence once; the schema
    ledgers not judged are named.  Read-only.  Exit 0 when nothing is found, 1 when anything is, 5 when
    ZooKeeper is unreachable: fit for cron.  --json: one line per finding:
    kind, schema_id, topic, version, ledger_id, detail, consequence.
    """
    from ..ops.ledger_meta import parse_duration
    from ..ops.pulsar_schema import check_schemas

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        raise CommandError(f"--older-than: {exc}", USAGE) from None
    doc = check_schemas(app.store, _base(), bk=lambda: app.bk, older_than=age)
    rows = doc.findings

    def human(rows):
        kind = None
        for r in rows:  # grouped by kind: its consequence once, then one line per finding
            if r.kind != kind:
                kind = r.kind
                n = sum(1 for x in rows if x.kind == kind)
                app.console.print(f"{kind.value} ({n}): {r.consequence}", highlight=False, soft_wrap=True)
            where = r.topic or r.schema_id or "no schema id"
            version = "" if r.version is None else f" version {r.version}"
            app.console.print(f"  {where}{version}, ledger {r.ledger_id}: {r.detail}", highlight=False, soft_wrap=True)
        young = doc.young_ledgers
        named = f" (ledger{'s' if len(young) > 1 else ''} {', '.join(map(str, young))})" if young else ""
        app.console.print(
            f"{plural(len(rows), 'finding')} among {plural(doc.schemas, 'schema')} and "
            f"{plural(doc.schema_ledgers, 'schema ledger')}; not judged: {doc.young} younger "
            f"than {older_than}{named}",
            highlight=False,
        )

    emit_rows(app, rows, human)
    if rows:
        raise CommandError(f"{plural(len(rows), 'schema registry finding')} (exit 1)", FAILED)


from .pulsar_offload import offload  # noqa: E402 - the group of its own module, under `pulsar`

pulsar.add_command(offload)
