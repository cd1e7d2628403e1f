"""bookied's HTTP admin endpoints without a network: a fake bookie status, a DummyRequest
renderer, and raw HTTP bytes through the real twisted.web stack on a StringTransport."""

from __future__ import annotations

import io
import json

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.test.requesthelper import DummyRequest

from bkctl.bookied.http import AdminResource

METRICS = (
    "# TYPE bookie_add_entry_count counter\n"
    "bookie_add_entry_count 42\n"
    "# TYPE bookie_journal_queue_size gauge\n"
    "bookie_journal_queue_size 0\n"
)


class FakeStatus:
    """A bookie as http.py sees it (every member of BookieStatus), with knobs for the tests:
    a read-only switch that records its calls and can refuse (``refuse``) or answer later
    (``pending``), no ZooKeeper store (``zk``), and a GC that only records forced passes."""

    def __init__(self, *, running=True, readonly=False, state=None, info=None, metrics=METRICS):
        self.bookie_id = "bookie-1.example.com:3181"
        self.zk = None
        self.running = running
        self.readonly = readonly
        self._state = state if state is not None else {}
        self._info = (
            info
            if info is not None
            else {
                "freeSpace": 1000,
                "totalSpace": 4000,
                "journalDirectories": ["/var/lib/bookkeeper/journal"],
                "ledgerDirectories": ["/var/lib/bookkeeper/ledgers"],
            }
        )
        self._metrics = metrics
        self.calls: list[tuple[bool, bool]] = []  # set_readonly's (readonly, force)
        self.refuse: str | None = None
        self.pending: defer.Deferred | None = None
        self.forced: list = []  # force_gc's (force_major, force_minor)
        self.accepts: list = []  # metrics_page's Accept headers
        self.ledgers: set[int] = set()  # held_ledgers' answer

    def is_readonly(self):
        return self.readonly

    def is_running(self):
        return self.running

    def metrics_page(self, accept=None):
        from bkctl.wire.process.exposition import MetricsPage

        if isinstance(self._metrics, Exception):
            raise self._metrics
        self.accepts.append(accept)
        return MetricsPage(self._metrics.encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")

    def info(self):
        return self._info

    def state(self):
        return self._state

    def set_readonly(self, readonly, force=False):
        self.calls.append((readonly, force))
        if self.refuse:
            raise ValueError(self.refuse)
        if self.pending is not None:

            def apply(_):
                self.readonly = readonly

            self.pending.addCallback(apply)
            return self.pending
        self.readonly = readonly
        return None

    def force_gc(self, force_major=None, force_minor=None):
        self.forced.append((force_major, force_minor))

    def gc_status(self):
        return {"is_in_force_gc": "false"}

    def gc_details(self):
        return []

    def list_disk_files(self, file_type):
        return {}

    def last_log_marks(self):
        return {}

    def expand_storage(self):
        return "Success expand storage"

    def held_ledgers(self):
        return sorted(self.ledgers)


def render(
    status, path: str, method: bytes = b"GET", body: bytes | None = None, args: dict | None = None, run_blocking=None
):
    """Render *path* on a fresh AdminResource with a DummyRequest (``run_blocking``: the site's,
    e.g. one that runs the call at once); returns the request."""
    res = AdminResource(status, run_blocking=run_blocking)
    segments = [s.encode() for s in path.split("?")[0].split("/")[1:]]
    req = DummyRequest(segments)
    req.method = method
    if body is not None:
        req.content = io.BytesIO(body)
    req.args = args or {}
    result = res.render(req)
    if result is not server.NOT_DONE_YET:
        assert isinstance(result, bytes)
        req.write(result)
        req.finish()
    return req


def code(req) -> int:
    return req.responseCode or 200


def body(req) -> bytes:
    return b"".join(req.written)


def header(req, name: str) -> str | None:
    values = req.responseHeaders.getRawHeaders(name.encode())
    return values[-1].decode() if values else None


def as_json(req):
    assert header(req, "content-type") == "application/json"
    return json.loads(body(req))


def exchange(site, raw: bytes):
    """Push raw HTTP bytes through the real twisted.web stack; returns (status, headers, body)."""
    proto = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
    transport = StringTransport()
    proto.makeConnection(transport)
    proto.dataReceived(raw)
    data = transport.value()
    proto.connectionLost(Failure(ConnectionDone()))
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def request_bytes(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: bookie\r\nConnection: close\r\n{extra}"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body
