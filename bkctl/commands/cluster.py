"""``bkctl cluster info``, ``bkctl metaformat`` and ``bkctl autorecovery ...``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id
from ..render import emit, emit_rows, fields, table
from . import pass_app

if TYPE_CHECKING:
    from bkctl.wire.autorecovery.repairstate import LostBookie


@click.group()
def cluster():
    """The cluster as a whole."""


@cluster.command("info")
@pass_app
def cluster_info(app: App):
    """The cluster in use (config name, URI), instance id, layout, bookies and autorecovery state."""
    from ..ops.cluster import cluster_info as info

    doc = info(app.store, app.cluster_name)

    def human():
        ar = doc.autorecovery
        b = doc.bookies
        fields(
            app,
            [
                ("cluster", doc.cluster or "(not in the config file)"),
                ("metadata URI", doc.uri),
                ("instance id", doc.instance_id),
                ("ledger manager", doc.layout and doc.layout.manager),
                ("bookies", f"{len(b.writable)} writable, {len(b.readonly)} read-only, {len(b.all)} with cookies"),
                ("autorecovery", "enabled" if ar.enabled else "disabled"),
                ("lost bookie delay", delay_text(ar.lost_bookie_recovery_delay)),
                ("under-replicated", ar.underreplicated),
                ("auditor", ar.auditor or "none"),
            ],
        )

    emit(app, doc, human)


@click.command()
@click.option("-f", "--force", is_flag=True, help="Format without asking, even when the cluster has data.")
@click.option(
    "-n", "--non-interactive", is_flag=True, help="Never prompt: refuse unless --force is given (as BookKeeper's -n)."
)
@click.option(
    "--with-registered-bookies",
    "with_bookies",
    is_flag=True,
    help="Format even while bookies are registered (their old ledgers then collide with new ids).",
)
@pass_app
def metaformat(app: App, force: bool, non_interactive: bool, with_bookies: bool):
    """Format the cluster metadata: wipe ledgers, cookies and marks; new INSTANCEID.

    Keeps available/, the autorecovery switch, lostBookieRecoveryDelay and
    the auditor election, as BookKeeper's metaformat does.  Refuses (exit 4)
    while any bookie is registered, as `cluster nuke` does (Java's metaformat
    does not check), unless --with-registered-bookies.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.cluster import metaformat as do_format

    def confirm() -> bool:
        if non_interactive and not force:
            raise CommandError("refusing to format existing cluster metadata without --force", USAGE)
        confirm_destructive(
            app,
            "Ledger root already exists. Are you sure to format bookkeeper metadata? This may cause data loss.",
            force,
            "format existing cluster metadata",
        )
        return True

    result = do_format(app.connect_store(), confirm, with_bookies=with_bookies)
    emit(
        app,
        result,
        lambda: app.console.print(
            f"formatted; new instance id {result.instance_id}" if result.formatted else "not formatted"
        ),
    )


@click.group()
def autorecovery():
    """The autorecovery daemon, its switch, lost-bookie delay and under-replicated ledgers."""


@autorecovery.command("run")
@click.option(
    "--bookie-id",
    metavar="ID",
    shell_complete=complete_bookie_id,
    help="The id this daemon votes with in the auditor election (default: HOSTNAME:3181, "
    "the id of a bookie on this host).",
)
@click.option(
    "-o",
    "--set",
    "settings",
    metavar="KEY=VALUE",
    multiple=True,
    help="A key of the Autorecovery section of bookied.conf(5) but autoRecoveryDaemonEnabled and "
    "autoRecoveryDaemonCpuPriority (this daemon keeps the priority it is started with: `nice`, or "
    "systemd's CPUSchedulingPolicy=), "
    "in Java's units and checked as bookied checks it: lostBookieRecoveryDelay (s; the cluster's value "
    "in ZooKeeper wins, as in Java: this one is written only when the cluster has none, and the "
    "daemon says at start when it is not used; `lost-bookie-delay` sets the cluster's), "
    "auditorPeriodicCheckInterval (s), auditorPeriodicBookieCheckInterval (s), auditorReplicasCheckInterval (s), "
    "openLedgerRereplicationGracePeriod (ms), lockReleaseOfFailedLedgerGracePeriod (ms), "
    "rereplicationEntryBatchSize, replicationRateByBytes (bytes/s), ensemblePlacementPolicy, "
    "minNumRacksPerWriteQuorum... Repeatable.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve the auditor's and the worker's figures at http://HOST:PORT/metrics under Java's names "
    "(auditor_NUM_UNDER_REPLICATED_LEDGERS, replication_worker_*), as Java's autorecovery does on "
    "prometheusStatsHttpPort (default: not served).",
)
@click.option(
    "--metrics-host",
    metavar="HOST",
    default="0.0.0.0",
    show_default=True,
    help="The address --metrics-port listens on.",
)
@pass_app
def autorecovery_run(
    app: App,
    bookie_id: str | None,
    settings: tuple[str, ...],
    metrics_port: int | None,
    metrics_host: str,
):
    """Run the autorecovery daemon in the foreground (auditor election, auditor, replication worker).

    For hosts whose bookies do not run it themselves (bookied runs it inside
    with autoRecoveryDaemonEnabled=true). Logs its vote, its role (auditor or
    worker) and each repair at INFO on stderr. Stops cleanly on SIGTERM;
    exit 5 naming the cause when it cannot start (ZooKeeper not answering
    within the global --timeout).
    """
    import socket

    from ..exitcodes import USAGE, CommandError
    from ..ops.bookie_conf import config_from_settings

    pairs = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"--set {item!r}: expected KEY=VALUE", USAGE)
        pairs[key.strip()] = value.strip()
    try:
        config = config_from_settings(pairs)
    except ValueError as exc:
        raise CommandError(f"--set: {exc}", USAGE) from None
    from bkctl.wire.metadata.bookieid import bookie_id_problem

    bookie_id = bookie_id or f"{socket.gethostname()}:3181"
    problem = bookie_id_problem(bookie_id)
    if problem:
        raise CommandError(f"--bookie-id {bookie_id!r} {problem}", USAGE)
    uri = app.require_uri()
    from ..ops.autorecovery_daemon import daemon_logging, run_daemon

    if app.bookie_tls:
        from ..app import check_tls_files

        check_tls_files(app.bookie_tls)
    with daemon_logging():
        # in the shell the process goes on after the daemon: never ended for a stuck stop
        code, why = run_daemon(
            uri,
            bookie_id,
            config,
            protocol=app.protocol,
            zk_timeout=app.zk_timeout,
            tls=app.bookie_tls or None,
            exit_when_stuck=not app.interactive,
            twins=app.require_twins(),
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
    if not app.interactive:  # the process ends next: a late SIGTERM must not make it "killed"
        from bkctl.wire.process.shutdown import ignore_late_signals

        ignore_late_signals()
    if code:
        raise CommandError(f"the autorecovery daemon could not start: {why}", code)


@autorecovery.command("whoisauditor")
@pass_app
def autorecovery_whoisauditor(app: App):
    """The bookie id of the elected auditor ("none" when no daemon runs)."""
    from ..ops.autorecovery import who_is_auditor

    doc = who_is_auditor(app.store)
    emit(app, doc, lambda: app.console.print(doc.auditor or "none"))


@autorecovery.command("trigger-audit")
@pass_app
def autorecovery_trigger_audit(app: App):
    """Make the auditor audit now (rewrites lostBookieRecoveryDelay with its own value).

    Refuses while autorecovery is disabled (exit 4) and when no auditor is
    elected (exit 5), as Java's shell and bookied's HTTP endpoint do; the
    delay itself never changes.  --json: triggered, auditor,
    lost_bookie_recovery_delay.
    """
    from ..ops.autorecovery import trigger_audit

    doc = trigger_audit(app.store)
    emit(app, doc, lambda: app.console.print(f"audit triggered (auditor {doc.auditor})"))


@autorecovery.command("force-audit")
@click.option(
    "--check-all-ledgers",
    "checks",
    flag_value="checkallledgersctime",
    multiple=True,
    help="The periodic check of every ledger's fragments (Java's -calc/--checkallledgerscheck; "
    "auditorPeriodicCheckInterval).",
)
@click.option(
    "--placement-policy-check",
    "checks",
    flag_value="placementpolicycheckctime",
    multiple=True,
    help="The placement policy check (-ppc; auditorPeriodicPlacementPolicyCheckInterval).",
)
@click.option(
    "--replicas-check",
    "checks",
    flag_value="replicascheckctime",
    multiple=True,
    help="The replicas check (-rc; auditorReplicasCheckInterval).",
)
@click.option("--all", "every", is_flag=True, help="All three.")
@pass_app
def autorecovery_force_audit(app: App, checks: tuple[str, ...], every: bool):
    """Have the auditor's periodic checks run when it next starts (Java's forceauditchecks).

    Sets each chosen check's last run (underreplication/checkallledgersctime,
    placementpolicycheckctime, replicascheckctime, in Java's format) 21 days
    back, as Java does.  An auditor reads them only when it starts, so the
    checks run once the elected auditor's daemon is restarted (or another
    daemon becomes the auditor), if their interval is set (not 0) and at most
    21 days; the output names the auditor to restart.  At least one check,
    or --all (exit 2 otherwise).
    To audit the lost bookies now, `trigger-audit` needs no restart.
    --json: checks, ctime (ms), previous {check: ms or null}, auditor.
    """
    import time

    from bkctl.wire.metadata import paths as P

    from ..exitcodes import USAGE, CommandError
    from ..ops.autorecovery import force_audit
    from ..render import human_time

    chosen = list(P.UR_CHECK_CTIMES) if every else list(dict.fromkeys(checks))
    if not chosen:
        raise CommandError(
            "name the checks to force: --check-all-ledgers, --placement-policy-check, --replicas-check, or --all", USAGE
        )
    doc = force_audit(app.store, chosen, int(time.time() * 1000))

    def human():
        app.console.print(f"{', '.join(doc.checks)}: last run set to {human_time(doc.ctime)} (21 days ago)")
        if doc.auditor:
            app.console.print(
                f"they run when the auditor next starts: restart the daemon of {doc.auditor} "
                "(bookied, or `autorecovery run`) for them to run now"
            )
        else:
            app.console.print("no auditor is elected: the next one to start runs them")

    emit(app, doc, human)


_STATES_HELP = """A ledger's state is one of: waiting-delay (a lost bookie of it is not due
    before lostBookieRecoveryDelay: until), held-disabled (autorecovery is
    disabled), not-marked (the auditor has not marked it yet), waiting-worker
    (marked, no worker holds it), waiting-grace (an open ledger: its worker
    waits for the writer before fencing it, openLedgerRereplicationGracePeriod:
    until), re-replicating (by worker, since), held-failed (an attempt failed:
    the worker keeps its lock until lockReleaseOfFailedLedgerGracePeriod is
    over, or a bookie registers; then any worker retries it), locked (a worker
    that keeps no status holds it -- Java's: its lock names the host and
    nothing tells copying from waiting or held), done.  Workers are named by
    their daemon's bookie id, from the status our daemons keep in ZooKeeper
    (underreplication/bkctl-daemons/, which Java's tools ignore); attempts
    are the failed attempts the running workers remember (worker, reason,
    at, retry_at)."""


@autorecovery.command("query-status")
@pass_app
def autorecovery_query_status(app: App):
    """Ledgers a worker holds now: which worker, doing what, since and until when.

    {states}  --json: JSON lines {{"ledger_id", "state", "text", "worker",
    "lock" (what the lock holds: our worker's bookie id, Java's host name),
    "since", "until" (ms or null), "attempts", "last_failure" (the last
    attempt or null), "missing_replicas", "ctime"}}.
    """
    from ..ops.autorecovery import query_status

    rows = query_status(app.store)
    emit_rows(
        app,
        rows,
        lambda rows: (
            table(
                app,
                ["ledger", "worker", "state"],
                [(r.repair.ledger_id, r.repair.worker or f"? (lock: {r.repair.lock or '?'})", r.text) for r in rows],
            )
            if rows
            else app.console.print("no worker holds a ledger")
        ),
    )


autorecovery_query_status.help = (autorecovery_query_status.help or "").format(states=_STATES_HELP)


def lost_text(b: LostBookie) -> str:
    """One lost bookie of ``autorecovery status``: why, how many ledgers (the audit's count, then
    what the repair left of it), since when, what the auditor waits for."""
    from ..render import human_time

    since = f"since {human_time(b.lost_since)}; " if b.lost_since else ""
    if b.named_by is not None and b.marked:  # the audit's count, then what the repair left of it
        since = f"{b.under_replicated} of its {b.named_by} ledgers still to re-replicate; " + since
    elif b.named_by is not None:
        since = f"{b.named_by} ledgers; " + since
    elif b.under_replicated:
        since = f"{b.under_replicated} ledgers to re-replicate; " + since
    if b.not_waited:
        return f"{b.bookie_id} ({b.why}; {since}marked at once: {b.not_waited})"
    if b.due_in:
        return f"{b.bookie_id} ({b.why}; {since}due in {b.due_in:g} s)"
    return f"{b.bookie_id} ({b.why}{'; ' + since.rstrip('; ') if since else ''})"


@autorecovery.command("status")
@pass_app
def autorecovery_status(app: App):
    """Whether autorecovery is enabled, and what it has to do and waits for.

    Lost bookies are those with a cookie that are not registered, and those
    the auditor found named by ledgers at its last audit (said so when they
    have no cookie); a decommissioned bookie (no cookie, no ledger names
    it) is not lost.  Each is shown with when the auditor saw it go and
    when lostBookieRecoveryDelay makes it due (or why it is not waited for:
    several bookies lost at once, a triggered audit).  With an auditor that
    keeps no status (Java's) only the cookies and the marks tell who is
    lost, and since when is not known.  Then what the auditor waits for,
    each worker, and each marked or held ledger with its state.  {states}
    --json: enabled, lost_bookie_recovery_delay, underreplicated, auditor,
    auditor_keeps_status, lost_bookies[] (bookie_id, cookie, named_by (at
    the last audit), under_replicated (marked ledgers missing a copy there
    now), marked, lost_since, due (ms), due_in (s), not_waited,
    seen_by_auditor, why),
    auditor_waits_for, workers[] (worker, host, active, holds, updated),
    ledgers[] (as query-status's lines), lost_entries[] (ledger_id, entries,
    runs[] (first_entry_id, last_entry_id, bookies, cause), recorded_at (ms),
    by: the entries a worker found no good copy of, the rest repaired).
    """
    import time

    from ..ops.autorecovery import autorecovery_report

    doc = autorecovery_report(app.store, int(time.time() * 1000))

    def human():
        fields(
            app,
            [
                ("autorecovery", "enabled" if doc.enabled else "disabled"),
                ("lost bookie delay", delay_text(doc.lost_bookie_recovery_delay)),
                (
                    "auditor",
                    (doc.auditor or "none")
                    + ("" if doc.auditor_keeps_status or not doc.auditor else " (keeps no status: Java's?)"),
                ),
                ("lost bookies", "; ".join(lost_text(b) for b in doc.lost_bookies) or "none"),
                ("auditor waits for", doc.auditor_waits_for),
                (
                    "workers",
                    ", ".join(
                        w.worker + (f" (ledger {', '.join(map(str, w.active))})" if w.active else "")
                        for w in doc.workers
                    )
                    or doc.workers_note
                    or "none",
                ),
                ("under-replicated", doc.underreplicated),
                (
                    "lost entries",
                    f"{sum(r.count() for r in doc.lost_entries)} in {len(doc.lost_entries)} ledgers "
                    "(no good copy on any replica; the rest of each ledger was repaired)"
                    if doc.lost_entries
                    else "none",
                ),
            ],
        )
        for r in doc.lost_entries:
            for run in r.runs:
                what = f"entry {run.first}" if run.first == run.last else f"entries {run.first}-{run.last}"
                app.console.print(
                    f"ledger {r.ledger_id}: {what} lost ({', '.join(run.bookies)}): {run.cause}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        if doc.ledgers:
            table(
                app,
                ["ledger", "missing replicas", "worker", "state"],
                [
                    (r.repair.ledger_id, ", ".join(r.repair.missing_replicas), r.repair.worker or "", r.text)
                    for r in doc.ledgers
                ],
            )

    emit(app, doc, human)


autorecovery_status.help = (autorecovery_status.help or "").format(states=_STATES_HELP)


@autorecovery.command("enable")
@pass_app
def autorecovery_enable(app: App):
    """Enable autorecovery (delete underreplication/disable)."""
    _toggle(app, True)


@autorecovery.command("disable")
@pass_app
def autorecovery_disable(app: App):
    """Disable autorecovery (create underreplication/disable)."""
    _toggle(app, False)


def _toggle(app: App, enabled: bool) -> None:
    from ..ops.cluster import set_autorecovery

    doc = set_autorecovery(app.store, enabled)
    state = "enabled" if enabled else "disabled"
    emit(
        app,
        doc,
        lambda: app.console.print(f"autorecovery {state}" if doc.changed else f"autorecovery was already {state}"),
    )


class Duration(click.ParamType):
    """Seconds, or a duration with a unit: 90, 90s, 15m, 1h, 1d."""

    name = "duration"
    _UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        unit = self._UNITS.get(text[-1:]) if text[-1:].isalpha() else 1
        digits = text[:-1] if text[-1:].isalpha() else text
        if unit is None or not digits.isdigit():
            self.fail(f"{value!r} is not a duration: seconds, or a number with s, m, h or d (1h)", param, ctx)
        seconds = int(digits) * unit
        if seconds > 2**31 - 1:
            self.fail(f"{value!r} is too long (at most {2**31 - 1} s)", param, ctx)
        return seconds


def delay_text(seconds: int | None) -> str:
    """The lost-bookie delay as every command shows it."""
    return "not set (the auditor's lostBookieRecoveryDelay)" if seconds is None else f"{seconds} s"


@autorecovery.command("lost-bookie-delay")
@click.argument("delay", type=Duration(), required=False)
@pass_app
def lost_bookie_delay(app: App, delay: int | None):
    """Show, or set, how long the auditor waits after a bookie disappears.

    DELAY is seconds or a duration with a unit (90s, 15m, 1h, 1d).  --json:
    {"lost_bookie_recovery_delay"} in seconds (null when not set: the
    auditor writes its own lostBookieRecoveryDelay when it starts).
    """
    store = app.store
    if delay is not None:
        store.underreplication.set_lost_bookie_recovery_delay(delay)
    value = store.underreplication.lost_bookie_recovery_delay()
    emit(app, {"lost_bookie_recovery_delay": value}, lambda: app.console.print(delay_text(value)))


@autorecovery.command("underreplicated")
@click.option("-c", "--count", is_flag=True, help="Only the number of under-replicated ledgers.")
@click.option(
    "--include-bookie",
    "include",
    metavar="BOOKIE",
    multiple=True,
    shell_complete=complete_bookie_id,
    help="Only ledgers missing a replica on this bookie (repeatable: any of them).",
)
@click.option(
    "--exclude-bookie",
    "exclude",
    metavar="BOOKIE",
    multiple=True,
    shell_complete=complete_bookie_id,
    help="Leave out ledgers missing a replica on this bookie (repeatable).",
)
@pass_app
def underreplicated(app: App, count: bool, include: tuple[str, ...], exclude: tuple[str, ...]):
    """Ledgers marked under-replicated, their missing replicas, and where each repair stands.

    The state and worker (a bookie id) are those of `autorecovery status`.
    --json: JSON lines {"ledger_id", "missing_replicas", "ctime", "state",
    "text", "worker", "lock", "since", "until", "attempts", "last_failure"}
    ({"count"} with --count).
    """
    if count:
        n = app.store.underreplication.count() if not include and not exclude else None
        if n is None:
            from ..ops.autorecovery import underreplicated as marks

            n = len(marks(app.store, include=include, exclude=exclude))
        emit(app, {"count": n}, lambda: app.console.print(str(n)))
        return
    from ..ops.autorecovery import underreplicated as marks

    rows = marks(app.store, include=include, exclude=exclude)
    emit_rows(
        app,
        rows,
        lambda rows: table(
            app,
            ["ledger", "missing replicas", "worker", "state"],
            [(r.repair.ledger_id, ", ".join(r.repair.missing_replicas), r.repair.worker or "", r.text) for r in rows],
        ),
    )
