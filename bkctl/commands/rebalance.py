"""``bkctl rebalance`` and ``bkctl drain``: move replicas between live bookies, never a copy fewer."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id
from ..render import human_size, plural, table
from . import pass_app
from .progress import LedgerProgress

_MOVES_SHOWN = 20


def _max_rate(_ctx, _param, value: str | None) -> float:
    from ..ops.rebalance import parse_rate

    return 0.0 if value is None else parse_rate(value)


def _throttle_options(fn):
    fn = click.option(
        "--concurrency",
        type=click.IntRange(1, 64),
        default=16,
        show_default=True,
        help="Ledgers moved at once (small ledgers move at the pace of ZooKeeper's round trips: many at once pay).",
    )(fn)
    fn = click.option(
        "--per-bookie",
        type=click.IntRange(1, 64),
        default=8,
        show_default=True,
        help="Moves at once into any one target bookie (the others go on meanwhile).",
    )(fn)
    return click.option(
        "--max-rate",
        metavar="BYTES_PER_S",
        callback=_max_rate,
        help="At most this many bytes per second written to the targets (10M, 512k; default: no limit).",
    )(fn)


def _throttle(concurrency: int, per_bookie: int, max_rate: float):
    from bkctl.wire.rebalance.executor import Throttle

    return Throttle(concurrency, per_bookie, max_rate)


class _Events:
    """What a run says as it goes: under --json one event per line on stdout (the plan, each
    planned or finished move, the summary), else a progress bar with the ETA on a terminal
    (nothing on a pipe) and the plan and the outcome as tables and lines."""

    def __init__(self, app: App, label: str, dry_run: bool):
        self.app = app
        self.label = label
        self.dry_run = dry_run
        self.bar = None if app.json else LedgerProgress(app, label)
        self.reasons: Counter[str] = Counter()
        self._lock = threading.Lock()

    def event(self, kind: str, doc: Any) -> None:
        """One event line: ``doc``'s keys (a dict, or an operation's result) beside ``event``."""
        from ..ops.results import fields_of

        with self._lock:
            self.app.emit_json({"event": kind, **(doc if isinstance(doc, dict) else fields_of(doc))})

    def plan(self, plan) -> None:
        from ..ops.rebalance import plan_summary, planned_move

        if self.app.json:
            self.event("plan", plan_summary(plan, self.dry_run))
            for move in plan.moves:
                self.event("planned", planned_move(move))
            return
        _show_plan(self.app, plan, self.dry_run)

    def start(self, plan) -> None:
        if plan.moves and self.bar is not None:
            self.bar.start(len(plan.moves), plan.nbytes)

    def copied(self, nbytes: int) -> None:
        if self.bar is not None:
            self.bar.copied(nbytes)

    def result(self, result) -> None:
        from bkctl.wire.rebalance.mover import MoveOutcome

        if self.app.json:
            self.event("move", result.as_json())
            return
        if result.outcome is not MoveOutcome.MOVED:
            with self._lock:
                self.reasons[f"{result.outcome.value}: {result.reason}"] += 1
        if self.bar is not None:
            self.bar.ledger()  # its bytes were counted as they were copied

    def note(self, text: str) -> None:
        if self.app.json:
            self.event("note", {"text": text})
        else:
            self.app.err_console.print(text, markup=False)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()

    def say_reasons(self) -> None:
        for reason, n in self.reasons.most_common(20):
            self.app.console.print(f"{plural(n, 'ledger')} {reason}", markup=False)


def _percent(n: int, mean: float) -> str:
    return f"{(n - mean) / mean:+.0%}" if mean else ""


def _show_plan(app: App, plan, dry_run: bool) -> None:
    bookies = sorted(set(plan.before) | set(plan.after), key=lambda b: -plan.before.get(b, 0))
    mean = plan.mean or (sum(plan.before.values()) / len(plan.before) if plan.before else 0.0)
    rows = [
        (
            b,
            human_size(plan.before.get(b, 0)),
            _percent(plan.before.get(b, 0), mean),
            human_size(plan.after.get(b, 0)),
            _percent(plan.after.get(b, 0), mean),
        )
        for b in bookies
    ]
    table(app, ["bookie", "live before", "vs mean", "after", "vs mean"], rows)
    if plan.moves and (dry_run or app.verbose):
        shown = plan.moves if app.verbose else plan.moves[:_MOVES_SHOWN]
        table(
            app,
            ["ledger", "move", "segments", "bytes", "why"],
            [(m.ledger_id, m.describe(), len(m.segments), human_size(m.nbytes), m.reason.value) for m in shown],
        )
        if len(shown) < len(plan.moves):
            app.console.print(f"... and {len(plan.moves) - len(shown)} more moves (-v or --json lists every one)")
    by_kind = Counter(u.kind.value for u in plan.unmovable)
    for kind, n in by_kind.most_common():
        example = next(u for u in plan.unmovable if u.kind.value == kind)
        app.console.print(f"{plural(n, 'ledger')} left where they are: {example.reason}", markup=False)
    for text in plan.notes:
        app.console.print(text, markup=False)
    verb = "would move" if dry_run else "moving"
    app.console.print(
        f"{plural(len(plan.moves), 'ledger')} {verb}, about {human_size(plan.nbytes)} to copy"
        + (f" (from a walk of {plural(plan.ledgers_walked, 'ledger')})" if plan.ledgers_walked else "")
        + ("; dry run: nothing changed" if dry_run else "")
    )


@click.command()
@click.option(
    "--tolerance",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.1,
    show_default=True,
    metavar="F",
    help="Balanced when every writable bookie's live bytes are within this fraction of their mean.",
)
@click.option(
    "--fix-placement",
    is_flag=True,
    help="Instead of balancing: move the replicas of ledgers whose ensembles break the placement policy.",
)
@click.option("--max-moves", type=click.IntRange(1), metavar="N", help="Plan at most N moves.")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--replan",
    is_flag=True,
    help="Forget the kept plan of a rebalance that did not end, and plan again from what the cluster holds.",
)
@click.option(
    "--cancel",
    is_flag=True,
    help="Stop the rebalance or drain running on this cluster (from another terminal) and wait for it to end.",
)
@_throttle_options
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def rebalance(
    app: App,
    tolerance: float,
    fix_placement: bool,
    max_moves: int | None,
    dry_run: bool,
    replan: bool,
    cancel: bool,
    concurrency: int,
    per_bookie: int,
    max_rate: float,
    force: bool,
):
    """Even out the bookies' live data by moving replicas between live bookies.

    One walk of every ledger's metadata gives each writable bookie's live bytes (closed
    ledgers' lengths spread over their entries and write sets, as `disk` counts them).
    The plan moves replicas of closed ledgers from the fullest bookies to the emptiest
    until every one is within --tolerance of the mean, honouring the placement policy in
    use (--placement; a move never makes a segment break it, and never puts two copies of
    an entry on one bookie).  --fix-placement moves, instead, the replicas of ledgers
    whose ensembles break the policy (racks assigned after the data was written, a region
    lost), the fewest that make each comply; an open ledger's last segment is its
    writer's and stays.

    A move takes the ledger's replication lock (so no replication worker, Java's or
    bookied's, touches it meanwhile), copies each entry from the live copies to the target
    with digests verified, and only then swaps the bookies in the metadata with one
    version-checked write: no ledger is ever a copy short.  A ledger marked
    under-replicated, locked by a worker, deleted, fenced or changed since the plan is left
    alone (skipped, or abandoned after its copy: the target's copies are garbage its bookie
    collects).  The sources' copies are garbage once moved: bookied collects them after
    gcOverreplicatedLedgerWaitTime (a day by default, as Java's).  Killed or interrupted,
    nothing is half moved, and the plan is kept beside the cluster's metadata (in ZooKeeper,
    a sibling of the ledgers root: <root>-bkctl-rebalance) until the run ends: run it again
    and it goes on with the kept plan's moves not done yet (to bookies still writable), so
    no replica moves twice (a plan made again from a half-moved cluster could take back a
    replica just placed); --replan forgets the kept plan and plans again.  --dry-run prints
    the plan: the moves, the bytes and each bookie's live bytes before and after.  On a
    terminal a bar shows what is left and the ETA; nothing on a pipe.  --json prints one
    event per line: plan (bookies before/after, unmovable, notes), planned (each move), move
    (each outcome: moved, skipped, abandoned, failed with its reason), summary (with stopped:
    why a cancelled run stopped).  Exit 1 when a move failed (the others go on); a ledger
    skipped or abandoned is said, with why, and a rerun takes it up.

    One rebalance or drain at a time per cluster: a run records itself beside the cluster
    root (<root>-bkctl-running, ephemeral: who, since when, its throttle) and a second one
    is refused, exit 4, naming it.  --cancel, from any terminal, asks the running one to
    stop and waits (up to 60 s) for it to end: it starts no further move, those under way
    end whole, and the stopped run exits 1 (a cancelled rebalance forgets its plan); exit 3
    when none runs.  Moves go --concurrency at a time and at most --per-bookie into any one
    target bookie.
    """
    from ..exitcodes import FAILED, CommandError
    from ..ops.rebalance import rebalance as run

    if cancel:
        from ..ops.rebalance import cancel as stop

        line = stop(app.store)
        if app.json:
            app.emit_json({"event": "cancelled", "text": line})
        else:
            app.console.print(line, markup=False)
        return
    events = _Events(app, "rebalancing", dry_run)

    def confirm(plan) -> None:
        confirm_destructive(
            app,
            f"Move {plural(len(plan.moves), 'ledger')} ({human_size(plan.nbytes)})?",
            force,
            "move replicas",
        )

    try:
        plan, tally = run(
            app.bk,
            app.store,
            placement=app.placement_policy(),
            tolerance=tolerance,
            fix_placement=fix_placement,
            max_moves=max_moves,
            dry_run=dry_run,
            throttle=_throttle(concurrency, per_bookie, max_rate),
            confirm=confirm,
            listener=events,
            progress=lambda: app.walk_progress("reading every ledger's metadata"),
            replan=replan,
        )
    finally:
        events.stop()
    summary = {"dry_run": dry_run, "planned": len(plan.moves), **tally.as_json(), "outside_after": plan.outside()}
    if app.json:
        events.event("summary", summary)
    elif not dry_run and plan.moves:
        events.say_reasons()
        app.console.print(
            f"{plural(tally.moved, 'ledger')} moved ({human_size(tally.nbytes)})"
            + (f"; {tally.skipped} skipped" if tally.skipped else "")
            + (f"; {tally.abandoned} abandoned" if tally.abandoned else "")
            + (f"; {tally.failed} FAILED" if tally.failed else "")
            + (
                f"; stopped ({tally.stopped}) with {len(plan.moves) - tally.moved - len(tally.left)} not started"
                if tally.stopped
                else ""
            )
        )
    elif not plan.moves and not dry_run:
        app.console.print(
            "nothing left to move"
            if plan.resumed is not None
            else "nothing to move" + ("" if fix_placement else ": every bookie is within the tolerance")
        )
    if tally.failed:
        raise CommandError(f"{plural(tally.failed, 'move')} failed; the ledgers stay where they were", FAILED)
    if tally.stopped:
        raise CommandError(f"rebalance stopped: {tally.stopped}; no move was left half done", FAILED)


@click.command()
@click.argument("bookie", metavar="BOOKIE", shell_complete=complete_bookie_id)
@click.option(
    "--decommission",
    is_flag=True,
    help="Once drained and stopped (waited for up to --wait), delete the bookie's cookie.",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=600,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for open ledgers' writers to leave the bookie (and, with --decommission, for it to stop).",
)
@click.option("--http", metavar="HOST:PORT", help="The bookie's HTTP admin (default: from its registration).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing (the bookie stays writable).")
@_throttle_options
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def drain(
    app: App,
    bookie: str,
    decommission: bool,
    wait: float,
    http: str | None,
    dry_run: bool,
    concurrency: int,
    per_bookie: int,
    max_rate: float,
    force: bool,
):
    """Empty a running bookie while it serves reads: every replica moves elsewhere.

    The bookie turns read-only first (its HTTP admin, as `bookie readonly on`), so new
    ledgers and ensemble changes go elsewhere while it keeps serving reads; then each
    replica it holds moves to the emptiest writable bookie the placement policy allows,
    as `rebalance` moves them (copied from the live copies, digests verified, then one
    version-checked metadata write under the ledger's replication lock): the cluster
    never holds fewer than write-quorum copies.  An open ledger's last segment is its
    writer's: the writer leaves a read-only bookie at its next ensemble change or when
    it rolls the ledger, and drain looks again until --wait runs out.  It ends when no
    ledger names the bookie (exit 0), ready for `decommission` -- or, with
    --decommission, it waits for the bookie to be stopped and deletes its cookie.
    Ledgers still on it after --wait are listed, each with why (exit 1), and the last line
    says what moved, that the bookie is left read-only and the command that undoes it
    (`bkctl bookie readonly BOOKIE off`); so do --cancel from another terminal (exit 1) and
    Ctrl-C (exit 130).  A bookie not running is exit 4 (use `decommission`), an unknown
    one exit 3, a rebalance or drain running already exit 4.  Killed or interrupted,
    nothing is half moved; run it again.  --dry-run lists every ledger that cannot move,
    with why, and exits 1 when there is any (an open ledger whose writer may yet leave the
    bookie is listed as waiting, not counted) -- or 9 (data lost) when some ledger has
    entries with no good copy off the bookie (data lost if it left before they are
    repaired), found by `ledger fsck`'s data_lost rule (its surviving copies read and
    digest-checked), each named with its entries, bookies and cause.  --json:
    one event per line (plan, planned, move, note, summary: bookie_id, drained, passes,
    moved, skipped, abandoned, failed, bytes, entries_copied, stopped, left[] {ledger_id,
    reason}, lost[] and waiting[] {ledger_id, reason}, read_only_set, left_read_only, cookie_deleted,
    dry_run).
    """
    from ..exitcodes import FAILED, FSCK_DATA_LOST, INTERRUPTED, CommandError
    from ..ops.rebalance import drain as run

    events = _Events(app, f"draining {bookie}", dry_run)

    def confirm(what: str) -> None:
        confirm_destructive(app, f"{what[0].upper()}{what[1:]}?", force, f"drain {bookie}")

    try:
        report, _plan = run(
            app.bk,
            app.store,
            bookie,
            placement=app.placement_policy(),
            dry_run=dry_run,
            wait=wait,
            throttle=_throttle(concurrency, per_bookie, max_rate),
            http=http,
            decommission=decommission,
            confirm=confirm,
            listener=events,
            progress=lambda: app.walk_progress("reading every ledger's metadata"),
        )
    finally:
        events.stop()
    if app.json:
        events.event("summary", report.as_json())
    elif dry_run:
        for lid, why in sorted(report.lost.items()):
            app.console.print(f"  {lid}: LOST if {bookie} leaves: {why}", markup=False)
        for lid, why in sorted(report.left.items()):
            if lid not in report.lost:
                app.console.print(f"  {lid}: cannot move: {why}", markup=False)
        for lid, why in sorted(report.waiting.items()):
            app.console.print(f"  {lid}: waits ({why}); the run looks again until --wait", markup=False)
    else:
        events.say_reasons()
        t = report.tally
        if report.drained:
            app.console.print(
                f"{bookie} drained: {plural(t.moved, 'ledger')} moved ({human_size(t.nbytes)}) in "
                f"{plural(report.passes, 'pass', 'passes')}; nothing live is left on it"
                + (
                    "; cookie deleted"
                    if report.cookie_deleted
                    else f" (bkctl decommission {bookie} once it is stopped)"
                )
            )
        else:
            for lid, why in sorted(report.left.items()):
                app.console.print(f"  {lid}: {why}", markup=False)
    if dry_run and report.lost:
        raise CommandError(
            f"dry run: {plural(len(report.lost), 'ledger')} of {bookie} would lose data if it left "
            "(entries with no good copy off it: listed above); nothing changed",
            FSCK_DATA_LOST,
        )
    if dry_run and report.left:
        raise CommandError(
            f"dry run: {plural(len(report.left), 'ledger')} of {bookie} cannot move now (listed above); nothing changed",
            FAILED,
        )
    if not dry_run and not report.drained:
        raise CommandError(report.ending(wait), INTERRUPTED if report.interrupted else FAILED)
