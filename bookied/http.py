"""bookied's HTTP admin endpoint (``httpServerEnabled`` / ``httpServerPort`` / ``httpServerHost``).

A twisted.web site that answers the subset of Apache BookKeeper's bookie
HTTP service that makes sense for a single bookie, on the same paths and
with the same JSON keys, so existing probes, dashboards and scripts work
unchanged:

=========================================  ======  ==========================================
path                                       method  answer
=========================================  ======  ==========================================
``/heartbeat``                             GET     ``OK\\n`` (text/plain)
``/metrics``                               GET     Prometheus text exposition format 0.0.4
                                                   (OpenMetrics when ``Accept`` asks for it);
                                                   bookied's names and Java's (docs/bookied.md)
``/api/v1/bookie/info``                    GET     ``{"freeSpace": n, "totalSpace": n, ...}``
``/api/v1/bookie/state``                   GET     ``{"running", "readOnly", "shuttingDown",
                                                   "availableForHighPriorityWrites"}``
``/api/v1/bookie/is_ready``                GET     200 if running and not shutting down, else 503
``/api/v1/bookie/state/readonly``          GET     ``{"readOnly": bool}``
``/api/v1/bookie/state/readonly``          PUT     body ``{"readOnly": bool}`` (optional
                                                   ``?force=true``); answers the new state
``/api/v1/bookie/gc``                      GET     ``{"is_in_force_gc": "true"|"false"}`` then
                                                   bookied's figures: gcRunning, compacting,
                                                   gcRuns, lastGcTime, nextGcTime, the
                                                   compaction counters, lastCompaction,
                                                   next{Major,Minor}CompactionTime,
                                                   reclaimedSpaceVia{Deletes,Compaction},
                                                   entriesMoved, bytesMoved (times: epoch ms)
``/api/v1/bookie/gc``                      PUT     starts a forced GC pass; an optional body
                                                   ``{"forceMajor": b, "forceMinor": b}``
                                                   limits its compaction to those kinds;
                                                   answers ``"Triggered GC on BookieServer: <id>"``
``/api/v1/bookie/gc_details``              GET     ``[{"forceCompacting", "majorCompacting",
                                                   "minorCompacting", "lastMajorCompactionTime",
                                                   "lastMinorCompactionTime", "majorCompactionCounter",
                                                   "minorCompactionCounter", "gcRunning", "gcRuns",
                                                   "ledgersRemoved", "entryLogs"}]`` (entryLogs:
                                                   each log's size, live bytes and liveRatio)
``/api/v1/bookie/list_disk_file``          GET     ``?file_type=journal|entrylog|index`` (else
                                                   all): ``{"journal files": "name\\t...", ...}``
``/api/v1/bookie/list_ledgers``            GET     bookied's own (Java has none): ``{"ledgers":[id,...]}``,
                                                   every ledger it holds, ascending (compact JSON)
``/api/v1/bookie/last_log_mark``           GET     ``{"LastLogMark: Journal Id - N(hex.txn)":
                                                   "Pos - P"}`` per journal
``/api/v1/bookie/expand_storage``          PUT     checks the configured directories against
                                                   the cookie with expansion allowed (stamps new
                                                   empty ones): ``"Success expand storage"``;
                                                   409 on a mismatch
=========================================  ======  ==========================================

Through the bookie's ZooKeeper store (``status.zk``, see :class:`BookieStatus`)
it also answers Java's autorecovery endpoints.  They need only ZooKeeper, not the
autorecovery daemon (decommission needs an elected auditor somewhere in
the cluster), and their ZooKeeper calls run in the reactor's thread pool.
Success bodies are Java's, text where Java answers text:

=====================================  ======  ==========================================
path (under ``/api/v1/autorecovery``)  method  answer
=====================================  ======  ==========================================
``/who_is_auditor``                    GET     ``Auditor: <bookie id>``; 404 when no
                                               auditor is elected
``/trigger_audit``                     PUT     ``Success trigger audit.``; 503 when no
                                               auditor is elected, 409 when autorecovery
                                               is disabled (Java answers 200 and does
                                               nothing)
``/lost_bookie_recovery_delay``        GET     ``lostBookieRecoveryDelay value: N`` (404
                                               while the node is missing)
``/lost_bookie_recovery_delay``        PUT     body ``{"delay_seconds": N}``, 0 <= N <
                                               2**31: ``Success set
                                               lostBookieRecoveryDelay to N``
``/list_under_replicated_ledger``      GET     JSON list of ledger ids; with
                                               ``?printmissingreplica`` an object
                                               ``{"<id>": [bookie, ...]}``.
                                               ``?missingreplica=B`` keeps the ledgers
                                               missing a replica on B,
                                               ``?excludingmissingreplica=B`` drops them;
                                               404 when none matches
``/status``                            GET     ``{"enabled": bool}``
``/status``                            PUT     ``?enabled=true|false``; answers the new
                                               ``{"enabled": bool}``
``/decommission``                      PUT     body ``{"bookie_src": "host:port"}``:
                                               triggers the audit that makes the daemons
                                               re-replicate the stopped bookie's ledgers;
                                               ``Success send decommission Bookie
                                               command B``.  409 while B is registered or
                                               autorecovery is disabled, 503 with no
                                               auditor.  Unlike Java it does not wait to
                                               delete B's cookie (``bkctl decommission``
                                               does both)
``/bookie``                            PUT     501: not supported, copying a bookie's
                                               ledgers is ``bkctl recover``'s job
=====================================  ======  ==========================================

Where Java answers a bad body with 404 (or 500 for a missing ``enabled``)
this one answers 400, and ZooKeeper unreachable is 503 (Java: 404).

HEAD is accepted wherever GET is.  A trailing slash is ignored.  Where the
Java bookie answers a wrong method with 403 or 404, this one answers 405
with an ``Allow`` header; unknown paths get a 404 with a JSON body.  Every
error body is ``{"error": "..."}``.  JSON is pretty-printed the way Java's
Jackson default printer does it (two-space indent, ``"key" : value``).

The site reaches the bookie only through a declared interface (see
:class:`BookieStatus`), so it can be tested without a bookie.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

from twisted.internet import defer, threads
from twisted.internet.interfaces import IReactorThreads, IReactorTime
from twisted.python.failure import Failure
from twisted.web import http, resource, server

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.process.exposition import MetricsPage

__all__ = [
    "AdminResource",
    "AdminSite",
    "BOOKIE_EXPAND_STORAGE",
    "BOOKIE_GC",
    "BOOKIE_GC_DETAILS",
    "BOOKIE_INFO",
    "BOOKIE_LAST_LOG_MARK",
    "BOOKIE_LIST_DISK_FILE",
    "BOOKIE_LIST_LEDGERS",
    "BOOKIE_IS_READY",
    "BOOKIE_STATE",
    "BOOKIE_STATE_READONLY",
    "BookieStatus",
    "HEARTBEAT",
    "METRICS",
    "PROMETHEUS_CONTENT_TYPE",
    "listen_from_config",
    "listen_metrics",
    "listen_http",
    "make_site",
    "AUTORECOVERY_BOOKIE",
    "AUTORECOVERY_DECOMMISSION",
    "AUTORECOVERY_LIST_UNDER_REPLICATED_LEDGER",
    "AUTORECOVERY_LOST_BOOKIE_RECOVERY_DELAY",
    "AUTORECOVERY_STATUS",
    "AUTORECOVERY_TRIGGER_AUDIT",
    "AUTORECOVERY_WHO_IS_AUDITOR",
]

log = logging.getLogger("bookied.http")

# Paths, as in Java's org.apache.bookkeeper.http.HttpRouter.
HEARTBEAT = "/heartbeat"
METRICS = "/metrics"
BOOKIE_INFO = "/api/v1/bookie/info"
BOOKIE_STATE = "/api/v1/bookie/state"
BOOKIE_IS_READY = "/api/v1/bookie/is_ready"
BOOKIE_STATE_READONLY = "/api/v1/bookie/state/readonly"
BOOKIE_GC = "/api/v1/bookie/gc"
BOOKIE_GC_DETAILS = "/api/v1/bookie/gc_details"
BOOKIE_LIST_DISK_FILE = "/api/v1/bookie/list_disk_file"
BOOKIE_LAST_LOG_MARK = "/api/v1/bookie/last_log_mark"
BOOKIE_LIST_LEDGERS = "/api/v1/bookie/list_ledgers"
BOOKIE_EXPAND_STORAGE = "/api/v1/bookie/expand_storage"
AUTORECOVERY_WHO_IS_AUDITOR = "/api/v1/autorecovery/who_is_auditor"
AUTORECOVERY_TRIGGER_AUDIT = "/api/v1/autorecovery/trigger_audit"
AUTORECOVERY_LOST_BOOKIE_RECOVERY_DELAY = "/api/v1/autorecovery/lost_bookie_recovery_delay"
AUTORECOVERY_LIST_UNDER_REPLICATED_LEDGER = "/api/v1/autorecovery/list_under_replicated_ledger"
AUTORECOVERY_STATUS = "/api/v1/autorecovery/status"
AUTORECOVERY_BOOKIE = "/api/v1/autorecovery/bookie"
AUTORECOVERY_DECOMMISSION = "/api/v1/autorecovery/decommission"

PROMETHEUS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
TEXT_CONTENT_TYPE = b"text/plain; charset=utf-8"
JSON_CONTENT_TYPE = b"application/json"

MAX_REQUEST_BODY = 64 * 1024


@runtime_checkable
class BookieStatus(Protocol):
    """Everything the admin site reads or asks of the bookie (bookied's
    :class:`~bkctl.bookied.service.BookieService` is one)."""

    bookie_id: str

    #: the bookie's ZooKeeper store for the autorecovery endpoints; None (503) until it is connected
    @property
    def zk(self) -> MetadataStore | None: ...

    def is_readonly(self) -> bool: ...

    def is_running(self) -> bool: ...

    def metrics_page(self, accept: str | None = None) -> MetricsPage | defer.Deferred:
        """The page a scrape gets (:mod:`bkctl.wire.process.exposition`): collected on the
        reactor thread, encoded there or (a Deferred) in a thread."""

    def info(self) -> Mapping[str, Any]: ...

    def state(self) -> Mapping[str, Any]: ...

    def set_readonly(self, readonly: bool, force: bool = False) -> defer.Deferred | None:
        """The read-only switch; ``force`` is passed only for ``?force=true``.
        May return a Deferred; a :class:`ValueError` (raised or failed with)
        refuses the change, answered 400 like Java's "forceReadOnly" /
        "readOnly mode disabled" refusals."""

    def force_gc(self, force_major: bool | None = None, force_minor: bool | None = None) -> Any:
        """Start a forced GC pass (its compaction limited to the kinds given)."""

    def gc_status(self) -> Mapping[str, Any]: ...

    def gc_details(self) -> Sequence[Mapping[str, Any]]: ...

    def list_disk_files(self, file_type: str | None) -> Mapping[str, str]: ...

    def last_log_marks(self) -> Mapping[str, str]: ...

    def held_ledgers(self) -> Sequence[int] | defer.Deferred:
        """Every ledger the bookie holds entries or state of, ascending (may be a Deferred)."""

    def expand_storage(self) -> Any:
        """Check the directories against the cookie with expansion allowed; may
        return a Deferred, ValueError (raised or failed with) on a mismatch."""


class HTTPError(Exception):
    """Ends a request with *code* and a JSON ``{"error": message}`` body."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def to_json(value: Any) -> bytes:
    """JSON as Jackson's default pretty printer lays it out (close enough for humans and parsers)."""
    return json.dumps(value, indent=2, separators=(",", " : "), default=str).encode("utf-8")


Handler = Callable[[Any], Any]


class AdminResource(resource.Resource):
    """The whole admin API as one leaf resource dispatching on the request path."""

    isLeaf = True

    def __init__(
        self,
        status: BookieStatus,
        *,
        run_blocking: Callable[..., defer.Deferred] | None = None,
        metrics_only: bool = False,
    ):
        """*run_blocking(fn, *args)* runs a blocking (ZooKeeper) call and returns
        a Deferred; by default in the global reactor's thread pool.  *metrics_only*:
        ``/metrics`` and nothing else (the prometheusStatsHttpPort listener)."""
        super().__init__()
        self.status = status
        self._run_blocking = run_blocking
        routes: dict[str, dict[bytes, Handler]] = {
            HEARTBEAT: {b"GET": self.get_heartbeat},
            METRICS: {b"GET": self.get_metrics},
            BOOKIE_INFO: {b"GET": self.get_info},
            BOOKIE_STATE: {b"GET": self.get_state},
            BOOKIE_IS_READY: {b"GET": self.get_is_ready},
            BOOKIE_STATE_READONLY: {b"GET": self.get_readonly, b"PUT": self.put_readonly},
            BOOKIE_GC: {b"GET": self.get_gc, b"PUT": self.put_gc},
            BOOKIE_GC_DETAILS: {b"GET": self.get_gc_details},
            BOOKIE_LIST_DISK_FILE: {b"GET": self.get_list_disk_file},
            BOOKIE_LAST_LOG_MARK: {b"GET": self.get_last_log_mark},
            BOOKIE_LIST_LEDGERS: {b"GET": self.get_list_ledgers},
            BOOKIE_EXPAND_STORAGE: {b"PUT": self.put_expand_storage},
            AUTORECOVERY_WHO_IS_AUDITOR: {b"GET": self.get_who_is_auditor},
            AUTORECOVERY_TRIGGER_AUDIT: {b"PUT": self.put_trigger_audit},
            AUTORECOVERY_LOST_BOOKIE_RECOVERY_DELAY: {
                b"GET": self.get_lost_bookie_recovery_delay,
                b"PUT": self.put_lost_bookie_recovery_delay,
            },
            AUTORECOVERY_LIST_UNDER_REPLICATED_LEDGER: {b"GET": self.get_under_replicated},
            AUTORECOVERY_STATUS: {b"GET": self.get_autorecovery_status, b"PUT": self.put_autorecovery_status},
            AUTORECOVERY_DECOMMISSION: {b"PUT": self.put_decommission},
            AUTORECOVERY_BOOKIE: {b"PUT": self.put_recover_bookie},
        }
        self.routes = {METRICS: routes[METRICS]} if metrics_only else routes

    # -- dispatch -------------------------------------------------------------

    @staticmethod
    def request_path(request) -> str:
        segments = list(request.postpath)
        if len(segments) > 1 and segments[-1] == b"":
            segments.pop()  # trailing slash
        return "/" + b"/".join(segments).decode("utf-8", "replace")

    def render(self, request):
        path = self.request_path(request)
        route = self.routes.get(path)
        try:
            if route is None:
                raise HTTPError(http.NOT_FOUND, f"no such endpoint: {path}")
            method = request.method
            handler = route.get(b"GET" if method == b"HEAD" else method)
            if handler is None:
                allowed = sorted(set(route) | ({b"HEAD"} if b"GET" in route else set()))
                request.setHeader(b"Allow", b", ".join(allowed))
                raise HTTPError(http.NOT_ALLOWED, f"method {method.decode('ascii', 'replace')} not allowed on {path}")
            body = handler(request)
        except HTTPError as exc:
            body = self.error(request, exc.code, exc.message)
        except Exception:
            log.exception("HTTP admin request %s %s failed", request.method, path)
            body = self.error(request, http.INTERNAL_SERVER_ERROR, "internal error")
        if body is server.NOT_DONE_YET:
            return body
        if request.method == b"HEAD":
            # Let twisted send the headers with the real length but no body.
            request.setHeader(b"Content-Length", b"%d" % len(body))
            return b""
        return body

    @staticmethod
    def error(request, code: int, message: str) -> bytes:
        request.setResponseCode(code)
        request.setHeader(b"Content-Type", JSON_CONTENT_TYPE)
        return to_json({"error": message})

    @staticmethod
    def json_body(request, value: Any, code: int = http.OK) -> bytes:
        request.setResponseCode(code)
        request.setHeader(b"Content-Type", JSON_CONTENT_TYPE)
        return to_json(value)

    # -- endpoints --------------------------------------------------------------

    def get_heartbeat(self, request) -> bytes:
        request.setHeader(b"Content-Type", TEXT_CONTENT_TYPE)
        return b"OK\n"

    def get_metrics(self, request):
        accept = request.getHeader(b"accept")
        page = self.status.metrics_page(accept.decode("latin-1") if accept else None)
        if isinstance(page, defer.Deferred):  # encoded in a thread (bookied's)
            return self._finish_later(request, page, answer=self._metrics_body, refusal=self._metrics_refusal)
        return self._metrics_body(request, page)

    @staticmethod
    def _metrics_body(request, page: MetricsPage) -> bytes:
        request.setHeader(b"Content-Type", page.content_type.encode("ascii"))
        return page.body

    @staticmethod
    def _metrics_refusal(exc: BaseException) -> HTTPError:
        log.error("HTTP admin: /metrics failed: %r", exc)
        return HTTPError(http.INTERNAL_SERVER_ERROR, "internal error")

    def get_info(self, request) -> bytes:
        info = dict(self.status.info())
        info.setdefault("bookieId", self.status.bookie_id)
        return self.json_body(request, info)

    def current_state(self) -> dict[str, Any]:
        """Java's four BookieStateService keys first (filled in if state() lacks them), then extras."""
        given = dict(self.status.state())
        state = {
            "running": given.pop("running", None),
            "readOnly": given.pop("readOnly", None),
            "shuttingDown": given.pop("shuttingDown", False),
            "availableForHighPriorityWrites": given.pop("availableForHighPriorityWrites", True),
        }
        if state["running"] is None:
            state["running"] = bool(self.status.is_running())
        if state["readOnly"] is None:
            state["readOnly"] = bool(self.status.is_readonly())
        state.update(given)
        return state

    def get_state(self, request) -> bytes:
        return self.json_body(request, self.current_state())

    def get_is_ready(self, request) -> bytes:
        state = self.current_state()
        request.setHeader(b"Content-Type", TEXT_CONTENT_TYPE)
        if state["running"] and not state["shuttingDown"]:
            return b""
        request.setResponseCode(http.SERVICE_UNAVAILABLE)
        return b"Bookie is not fully started yet"

    def readonly_body(self, request) -> bytes:
        return self.json_body(request, {"readOnly": bool(self.status.is_readonly())})

    def get_readonly(self, request) -> bytes:
        return self.readonly_body(request)

    def put_readonly(self, request):
        wanted = self._parse_readonly_body(request)
        force = request.args.get(b"force", [b"false"])[-1].lower() == b"true"
        kwargs = {"force": True} if force else {}
        try:
            result = self.status.set_readonly(wanted, **kwargs)
        except ValueError as exc:
            raise self._refusal(exc) from None
        if isinstance(result, defer.Deferred):
            return self._finish_later(request, result)
        return self.readonly_body(request)

    def _finish_later(self, request, d: defer.Deferred, answer=None, refusal=None):
        """Answer once *d* fires, unless the client has gone: with
        ``answer(request, result)`` (default: the read-only state, for
        ``set_readonly``) or, when *d* fails, the :class:`HTTPError` that
        ``refusal(exception)`` makes of it."""
        answer = answer or (lambda req, _result: self.readonly_body(req))
        refusal = refusal or self._refusal
        gone: list[bool] = []
        request.notifyFinish().addErrback(lambda _failure: gone.append(True))

        def send(result):
            try:
                if isinstance(result, Failure):
                    exc = refusal(result.value)
                    body = self.error(request, exc.code, exc.message)
                else:
                    body = answer(request, result)
            except Exception:
                log.exception("HTTP admin: answering %s %s failed", request.method, self.request_path(request))
                body = self.error(request, http.INTERNAL_SERVER_ERROR, "internal error")
            if gone:
                return
            request.setHeader(b"Content-Length", b"%d" % len(body))
            request.write(body)
            request.finish()

        d.addBoth(send)
        d.addErrback(lambda failure: log.error("HTTP admin: cannot answer: %s", failure.value))
        return server.NOT_DONE_YET

    @staticmethod
    def _refusal(exc: BaseException) -> HTTPError:
        if isinstance(exc, HTTPError):
            return exc
        if isinstance(exc, ValueError):
            return HTTPError(http.BAD_REQUEST, str(exc) or "refused")
        log.error("HTTP admin: set_readonly failed: %r", exc)
        return HTTPError(http.INTERNAL_SERVER_ERROR, "internal error")

    @staticmethod
    def _json_request(request, example: str) -> Any:
        """The request's JSON body; 400 naming *example* when it is not JSON."""
        content = getattr(request, "content", None)
        raw = content.read(MAX_REQUEST_BODY + 1) if content is not None else b""
        if len(raw) > MAX_REQUEST_BODY:
            raise HTTPError(http.REQUEST_ENTITY_TOO_LARGE, "request body too large")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise HTTPError(http.BAD_REQUEST, f"body must be JSON like {example}") from None

    @classmethod
    def _parse_readonly_body(cls, request) -> bool:
        example = '{"readOnly": true}'
        doc = cls._json_request(request, example)
        if not isinstance(doc, dict) or not isinstance(doc.get("readOnly"), bool):
            raise HTTPError(http.BAD_REQUEST, f"body must be JSON like {example}")
        return doc["readOnly"]

    # -- day-2 bookie endpoints (bookied.garbage_collector, bookied.day2) ----------------------------------------

    def get_gc(self, request) -> bytes:
        return self.json_body(request, self.status.gc_status())

    def put_gc(self, request) -> bytes:
        content = getattr(request, "content", None)
        raw = content.read(MAX_REQUEST_BODY) if content is not None else b""
        if content is not None and raw.strip():
            content.seek(0)
            doc = self._json_request(request, '{"forceMajor": true, "forceMinor": false}')
            if not isinstance(doc, dict):
                raise HTTPError(http.BAD_REQUEST, 'body must be JSON like {"forceMajor": true}')
            # Java reads each with Boolean.parseBoolean(value.toString()), absent meaning false
            self.status.force_gc(*(str(doc.get(k, False)).lower() == "true" for k in ("forceMajor", "forceMinor")))
        else:
            self.status.force_gc()
        return self.json_body(request, f"Triggered GC on BookieServer: {self.status.bookie_id}")

    def get_gc_details(self, request) -> bytes:
        return self.json_body(request, self.status.gc_details())

    def get_list_disk_file(self, request) -> bytes:
        kind = request.args.get(b"file_type", [b""])[-1].decode("utf-8", "replace") or None
        return self.json_body(request, self.status.list_disk_files(kind))

    def get_last_log_mark(self, request) -> bytes:
        return self.json_body(request, self.status.last_log_marks())

    def get_list_ledgers(self, request):
        def encode(ids) -> bytes:  # compact (C's encoder) and off the reactor: a million ids
            return json.dumps({"ledgers": list(ids)}, separators=(",", ":")).encode("ascii")

        def answer(req, data: bytes) -> bytes:
            self.json_body(req, None)
            return data

        d = defer.maybeDeferred(self.status.held_ledgers).addCallback(lambda ids: self.run_blocking(encode, ids))
        return self._finish_later(request, d, answer=answer)

    def put_expand_storage(self, request):
        def refusal(exc):
            if isinstance(exc, ValueError):
                return HTTPError(http.CONFLICT, str(exc))
            return self._zk_refusal(exc)

        return self._finish_later(
            request,
            defer.maybeDeferred(self.status.expand_storage),
            answer=lambda req, _r: self.json_body(req, "Success expand storage"),
            refusal=refusal,
        )

    # -- autorecovery (Java's /api/v1/autorecovery/*) ---------------------------------

    def run_blocking(self, fn, *args) -> defer.Deferred:
        if self._run_blocking is not None:
            return self._run_blocking(fn, *args)
        from twisted.internet import reactor, threads

        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn, *args)

    def _with_store(self, request, work: Callable[[Any], tuple[int, bytes, bytes]]):
        """Run ``work(store)`` off the reactor thread and answer its
        ``(code, content type, body)``; it may raise :class:`HTTPError`."""
        store = self.status.zk
        if store is None or not store.connected:
            raise HTTPError(http.SERVICE_UNAVAILABLE, "ZooKeeper is not connected")
        return self._finish_later(
            request, self.run_blocking(work, store), answer=self._send_reply, refusal=self._zk_refusal
        )

    @staticmethod
    def _send_reply(request, reply: tuple[int, bytes, bytes]) -> bytes:
        code, content_type, body = reply
        request.setResponseCode(code)
        request.setHeader(b"Content-Type", content_type)
        return body

    @staticmethod
    def _zk_refusal(exc: BaseException) -> HTTPError:
        from bkctl.wire.errors import Unreachable

        if isinstance(exc, HTTPError):
            return exc
        if isinstance(exc, Unreachable):
            return HTTPError(http.SERVICE_UNAVAILABLE, f"ZooKeeper is unreachable: {exc}")
        log.error("HTTP admin: ZooKeeper call failed: %r", exc)
        return HTTPError(http.INTERNAL_SERVER_ERROR, f"ZooKeeper call failed: {exc}")

    @staticmethod
    def _text(body: str) -> tuple[int, bytes, bytes]:
        return http.OK, TEXT_CONTENT_TYPE, body.encode("utf-8")

    @staticmethod
    def _json(value: Any) -> tuple[int, bytes, bytes]:
        return http.OK, JSON_CONTENT_TYPE, to_json(value)

    def get_who_is_auditor(self, request):
        def work(store):
            auditor = store.auditor.current()
            if auditor is None:
                raise HTTPError(http.NOT_FOUND, "No auditor elected")
            return self._text(f"Auditor: {auditor}")

        return self._with_store(request, work)

    def put_trigger_audit(self, request):
        from bkctl.wire.autorecovery.control import trigger_audit

        def work(store):
            with self._audit_refusals():
                trigger_audit(store)
            return self._text("Success trigger audit.")

        return self._with_store(request, work)

    @staticmethod
    @contextmanager
    def _audit_refusals():
        """The refusals of :func:`~bkctl.wire.autorecovery.control.trigger_audit` as
        409 (autorecovery disabled) and 503 (no auditor); Java's triggerAudit
        gives up silently then, this one says why, as ``bkctl autorecovery
        trigger-audit`` does."""
        from bkctl.wire.errors import AutorecoveryDisabled, NoAuditor

        try:
            yield
        except AutorecoveryDisabled:
            raise HTTPError(
                http.CONFLICT, f"Autorecovery is disabled (PUT {AUTORECOVERY_STATUS}?enabled=true enables it)"
            ) from None
        except NoAuditor as exc:
            text = str(exc)
            raise HTTPError(http.SERVICE_UNAVAILABLE, text[:1].upper() + text[1:]) from None

    def get_lost_bookie_recovery_delay(self, request):
        def work(store):
            delay = store.underreplication.lost_bookie_recovery_delay()
            if delay is None:
                raise HTTPError(http.NOT_FOUND, "lostBookieRecoveryDelay is not set (no auditor has run yet)")
            return self._text(f"lostBookieRecoveryDelay value: {delay}")

        return self._with_store(request, work)

    def put_lost_bookie_recovery_delay(self, request):
        example = '{"delay_seconds": 60}'
        doc = self._json_request(request, example)
        delay = doc.get("delay_seconds") if isinstance(doc, dict) else None
        if isinstance(delay, bool) or not isinstance(delay, int):
            raise HTTPError(http.BAD_REQUEST, f"body must be JSON like {example}")
        if not 0 <= delay < 2**31:
            raise HTTPError(http.BAD_REQUEST, f"delay_seconds must be between 0 and {2**31 - 1}, got {delay}")

        def work(store):
            store.underreplication.set_lost_bookie_recovery_delay(delay)
            return self._text(f"Success set lostBookieRecoveryDelay to {delay}")

        return self._with_store(request, work)

    @staticmethod
    def _params(request, name: str) -> list[str]:
        """The non-blank values of query parameter *name*."""
        values = [v.decode("utf-8", "replace").strip() for v in request.args.get(name.encode(), [])]
        return [v for v in values if v]

    @staticmethod
    def _has_param(request, name: str) -> bool:
        """Whether the query has *name*, even without a value (``?flag``, which
        twisted leaves out of ``request.args``)."""
        if name.encode() in request.args:
            return True
        query = (getattr(request, "uri", b"") or b"").partition(b"?")[2]
        return name.encode() in parse_qs(query, keep_blank_values=True)

    def get_under_replicated(self, request):
        from bkctl.wire.autorecovery.control import matching_marks

        include = self._params(request, "missingreplica")
        exclude = self._params(request, "excludingmissingreplica")
        with_replicas = self._has_param(request, "printmissingreplica")  # Java: present means true

        def work(store):
            marks = list(matching_marks(store.underreplication.marks(), include, exclude))
            if not marks:
                raise HTTPError(http.NOT_FOUND, "No under replicated ledgers found")
            if with_replicas:
                return self._json({str(m.ledger_id): list(m.replicas) for m in marks})
            return self._json([m.ledger_id for m in marks])

        return self._with_store(request, work)

    def get_autorecovery_status(self, request):
        return self._with_store(request, lambda store: self._json({"enabled": store.underreplication.is_enabled()}))

    def put_autorecovery_status(self, request):
        values = [v.lower() for v in self._params(request, "enabled")]
        if len(values) != 1 or values[0] not in ("true", "false"):
            raise HTTPError(http.BAD_REQUEST, "query parameter 'enabled' must be true or false")
        enable = values[0] == "true"

        def work(store):
            if enable:
                store.underreplication.enable()
            else:
                store.underreplication.disable()
            return self._json({"enabled": store.underreplication.is_enabled()})

        return self._with_store(request, work)

    def put_decommission(self, request):
        from bkctl.wire.autorecovery.control import trigger_audit
        from bkctl.wire.metadata.bookieid import is_valid_bookie_id

        example = '{"bookie_src": "bookie1.example.com:3181"}'
        doc = self._json_request(request, example)
        bookie = doc.get("bookie_src") if isinstance(doc, dict) else None
        if not isinstance(bookie, str):
            raise HTTPError(http.BAD_REQUEST, f"body must be JSON like {example}")
        if not is_valid_bookie_id(bookie):
            raise HTTPError(http.BAD_REQUEST, f"invalid bookie id {bookie!r}")

        def work(store):
            if bookie in store.registration.writable_bookies() or bookie in store.registration.readonly_bookies():
                raise HTTPError(
                    http.CONFLICT, f"bookie {bookie} is registered (running); stop it before decommissioning it"
                )
            with self._audit_refusals():
                trigger_audit(store)
            log.info("HTTP admin: decommission of %s: audit triggered", bookie)
            return self._text(f"Success send decommission Bookie command {bookie}")

        return self._with_store(request, work)

    def put_recover_bookie(self, request):
        raise HTTPError(
            http.NOT_IMPLEMENTED,
            "recovering a bookie is not supported by bookied's HTTP API: run 'bkctl recover "
            f"BOOKIE', or stop the bookie and PUT {AUTORECOVERY_DECOMMISSION} to let the "
            "autorecovery daemons re-replicate its ledgers",
        )


class AdminSite(server.Site):
    """A quiet :class:`twisted.web.server.Site`: no tracebacks to clients, optional access log.

    *reactor* (an ``IReactorTime``) times idle connections out after
    *timeout* seconds; it defaults to the global reactor.
    """

    displayTracebacks = False
    noisy = False

    def __init__(self, root: resource.IResource, *, access_log: bool = False, timeout: float = 60, reactor=None):
        super().__init__(root, timeout=timeout, reactor=reactor, parsePOSTFormSubmission=False)
        self.access_log = access_log

    def log(self, request):
        if self.access_log:
            super().log(request)


def make_site(
    status: BookieStatus,
    *,
    access_log: bool = False,
    reactor=None,
    run_blocking: Callable[..., defer.Deferred] | None = None,
    metrics_only: bool = False,
) -> AdminSite:
    """The admin site for *status*; serve it with ``reactor.listenTCP`` or :func:`listen_http`.

    *run_blocking* runs the ZooKeeper calls (see :class:`AdminResource`)."""
    admin = AdminResource(status, run_blocking=run_blocking, metrics_only=metrics_only)
    # a Resource provides IResource through zope's @implementer, which mypy reads only with its plugin
    return AdminSite(admin, access_log=access_log, reactor=reactor)  # type: ignore[arg-type]


def listen_http(reactor, port: int, status: BookieStatus, interface: str = "0.0.0.0", *, access_log: bool = False):
    """Start serving the admin site on *interface*:*port*; returns the ``IListeningPort``.

    Port 0 picks a free port (``getHost().port`` tells which).  IPv6
    interfaces such as ``"::"`` work too.
    """
    clock = reactor if IReactorTime.providedBy(reactor) else None
    run_blocking = None
    if IReactorThreads.providedBy(reactor):

        def run_blocking(fn, *args):
            return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn, *args)

    site = make_site(status, access_log=access_log, reactor=clock, run_blocking=run_blocking)
    listening = reactor.listenTCP(port, site, interface=interface)
    log.info("HTTP admin server listening on %s:%s", interface, listening.getHost().port)
    return listening


def listen_metrics(reactor, port: int, status: BookieStatus, interface: str = "0.0.0.0"):
    """Serve ``/metrics`` alone on *interface*:*port* (``prometheusStatsHttpPort``: Java's
    Prometheus stats provider's own server, started when the HTTP admin server is off)."""
    clock = reactor if IReactorTime.providedBy(reactor) else None
    site = make_site(status, reactor=clock, metrics_only=True)
    listening = reactor.listenTCP(port, site, interface=interface)
    log.info("Prometheus metrics listening on %s:%s", interface, listening.getHost().port)
    return listening


def listen_from_config(reactor, config, status: BookieStatus, *, access_log: bool = False):
    """:func:`listen_http` as the bookie's config says, or None if ``httpServerEnabled`` is false.

    *config* is a :class:`bkctl.bookied.config.BookieConfig` (``http_server_enabled``,
    ``http_server_port``, ``http_server_host``).
    """
    if not config.http_server_enabled:
        return None
    return listen_http(reactor, config.http_server_port, status, config.http_server_host, access_log=access_log)
