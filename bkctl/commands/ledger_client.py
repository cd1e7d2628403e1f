"""``bkctl ledger create|add|read|close|fence|recover|tail``: the ledger commands that go through the
BookKeeper client to the bookies, with the handles the shell holds between them (added to the
``ledger`` group in bkctl.cli)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id, complete_ledger_id, complete_open_ledger_id
from ..render import emit, human_size, plural
from . import LEDGER_ID, pass_app

if TYPE_CHECKING:
    from ..ops.ledgers import ClosedLedger

_PASSWORD = click.option(
    "--password",
    metavar="PASSWORD",
    help="The ledger's password (default: the one stored in its metadata; a wrong one fails with exit 1).",
)


def _password(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def _held(app: App, ledger_id: int):
    return app.handles.get(ledger_id)


def drop_held(app: App, ledger_id: int) -> None:
    held = app.handles.pop(ledger_id, None)
    if held is not None:
        try:
            held.release()
        except Exception:  # noqa: BLE001 - it failed already (fenced...); the lock goes anyway
            pass


_FORCE_LIVE = click.option(
    "-f", "--force", is_flag=True, help="Do not ask before acting on an open ledger that Pulsar writes."
)
_FORCE_OPEN = click.option(
    "-f", "--force", is_flag=True, help="Do not ask before acting on an open ledger (its writer's next add fails)."
)


def _guard_live(app: App, ledger_id: int, verb: str, force: bool, any_writer: bool = False) -> None:
    """Fencing, closing or recovering an open ledger that a Pulsar broker
    writes fails the broker's next write: say whose it is, then ask on a
    terminal, refuse without --force elsewhere (as for every command that
    changes data).  ``any_writer`` (fence, recover: what they are for is
    stopping another writer): every open ledger, whoever writes it."""
    from ..ops.ledgers import live_writer

    why = live_writer(app.store, ledger_id, any_writer=any_writer)
    if why is None:
        return
    app.err_console.print(f"bkctl: ledger {ledger_id} is {why}", markup=False, soft_wrap=True)
    confirm_destructive(app, f"{verb.capitalize()} it anyway?", force, f"{verb} ledger {ledger_id}")


@click.command("create")
@click.option(
    "-e",
    "--ensemble",
    "ensemble",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Ensemble size (bookies per segment).",
)
@click.option(
    "-w", "--write-quorum", type=click.IntRange(1), default=2, show_default=True, help="Copies of each entry."
)
@click.option(
    "-a",
    "--ack-quorum",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="Acknowledgements an add waits for.",
)
@click.option(
    "--digest",
    type=click.Choice(["crc32", "crc32c", "mac", "dummy"], case_sensitive=False),
    default="crc32c",
    show_default=True,
    help="Entry digest type.",
)
@click.option("--password", default="", metavar="PASSWORD", help="Ledger password (default: empty).")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Custom metadata (repeatable).")
@pass_app
def ledger_create(
    app: App, ensemble: int, write_quorum: int, ack_quorum: int, digest: str, password: str, meta: tuple[str, ...]
):
    """Create an OPEN ledger on random writable bookies; prints its id.

    The ledger stays open for `ledger add` (from any process).  In the shell
    the session keeps writing it through its live handle until `ledger
    close` (leaving the shell leaves it open).  --json prints the metadata
    as `ledger show` does (ledger_id, state, ensemble_size, ..., segments).
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.ledgers import HeldLedger, create_ledger, describe, parse_custom_metadata

    if not ensemble >= write_quorum >= ack_quorum:
        raise CommandError(
            f"need ensemble >= write quorum >= ack quorum (got {ensemble}/{write_quorum}/{ack_quorum})", USAGE
        )
    try:
        custom = parse_custom_metadata(meta)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--meta") from None
    lh = create_ledger(app.bk, ensemble, write_quorum, ack_quorum, digest, password.encode("utf-8"), custom)
    if app.interactive:
        app.handles[lh.ledger_id] = HeldLedger(app.bk, lh, app.store)
    md, version = app.store.ledgers.read(lh.ledger_id)
    doc = describe(lh.ledger_id, md, version)
    emit(app, doc, lambda: click.echo(lh.ledger_id))


def _payloads(data: tuple[str, ...], file: BinaryIO | None, binary: bool) -> Iterator[bytes]:
    """The entries to add, as a lazy iterator of bytes."""
    if file is None and data == ("-",):
        file = sys.stdin.buffer  # (click.get_binary_stream is deprecated and gives this)
        if file.isatty():
            click.echo("reading entries from the terminal, one per line; Ctrl-D ends them", err=True)
    if file is None:
        return (d.encode("utf-8") for d in data)
    if binary:
        return iter([file.read()])
    return (_strip_newline(line) for line in file)


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(b"\n") else line


@click.command("add")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@click.argument("data", nargs=-1)
@click.option("-f", "--file", "file", type=click.File("rb"), help="Read entries from FILE (- = stdin).")
@click.option("--binary", is_flag=True, help="The whole input (FILE or stdin) is ONE entry.")
@_PASSWORD
@pass_app
def ledger_add(app: App, ledger_id: int, data: tuple[str, ...], file, binary: bool, password: str | None):
    """Append entries to an OPEN ledger; says which entry ids they got.

    Each DATA argument is one entry (UTF-8).  With `-` (or -f FILE), each
    input line is one entry, its newline stripped; with --binary the whole
    input is one entry.  Adds are pipelined and acknowledged by the ack
    quorum before the command returns.

    A ledger another process created is continued like a writer that took
    over: its ZooKeeper append lock is taken, its tail written back to full write quorums, the
    entries appended, the LAC published, and the lock released; the ledger
    stays open.  In the shell, a ledger created in the session is written
    through its live handle.  A closed, fenced or locked ledger: exit 4.
    Prints "ledger N: added K entries, FIRST..LAST" (one entry as many);
    with -q only the last entry id.  --json prints {"ledger_id", "entry_ids"}.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.ledgers import add_entries

    if file is not None and data:
        raise CommandError("give DATA arguments or --file, not both", USAGE)
    if file is None and not data:
        raise CommandError("nothing to add: give DATA arguments, - (stdin) or --file", USAGE)
    if "-" in data and data != ("-",):
        raise CommandError("- (stdin) cannot be mixed with DATA arguments", USAGE)
    held = _held(app, ledger_id)
    try:
        doc = add_entries(app.bk, ledger_id, _payloads(data, file, binary), _password(password), held)
    except Exception as e:
        from bkctl.wire.errors import Conflict

        if held is not None and isinstance(e, Conflict):
            drop_held(app, ledger_id)  # fenced or closed by someone else: this session is done with it
        raise

    def human():
        ids = doc.entry_ids
        if app.quiet:  # the result alone: the last entry id added
            if ids:
                click.echo(ids[-1])
        elif not ids:
            app.console.print(f"ledger {ledger_id}: nothing added")
        else:
            span = str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"
            app.console.print(f"ledger {ledger_id}: added {plural(len(ids), 'entry', 'entries')}, {span}")

    emit(app, doc, human)


@click.command("read")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@click.option("--from", "first", type=click.IntRange(0), help="First entry (default 0).")
@click.option("--to", "last", type=click.IntRange(0), help="Last entry (default: the last confirmed one).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "hex", "raw"]),
    default="text",
    show_default=True,
    help="text: UTF-8 (bad bytes replaced); hex; raw: the bytes as they are.",
)
@_PASSWORD
@click.option(
    "--bookie",
    metavar="BOOKIE",
    shell_complete=complete_bookie_id,
    help="Read only the replicas on this bookie, straight from it (to compare replicas); entries it "
    "lacks or that fail their digest are reported on stderr and make the exit status 1.",
)
@pass_app
def ledger_read(
    app: App,
    ledger_id: int,
    first: int | None,
    last: int | None,
    fmt: str,
    password: str | None,
    bookie: str | None = None,
):
    """Print entries (default: every confirmed one), streamed in batches.

    text and hex print one "ENTRY_ID<TAB>PAYLOAD" line per entry (text
    escapes control characters: \\n, \\t, \\xNN); raw writes the payloads back to back to stdout.  --json prints
    JSON lines {"ledger_id", "entry_id", "length", "encoding", "payload"}
    where payload is UTF-8 text (encoding "utf-8") when the entry is valid
    UTF-8, else base64 ("base64"); hex ("hex") with --format hex, and
    always base64 with --format raw.  --from or --to past the last
    confirmed entry is exit 3; --to before --from is exit 2.  An open
    ledger is read to its last add confirmed, and stderr says so.  With --bookie
    only the entries whose write set holds that bookie are read, from it
    alone (to the ledger's last entry, or for an open ledger the highest
    the bookie has); --json lines then also carry "bookie" and "status"
    (ok, missing, corrupt, error).
    """
    from ..exitcodes import NOT_FOUND, USAGE, CommandError
    from ..ops.ledgers import entry_doc, entry_line, iter_entries, open_reader, read_limit

    if first is not None and last is not None and last < first:
        raise CommandError(f"--to {last} is before --from {first}", USAGE)
    if bookie is not None:
        return _read_replica(app, ledger_id, bookie, first or 0, last, fmt, password)

    reader = open_reader(app.bk, ledger_id, _password(password), _held(app, ledger_id))
    limit = read_limit(reader)
    if first is not None and first > limit:
        raise CommandError(f"ledger {ledger_id}: entry {first} is past the last confirmed entry ({limit})", NOT_FOUND)
    first = first or 0
    end = limit if last is None else last
    total = max(0, end - first + 1)
    out = _binary_stdout() if fmt == "raw" and not app.json else None
    # no bar when the entries go to the terminal (or the shell's pager): only for pipes and files
    bar = app.progress(total, f"ledger {ledger_id}") if total > 2000 and not sys.stdout.isatty() else _quiet()
    with bar:
        for batch in iter_entries(reader, first, last):
            for entry_id, payload in batch:
                if app.json:
                    app.emit_json(entry_doc(ledger_id, entry_id, payload, fmt))
                elif out is not None:
                    out.write(payload)
                else:
                    click.echo(entry_line(entry_id, payload, fmt))
            if out is not None:
                out.flush()
            bar.advance(len(batch))
    if not reader.is_closed and last is None and _held(app, ledger_id) is None:
        app.info(
            f"ledger {ledger_id} is open: only entries up to its last add confirmed ({limit}) are shown; "
            "a writer's last entries are confirmed by its next add, an explicit LAC (v2 writers send "
            f"none) or closing the ledger (`bkctl ledger close {ledger_id}`)"
        )


def _read_replica(
    app: App, ledger_id: int, bookie: str, first: int, last: int | None, fmt: str, password: str | None
) -> None:
    from ..exitcodes import FAILED, CommandError
    from ..ops.ledgers import entry_doc, entry_line
    from ..ops.recovery import check_bookie_ids
    from ..ops.replica_read import BadReplica, ReplicaRead, ReplicaStatus, read_replica

    check_bookie_ids([bookie])
    doc: ReplicaRead = app.bk.run(read_replica, ledger_id, bookie, first, last, _password(password))
    out = _binary_stdout() if fmt == "raw" and not app.json else None
    bad = 0
    for row in doc.entries:
        if row.status is not ReplicaStatus.OK or row.payload is None:
            bad += 1
            if app.json:
                app.emit_json(BadReplica(ledger_id, row.entry_id, bookie, row.status, row.error))
            else:
                app.err_console.print(f"entry {row.entry_id}: {row.status.value} on {bookie}: {row.error}")
            continue
        if app.json:
            app.emit_json(replace(entry_doc(ledger_id, row.entry_id, row.payload, fmt), bookie=bookie, status="ok"))
        elif out is not None:
            out.write(row.payload)
        else:
            click.echo(entry_line(row.entry_id, row.payload, fmt))
    if out is not None:
        out.flush()
    if bad:
        raise CommandError(f"{bad} of {len(doc.entries)} entries are missing or bad on {bookie}", FAILED)


def _binary_stdout():
    """stdout for bytes; when it has no binary side (the shell's pager), text with bad bytes replaced."""
    buffer = getattr(sys.stdout, "buffer", None)  # (click.get_binary_stream is deprecated)
    if buffer is not None:
        return buffer

    class _Text:
        def write(self, data: bytes) -> None:
            sys.stdout.write(data.decode("utf-8", "replace"))

        def flush(self) -> None:
            sys.stdout.flush()

    return _Text()


def _quiet():
    from ..app import ProgressBar

    return ProgressBar()


@click.command("close")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_open_ledger_id)
@_PASSWORD
@_FORCE_LIVE
@pass_app
def ledger_close(app: App, ledger_id: int, password: str | None, force: bool):
    """Close a ledger: no more entries; readers see its last entry.

    A ledger this shell session writes is closed by its writer.  Any other
    OPEN ledger is recovered: fenced on its bookies (so a writer that is
    still alive cannot add behind our back), its tail written back to full write quorums, then
    closed at the last entry found.  Closing a closed ledger changes
    nothing.  An open ledger that Pulsar writes (a topic's, a cursor's, or a
    Pulsar ledger too young for a topic to list yet) is named with its owner
    and asked about on a terminal, refused without --force elsewhere: its
    broker's next write fails.  --json: {"ledger_id", "state", "last_entry_id", "length",
    "already_closed", "fenced"}.
    """
    from ..ops.ledgers import close_ledger

    held = app.handles.pop(ledger_id, None)
    if held is None:
        _guard_live(app, ledger_id, "close", force)
    doc = close_ledger(app.bk, ledger_id, _password(password), held)
    emit(app, doc, lambda: app.console.print(_closed_text(doc, bool(doc.already_closed))))


@click.command("fence")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@_PASSWORD
@_FORCE_OPEN
@pass_app
def ledger_fence(app: App, ledger_id: int, password: str | None, force: bool):
    """Fence a ledger without closing it: its writer's next add fails.

    Sends a fencing read to every bookie of the last ensemble (the first
    step of recovery); those bookies then refuse normal adds, so nobody can
    append, while the metadata stays as it is (OPEN).  `ledger recover` or
    `ledger close` closes it afterwards.  Exit 5 when too few bookies
    answered to stop every write quorum.  An open ledger -- whoever writes
    it: a Pulsar broker, named, or any other application -- is asked about
    on a terminal, and refused without --force elsewhere (exit 2).
    --json: {"ledger_id", "state", "fenced", "bookies_fenced", "bookies_failed", "last_add_confirmed"}.
    """
    from ..ops.ledgers import fence_ledger

    if _held(app, ledger_id) is None:
        _guard_live(app, ledger_id, "fence", force, any_writer=True)
    drop_held(app, ledger_id)
    doc = fence_ledger(app.bk, ledger_id, _password(password))

    def human():
        if not doc.fenced:
            app.console.print(f"ledger {ledger_id} was already {doc.state.lower().replace('_', ' ')}: nothing to fence")
            return
        app.console.print(
            f"ledger {ledger_id} fenced on {', '.join(doc.bookies_fenced)} (last add confirmed {doc.last_add_confirmed})"
        )
        for bookie, error in doc.bookies_failed.items():
            app.err_console.print(f"not fenced: {bookie}: {error}")

    emit(app, doc, human)


@click.command("recover")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@_PASSWORD
@_FORCE_OPEN
@pass_app
def ledger_recover(app: App, ledger_id: int, password: str | None, force: bool):
    """Ledger recovery: fence, write the tail back to full write quorums, close.

    (Re-replication, copying a lost bookie's fragments elsewhere, is `bkctl recover`.)

    Every entry acknowledged to the old writer is kept; the writer's next
    add fails (fenced).  Concurrent recoveries agree on the last entry.  A
    closed ledger is left as is.  An open ledger -- whoever writes it: a
    Pulsar broker, named, or any other application -- is asked about on a
    terminal, and refused without --force elsewhere (exit 2).  --json:
    {"ledger_id", "state", "last_entry_id", "length", "previous_state"}.
    """
    from ..ops.ledgers import recover_ledger

    if _held(app, ledger_id) is None:
        _guard_live(app, ledger_id, "recover", force, any_writer=True)
    drop_held(app, ledger_id)
    doc = recover_ledger(app.bk, ledger_id, _password(password))
    emit(app, doc, lambda: app.console.print(_closed_text(doc, doc.previous_state == "CLOSED")))


def _closed_text(doc: ClosedLedger, already: bool) -> str:
    """What close and recover say: the same words for the same outcome."""
    return (
        f"ledger {doc.ledger_id} {'was already' if already else 'is now'} closed: last entry "
        f"{doc.last_entry_id}, length {human_size(doc.length)}"
    )


@click.command("tail")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@click.option(
    "--from",
    "first",
    type=click.IntRange(0),
    help="Start at this entry (default: the first entry after the current LAC).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "hex", "raw"]),
    default="text",
    show_default=True,
    help="As for `ledger read`.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.01),
    default=0.5,
    show_default=True,
    help="Longest wait of one long poll of the bookies, after which the metadata is checked for "
    "the ledger being closed (over --protocol v2: seconds between polls of the LAC).",
)
@_PASSWORD
@pass_app
def ledger_tail(app: App, ledger_id: int, first: int | None, fmt: str, interval: float, password: str | None):
    """Follow a ledger: print entries as its LAC advances.

    Long-polls the bookies' LAC (they answer as soon as it moves, with the
    next entry along, as Java's readLastAddConfirmedAndEntry) and prints
    what became readable; stops on Ctrl-C (exit 0) or once the ledger is
    closed and its last entry printed.  Over --protocol v2, which has no long
    poll, the LAC and the metadata are polled every --interval seconds.
    An entry shows once the bookies know it is confirmed: from the LAC the
    writer's next add carries, or from an explicit LAC the writer sends
    (Java's explicitLacInterval; `bkctl ledger add` sends one after its
    entries); the last entry of a closed ledger, from the metadata after at
    most --interval.  Output as `ledger read` (--json: JSON lines).
    """
    from ..ops.ledgers import entry_doc, entry_line, tail_ledger

    out = _binary_stdout() if fmt == "raw" and not app.json else None
    try:
        for entry_id, payload in tail_ledger(app.bk, ledger_id, first, _password(password), interval):
            if app.json:
                app.emit_json(entry_doc(ledger_id, entry_id, payload, fmt))
            elif out is not None:
                out.write(payload)
                out.flush()
            else:
                click.echo(entry_line(entry_id, payload, fmt))
    except KeyboardInterrupt:
        return
