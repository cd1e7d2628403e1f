"""``bkctl simpletest`` and ``bkctl bench``: test ledgers written, read back and
deleted, to check a cluster works and to measure it."""

from __future__ import annotations

import click

from ..app import App
from ..completers import complete_bookie_id
from ..render import emit, fields
from . import pass_app


def _quorum_options(f):
    """-e/-w/-a with BookKeeper's defaults 3/2/2."""
    f = click.option("-a", "--ack-quorum", type=click.IntRange(1), default=2, show_default=True, help="Ack quorum.")(f)
    f = click.option(
        "-w", "--write-quorum", type=click.IntRange(1), default=2, show_default=True, help="Write quorum."
    )(f)
    return click.option(
        "-e", "--ensemble", type=click.IntRange(1), default=3, show_default=True, help="Ensemble size."
    )(f)


@click.command()
@_quorum_options
@click.option("-n", "--entries", type=click.IntRange(0), default=100, show_default=True, help="Entries to write.")
@click.option(
    "--bookie",
    metavar="BOOKIE",
    shell_complete=complete_bookie_id,
    help="Test this one writable bookie alone (ensemble, write and ack quorum 1; exit 3 if it is not "
    "registered, 4 if it is read-only).",
)
@pass_app
def simpletest(app: App, ensemble: int, write_quorum: int, ack_quorum: int, entries: int, bookie: str | None = None):
    """Write, read back, close, reopen, read and delete a test ledger.

    BookKeeper's simpletest: a CRC32C ledger with an empty password and
    custom metadata Bookie=simpletest gets N 100-byte A-Z entries; the last
    entry id must be N-1 and every entry must read back, before and after
    closing.  Exit 1 on a failure, 5 when bookies cannot be reached or TLS
    fails (the legacy shell always exits 0).
    --json: ledger_id, ensemble_size, write_quorum, ack_quorum, entries,
    entry_size, bookies, last_entry_id, write_seconds, read_seconds,
    deleted, ok.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.simpletest import simpletest as run

    if not ensemble >= write_quorum >= ack_quorum:
        raise CommandError("need ensemble >= write quorum >= ack quorum", USAGE)
    if bookie is not None:
        from bkctl.wire.metadata.registration_state import Registrations, RegistrationState

        from ..exitcodes import CONFLICT, NOT_FOUND
        from ..ops.recovery import check_bookie_ids

        check_bookie_ids([bookie])
        state = Registrations.read(app.store.registration).state_of(bookie)
        if state is RegistrationState.READ_ONLY:
            raise CommandError(f"bookie {bookie} is read-only", CONFLICT)
        if state is RegistrationState.NOT_REGISTERED:
            raise CommandError(f"bookie {bookie} is not registered", NOT_FOUND)
        ensemble = write_quorum = ack_quorum = 1
    doc = run(
        app.bk,
        ensemble,
        write_quorum,
        ack_quorum,
        entries,
        on_step=lambda s: app.info(f"{s}...") if app.verbose else None,
        bookie=bookie,
    )
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"simpletest OK: {entries} entries written to ledger {doc.ledger_id} "
            f"({ensemble}/{write_quorum}/{ack_quorum} on {', '.join(doc.bookies)}) in {doc.write_seconds:.3f}s,"
            f" read back, closed, reopened, read in {doc.read_seconds:.3f}s, deleted"
        ),
    )


@click.command()
@_quorum_options
@click.option("--size", type=click.IntRange(1), default=100, show_default=True, help="Entry size in bytes.")
@click.option("--entries", type=click.IntRange(1), default=10000, show_default=True, help="Entries to write.")
@click.option("--inflight", type=click.IntRange(1), default=256, show_default=True, help="Adds outstanding at once.")
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
    # the bar is drawn a few times a second: drive_adds advances it every 1/200th of the adds,
    # not on each (a rich bar's advance takes a lock and a clock reading: some 5% of an add's CPU)
    with app.progress(entries * 2, "bench") as bar:
        doc = run(
            app.bk, ensemble, write_quorum, ack_quorum, size, entries, inflight, on_add=bar.advance, on_read=bar.advance
        )

    def human():
        a, r, lat = doc.add, doc.read, doc.add.latency_ms
        fields(
            app,
            [
                ("ledger", f"{doc.ledger_id} ({ensemble}/{write_quorum}/{ack_quorum}, deleted)"),
                ("entries", f"{entries} x {size} bytes, {inflight} in flight"),
                ("adds", f"{a.entries_per_second:,.0f}/s  {a.mb_per_second:.2f} MB/s  ({a.seconds:.2f}s)"),
                (
                    "add latency",
                    f"mean {lat.mean:.2f} ms  p50 {lat.p50:.2f}  p99 {lat.p99:.2f}  "
                    f"p99.9 {lat.p999:.2f}  max {lat.max:.2f}",
                ),
                ("reads", f"{r.entries_per_second:,.0f}/s  {r.mb_per_second:.2f} MB/s  ({r.seconds:.2f}s)"),
            ],
        )

    emit(app, doc, human)
