"""A bookie's HTTP admin API (Java's ``HttpRouter`` endpoints, which bookied serves too):
read-only switch, state, garbage collection.

The address comes from the bookie's registration: the ``http`` endpoint of the
BookieServiceInfo it published (Java publishes host 0.0.0.0 there, so the host
is taken from its ``bookie-rpc`` endpoint, or from the bookie id).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bkctl.wire.metadata.registration_state import Registrations, RegistrationState

from .errors import BadInput, NoHttpAnswer, NotRegistered, OpFailed

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

STATE = "/api/v1/bookie/state"
READONLY = "/api/v1/bookie/state/readonly"
GC = "/api/v1/bookie/gc"
GC_DETAILS = "/api/v1/bookie/gc_details"
TIMEOUT = 10.0

#: what asking a bookie's HTTP admin raises (:func:`http_address`, :func:`call`): a view of many
#: bookies names it for the one bookie and goes on
HTTP_FAILURES = (BadInput, NotRegistered, OpFailed, NoHttpAnswer)


def http_address(store: MetadataStore | None, bookie_id: str, override: str | None = None) -> str:
    """``host:port`` of the bookie's HTTP admin server (an IPv6 host in brackets); ``store``
    is read for it unless ``override`` names it (then it may be None)."""
    from bkctl.wire.metadata.serviceinfo import HTTP
    from bkctl.wire.text import join_host_port, split_host_port

    if override:
        try:
            return join_host_port(*split_host_port(override))
        except ValueError:
            raise BadInput(f"--http takes HOST:PORT, not {override!r}") from None
    assert store is not None, "no store: the address must be given"
    if not store.registration.is_registered(bookie_id):
        raise NotRegistered(f"bookie {bookie_id} is not registered (not running?)")
    info = store.registration.service_info(bookie_id)
    ep = info.endpoint(HTTP) if info is not None else None
    if info is None or ep is None:
        raise OpFailed(
            f"bookie {bookie_id} publishes no HTTP endpoint (httpServerEnabled=false?); give --http HOST:PORT"
        )
    try:
        host = info.rpc_address(bookie_id)[0]
    except ValueError:
        host = ep.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return join_host_port(host, ep.port)


def _url(address: str, path: str, query: str = "") -> str:
    from bkctl.wire.text import join_host_port, split_host_port

    return f"http://{join_host_port(*split_host_port(address))}{path}" + (f"?{query}" if query else "")


def _failed(method: str, url: str, e: OSError) -> Exception:
    """A request's failure as :func:`call` and :func:`read_chunks` raise it: an error answer (its
    JSON ``error`` when it has one), exit 1; no answer, exit 5."""
    import urllib.error

    if isinstance(e, urllib.error.HTTPError):
        text = e.read().decode("utf-8", "replace").strip()
        try:
            text = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            pass
        return OpFailed(f"{method} {url}: HTTP {e.code}: {text}")
    return NoHttpAnswer(f"{method} {url}: {getattr(e, 'reason', e)}")


def call(address: str, method: str, path: str, body: Any = None, query: str = "", timeout: float = TIMEOUT) -> Any:
    """One request; the decoded JSON answer (or text).  Unreachable: exit 5; an error answer: exit 1."""
    import urllib.request

    url = _url(address, path, query)
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"} if data is not None else {}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except OSError as e:
        raise _failed(method, url, e) from None
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_chunks(address: str, path: str, timeout: float = TIMEOUT, size: int = 256 * 1024) -> Iterator[bytes]:
    """A GET's answer body in chunks of ``size`` bytes, as it arrives (a long listing is never
    held whole); failures as :func:`call`'s, one cut short too."""
    import urllib.request

    url = _url(address, path)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := resp.read(size):
                yield chunk
    except OSError as e:
        raise _failed("GET", url, e) from None


@dataclass(frozen=True)
class BookieState:
    """``bookie state``: what the bookie's HTTP admin answered (``state``, as it says it) beside its
    registration in ZooKeeper."""

    bookie_id: str
    http: str
    state: Any
    registration: RegistrationState


@dataclass(frozen=True)
class ReadOnlySwitched:
    """``bookie readonly on|off``: the bookie's answer, and its registration once it showed (or not)."""

    bookie_id: str
    http: str
    read_only: bool
    registration: RegistrationState


@dataclass(frozen=True)
class GcRun:
    """``bookie gc``: whether a pass was forced (the bookie's ``message``; ``kind`` of compaction),
    the bookie's GC ``status`` and ``details`` answers, and ``error`` when a waited-for pass was
    not over in time; ``no_compaction`` says why a forced pass compacts nothing."""

    bookie_id: str
    http: str
    triggered: bool
    message: Any
    kind: str | None
    is_in_force_gc: bool | None
    status: dict
    details: Any
    error: str | None
    no_compaction: str | None


def state(store: MetadataStore, bookie_id: str, http: str | None = None) -> BookieState:
    address = http_address(store, bookie_id, http)
    doc = call(address, "GET", STATE)
    return BookieState(bookie_id, address, doc, registration(store, bookie_id))


def read_only_reasons_of(doc: Any) -> dict[str, str] | None:
    """bookied's ``readOnlyReasons`` (cause -> why) in an ``info`` or ``state`` answer; None when
    there is none (a writable bookie, or Java's, which does not say)."""
    reasons = doc.get("readOnlyReasons") if isinstance(doc, dict) else None
    return {str(k): str(v) for k, v in reasons.items()} if isinstance(reasons, dict) and reasons else None


def read_only_reasons(store: MetadataStore, bookie_id: str, timeout: float = 2.0) -> dict[str, str] | str:
    """Why a read-only bookie is read-only, as its HTTP admin says (bookied's ``readOnlyReasons``:
    cause -> why); else one line saying why that is not known (no HTTP admin, Java's says nothing)."""
    try:
        answer = call(http_address(store, bookie_id), "GET", STATE, timeout=timeout)
    except HTTP_FAILURES as e:
        return f"not known: {e}"
    return read_only_reasons_of(answer) or "not known: its HTTP admin does not say (a Java bookie? its log does)"


def registration(store: MetadataStore, bookie_id: str) -> RegistrationState:
    return Registrations.read(store.registration).state_of(bookie_id)


def set_readonly(
    store: MetadataStore, bookie_id: str, readonly: bool, http: str | None = None, wait: float = 10.0
) -> ReadOnlySwitched:
    """Switch the bookie, then wait (up to ``wait`` s) until its registration shows it."""
    address = http_address(store, bookie_id, http)
    answer = call(address, "PUT", READONLY, {"readOnly": readonly})
    want = RegistrationState.READ_ONLY if readonly else RegistrationState.WRITABLE
    deadline = time.monotonic() + wait
    seen = registration(store, bookie_id)
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = registration(store, bookie_id)
    return ReadOnlySwitched(
        bookie_id, address, bool(answer.get("readOnly")) if isinstance(answer, dict) else readonly, seen
    )


def gc(
    store: MetadataStore | None,
    bookie_id: str,
    status_only: bool = False,
    http: str | None = None,
    kind: str | None = None,
    wait: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    on_status: Callable[[Any], Any] | None = None,
) -> GcRun:
    """Force a GC pass (``kind`` "major"/"minor": only that compaction, Java's forceMajor/forceMinor
    body), or with ``status_only`` only read the status; with ``wait`` (seconds) wait until the pass
    is over (bookied reports its runs; a Java bookie does not: exit 1), telling ``on_status(status)``
    each status read meanwhile.  ``store`` is only read for the bookie's HTTP address: None
    with ``http``.  A pass not over within ``wait`` is the document with ``error`` saying so
    (None otherwise), for the caller to print and then fail."""
    address = http_address(store, bookie_id, http)
    triggered = None
    error = None
    if not status_only:
        before = call(address, "GET", GC) if wait is not None else None
        if wait is not None and not (isinstance(before, dict) and "gcRuns" in before):
            raise OpFailed(
                f"bookie {bookie_id} does not report its garbage collection runs (not bookied?); "
                "--wait cannot tell when the pass is over",
            )
        runs_before = before["gcRuns"] if isinstance(before, dict) else 0
        body = None if kind is None else {"forceMajor": kind == "major", "forceMinor": kind == "minor"}
        triggered = call(address, "PUT", GC, body)
        if wait is not None:
            deadline = clock() + wait
            while True:
                now = call(address, "GET", GC)
                if on_status is not None:
                    on_status(now)
                if now.get("gcRuns", 0) > runs_before and not now.get("gcRunning"):
                    break
                if clock() >= deadline:
                    error = f"the garbage collection of {bookie_id} was not over within {wait:g} s (--wait-timeout)"
                    break
                sleep(0.2)
    running = call(address, "GET", GC)
    details = call(address, "GET", GC_DETAILS)
    status = running if isinstance(running, dict) else {}
    return GcRun(
        bookie_id,
        address,
        triggered is not None,
        triggered,
        kind,
        str(status.get("is_in_force_gc", "false")).lower() == "true" if isinstance(running, dict) else None,
        status,
        details,
        error,
        no_compaction(status, kind) if triggered is not None else None,
    )


def no_compaction(status: dict, kind: str | None) -> str | None:
    """Why a forced pass of ``kind`` (None: either, major first) compacts nothing, as the bookie
    says (bookied's ``forcedCompactionRefused``: its intervals, thresholds, forceAllowCompaction);
    None when it compacts or the bookie does not say (Java's)."""
    refused = status.get("forcedCompactionRefused")
    if not isinstance(refused, dict):
        return None
    kinds = [kind] if kind else ["major", "minor"]
    reasons = [refused.get(k) for k in kinds]
    if not all(reasons):
        return None  # one of them runs
    return "; ".join(str(r) for r in reasons)


def gc_activity(status: dict) -> str:
    """What a bookie's garbage collector is doing, from its GET /api/v1/bookie/gc answer:
    bookied's state (collecting, minor compacting, major compacting, idle)."""
    if status.get("state"):
        return "collecting deleted ledgers" if status["state"] == "collecting" else status["state"]
    if status.get("compacting"):
        return f"{status['compacting']} compaction"
    if status.get("gcRunning"):
        return "running"
    return "idle"
