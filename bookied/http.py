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
``/api/v1/bookie/info``                    GET     ``{"freeSpace": n, "totalSpace": n, ...}``
``/api/v1/bookie/state``                   GET     ``{"running", "readOnly", "shuttingDown",
                                                   "availableForHighPriorityWrites"}``
``/api/v1/bookie/is_ready``                GET     200 if running and not shutting down, else 503
``/api/v1/bookie/state/readonly``          GET     ``{"readOnly": bool}``
``/api/v1/bookie/state/readonly``          PUT     body ``{"readOnly": bool}`` (optional
                                                   ``?force=true``); answers the new state
=========================================  ======  ==========================================

HEAD is accepted wherever GET is.  A trailing slash is ignored.  Where the
Java bookie answers a wrong method with 403 or 404, this one answers 405
with an ``Allow`` header; unknown paths get a 404 with a JSON body.  Every
error body is ``{"error": "..."}``.  JSON is pretty-printed the way Java's
Jackson default printer does it (two-space indent, ``"key" : value``).

The site only reads the bookie through a small interface (see
:class:`BookieStatus`), so it can be tested, and reused, without a bookie.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from twisted.web import http, resource, server

__all__ = [
    "AdminResource",
    "AdminSite",
    "BOOKIE_INFO",
    "BOOKIE_IS_READY",
    "BOOKIE_STATE",
    "BOOKIE_STATE_READONLY",
    "BookieStatus",
    "HEARTBEAT",
    "METRICS",
    "PROMETHEUS_CONTENT_TYPE",
    "listen_from_config",
    "listen_http",
    "make_site",
]

log = logging.getLogger("bookied.http")

# Paths, as in Java's org.apache.bookkeeper.http.HttpRouter.
HEARTBEAT = "/heartbeat"
METRICS = "/metrics"
BOOKIE_INFO = "/api/v1/bookie/info"
BOOKIE_STATE = "/api/v1/bookie/state"
BOOKIE_IS_READY = "/api/v1/bookie/is_ready"
BOOKIE_STATE_READONLY = "/api/v1/bookie/state/readonly"

PROMETHEUS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
TEXT_CONTENT_TYPE = b"text/plain; charset=utf-8"
JSON_CONTENT_TYPE = b"application/json"

MAX_REQUEST_BODY = 64 * 1024


@runtime_checkable
class BookieStatus(Protocol):
    """What the admin site needs to know about the bookie.

    ``set_readonly(read_only, force=False)`` is optional; without it the
    read-only switch is GET only.  It may return a Deferred, and may raise
    :class:`ValueError` (or fail with one) to refuse the change, which is
    answered with 400 like Java's "forceReadOnly" / "readOnly mode
    disabled" refusals.  ``force`` is passed only when the request has
    ``?force=true``.
    """

    bookie_id: str

    def is_readonly(self) -> bool: ...

    def is_running(self) -> bool: ...

    def metrics_text(self) -> str: ...

    def info(self) -> Mapping[str, Any]: ...

    def state(self) -> Mapping[str, Any]: ...


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

    def __init__(self, status: BookieStatus):
        super().__init__()
        self.status = status
        routes: dict[str, dict[bytes, Handler]] = {
            HEARTBEAT: {b"GET": self.get_heartbeat},
            METRICS: {b"GET": self.get_metrics},
            BOOKIE_INFO: {b"GET": self.get_info},
            BOOKIE_STATE: {b"GET": self.get_state},
            BOOKIE_IS_READY: {b"GET": self.get_is_ready},
            BOOKIE_STATE_READONLY: {b"GET": self.get_readonly},
        }
        if callable(getattr(status, "set_readonly", None)):
            routes[BOOKIE_STATE_READONLY][b"PUT"] = self.put_readonly
        self.routes = routes

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
                raise HTTPError(http.NOT_ALLOWED,
                                f"method {method.decode('ascii', 'replace')} not allowed on {path}")
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

    def get_metrics(self, request) -> bytes:
        text = self.status.metrics_text()
        request.setHeader(b"Content-Type", PROMETHEUS_CONTENT_TYPE)
        return text.encode("utf-8")

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

    def _finish_later(self, request, d: defer.Deferred):
        """Answer once *d* (from ``set_readonly``) fires, unless the client has gone."""
        gone: list[bool] = []
        request.notifyFinish().addErrback(lambda _failure: gone.append(True))

        def send(result):
            try:
                if isinstance(result, Failure):
                    exc = self._refusal(result.value)
                    body = self.error(request, exc.code, exc.message)
                else:
                    body = self.readonly_body(request)
            except Exception:
                log.exception("HTTP admin: answering PUT %s failed", BOOKIE_STATE_READONLY)
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
    def _parse_readonly_body(request) -> bool:
        content = getattr(request, "content", None)
        raw = content.read(MAX_REQUEST_BODY + 1) if content is not None else b""
        if len(raw) > MAX_REQUEST_BODY:
            raise HTTPError(http.REQUEST_ENTITY_TOO_LARGE, "request body too large")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise HTTPError(http.BAD_REQUEST, 'body must be JSON like {"readOnly": true}') from None
        if not isinstance(doc, dict) or not isinstance(doc.get("readOnly"), bool):
            raise HTTPError(http.BAD_REQUEST, 'body must be JSON like {"readOnly": true}')
        return doc["readOnly"]


class AdminSite(server.Site):
    """A quiet :class:`twisted.web.server.Site`: no tracebacks to clients, optional access log.

    *reactor* (an ``IReactorTime``) times idle connections out after
    *timeout* seconds; it defaults to the global reactor.
    """

    displayTracebacks = False
    noisy = False

    def __init__(self, root: resource.IResource, *, access_log: bool = False,
                 timeout: float = 60, reactor=None):
        super().__init__(root, timeout=timeout, reactor=reactor, parsePOSTFormSubmission=False)
        self.access_log = access_log

    def log(self, request):
        if self.access_log:
            super().log(request)


def make_site(status: BookieStatus, *, access_log: bool = False, reactor=None) -> AdminSite:
    """The admin site for *status*; serve it with ``reactor.listenTCP`` or :func:`listen_http`."""
    return AdminSite(AdminResource(status), access_log=access_log, reactor=reactor)


def listen_http(reactor, port: int, status: BookieStatus, interface: str = "0.0.0.0", *,
                access_log: bool = False):
    """Start serving the admin site on *interface*:*port*; returns the ``IListeningPort``.

    Port 0 picks a free port (``getHost().port`` tells which).  IPv6
    interfaces such as ``"::"`` work too.
    """
    clock = reactor if IReactorTime.providedBy(reactor) else None
    site = make_site(status, access_log=access_log, reactor=clock)
    listening = reactor.listenTCP(port, site, interface=interface)
    log.info("HTTP admin server listening on %s:%s", interface, listening.getHost().port)
    return listening


def listen_from_config(reactor, config, status: BookieStatus, *, access_log: bool = False):
    """:func:`listen_http` as the bookie's config says, or None if ``httpServerEnabled`` is false.

    *config* is a :class:`bkctl.bookied.config.BookieConfig` (``http_server_enabled``,
    ``http_server_port``, ``http_server_host``).
    """
    if not config.http_server_enabled:
        return None
    return listen_http(reactor, config.http_server_port, status, config.http_server_host,
                       access_log=access_log)
