"""``bkctl ledger ...``: create, write, read, close, fence, recover, list, show, delete."""
from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completion import complete_bookie_id, complete_ledger_id
from ..render import emit, fields, table
from . import pass_app

STATES = click.Choice(["open", "in_recovery", "closed"], case_sensitive=False)


@click.group()
def ledger():
    """Ledgers: create, write, read, close, fence, recover, list, show, delete."""


@ledger.command("list")
@click.option("--state", type=STATES, help="Only ledgers in this state.")
@click.option("--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id,
              help="Only ledgers with a segment on this bookie.")
@click.option("--not-adhering", is_flag=True,
              help="Only ledgers with a segment whose ensemble breaks the placement policy (--placement; "
                   "with --json, not_adhering lists those segments' first entries).")
@pass_app
def ledger_list(app: App, state: str | None, bookie: str | None, not_adhering: bool):
    """Ledger ids in ascending order (with details when filtering)."""
    from ..ops.ledgers import list_ledgers

    rows = list_ledgers(app.store, state, bookie, app.placement_policy() if not_adhering else None)
    if app.json:  # a stream: JSON lines, one per ledger
        for row in rows:
            app.emit_json(row)
        return
    if state is None and bookie is None and not not_adhering:
        for row in rows:
            click.echo(row["ledger_id"])
        return
    table(app, ["ledger", "state", "E/Qw/Qa", "last entry", "length", "bookies"],
          ((r["ledger_id"], r.get("state", r.get("error")), _quorums(r), r.get("last_entry_id"),
            r.get("length"), ", ".join(sorted({b for s in r.get("segments", []) for b in s["bookies"]})))
           for r in rows))


def _quorums(r: dict) -> str:
    return f"{r['ensemble_size']}/{r['write_quorum']}/{r['ack_quorum']}" if "ensemble_size" in r else ""


@ledger.command("show")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@pass_app
def ledger_show(app: App, ledger_id: int):
    """A ledger's metadata: state, quorums, last entry, segments."""
    from ..ops.ledgers import show_ledger

    doc = show_ledger(app.store, ledger_id)

    def human():
        fields(app, [
            ("ledger", doc["ledger_id"]), ("state", doc["state"]),
            ("ensemble/write/ack", _quorums(doc)), ("last entry", doc["last_entry_id"]),
            ("length", doc["length"]), ("digest", doc["digest"]),
            ("password", "set" if doc["password_set"] else "empty"), ("ctime", doc["ctime"]),
            ("metadata format", doc["format_version"]), ("znode version", doc["version"]),
        ] + [(f"meta {k}", v) for k, v in doc["custom_metadata"].items()])
        table(app, ["first entry", "ensemble"],
              [(s["first_entry_id"], ", ".join(s["bookies"])) for s in doc["segments"]])

    emit(app, doc, human)


@ledger.command("delete")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def ledger_delete(app: App, ledger_id: int, force: bool):
    """Delete a ledger's metadata; bookies reclaim its entries at their next GC."""
    from ..ops.ledgers import delete_ledger

    app.store.read_ledger(ledger_id)  # not found -> exit 3 before asking
    confirm_destructive(app, f"Delete ledger {ledger_id}?", force, f"delete ledger {ledger_id}")
    _drop_held(app, ledger_id)
    doc = delete_ledger(app.store, ledger_id)
    emit(app, doc, lambda: app.console.print(f"ledger {ledger_id} deleted"))


# -- through the client -----------------------------------------------------------------

_PASSWORD = click.option("--password", metavar="PASSWORD",
                         help="The ledger's password (default: the one stored in its metadata; "
                              "a wrong one fails with exit 1).")


def _password(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def _held(app: App, ledger_id: int):
    return app.handles.get(ledger_id)


def _drop_held(app: App, ledger_id: int) -> None:
    held = app.handles.pop(ledger_id, None)
    if held is not None:
        try:
            held.release()
        except Exception:  # noqa: BLE001 - it failed already (fenced...); the lock goes anyway
            pass


@ledger.command("create")
@click.option("-e", "--ensemble", "ensemble", type=click.IntRange(1), default=3, show_default=True,
              help="Ensemble size (bookies per segment).")
@click.option("-w", "--write-quorum", type=click.IntRange(1), default=2, show_default=True,
              help="Copies of each entry.")
@click.option("-a", "--ack-quorum", type=click.IntRange(1), default=2, show_default=True,
              help="Acknowledgements an add waits for.")
@click.option("--digest", type=click.Choice(["crc32", "crc32c", "mac", "dummy"], case_sensitive=False),
              default="crc32c", show_default=True, help="Entry digest type.")
@click.option("--password", default="", metavar="PASSWORD", help="Ledger password (default: empty).")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Custom metadata (repeatable).")
@pass_app
def ledger_create(app: App, ensemble: int, write_quorum: int, ack_quorum: int, digest: str, password: str,
                  meta: tuple[str, ...]):
    """Create an OPEN ledger on random writable bookies; prints its id.

    The ledger stays open for `ledger add` (from any process).  In the shell
    the session keeps writing it through its live handle until `ledger
    close` (leaving the shell leaves it open).  --json prints the metadata
    as `ledger show` does (ledger_id, state, ensemble_size, ..., segments).
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.ledgers import HeldLedger, create_ledger, describe, parse_custom_metadata

    if not ensemble >= write_quorum >= ack_quorum:
        raise CommandError(f"need ensemble >= write quorum >= ack quorum (got {ensemble}/{write_quorum}/"
                           f"{ack_quorum})", USAGE)
    try:
        custom = parse_custom_metadata(meta)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--meta") from None
    lh = create_ledger(app.bk, ensemble, write_quorum, ack_quorum, digest, password.encode("utf-8"), custom)
    if app.interactive:
        app.handles[lh.ledger_id] = HeldLedger(app.bk, lh, app.store)
    md, version = app.store.read_ledger(lh.ledger_id)
    doc = describe(lh.ledger_id, md, version)
    emit(app, doc, lambda: click.echo(lh.ledger_id))


def _payloads(data: tuple[str, ...], file, binary: bool):
    """The entries to add, as a lazy iterator of bytes."""
    if file is None and data == ("-",):
        file = click.get_binary_stream("stdin")
    if file is None:
        return (d.encode("utf-8") for d in data)
    if binary:
        return iter([file.read()])
    return (_strip_newline(line) for line in file)


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(b"\n") else line


@ledger.command("add")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@click.argument("data", nargs=-1)
@click.option("-f", "--file", "file", type=click.File("rb"), help="Read entries from FILE (- = stdin).")
@click.option("--binary", is_flag=True, help="The whole input (FILE or stdin) is ONE entry.")
@_PASSWORD
@pass_app
def ledger_add(app: App, ledger_id: int, data: tuple[str, ...], file, binary: bool, password: str | None):
    """Append entries to an OPEN ledger; prints the new entry ids.

    Each DATA argument is one entry (UTF-8).  With `-` (or -f FILE), each
    input line is one entry, its newline stripped; with --binary the whole
    input is one entry.  Adds are pipelined and acknowledged by the ack
    quorum before the command returns.

    A ledger another process created is continued like a writer that took
    over: its ZooKeeper append lock is taken, its tail written back to full write quorums, the
    entries appended, the LAC published, and the lock released; the ledger
    stays open.  In the shell, a ledger created in the session is written
    through its live handle.  A closed, fenced or locked ledger: exit 4.
    --json prints {"ledger_id", "entry_ids"}.
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
            _drop_held(app, ledger_id)  # fenced or closed by someone else: this session is done with it
        raise

    def human():
        ids = doc["entry_ids"]
        if not ids:
            app.console.print(f"ledger {ledger_id}: nothing added")
        elif len(ids) == 1:
            click.echo(ids[0])
        else:
            app.console.print(f"ledger {ledger_id}: added {len(ids)} entries, {ids[0]}..{ids[-1]}")

    emit(app, doc, human)


@ledger.command("read")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@click.option("--from", "first", type=click.IntRange(0), default=0, show_default=True, help="First entry.")
@click.option("--to", "last", type=click.IntRange(0), help="Last entry (default: the last confirmed one).")
@click.option("--format", "fmt", type=click.Choice(["text", "hex", "raw"]), default="text", show_default=True,
              help="text: UTF-8 (bad bytes replaced); hex; raw: the bytes as they are.")
@_PASSWORD
@pass_app
def ledger_read(app: App, ledger_id: int, first: int, last: int | None, fmt: str, password: str | None):
    """Print entries (default: every confirmed one), streamed in batches.

    text and hex print one "ENTRY_ID<TAB>PAYLOAD" line per entry (text
    escapes control characters: \\n, \\t, \\xNN); raw writes the payloads back to back to stdout.  --json prints
    JSON lines {"ledger_id", "entry_id", "length", "encoding", "payload"}
    where payload is UTF-8 text (encoding "utf-8"), hex ("hex") or, with
    --format raw, base64 ("base64").  Reading past the last confirmed entry
    is exit 3.
    """
    from ..ops.ledgers import entry_doc, entry_line, iter_entries, open_reader, read_limit

    reader = open_reader(app.bk, ledger_id, _password(password), _held(app, ledger_id))
    end = read_limit(reader) if last is None else last
    total = max(0, end - first + 1)
    out = _binary_stdout() if fmt == "raw" and not app.json else None
    with (app.progress(total, f"ledger {ledger_id}") if total > 2000 else _quiet()) as bar:
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


def _binary_stdout():
    """stdout for bytes; when it has no binary side (the shell's pager), text with bad bytes replaced."""
    try:
        return click.get_binary_stream("stdout")
    except RuntimeError:
        import sys

        class _Text:
            def write(self, data: bytes) -> None:
                sys.stdout.write(data.decode("utf-8", "replace"))

            def flush(self) -> None:
                sys.stdout.flush()

        return _Text()


def _quiet():
    from ..app import _NoProgress

    return _NoProgress()


@ledger.command("close")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@_PASSWORD
@pass_app
def ledger_close(app: App, ledger_id: int, password: str | None):
    """Close a ledger: no more entries; readers see its last entry.

    A ledger this shell session writes is closed by its writer.  Any other
    OPEN ledger is recovered: fenced on its bookies (so a writer that is
    still alive cannot add behind our back), its tail written back to full write quorums, then
    closed at the last entry found.  Closing a closed ledger changes
    nothing.  --json: {"ledger_id", "state", "last_entry_id", "length",
    "already_closed", "fenced"}.
    """
    from ..ops.ledgers import close_ledger

    held = app.handles.pop(ledger_id, None)
    doc = close_ledger(app.bk, ledger_id, _password(password), held)
    emit(app, doc, lambda: app.console.print(
        f"ledger {ledger_id} {'was already' if doc['already_closed'] else 'is now'} closed: last entry "
        f"{doc['last_entry_id']}, length {doc['length']}"))


@ledger.command("fence")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@_PASSWORD
@pass_app
def ledger_fence(app: App, ledger_id: int, password: str | None):
    """Fence a ledger without closing it: its writer's next add fails.

    Sends a fencing read to every bookie of the last ensemble (the first
    step of recovery); those bookies then refuse normal adds, so nobody can
    append, while the metadata stays as it is (OPEN).  `ledger recover` or
    `ledger close` closes it afterwards.  Exit 5 when too few bookies
    answered to stop every write quorum.  --json: {"ledger_id", "state",
    "fenced", "bookies_fenced", "bookies_failed", "last_add_confirmed"}.
    """
    from ..ops.ledgers import fence_ledger

    _drop_held(app, ledger_id)
    doc = fence_ledger(app.bk, ledger_id, _password(password))

    def human():
        if not doc["fenced"]:
            app.console.print(f"ledger {ledger_id} is {doc['state']}: nothing to fence")
            return
        app.console.print(f"ledger {ledger_id} fenced on {', '.join(doc['bookies_fenced'])}"
                          f" (last add confirmed {doc['last_add_confirmed']})")
        for bookie, error in doc["bookies_failed"].items():
            app.err_console.print(f"not fenced: {bookie}: {error}")

    emit(app, doc, human)


@ledger.command("recover")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@_PASSWORD
@pass_app
def ledger_recover(app: App, ledger_id: int, password: str | None):
    """Ledger recovery: fence, write the tail back to full write quorums, close.

    (Re-replication, copying a lost bookie's fragments elsewhere, is `bkctl recover`.)

    Every entry acknowledged to the old writer is kept; the writer's next
    add fails (fenced).  Concurrent recoveries agree on the last entry.  A
    closed ledger is left as is.  --json: {"ledger_id", "state",
    "last_entry_id", "length", "previous_state"}.
    """
    from ..ops.ledgers import recover_ledger

    _drop_held(app, ledger_id)
    doc = recover_ledger(app.bk, ledger_id, _password(password))
    emit(app, doc, lambda: fields(app, [("ledger", ledger_id), ("state", doc["state"]),
                                        ("last entry", doc["last_entry_id"]), ("length", doc["length"])]))


@ledger.command("tail")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@click.option("--from", "first", type=click.IntRange(0),
              help="Start at this entry (default: the first entry after the current LAC).")
@click.option("--format", "fmt", type=click.Choice(["text", "hex", "raw"]), default="text", show_default=True,
              help="As for `ledger read`.")
@click.option("--interval", type=click.FloatRange(0.01), default=0.5, show_default=True,
              help="Seconds between polls of the LAC.")
@_PASSWORD
@pass_app
def ledger_tail(app: App, ledger_id: int, first: int | None, fmt: str, interval: float, password: str | None):
    """Follow a ledger: print entries as its LAC advances.

    Polls the bookies' LAC (and the metadata) every --interval seconds and
    prints what became readable; stops on Ctrl-C (exit 0) or once the ledger
    is closed and its last entry printed.  Output as `ledger read` (--json:
    JSON lines).
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
