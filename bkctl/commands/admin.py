"""``bkctl recover``, ``bkctl decommission``, ``bkctl simpletest`` and ``bkctl bench``."""
from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completion import complete_bookie_id, complete_down_bookie_id, complete_ledger_id
from ..render import emit, fields, plural as _plural, table
from . import pass_app


def _fragment_rows(ledgers: list[dict], repeated: set[str] = frozenset()):
    """Table rows; an error in ``repeated`` is left out of the rows (said once below the table)."""
    def with_error(note: str, r: dict) -> str:
        error = r.get("error")
        if not error:
            return note
        return note + (" (see below)" if error in repeated else f": {error}")

    for r in ledgers:
        if not r["fragments"]:
            yield (r["ledger_id"], r["state"], "", "", with_error(r["status"], r))
            continue
        for f in r["fragments"]:
            end = "open" if f["last_entry_id"] is None else f["last_entry_id"]
            moves = ", ".join(f"{old} -> {new}" for old, new in f["replacements"].items()) or ", ".join(f["lost"])
            count = "?" if f["entries"] is None else f["entries"]
            note = r["status"]
            if r["closed_first"]:
                note += " (closed first)" if r["status"] != "planned" else " (would be closed first)"
            yield (r["ledger_id"], f"{f['first_entry_id']}..{end}", moves, count, with_error(note, r))


def _show_plan_or_result(app: App, doc: dict, what: str) -> None:
    from collections import Counter

    errors = Counter(r["error"] for r in doc["ledgers"] if r.get("error"))
    repeated = {e for e, n in errors.items() if n > 1}
    rows = list(_fragment_rows(doc["ledgers"], repeated))
    if rows:
        table(app, ["ledger", "entries", "lost -> replacement", "count", "status"], rows)
    for error in sorted(repeated):
        app.console.print(f"{_plural(errors[error], 'ledger')}: {error}")
    t = doc["totals"]
    if doc["dry_run"]:
        app.console.print(f"dry run: {_plural(t['planned'], 'ledger')} to recover off {what}, nothing changed"
                          + (f"; {t['skipped']} skipped" if t["skipped"] else "")
                          + (f"; {t['failed']} cannot be planned" if t["failed"] else ""))
    else:
        app.console.print(f"{_plural(t['recovered'], 'ledger')} recovered off {what}, "
                          f"{_plural(t['entries_copied'], 'entry', 'entries')} copied"
                          + (f"; {t['skipped']} skipped" if t["skipped"] else "")
                          + (f"; {t['failed']} FAILED" if t["failed"] else ""))


class _Reporter:
    """Progress over ledgers (bar on a terminal) plus entries copied."""

    def __init__(self, app: App, label: str):
        self.app = app
        self.label = label
        self.bar = None
        self.entries = 0

    def start(self, count: int) -> None:
        if self.bar is None:
            self.bar = self.app.progress(count, self.label).__enter__()
        else:
            self.bar.update(total=count, completed=0)

    def ledger(self, _result: dict) -> None:
        if self.bar is not None:
            self.bar.advance(1)

    def entry(self, _entry_id: int) -> None:
        self.entries += 1
        if self.bar is not None and self.entries % 100 == 0:
            self.bar.update(description=f"{self.label} ({self.entries} entries copied)")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.command()
@click.argument("bookies", nargs=-1, required=True, metavar="BOOKIE...", shell_complete=complete_bookie_id)
@click.option("--target", metavar="BOOKIE", shell_complete=complete_bookie_id, help="Copy to this bookie (default: a random writable bookie "
                                                 "outside each ensemble).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--skip-open-ledgers", is_flag=True, help="Leave ledgers that are not closed alone.")
@click.option("--parallel", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Ledgers re-replicated at once.")
@click.option("--ledger", "ledger_id", type=click.IntRange(0), metavar="ID", shell_complete=complete_ledger_id,
              help="Only this ledger (exit 3 if it does not exist).")
@click.option("--rate", type=click.FloatRange(min=0), default=0, metavar="BYTES_PER_S",
              help="At most this many bytes per second written to the replacements (default: no limit).")
@click.option("--delete-cookie", is_flag=True,
              help="Afterwards, if every ledger was recovered, delete the bookies' cookies (not with --dry-run).")
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def recover(app: App, bookies: tuple[str, ...], target: str | None, dry_run: bool, skip_open_ledgers: bool,
            parallel: int, force: bool, ledger_id: int | None = None, rate: float = 0, delete_cookie: bool = False):
    """Re-replicate every entry the given (lost) bookies held (Java's `recover`).

    Re-replication copies fragments to other bookies; ledger recovery (fence
    and close, `ledger recover`) is a different operation, done here first
    for an open ledger whose last segment contains a lost bookie (skipped
    with --skip-open-ledgers).  Then for each such segment a replacement is
    chosen per lost bookie, every entry the lost bookie held (entry e lives
    on ensemble positions (e+i) mod E, i < Qw) is read from a surviving
    replica, verified, and written to the replacement; finally that segment
    of the metadata is updated by compare-and-set.  Metadata changes only
    after the copy, so an interrupted run leaves the ledger as it was and a
    second run completes it.  A ledger that fails is reported and the others
    go on; the exit status is 1 if any failed.  An id that is not a bookie id
    (host:1.2) is exit 2; a bookie with no cookie, no registration and in no
    ledger is exit 3; a running (registered) bookie is exit 4 unless
    --force (or --dry-run), and a warning with it.

    --dry-run prints, per ledger and segment, the lost bookie, the
    replacement it would get now and how many entries it held.  --json
    prints one summary: bookies, target, dry_run, skip_open_ledgers,
    ledgers[] (ledger_id, state, status, closed_first, fragments[]
    (first_entry_id, last_entry_id, lost, replacements, entries,
    entries_copied), entries_copied, error) and totals (ledgers, recovered,
    planned, skipped, failed, entries_copied); with --delete-cookie also
    cookies {bookie: deleted | none | kept: registered}.
    """
    from ..exitcodes import CONFLICT, FAILED, CommandError
    from ..ops.recovery import check_bookie_ids, delete_cookies, live_bookies, rereplicate_bookies

    what = ", ".join(bookies)
    live = live_bookies(app.store, check_bookie_ids(bookies))
    if live and not (force or dry_run):
        raise CommandError(f"{', '.join(live)} {'is' if len(live) == 1 else 'are'} running (registered): "
                           "stop it first, or give --force to copy its data anyway", CONFLICT)
    for b in live:
        click.echo(f"bkctl: warning: bookie {b} is running (registered); its data is copied although it "
                   "still serves it", err=True)

    def confirm(ids: list[int]) -> None:
        confirm_destructive(app, f"Re-replicate {_plural(len(ids), 'ledger')} off {what}?", force,
                            f"recover {what}")

    only = None
    if ledger_id is not None:
        app.store.ledgers.read(ledger_id)  # not found: exit 3
        only = [ledger_id]
    reporter = _Reporter(app, "re-replicating")
    try:
        doc = rereplicate_bookies(app.bk, app.store, bookies, target=target, dry_run=dry_run,
                              skip_open=skip_open_ledgers, parallel=parallel, confirm=confirm,
                              on_start=reporter.start, on_ledger=reporter.ledger, on_entry=reporter.entry,
                              ledger_ids=only, rate=rate)
    finally:
        reporter.stop()
    if delete_cookie and not dry_run:
        doc["cookies"] = ({} if doc["totals"]["failed"] or doc["totals"]["skipped"]
                          else delete_cookies(app.store, doc["bookies"]))

    def human():
        _show_plan_or_result(app, doc, what)
        for b, outcome in doc.get("cookies", {}).items():
            app.console.print(f"cookie of {b}: {outcome}")
        if delete_cookie and not dry_run and not doc.get("cookies"):
            app.console.print("cookies kept: not every ledger was recovered")

    emit(app, doc, human)
    if doc["totals"]["failed"]:
        raise CommandError(f"{_plural(doc['totals']['failed'], 'ledger')} could not be re-replicated", FAILED)


@click.command()
@click.argument("bookie", metavar="BOOKIE", shell_complete=complete_down_bookie_id)
@click.option("--daemons/--no-daemons", "daemons", default=None,
              help="Let the autorecovery daemons copy (default when autorecovery is enabled and an auditor is "
                   "elected), or copy from this process.")
@click.option("--timeout", type=click.FloatRange(min=1), default=3600, show_default=True, metavar="SECONDS",
              help="With the daemons: how long to wait for them to move every ledger.")
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def decommission(app: App, bookie: str, daemons: bool | None, timeout: float, force: bool):
    """Retire a stopped bookie: move its data off, then delete its cookie.

    The bookie must not be registered (exit 4: stop it first) and must be
    known to the cluster (a cookie or a ledger naming it; else exit 3).  When
    autorecovery is enabled and an auditor is elected, the autorecovery
    daemons copy its data, as Java's decommissionbookie lets them: the audit
    is triggered and the progress shown until no ledger names the bookie
    (exit 1 after --timeout, cookie kept).  Otherwise (or --no-daemons) every
    fragment on it is re-replicated from this process as `recover` does
    (open ledgers using it in their last segment are recovered: fenced and
    closed), then the metadata is scanned until no ledger names it (up to 3
    passes).  Only then is its cookie deleted.  --json: bookie_id, mode
    (autorecovery or local), passes, ledgers[] (as `recover`; with the
    daemons ledger_id and status), entries_copied (null with the daemons),
    remaining_ledgers, cookie_deleted.
    """
    from ..ops.recovery import decommission as run

    def confirm(ids: list[int]) -> None:
        confirm_destructive(app, f"Move {_plural(len(ids), 'ledger')} off {bookie} and delete its cookie?", force,
                            f"decommission {bookie}")

    reporter = _Reporter(app, f"decommissioning {bookie}")
    try:
        doc = run(app.bk, app.store, bookie, confirm=confirm, on_start=reporter.start,
                  on_ledger=reporter.ledger, on_entry=reporter.entry, use_daemons=daemons, timeout=timeout)
    finally:
        reporter.stop()
    copied = ("by the autorecovery daemons" if doc["mode"] == "autorecovery"
              else f"{_plural(doc['entries_copied'], 'entry', 'entries')} copied")
    emit(app, doc, lambda: app.console.print(
        f"bookie {bookie} decommissioned: {_plural(len(doc['ledgers']), 'ledger')} moved, {copied}; "
        f"cookie {'deleted' if doc['cookie_deleted'] else 'not found'}"))


def _quorum_options(f):
    """-e/-w/-a with BookKeeper's defaults 3/2/2."""
    f = click.option("-a", "--ack-quorum", type=click.IntRange(1), default=2, show_default=True,
                     help="Ack quorum.")(f)
    f = click.option("-w", "--write-quorum", type=click.IntRange(1), default=2, show_default=True,
                     help="Write quorum.")(f)
    return click.option("-e", "--ensemble", type=click.IntRange(1), default=3, show_default=True,
                        help="Ensemble size.")(f)


@click.command()
@_quorum_options
@click.option("-n", "--entries", type=click.IntRange(0), default=100, show_default=True,
              help="Entries to write.")
@click.option("--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id,
              help="Test this one writable bookie alone (ensemble, write and ack quorum 1; exit 3 if it is not "
                   "registered, 4 if it is read-only).")
@pass_app
def simpletest(app: App, ensemble: int, write_quorum: int, ack_quorum: int, entries: int,
               bookie: str | None = None):
    """Write, read back, close, reopen, read and delete a test ledger.

    BookKeeper's simpletest: a CRC32C ledger with an empty password and
    custom metadata Bookie=simpletest gets N 100-byte A-Z entries; the last
    entry id must be N-1 and every entry must read back, before and after
    closing.  Exit 1 on any failure (the legacy shell always exits 0).
    --json: ledger_id, ensemble_size, write_quorum, ack_quorum, entries,
    entry_size, bookies, last_entry_id, write_seconds, read_seconds,
    deleted, ok.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.simpletest import simpletest as run

    if not ensemble >= write_quorum >= ack_quorum:
        raise CommandError("need ensemble >= write quorum >= ack quorum", USAGE)
    if bookie is not None:
        from ..exitcodes import CONFLICT, NOT_FOUND
        from ..ops.recovery import check_bookie_ids

        check_bookie_ids([bookie])
        if bookie in app.store.registration.readonly_bookies():
            raise CommandError(f"bookie {bookie} is read-only", CONFLICT)
        if bookie not in app.store.registration.writable_bookies():
            raise CommandError(f"bookie {bookie} is not registered", NOT_FOUND)
        ensemble = write_quorum = ack_quorum = 1
    doc = run(app.bk, ensemble, write_quorum, ack_quorum, entries,
              on_step=lambda s: app.info(f"{s}...") if app.verbose else None, bookie=bookie)
    emit(app, doc, lambda: app.console.print(
        f"simpletest OK: {entries} entries written to ledger {doc['ledger_id']} "
        f"({ensemble}/{write_quorum}/{ack_quorum} on {', '.join(doc['bookies'])}) in {doc['write_seconds']:.3f}s,"
        f" read back, closed, reopened, read in {doc['read_seconds']:.3f}s, deleted"))


@click.command()
@_quorum_options
@click.option("--size", type=click.IntRange(1), default=100, show_default=True, help="Entry size in bytes.")
@click.option("--entries", type=click.IntRange(1), default=10000, show_default=True, help="Entries to write.")
@click.option("--inflight", type=click.IntRange(1), default=256, show_default=True,
              help="Adds outstanding at once.")
@pass_app
def bench(app: App, ensemble: int, write_quorum: int, ack_quorum: int, size: int, entries: int, inflight: int):
    """Measure add and read throughput and add latency through the Python client.

    Writes --entries entries of --size random bytes to a new ledger with
    --inflight adds outstanding, closes it, reads it back, deletes it.
    Prints adds/s, MB/s and add latency (mean, p50, p99, p99.9, max), then
    reads/s.  --json: ledger_id, ensemble_size, write_quorum, ack_quorum,
    entry_size, entries, inflight, add {seconds, entries_per_second,
    mb_per_second, latency_ms {mean, p50, p99, p999, max}}, read {seconds,
    entries_per_second, mb_per_second}.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.bench import bench as run

    if not ensemble >= write_quorum >= ack_quorum:
        raise CommandError("need ensemble >= write quorum >= ack quorum", USAGE)
    with app.progress(entries * 2, "bench") as bar:
        doc = run(app.bk, ensemble, write_quorum, ack_quorum, size, entries, inflight,
                  on_add=lambda: bar.advance(1), on_read=bar.advance)

    def human():
        a, r, lat = doc["add"], doc["read"], doc["add"]["latency_ms"]
        fields(app, [
            ("ledger", f"{doc['ledger_id']} ({ensemble}/{write_quorum}/{ack_quorum}, deleted)"),
            ("entries", f"{entries} x {size} bytes, {inflight} in flight"),
            ("adds", f"{a['entries_per_second']:,.0f}/s  {a['mb_per_second']:.2f} MB/s  ({a['seconds']:.2f}s)"),
            ("add latency", f"mean {lat['mean']:.2f} ms  p50 {lat['p50']:.2f}  p99 {lat['p99']:.2f}  "
                            f"p99.9 {lat['p999']:.2f}  max {lat['max']:.2f}"),
            ("reads", f"{r['entries_per_second']:,.0f}/s  {r['mb_per_second']:.2f} MB/s  ({r['seconds']:.2f}s)"),
        ])

    emit(app, doc, human)
