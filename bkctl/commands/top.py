"""``bkctl top``: the cluster's bookies, live, full screen (bkctl.ops.top, bkctl.top_screen)."""

from __future__ import annotations

import sys
import time

import click

from ..app import App
from ..exitcodes import TERMINATED, UNREACHABLE, USAGE, CommandError
from ..ops.top import SORTS
from . import pass_app


@click.command("top")
@click.option(
    "-n",
    "--interval",
    type=click.FloatRange(0.2),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between refreshes.",
)
@click.option(
    "--once", is_flag=True, help="Print one frame and exit (rates over one interval); with --json the data instead."
)
@click.option(
    "--sort",
    type=click.Choice(list(SORTS)),
    default="bookie",
    show_default=True,
    help="The column to sort by first (the s key changes it).",
)
@click.option(
    "--filter",
    "filter_text",
    metavar="TEXT",
    default="",
    help="Only bookies whose id, state or rack contains TEXT (the / key changes it).",
)
@click.option(
    "--http-timeout",
    type=click.FloatRange(0.1),
    default=0.8,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for each bookie's HTTP admin per refresh.",
)
@pass_app
def top(app: App, interval: float, once: bool, sort: str, filter_text: str, http_timeout: float):
    """The cluster's bookies, live, in the spirit of htop.

    Per bookie: its state (writable, read-only, down: a cookie and no
    registration, lost: as the auditor counts it, unreachable: registered
    but its HTTP admin does not answer), rack, add and read rates and
    latencies and journal sync latency from its /metrics (bookied's names
    and Java's Prometheus ones; a bookie without metrics says so), disk used
    and what its entry logs could give back (bookied's gc_details), garbage
    collection and compaction.  Above them, what autorecovery is doing, as
    `autorecovery status` says it: enabled, the auditor, what it waits for,
    the under-replicated ledgers by state, lost bookies.

    Keys: q quit, ? help, s/S sort key/order, / filter, up/down select,
    Enter details of a bookie (its under-replicated ledgers too), Esc back,
    r refresh now.  The terminal is put back as it was on exit; SIGTERM
    ends the view as q does, with exit status 143.

    ZooKeeper's state is a line of its own: when it stops answering the view
    says since when, shows how old the registrations and the autorecovery
    report are, and goes on reading the bookies' HTTP admins (which need no
    ZooKeeper); the age of the bookies' figures turns red when they are late.

    --once prints one frame without the keys (for scripts and logs), --once
    --json the snapshot: time, cluster, bookies (one object each),
    autorecovery (the status report), zookeeper (state, since, error,
    read_at).  --once waits for ZooKeeper no longer than the global
    --timeout: the frame it could make, then exit 5.  Without --once stdout
    must be a terminal.
    """
    from dataclasses import replace

    from ..ops.top import TopCollector, ZooKeeperState, filter_rows, sort_rows

    if not once and not sys.stdout.isatty():
        raise CommandError("bkctl top draws on a terminal; give --once (and --json) for one frame", USAGE)
    started = time.monotonic()
    # ZooKeeper is read in threads of its own: a live view waits for it a moment per refresh,
    # --once as long as --timeout says
    collector = TopCollector(
        lambda: app.store,
        timeout=http_timeout,
        zk_wait=app.zk_timeout if once else min(1.0, interval),
        zk_grace=app.zk_timeout if once else max(2.0, 2 * interval),
    )
    title = app.cluster_name or app.metadata_uri or ""
    if not once:
        from rich.console import Console

        from ..top_screen import ViewState, run_live

        if run_live(
            collector,
            Console(no_color=not app.color, highlight=False),
            interval,
            title,
            ViewState(sort=sort, filter=filter_text),
        ):
            raise SystemExit(TERMINATED)  # raised here, after the view put everything back
        return
    try:
        snapshot = collector.snapshot()  # a first scrape: the rates are over the next interval
        if snapshot.zookeeper.state is ZooKeeperState.OK:
            time.sleep(interval)
            collector.zk_wait = collector.zk_grace = max(0.1, app.zk_timeout - (time.monotonic() - started))
            snapshot = collector.snapshot()
    finally:
        collector.close()
    snapshot = replace(snapshot, bookies=filter_rows(sort_rows(snapshot.bookies, sort), filter_text))
    if app.json:
        app.emit_json(snapshot)
    else:
        from ..top_screen import ViewState, render

        console = app.console
        if not console.is_terminal:  # a log or a pipe: as wide as the frame needs, never cut
            from rich.console import Console

            console = Console(width=200, no_color=True, highlight=False)
        console.print(
            render(snapshot, ViewState(sort=sort, filter=filter_text, interval=interval, title=title), live=False)
        )
    zookeeper = snapshot.zookeeper
    if zookeeper.state is not ZooKeeperState.OK:
        raise CommandError(
            f"ZooKeeper is not answering: {zookeeper.error}; the bookies shown, if any, were read over HTTP only",
            UNREACHABLE,
        )
