"""Ledger operations: list, show, delete (metadata); create, add, read,
close, fence, recover, tail (through the client)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState

from .results import not_in_json, omitted_unless, omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper, BlockingLedger
    from bkctl.wire.client.ledger_admin import Fenced
    from bkctl.wire.client.ledger_handle import LedgerHandle
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.metadata.store import MetadataStore, WalkProgress

#: enum names looked up once (an enum's ``.name`` is a descriptor call, and a listing
#: describes a million ledgers)
_STATE_NAMES = {state: state.name for state in LedgerState}
_DIGEST_NAMES = {digest: digest.name for digest in DigestType}


# Segment and LedgerInfo are not frozen: `ledger list` makes one per ledger, a million of them,
# and a frozen dataclass costs four times as much to build (object.__setattr__ per field); nothing
# changes one once made (dataclasses.replace makes the LAC's copy).
@dataclass(slots=True)
class Segment:
    """A segment of a ledger: its first entry and its ensemble, in order."""

    first_entry_id: int
    bookies: tuple[str, ...]


@dataclass(slots=True)
class LedgerInfo:
    """A ledger's metadata as every command describes it (no password bytes): ``ledger show``,
    a line of ``ledger list --json``, what ``ledger create --json`` prints."""

    ledger_id: int
    state: str  #: the LedgerState's name: OPEN, IN_RECOVERY, CLOSED
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    last_entry_id: int
    #: a closed ledger's last entry; for an open one, what the bookies say (:func:`add_confirmed_lac`)
    last_add_confirmed: int | None
    length: int
    digest: str | None
    password_set: bool
    ctime: int | None
    custom_metadata: dict[str, str]
    segments: tuple[Segment, ...]
    format_version: int
    version: int | None
    #: ``ledger list --not-adhering``: the first entries of the segments that break the placement policy
    not_adhering: list[int] | None = omitted_when_none()
    #: why the bookies could not tell an open ledger's LAC
    lac_error: str | None = omitted_when_none()
    #: once the bookies were asked for the LAC: :data:`V2_LAC_NOTE` over v2, else None
    lac_read: bool = not_in_json(False)
    lac_note: str | None = omitted_unless("lac_read")

    @property
    def is_closed(self) -> bool:
        return self.state == "CLOSED"


@dataclass(frozen=True, slots=True)
class UnreadableLedger:
    """A ledger of a listing whose metadata does not decode: its id and why."""

    ledger_id: int
    error: str


@dataclass(frozen=True, slots=True)
class LedgerId:
    """A ledger of a listing by id alone (no filter asked for its metadata)."""

    ledger_id: int


#: a line of ``ledger list``
LedgerRow = LedgerInfo | UnreadableLedger | LedgerId


def describe(ledger_id: int, md: LedgerMetadata, version: int | None = None) -> LedgerInfo:
    """Stable description of a ledger's metadata (no password bytes)."""
    return LedgerInfo(
        ledger_id,
        _STATE_NAMES[md.state],
        md.ensemble_size,
        md.write_quorum,
        md.ack_quorum,
        md.last_entry_id,
        md.last_entry_id if md.is_closed else None,
        md.length,
        _DIGEST_NAMES[md.digest_type] if md.digest_type is not None else None,
        bool(md.password),
        md.ctime,
        {k: v.decode("utf-8", "backslashreplace") for k, v in md.custom_metadata.items()},
        tuple(Segment(first, tuple(ens)) for first, ens in md.ensembles),
        md.format_version,
        version,
    )


def list_ledgers(
    store: MetadataStore,
    state: str | None = None,
    bookie: str | None = None,
    match: Callable[[LedgerMetadata], bool] | None = None,
    details: bool = False,
    placement: RandomPlacement | None = None,
    *,
    lacs: Callable[[], Any] | None = None,
    protocol: str = "v3",
    progress: WalkProgress | None = None,
) -> Iterator[LedgerRow]:
    """Stream ledgers in id order; with a filter (or ``details``) each
    ledger's metadata is read and described (one walk, :meth:`LedgerManager.walk`,
    which tells ``progress``), else only ids are listed.

    ``match(metadata) -> bool`` is a further filter (see ``ops.ledger_meta.LedgerFilter``).
    With ``placement`` only ledgers with a segment whose ensemble breaks that
    policy are listed, ``not_adhering`` giving those segments' first entries.
    With ``lacs`` (the client, called only once an open ledger is met) an open
    ledger's ``last_add_confirmed`` is read from its bookies, many at once
    (:func:`add_confirmed_lac`'s fields)."""
    want_state = LedgerState[state.upper()] if state else None
    if placement is not None:
        from bkctl.wire.client.placement import segments_not_adhering

        placement.refresh(store.registration.writable_bookies() + store.registration.readonly_bookies())
    if not details and want_state is None and bookie is None and match is None and placement is None:
        for ledger_id in store.ledgers.ids():
            yield LedgerId(ledger_id)
        return

    def selected() -> Iterator[tuple[Any, LedgerInfo | UnreadableLedger]]:
        for read in store.ledgers.walk(naming=None if bookie is None else (bookie,), progress=progress):
            ledger_id, md, version = read
            if md is None:
                continue  # deleted meanwhile
            if isinstance(md, Exception):  # corrupt: report and go on
                yield read, UnreadableLedger(ledger_id, str(md))
                continue
            if want_state is not None and md.state is not want_state:
                continue
            if bookie is not None and bookie not in md.bookies:
                continue
            if match is not None and not match(md):
                continue
            if placement is not None:
                failing = segments_not_adhering(md, placement)
                if not failing:
                    continue
                yield read, replace(describe(ledger_id, md, version), not_adhering=failing)
                continue
            yield read, describe(ledger_id, md, version)

    if lacs is None:
        for _read, doc in selected():
            yield doc
        return
    yield from _with_lacs(selected(), lacs, protocol)


#: open ledgers whose LACs are read at once while a listing goes on, and how many listed
#: ledgers it holds at most behind the oldest of them
LAC_WINDOW = 64
_LAC_HELD = 4096


def _with_lacs(
    items: Iterator[tuple[Any, LedgerInfo | UnreadableLedger]], lacs: Callable[[], Any], protocol: str
) -> Iterator[LedgerInfo | UnreadableLedger]:
    """The docs of *items*, an open ledger's with its LAC read from its bookies, in order
    and streaming: each open ledger's read starts as the walk meets it
    (``BlockingBookKeeper.start_read_lac``), up to :data:`LAC_WINDOW` at once, and the
    docs behind one wait for it only when the window or the held docs are full."""
    from collections import deque

    client = None
    held: deque[tuple[LedgerInfo | UnreadableLedger, Any]] = deque()  # (doc, its LAC read or None), in order
    reading = 0

    def oldest() -> LedgerInfo | UnreadableLedger:
        nonlocal reading
        doc, pending = held.popleft()
        if pending is not None:
            reading -= 1
            assert isinstance(doc, LedgerInfo)  # only an open ledger's LAC is read
            return _with_lac(doc, pending.result(), protocol)
        return doc

    try:
        for read, doc in items:
            if not isinstance(doc, LedgerInfo) or doc.is_closed:
                if not held:
                    yield doc
                    continue
                held.append((doc, None))
            else:
                while reading >= LAC_WINDOW:
                    yield oldest()
                if client is None:
                    client = lacs()
                held.append((doc, client.start_read_lac(*read)))
                reading += 1
            while len(held) > _LAC_HELD:
                yield oldest()
        while held:
            yield oldest()
    finally:
        for _doc, pending in held:  # a listing left early (a closed pipe): stop its reads
            if pending is not None:
                pending.cancel()


def show_ledger(store: MetadataStore, ledger_id: int) -> LedgerInfo:
    md, version = store.ledgers.read(ledger_id)
    return describe(ledger_id, md, version)


#: Why a LAC read over v2 can be lower than over v3 (``ledger show --protocol v2``).
V2_LAC_NOTE = (
    "read over v2, which has no READ_LAC request: this is the LAC the bookies' last stored entries "
    "carry, what the writer knew when it sent them (a writer that pipelines sends several before "
    "the first is acknowledged); a LAC it published explicitly is read only over v3 "
    "(--protocol v3)"
)


def add_confirmed_lac(bk: Callable[[], Any], doc: LedgerInfo, protocol: str = "v3") -> LedgerInfo:
    """Fill ``last_add_confirmed`` of a ledger that is not closed (its
    metadata says -1 until it is) from its bookies; when they cannot tell,
    it stays None and ``lac_error`` says why.  Over ``protocol`` v2 it is
    only what the last entries carry (``lac_note``: :data:`V2_LAC_NOTE`).
    ``bk()`` gives the client, called for such a ledger only: a closed one
    needs no bookie, nor the reactor thread and its imports."""
    if doc.is_closed:
        return doc
    client = bk()
    try:
        lac: int | Exception = client.open(doc.ledger_id).last_add_confirmed
    except Exception as e:  # noqa: BLE001 - the metadata is still worth showing
        lac = e
    return _with_lac(doc, lac, protocol)


def _with_lac(doc: LedgerInfo, lac: int | Exception, protocol: str) -> LedgerInfo:
    """*doc* with the LAC its bookies gave, or ``lac_error`` saying why they could not."""
    note = V2_LAC_NOTE if protocol == "v2" else None
    if isinstance(lac, Exception):
        return replace(doc, lac_error=str(lac) or type(lac).__name__, lac_read=True, lac_note=note)
    return replace(doc, last_add_confirmed=lac, lac_read=True, lac_note=note)


def parse_ledger_ids(
    words: Iterable[str], stdin: Iterable[str] | None = None
) -> tuple[list[int], list[tuple[int, int]]]:
    """``ledger delete``'s arguments: ids, inclusive ranges ``A-B`` and ``-``
    (read ``stdin``: a ledger id, a range or a JSON object with ``ledger_id``
    -- a line of ``pulsar orphans --json`` -- per line).  Returns the ids and
    the ranges, in order; ValueError names the word or line that is neither."""
    import json

    ids: list[int] = []
    ranges: list[tuple[int, int]] = []

    def one(word: str, where: str) -> None:
        first, dash, last = word.partition("-")
        try:
            if dash:
                low, high = int(first), int(last)
                if low < 0 or high < low:
                    raise ValueError
                ranges.append((low, high))
            else:
                ids.append(int(word))
                if ids[-1] < 0:
                    raise ValueError
        except ValueError:
            raise ValueError(f"{where}: not a ledger id or range A-B: {word!r}") from None

    for word in words:
        if word != "-":
            for part in word.split(","):  # 1,2,5-9 as `export --ledgers` takes them
                one(part.strip(), "argument")
            continue
        for number, line in enumerate(stdin or (), 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    value = json.loads(line).get("ledger_id")
                except (ValueError, AttributeError):
                    value = None
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ValueError(f"stdin line {number}: a JSON line without an integer ledger_id")
                line = str(value)
            one(line, f"stdin line {number}")
    return ids, ranges


@dataclass
class DeletePlan:
    """What ``ledger delete`` would do: ``delete`` (ids), ``refused`` (one
    :func:`~bkctl.wire.domain.ownership.ledger_owner` document per ledger Pulsar uses,
    with ``reason``) and ``not_found`` (ids given one by one that no ledger
    has; a range names only the ledgers it holds)."""

    delete: list[int] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    not_found: list[int] = field(default_factory=list)
    #: ledgers deleted (or to be) that would have been refused without --even-if-owned: owner docs with reason
    overridden: list[dict] = field(default_factory=list)

    def to_json(self, deleted: list[int] | None = None) -> dict:
        return {
            "dry_run": deleted is None,
            "deleted": [] if deleted is None else deleted,
            "would_delete": self.delete if deleted is None else [],
            "refused": self.refused,
            "not_found": self.not_found,
            "even_if_owned": self.overridden,
        }


def live_writer(
    store: MetadataStore, ledger_id: int, base: str | None = None, now_ms: int | None = None, any_writer: bool = False
) -> str | None:
    """What fencing, closing or recovering the ledger breaks when Pulsar is writing it
    (:meth:`~bkctl.wire.domain.ownership.LedgerOwnership.open_writer`), or None when the
    ledger is closed or missing."""
    from bkctl.wire.domain.ownership import Owners
    from bkctl.wire.errors import NotFound

    try:
        md, _version = store.ledgers.read(ledger_id)
    except NotFound:
        return None  # the command says "no such ledger" in its own words
    if md.is_closed:
        return None  # nothing to fence: Pulsar's writer, if any, is done
    return Owners(store, base).owner_of(ledger_id, md, now_ms).open_writer(any_writer)


def plan_delete(
    store: MetadataStore,
    ids: list[int],
    ranges: list[tuple[int, int]],
    even_if_owned: bool = False,
    base: str | None = None,
    now_ms: int | None = None,
    older_than: float | None = None,
) -> DeletePlan:
    """Which of the ledgers may be deleted.  A ledger a Pulsar topic, cursor,
    schema or compaction lists (the check of ``pulsar ledger-owner``), or a
    Pulsar ledger too young to call an orphan (younger than ``older_than``
    seconds, by default :data:`~bkctl.wire.domain.ownership.YOUNG_LEDGER_SECONDS`), is
    refused unless ``even_if_owned`` (then it is in ``overridden``, named).
    Metadata is read pipelined."""
    from bkctl.wire.domain.ownership import YOUNG_LEDGER_SECONDS, Owners

    wanted = list(dict.fromkeys(ids))
    if ranges:
        given = set(wanted)
        wanted += [i for i in store.ledgers.ids() if i not in given and any(lo <= i <= hi for lo, hi in ranges)]
    explicit = set(ids)
    plan = DeletePlan()
    owners = Owners(store, base, YOUNG_LEDGER_SECONDS if older_than is None else older_than)
    for ledger_id, md, _version in store.ledgers.read_many(sorted(set(wanted))):
        if md is None:
            if ledger_id in explicit:
                plan.not_found.append(ledger_id)
            continue
        if isinstance(md, Exception):  # undecodable metadata: no owner can be told; Pulsar's or not
            why: str | None = f"its metadata does not decode ({md}): its owner cannot be checked"
            doc: dict[str, Any] = {"ledger_id": ledger_id}
        else:
            owner = owners.owner_of(ledger_id, md, now_ms)
            why, doc = owner.refusal(), owner.to_json()
        if why is None:
            plan.delete.append(ledger_id)
        elif even_if_owned:
            plan.delete.append(ledger_id)
            plan.overridden.append({**doc, "reason": why})
        else:
            plan.refused.append({**doc, "reason": why})
    return plan


def delete_ledgers(store: MetadataStore, ids: list[int]) -> list[int]:
    """Delete each ledger's metadata (bookies reclaim the entries at their next GC)."""
    for ledger_id in ids:
        store.ledgers.delete(ledger_id)
    return list(ids)


# -- ledgers through the client ------------------------------------------------------
# ``bk`` below is a wire.client.blocking.BlockingBookKeeper (App.bk): these
# functions are what `bkctl ledger ...`, the shell and scripts share.

DIGESTS = ("crc32", "crc32c", "mac", "dummy")
FORMATS = ("text", "hex", "raw")


def parse_custom_metadata(pairs: Iterable[str] | None) -> dict[str, bytes]:
    """``["k=v", ...]`` -> ``{"k": b"v"}``; ValueError for an item without ``=``."""
    out: dict[str, bytes] = {}
    for item in pairs or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"custom metadata must be KEY=VALUE, not {item!r}")
        out[key] = value.encode("utf-8")
    return out


def create_ledger(
    bk: BlockingBookKeeper,
    ensemble: int = 3,
    write_quorum: int = 2,
    ack_quorum: int = 2,
    digest: str = "crc32c",
    password: bytes = b"",
    custom_metadata: dict[str, bytes] | None = None,
) -> BlockingLedger:
    """A new OPEN ledger; returns its writable BlockingLedger."""
    return bk.create(ensemble, write_quorum, ack_quorum, digest, password, custom_metadata or None)


class HeldLedger:
    """A ledger a shell session created and keeps writing: the live write
    handle plus the append lock (the one ``open_for_append`` takes), so other
    bkctl processes cannot append to it meanwhile (they get exit 4)."""

    def __init__(self, bk: BlockingBookKeeper, ledger: BlockingLedger, store: MetadataStore) -> None:
        from bkctl.wire.client.bookkeeper import AppendLock

        self.bk = bk
        self.ledger = ledger
        self.ledger_id = ledger.ledger_id
        self._lock = AppendLock(store, self.ledger_id)
        self._lock.acquire(timeout=0)  # LedgerLocked (exit 4) if another process appends

    def _unlock(self) -> None:
        self._lock.release()

    @property
    def writer(self) -> LedgerHandle:
        """The live write handle (a held ledger is the session's writer, never a reader)."""
        from bkctl.wire.client.ledger_handle import LedgerHandle

        handle = self.ledger.handle
        assert isinstance(handle, LedgerHandle), "a held ledger is written"
        return handle

    def release(self) -> None:
        """Leave the ledger OPEN (LAC published), drop the handle and the lock."""
        from bkctl.wire.client.blocking import run_in_reactor

        try:
            run_in_reactor(self.writer.release, timeout=self.bk.timeout)
        finally:
            self._unlock()

    def close(self) -> None:
        """Close the ledger (CLOSED at the last acknowledged entry), drop the lock."""
        try:
            self.ledger.close()
        finally:
            self._unlock()


def _pipelined_add(handle: LedgerHandle, payloads: Iterable[bytes], window: int = 256) -> list[int]:
    """Add each payload through a Twisted LedgerHandle, taking the next one
    in this (the calling) thread as soon as it comes: at most ``window``
    adds in flight, ids returned in order once all are acknowledged."""
    import crochet

    submit = crochet.run_in_reactor(handle.add_entry)
    pending: deque[Any] = deque()
    ids: list[int] = []
    try:
        for payload in payloads:
            if len(pending) >= window:
                ids.append(pending.popleft().wait(120))
            pending.append(submit(payload))
        while pending:
            ids.append(pending.popleft().wait(120))
    except crochet.TimeoutError:
        from bkctl.wire.client.blocking import OperationTimedOut

        raise OperationTimedOut(f"ledger {handle.ledger_id}: an add did not complete within 120s") from None
    return ids


def _check_appendable(bk: BlockingBookKeeper, ledger_id: int) -> None:
    """A closed or fenced-for-recovery ledger: fail before taking the lock."""
    from bkctl.wire.client.errors import LedgerClosedError, LedgerFencedError

    md, _ = bk.metadata(ledger_id)
    if md.is_closed:
        raise LedgerClosedError(
            f"ledger {ledger_id} is closed (last entry {md.last_entry_id}); it cannot be appended to"
        )
    if md.is_in_recovery:
        raise LedgerFencedError(f"ledger {ledger_id} is being recovered; it cannot be appended to")


@dataclass(frozen=True)
class Added:
    """What ``ledger add`` appended: the entry ids the ledger gave, in order."""

    ledger_id: int
    entry_ids: list[int]


def add_entries(
    bk: BlockingBookKeeper,
    ledger_id: int,
    payloads: Iterable[bytes],
    password: bytes | None = None,
    held: HeldLedger | None = None,
    window: int = 256,
) -> Added:
    """Append ``payloads`` (any iterable of bytes, consumed lazily) to a ledger.

    With ``held`` (the session's own handle) the adds go through it and the
    LAC is published afterwards.  Otherwise the ledger must be OPEN: it is
    continued with ``open_for_append`` (append lock, tail re-replicated),
    then released without closing, so a later ``add`` continues it.  A
    closed or fenced ledger gives a Conflict (exit 4).
    """
    from bkctl.wire.client.blocking import run_in_reactor

    if held is not None:
        _check_password(held, password)
        ids = _pipelined_add(held.writer, payloads, window)
        run_in_reactor(held.writer.publish_lac, timeout=bk.timeout)
        return Added(ledger_id, ids)
    _check_appendable(bk, ledger_id)
    from bkctl.wire.client.ledger_handle import LedgerHandle

    writer = bk.open_for_append(ledger_id, password).handle
    assert isinstance(writer, LedgerHandle), "open_for_append gives a writer"
    try:
        ids = _pipelined_add(writer, payloads, window)
    except BaseException:
        try:
            run_in_reactor(writer.release, timeout=bk.timeout)
        except Exception:  # noqa: BLE001 - the add's own error is the one to report
            pass
        raise
    run_in_reactor(writer.release, timeout=bk.timeout)
    return Added(ledger_id, ids)


def _check_password(held: HeldLedger, password: bytes | None) -> None:
    if password is not None and bytes(password) != held.ledger.handle.password:
        from bkctl.wire.client.errors import Unauthorized

        raise Unauthorized(f"wrong password for ledger {held.ledger_id}")


def open_reader(
    bk: BlockingBookKeeper, ledger_id: int, password: bytes | None = None, held: HeldLedger | None = None
) -> BlockingLedger:
    """A BlockingLedger to read with: the session's writer if it holds the ledger, else a new reader."""
    if held is not None:
        _check_password(held, password)
        return held.ledger
    return bk.open(ledger_id, password)


def read_limit(reader: BlockingLedger) -> int:
    """The last readable entry (-1 if none): the last entry of a closed ledger, else the LAC."""
    last = reader.last_entry_id if reader.is_closed else None  # a closed ledger's: never None
    return reader.last_add_confirmed if last is None else last


def iter_entries(
    reader: BlockingLedger, first: int = 0, last: int | None = None, batch: int = 500
) -> Iterator[list[tuple[int, bytes]]]:
    """Batches of ``[(entry_id, payload), ...]`` from ``first`` to ``last``
    (default: the last confirmed entry); at most two batches in memory."""
    limit = read_limit(reader) if last is None else last
    if limit < first:
        return iter(())
    return reader.read_range(first, limit, batch=batch)


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry as ``ledger read --json`` and ``ledger tail --json`` print it; read from one
    bookie (``--bookie``), that bookie and ``status`` (ok) too."""

    ledger_id: int
    entry_id: int
    length: int
    encoding: str  #: utf-8, hex, base64
    payload: str
    bookie: str | None = omitted_when_none()
    status: str | None = omitted_when_none()


def entry_doc(ledger_id: int, entry_id: int, payload: bytes, fmt: str = "text") -> Entry:
    """One entry as its JSON line shows it: ``payload`` is the UTF-8 text for
    ``text`` when the entry is valid UTF-8, else base64 (never mangled);
    lowercase hex for ``hex``; base64 for ``raw``.  ``encoding`` names which."""
    import base64

    if fmt == "hex":
        encoding, value = "hex", payload.hex()
    elif fmt == "raw":
        encoding, value = "base64", base64.b64encode(payload).decode("ascii")
    else:
        try:
            encoding, value = "utf-8", bytes(payload).decode("utf-8")
        except UnicodeDecodeError:
            encoding, value = "base64", base64.b64encode(payload).decode("ascii")
    return Entry(ledger_id, entry_id, len(payload), encoding, value)


_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, 0x85]}
_ESCAPES.update(
    {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord("\\"): "\\\\", 0x2028: "\\u2028", 0x2029: "\\u2029"}
)


def entry_line(entry_id: int, payload: bytes, fmt: str = "text") -> str:
    """``<entry id><TAB><payload>`` for people, one line per entry: text
    with control characters escaped (``\\n``, ``\\t``, ``\\xNN``; a
    backslash doubled), or hex."""
    if fmt == "hex":
        return f"{entry_id}\t{payload.hex()}"
    return f"{entry_id}\t{payload.decode('utf-8', 'replace').translate(_ESCAPES)}"


@dataclass(frozen=True)
class ClosedLedger:
    """A ledger ``ledger close`` or ``ledger recover`` left closed: its last entry and length;
    close says whether it was ``already_closed`` and whether it had to be ``fenced`` (recovered),
    recover what state it was in before (``previous_state``)."""

    ledger_id: int
    state: str
    last_entry_id: int
    length: int
    already_closed: bool | None = omitted_when_none()
    fenced: bool | None = omitted_when_none()
    previous_state: str | None = omitted_when_none()


def close_ledger(
    bk: BlockingBookKeeper, ledger_id: int, password: bytes | None = None, held: HeldLedger | None = None
) -> ClosedLedger:
    """Close a ledger.  The session's own ledger is closed by its writer;
    any other OPEN ledger is recovered (fenced, tail re-replicated, closed),
    the only safe way to close a ledger whose writer may still be alive.
    An already closed ledger is left as is (``already_closed``)."""
    if held is not None:
        _check_password(held, password)
        try:
            held.close()
        except Exception:  # noqa: BLE001 - fenced or taken over meanwhile: recovery below settles it
            pass
        md, _ = bk.metadata(ledger_id)
        if md.is_closed:
            return _closed(ledger_id, md, already_closed=False, fenced=False)
    md, _ = bk.metadata(ledger_id)
    if md.is_closed:
        if password is not None:
            bk.open(ledger_id, password)  # still check it
        return _closed(ledger_id, md, already_closed=True, fenced=False)
    bk.recover(ledger_id, password)
    md, _ = bk.metadata(ledger_id)
    return _closed(ledger_id, md, already_closed=False, fenced=True)


def _closed(ledger_id: int, md: LedgerMetadata, **outcome: Any) -> ClosedLedger:
    return ClosedLedger(ledger_id, md.state.name, md.last_entry_id, md.length, **outcome)


def recover_ledger(bk: BlockingBookKeeper, ledger_id: int, password: bytes | None = None) -> ClosedLedger:
    """Open with recovery: an OPEN (or half-recovered) ledger is fenced, its
    tail re-replicated and it is closed; concurrent recoveries agree."""
    was, _ = bk.metadata(ledger_id)
    reader = bk.recover(ledger_id, password)
    return _closed(ledger_id, reader.metadata, previous_state=was.state.name)


def fence_ledger(bk: BlockingBookKeeper, ledger_id: int, password: bytes | None = None) -> Fenced:
    """Fence without closing (see :func:`bkctl.wire.client.ledger_admin.fence_ledger`)."""
    from bkctl.wire.client.ledger_admin import fence_ledger as fence

    return bk.run(fence, ledger_id, password)


def tail_ledger(
    bk: BlockingBookKeeper,
    ledger_id: int,
    first: int | None = None,
    password: bytes | None = None,
    interval: float = 0.5,
    batch: int = 500,
    sleep: Callable[[float], object] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(entry_id, payload)`` as the ledger's LAC advances, from
    ``first`` (default: the entry after the current LAC); ends once the
    ledger is closed and its last entry was yielded.

    Over v3 the bookies are long-polled (they answer as soon as their LAC
    moves, with the next entry along; ``interval`` bounds one wait, after
    which the metadata is checked for the ledger being closed); over v2,
    which has no long poll, the LAC and the metadata are polled every
    ``interval`` seconds."""
    import time

    sleep = sleep or time.sleep
    reader = bk.open(ledger_id, password)
    next_id = read_limit(reader) + 1 if first is None else first
    if getattr(bk.client, "protocol", "v3") != "v3":
        while True:
            reader.refresh_metadata()
            closed = reader.is_closed
            limit = read_limit(reader) if closed else reader.read_lac()
            if limit >= next_id:
                for entries in reader.read_range(next_id, limit, batch=batch):
                    yield from entries
                next_id = limit + 1
            if closed:
                return
            sleep(interval)
    wait_ms = max(1, int(interval * 1000))
    limit = read_limit(reader)
    while True:
        if limit >= next_id:
            for entries in reader.read_range(next_id, limit, batch=batch):
                yield from entries
            next_id = limit + 1
        if reader.is_closed:
            return
        started = time.monotonic()
        limit, entry = reader.wait_for_entry(next_id, wait_ms)
        if entry is not None:
            yield entry
            next_id = entry[0] + 1
        elif limit < next_id:  # a whole wait without news: closed meanwhile?
            # bookies that know nothing of the ledger yet answer at once: wait out
            # the interval rather than ask them again straight away
            rest = interval - (time.monotonic() - started)
            if rest > 0:
                sleep(rest)
            reader.refresh_metadata()
            limit = read_limit(reader)
