"""``bkctl pulsar offload``: Pulsar's offloaded ledgers (tiered storage) listed, verified and swept
of orphans with no broker -- a group of its own beside ``pulsar.py``'s topics and schemas; the
work is :mod:`bkctl.wire.domain.offloads`' and :mod:`bkctl.ops.pulsar_offload`'s."""

from __future__ import annotations

import click

from ..app import App
from ..completers import complete_topic
from ..exitcodes import FAILED, USAGE, CommandError
from ..render import emit_rows, human_size, plural, table
from . import pass_app
from .offload_options import offload_options, offload_settings

#: how the store's refusals read at the end of a line
_STORE_HELP = (
    "Credentials come from the standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
    "the shared credentials file, an instance role) and are never printed; bucket, region and endpoint "
    "from each ledger's driver metadata, as a broker reads them."
)


def _base() -> str | None:
    return click.get_current_context().meta.get("pulsar_base")


def _topic(name: str | None) -> str | None:
    if name is None:
        return None
    from bkctl.wire.pulsar.managed_ledger import TopicName

    try:
        return str(TopicName.parse(name))
    except ValueError as exc:
        raise CommandError(str(exc), USAGE) from None


@click.group("offload")
def offload():
    """Offloaded ledgers (tiered storage): where they are, whether they read, what nobody names.

    \b
      bkctl pulsar offload list [TOPIC]
      bkctl pulsar offload verify [TOPIC] [--entries]
      bkctl pulsar offload orphans --older-than 7d
    """


@offload.command("list")
@click.argument("topic", required=False, metavar="[TOPIC]", shell_complete=complete_topic)
@pass_app
def offload_list(app: App, topic):
    """Every offloaded ledger (of TOPIC, or of every topic): where it is and how big.

    Read from the managed ledgers' offload contexts alone (the store is not
    asked): the driver, bucket and key (or MapFile folder), the entries and
    bytes the managed ledger records, whether the offload completed and
    whether the BookKeeper copy is deleted yet (until then the bytes are held
    twice).  --json: one line per ledger: topic, managed_ledger, ledger_id,
    uuid, driver, bucket, region, endpoint, base_path, objects, entries,
    size, where, complete, bookkeeper_deleted, offloaded_at.
    """
    from bkctl.wire.domain.offloads import offloads

    rows = (r.to_json() for r in offloads(app.store, _base(), _topic(topic)))

    def human(rows):
        if rows:
            table(
                app,
                ["topic", "ledger", "entries", "size", "state", "where"],
                [
                    (
                        r["topic"],
                        r["ledger_id"],
                        r["entries"],
                        human_size(r["size"]),
                        "offloading" if not r["complete"] else "offloaded" if r["bookkeeper_deleted"] else "both",
                        r["where"],
                    )
                    for r in rows
                ],
            )
        both = sum(r["size"] for r in rows if r["complete"] and not r["bookkeeper_deleted"])
        app.console.print(
            f"{plural(len(rows), 'offloaded ledger')}, {human_size(sum(r['size'] for r in rows))}; "
            f"{human_size(both)} still in BookKeeper too",
            highlight=False,
        )

    emit_rows(app, rows, human)


@offload.command("verify", epilog=_STORE_HELP)
@click.argument("topic", required=False, metavar="[TOPIC]", shell_complete=complete_topic)
@click.option("--entries", is_flag=True, help="Also decode every entry as a Pulsar entry (checksum and all).")
@offload_options
@pass_app
def offload_verify(app: App, topic, entries, s3_endpoint, offload_root, offload_timeout):
    """Check every offloaded ledger (of TOPIC, or of every topic) reads as a broker would read it.

    For each completed offload: both objects are there with the offloader's
    metadata (format version 1, role); the index parses and its entry count
    and length agree with the managed ledger, its ledger metadata with the
    ledger's znode while BookKeeper still has it; every block is read and its
    header, entry chain and padding checked (a MapFile: every record), and
    with --entries every entry decoded.  Reads every offloaded byte.  Exit 0
    when every ledger checks out; else 1, one line on stderr naming each
    ledger that does not and why.  A store that refuses the credentials is
    exit 6, one that does not answer within --offload-timeout exit 5.
    --json: one line per ledger: topic, ledger_id, where, complete,
    in_bookkeeper, ok, problems.
    """
    from ..ops.pulsar_offload import verify

    settings = offload_settings(s3_endpoint, offload_root, offload_timeout)
    bad: list[int] = []  # ids only: under --json the rows stream, never all held (issue 74)

    def named(rows):
        for r in rows:
            if not r.ok:
                bad.append(r.ledger_id)
                app.err_console.print(
                    f"bkctl: error: ledger {r.ledger_id} of {r.topic}: {'; '.join(r.problems)}",
                    highlight=False,
                    soft_wrap=True,
                )
            yield r

    def human(rows):
        if rows:
            table(
                app,
                ["topic", "ledger", "result", "where"],
                [(r.topic, r.ledger_id, "ok" if r.ok else "FAILED", r.where) for r in rows],
            )
        app.console.print(
            f"{plural(sum(r.ok for r in rows), 'offloaded ledger')} of {len(rows)} check out", highlight=False
        )

    emit_rows(app, named(verify(app.store, settings, _base(), _topic(topic), entries)), human)
    if bad:
        raise CommandError(
            f"{plural(len(bad), 'offloaded ledger')} do not check out: {', '.join(map(str, bad))}", FAILED
        )


@offload.command("orphans", epilog=_STORE_HELP)
@click.option(
    "--older-than",
    metavar="AGE",
    default="1d",
    show_default=True,
    help="Only objects and uploads older than AGE (90s, 30m, 1h, 7d): an offload under way has "
    "objects its managed ledger does not name yet.",
)
@click.option(
    "--bucket",
    "buckets",
    multiple=True,
    metavar="NAME",
    help="Also a bucket no managed ledger names any more (repeatable; with --s3-endpoint and --region).",
)
@click.option("--region", metavar="REGION", help="The region of the --bucket buckets.")
@offload_options
@pass_app
def offload_orphans(app: App, older_than, buckets, region, s3_endpoint, offload_root, offload_timeout):
    """List offloaded objects no managed ledger names, and abandoned multipart uploads.

    In every bucket (and filesystem base path) an offload context of the
    cluster names, plus --bucket: the objects whose keys no managed ledger's
    offload names (left by a failed offload, a deleted topic, a trimmed
    ledger whose objects were never deleted) and multipart uploads begun
    and never completed (a broker that died while uploading), older than
    --older-than; with the bytes deleting them would free.  Only what is
    Pulsar's is judged: an object whose key has the offloaders' form
    (<uuid>-ledger-<id> and its -index, a streaming segment's
    <uuid>[-index]) or whose user metadata is the offloader's (its format
    version, software version or ManagedLedgerName: one HEAD request per
    object not in that form), an upload in that key form, a MapFile folder
    <managed ledger>/<id>-<uuid>.  Anything else in the bucket (a bkctl
    backup archive, another tool's files) is counted apart and never
    listed.  A bucket shared by several Pulsar clusters holds the others'
    objects too: run this against a bucket only one cluster offloads to.
    Read-only.  Exit 0 whether or not there are orphans.  --json: one line
    each: kind (object, upload, mapfile), store, key, upload_id, size,
    modified, ledger_id, pulsar_key (false: judged Pulsar's by its
    metadata, under a key of another form).
    """
    from bkctl.wire.domain.offloads import OffloadOrphanScan
    from bkctl.wire.pulsar.offload_store import OffloadLocation

    from ..ops.ledger_meta import parse_duration

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        raise CommandError(f"--older-than: {exc}", USAGE) from None
    extra = [
        OffloadLocation(-1, "", "", "aws-s3", (("bucket", b), ("region", region or ""), ("serviceEndpoint", "")))
        for b in buckets
    ]
    settings = offload_settings(s3_endpoint, offload_root, offload_timeout)
    scan = OffloadOrphanScan.of_cluster(app.store, settings, age, _base(), extra)

    def human(rows):
        if rows:
            table(
                app,
                ["kind", "store", "key", "size", "modified"],
                [(r["kind"], r["store"], r["key"], human_size(r["size"]), r["modified"]) for r in rows],
            )
        app.console.print(
            f"{plural(scan.orphans, 'orphaned object')} ({human_size(scan.orphan_bytes)}) and "
            f"{plural(scan.uploads, 'abandoned upload')} ({human_size(scan.upload_bytes)}) in "
            f"{plural(len(scan.stores), 'store')}; not judged: {scan.young} younger than {older_than}, "
            f"{scan.foreign} not Pulsar's ({human_size(scan.foreign_bytes)}: neither its key form nor its metadata, "
            "left alone)",
            highlight=False,
        )

    emit_rows(app, (o.to_json() for o in scan), human)
