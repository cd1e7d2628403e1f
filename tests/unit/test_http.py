"""bookied.http: the admin endpoints (DummyRequest), the full HTTP stack (StringTransport),
listening (MemoryReactor) and one real socket (a short-lived reactor in a subprocess)."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
from twisted.internet import defer, task
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.web import server

from bkctl.bookied import http as bhttp
from bkctl.bookied.config import load_config_text
from bkctl.bookied.http import (
    PROMETHEUS_CONTENT_TYPE,
    AdminSite,
    BookieStatus,
    listen_from_config,
    listen_http,
    make_site,
)
from bkctl.bookied.service import BookieService
from bkctl.wire import fastpath
from tests.support.http import (
    METRICS,
    FakeStatus,
    as_json,
    body,
    code,
    exchange,
    header,
    render,
    request_bytes,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- endpoints (DummyRequest) -------------------------------------------------------------


def test_heartbeat():
    req = render(FakeStatus(), "/heartbeat")
    assert code(req) == 200
    assert body(req) == b"OK\n"
    assert header(req, "content-type").startswith("text/plain")


def test_heartbeat_answers_even_when_not_running():
    req = render(FakeStatus(running=False), "/heartbeat")
    assert code(req) == 200 and body(req) == b"OK\n"


def test_metrics():
    req = render(FakeStatus(), "/metrics")
    assert code(req) == 200
    assert body(req) == METRICS.encode()
    assert header(req, "content-type") == "text/plain; version=0.0.4; charset=utf-8"
    assert PROMETHEUS_CONTENT_TYPE == b"text/plain; version=0.0.4; charset=utf-8"


def test_metrics_failure_is_500_json(caplog):
    req = render(FakeStatus(metrics=RuntimeError("boom")), "/metrics")
    assert code(req) == 500
    assert as_json(req) == {"error": "internal error"}
    assert "boom" not in body(req).decode()
    assert "failed" in caplog.text


def test_info_keeps_java_keys_and_adds_bookie_id():
    req = render(FakeStatus(), "/api/v1/bookie/info")
    assert code(req) == 200
    doc = as_json(req)
    assert doc["freeSpace"] == 1000 and doc["totalSpace"] == 4000
    assert doc["journalDirectories"] == ["/var/lib/bookkeeper/journal"]
    assert doc["bookieId"] == "bookie-1.example.com:3181"


def test_info_does_not_override_given_bookie_id():
    req = render(FakeStatus(info={"freeSpace": 1, "totalSpace": 2, "bookieId": "x:1"}), "/api/v1/bookie/info")
    assert as_json(req) == {"freeSpace": 1, "totalSpace": 2, "bookieId": "x:1"}


def test_json_is_jackson_style_pretty():
    req = render(FakeStatus(info={"freeSpace": 0, "totalSpace": 0}), "/api/v1/bookie/info")
    assert body(req).startswith(b'{\n  "freeSpace" : 0,\n  "totalSpace" : 0,\n')


def test_state_java_keys_in_order():
    req = render(
        FakeStatus(
            state={"running": True, "readOnly": False, "shuttingDown": False, "availableForHighPriorityWrites": True}
        ),
        "/api/v1/bookie/state",
    )
    assert code(req) == 200
    doc = as_json(req)
    assert list(doc) == ["running", "readOnly", "shuttingDown", "availableForHighPriorityWrites"]
    assert doc == {"running": True, "readOnly": False, "shuttingDown": False, "availableForHighPriorityWrites": True}


def test_state_fills_missing_keys_from_status():
    req = render(FakeStatus(running=True, readonly=True, state={"journalQueue": 3}), "/api/v1/bookie/state")
    assert as_json(req) == {
        "running": True,
        "readOnly": True,
        "shuttingDown": False,
        "availableForHighPriorityWrites": True,
        "journalQueue": 3,
    }


def test_state_shutting_down():
    req = render(
        FakeStatus(
            state={"running": True, "readOnly": True, "shuttingDown": True, "availableForHighPriorityWrites": False}
        ),
        "/api/v1/bookie/state",
    )
    doc = as_json(req)
    assert doc["shuttingDown"] is True and doc["availableForHighPriorityWrites"] is False


@pytest.mark.parametrize(
    "state, expected",
    [
        ({"running": True}, 200),
        ({"running": False}, 503),
        ({"running": True, "shuttingDown": True}, 503),
    ],
)
def test_is_ready(state, expected):
    req = render(FakeStatus(state=state), "/api/v1/bookie/is_ready")
    assert code(req) == expected
    if expected == 200:
        assert body(req) == b""
    else:
        assert body(req) == b"Bookie is not fully started yet"


def test_trailing_slash_ignored():
    assert body(render(FakeStatus(), "/heartbeat/")) == b"OK\n"
    assert code(render(FakeStatus(), "/api/v1/bookie/state/")) == 200


def test_unknown_path_is_404_json():
    for path in ("/", "/nope", "/api/v1/bookie", "/api/v1/bookie/info/extra", "/heartbeat//"):
        req = render(FakeStatus(), path)
        assert code(req) == 404, path
        assert "error" in as_json(req)


@pytest.mark.parametrize(
    "path", ["/heartbeat", "/metrics", "/api/v1/bookie/info", "/api/v1/bookie/state", "/api/v1/bookie/is_ready"]
)
@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE", b"PATCH"])
def test_wrong_method_is_405_with_allow(path, method):
    req = render(FakeStatus(), path, method=method, body=b"{}")
    assert code(req) == 405
    assert header(req, "allow") == "GET, HEAD"
    assert "not allowed" in as_json(req)["error"]


def test_head_has_length_but_no_body():
    req = render(FakeStatus(), "/heartbeat", method=b"HEAD")
    assert code(req) == 200
    assert body(req) == b""
    assert header(req, "content-length") == "3"


# -- read-only switch -------------------------------------------------------------------


def test_readonly_get():
    assert as_json(render(FakeStatus(readonly=True), "/api/v1/bookie/state/readonly")) == {"readOnly": True}
    assert as_json(render(FakeStatus(), "/api/v1/bookie/state/readonly")) == {"readOnly": False}


def test_readonly_put_switches_both_ways():
    status = FakeStatus()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}')
    assert code(req) == 200 and as_json(req) == {"readOnly": True}
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly":false}')
    assert code(req) == 200 and as_json(req) == {"readOnly": False}
    assert status.calls == [(True, False), (False, False)]


def test_readonly_put_force_flag():
    status = FakeStatus()
    render(
        status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}', args={b"force": [b"true"]}
    )
    assert status.calls == [(True, True)]


def test_readonly_allow_lists_put():
    req = render(FakeStatus(), "/api/v1/bookie/state/readonly", method=b"DELETE")
    assert code(req) == 405
    assert header(req, "allow") == "GET, HEAD, PUT"


@pytest.mark.parametrize(
    "raw", [b"", b"nope", b"[]", b'{"readOnly": "true"}', b'{"readonly": true}', b'{"readOnly": 1}', b"\xff\xfe"]
)
def test_readonly_put_bad_body_is_400(raw):
    status = FakeStatus()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=raw)
    assert code(req) == 400
    assert "readOnly" in as_json(req)["error"]
    assert status.calls == []


def test_readonly_put_body_too_large():
    status = FakeStatus()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b" " * (bhttp.MAX_REQUEST_BODY + 1))
    assert code(req) == 413
    assert status.calls == []


def test_readonly_put_refused_is_400():
    status = FakeStatus(readonly=True)
    status.refuse = "Bookie is in forceReadOnly mode, cannot transit to writable mode"
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": false}')
    assert code(req) == 400
    assert as_json(req) == {"error": status.refuse}
    assert status.readonly is True


def test_readonly_put_deferred():
    status = FakeStatus()
    status.pending = defer.Deferred()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}')
    assert not req.finished
    status.pending.callback(None)
    assert req.finished
    assert code(req) == 200 and as_json(req) == {"readOnly": True}


def test_readonly_put_deferred_refusal():
    status = FakeStatus()
    status.pending = defer.Deferred()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}')
    status.pending.errback(ValueError("Bookie is disabled ReadOnly mode"))
    assert req.finished
    assert code(req) == 400 and as_json(req) == {"error": "Bookie is disabled ReadOnly mode"}


def test_readonly_put_deferred_crash_is_500(caplog):
    status = FakeStatus()
    status.pending = defer.Deferred()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}')
    status.pending.errback(OSError("disk on fire"))
    assert code(req) == 500 and as_json(req) == {"error": "internal error"}
    assert "disk on fire" in caplog.text


def test_readonly_put_client_gone_before_answer():
    status = FakeStatus()
    status.pending = defer.Deferred()
    req = render(status, "/api/v1/bookie/state/readonly", method=b"PUT", body=b'{"readOnly": true}')
    req.processingFailed(Failure(ConnectionDone()))  # fires notifyFinish's errback
    status.pending.callback(None)
    assert body(req) == b""
    assert status.readonly is True


# -- the full twisted.web stack ------------------------------------------------------------


@pytest.fixture
def site():
    return make_site(FakeStatus(), reactor=task.Clock())


def test_stack_heartbeat(site):
    status, headers, payload = exchange(site, request_bytes("GET", "/heartbeat"))
    assert status == 200
    assert payload == b"OK\n"
    assert headers["content-length"] == "3"
    assert headers["content-type"] == "text/plain; charset=utf-8"


def test_stack_metrics_and_query_string(site):
    status, headers, payload = exchange(site, request_bytes("GET", "/metrics?x=1"))
    assert status == 200
    assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert payload == METRICS.encode()


def test_stack_state_json(site):
    status, headers, payload = exchange(site, request_bytes("GET", "/api/v1/bookie/state"))
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(payload)["running"] is True


def test_stack_head(site):
    status, headers, payload = exchange(site, request_bytes("HEAD", "/api/v1/bookie/info"))
    assert status == 200
    assert payload == b""
    assert int(headers["content-length"]) > 0


def test_stack_404_and_405(site):
    status, headers, payload = exchange(site, request_bytes("GET", "/api/v1/ledger/list"))
    assert status == 404 and "error" in json.loads(payload)
    status, headers, payload = exchange(site, request_bytes("POST", "/heartbeat", b"x"))
    assert status == 405 and headers["allow"] == "GET, HEAD"


def test_stack_put_readonly():
    status_obj = FakeStatus()
    site = make_site(status_obj, reactor=task.Clock())
    status, _, payload = exchange(
        site,
        request_bytes(
            "PUT",
            "/api/v1/bookie/state/readonly?force=true",
            b'{"readOnly": true}',
            "Content-Type: application/json\r\n",
        ),
    )
    assert status == 200
    assert json.loads(payload) == {"readOnly": True}
    assert status_obj.calls == [(True, True)]


def test_stack_percent_encoded_path(site):
    status, _, payload = exchange(site, request_bytes("GET", "/heart%62eat"))
    assert status == 200 and payload == b"OK\n"


def test_site_is_quiet():
    site = make_site(FakeStatus(), reactor=task.Clock())
    assert isinstance(site, AdminSite) and isinstance(site, server.Site)
    assert site.displayTracebacks is False
    assert site.access_log is False
    assert make_site(FakeStatus(), access_log=True, reactor=task.Clock()).access_log is True


def test_status_protocol_is_runtime_checkable():
    assert isinstance(FakeStatus(), BookieStatus)
    assert not isinstance(object(), BookieStatus)


STATUS_METHODS = sorted(
    name for name, value in vars(BookieStatus).items() if callable(value) and not name.startswith("_")
)
# attributes, and read-only ones (properties: the bookie's is of a narrower type)
STATUS_ATTRIBUTES = sorted(
    [
        *BookieStatus.__annotations__,
        *(name for name, value in vars(BookieStatus).items() if isinstance(value, property)),
    ]
)


def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()][1:]  # after self


def test_the_status_declares_everything_the_site_asks_of_it():
    """Every ``self.status.<member>`` in bookied/http.py is a member of BookieStatus."""
    used = set(re.findall(r"self\.status\.(\w+)", inspect.getsource(bhttp)))
    assert used == set(STATUS_METHODS) | set(STATUS_ATTRIBUTES)
    assert STATUS_ATTRIBUTES == ["bookie_id", "zk"]
    assert len(STATUS_METHODS) == 13, STATUS_METHODS


@pytest.mark.parametrize("impl", [BookieService, FakeStatus], ids=["bookie", "fake"])
def test_the_bookie_and_the_fake_are_what_the_site_may_ask(impl, tmp_path):
    """The real bookie (and the tests' fake) has each member of BookieStatus, methods with
    the same parameters."""
    for name in STATUS_METHODS:
        assert _params(getattr(impl, name)) == _params(getattr(BookieStatus, name)), name
    if impl is BookieService:
        cfg = load_config_text(
            f"advertisedAddress=127.0.0.1\nallowLoopback=true\n"
            f"journalDirectories={tmp_path / 'j'}\nledgerDirectories={tmp_path / 'l'}\n"
        )
        status = BookieService(cfg, MemoryReactorClock(), twins=fastpath.selected())
    else:
        status = FakeStatus()
    for name in STATUS_ATTRIBUTES:
        assert hasattr(status, name), name
    assert isinstance(status, BookieStatus)


# -- listening -------------------------------------------------------------------------------


def test_listen_http_memory_reactor():
    reactor = MemoryReactorClock()
    port = listen_http(reactor, 8080, FakeStatus(), interface="127.0.0.1")
    assert len(reactor.tcpServers) == 1
    portno, factory, backlog, interface = reactor.tcpServers[0]
    assert (portno, interface) == (8080, "127.0.0.1")
    assert isinstance(factory, AdminSite)
    assert factory.reactor is reactor
    assert port.getHost().port == 8080


def test_listen_http_default_interface():
    reactor = MemoryReactorClock()
    listen_http(reactor, 0, FakeStatus())
    assert reactor.tcpServers[0][3] == "0.0.0.0"


def test_listen_from_config():
    reactor = MemoryReactorClock()
    off = SimpleNamespace(http_server_enabled=False, http_server_port=8080, http_server_host="0.0.0.0")
    assert listen_from_config(reactor, off, FakeStatus()) is None
    assert reactor.tcpServers == []
    on = SimpleNamespace(http_server_enabled=True, http_server_port=8123, http_server_host="::1")
    listen_from_config(reactor, on, FakeStatus())
    assert reactor.tcpServers[0][0] == 8123 and reactor.tcpServers[0][3] == "::1"


def test_listen_from_real_config():

    reactor = MemoryReactorClock()
    cfg = load_config_text("httpServerEnabled=true\nhttpServerPort=8124\nhttpServerHost=127.0.0.1\n")
    listen_from_config(reactor, cfg, FakeStatus())
    assert reactor.tcpServers[0][0] == 8124 and reactor.tcpServers[0][3] == "127.0.0.1"
    assert listen_from_config(MemoryReactorClock(), load_config_text(""), FakeStatus()) is None


_REAL_SOCKET_SCRIPT = textwrap.dedent("""
    import json, sys, urllib.error, urllib.request
    from twisted.internet import reactor, threads
    from bkctl.bookied.http import listen_http

    class Status:
        bookie_id = "127.0.0.1:3181"
        def is_readonly(self): return False
        def is_running(self): return True
        def metrics_page(self, accept=None):
            from bkctl.wire.process.exposition import MetricsPage
            return MetricsPage(b"up 1\\n", "text/plain; version=0.0.4; charset=utf-8")
        def info(self): return {"freeSpace": 5, "totalSpace": 10}
        def state(self): return {}

    port = listen_http(reactor, 0, Status(), interface="127.0.0.1")
    base = "http://127.0.0.1:%d" % port.getHost().port

    def fetch():
        out = {}
        for path in ("/heartbeat", "/metrics", "/api/v1/bookie/info", "/api/v1/bookie/state", "/nope"):
            try:
                with urllib.request.urlopen(base + path, timeout=10) as r:
                    out[path] = [r.status, r.headers["Content-Type"], r.read().decode()]
            except urllib.error.HTTPError as e:
                out[path] = [e.code, e.headers["Content-Type"], e.read().decode()]
        return out

    def done(result):
        print(json.dumps(result))
        port.stopListening()
        reactor.stop()

    def failed(f):
        print(f.getTraceback(), file=sys.stderr)
        reactor.stop()

    reactor.callWhenRunning(lambda: threads.deferToThread(fetch).addCallbacks(done, failed))
    reactor.callLater(20, reactor.stop)
    reactor.run()
""")


def test_real_socket_in_subprocess():
    proc = subprocess.run(
        [sys.executable, "-c", _REAL_SOCKET_SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["/heartbeat"] == [200, "text/plain; charset=utf-8", "OK\n"]
    assert result["/metrics"] == [200, "text/plain; version=0.0.4; charset=utf-8", "up 1\n"]
    status, ctype, text = result["/api/v1/bookie/info"]
    assert (status, ctype) == (200, "application/json")
    assert json.loads(text) == {"freeSpace": 5, "totalSpace": 10, "bookieId": "127.0.0.1:3181"}
    assert json.loads(result["/api/v1/bookie/state"][2]) == {
        "running": True,
        "readOnly": False,
        "shuttingDown": False,
        "availableForHighPriorityWrites": True,
    }
    assert result["/nope"][0] == 404


def test_metrics_encoded_later_are_answered_then(caplog):
    """bookied encodes a collection in a thread: /metrics waits for it, and a failure is a 500."""
    from bkctl.wire.process.exposition import MetricsPage

    class Later(FakeStatus):
        def metrics_page(self, accept=None):
            self.accepts.append(accept)
            self.pending = defer.Deferred()
            return self.pending

    status = Later()
    req = render(status, "/metrics")
    assert not req.finished
    status.pending.callback(MetricsPage(b"up 1\n", "application/openmetrics-text; version=1.0.0; charset=utf-8"))
    assert code(req) == 200 and body(req) == b"up 1\n"
    assert header(req, "content-type").startswith("application/openmetrics-text")
    failing = render(status, "/metrics")
    status.pending.errback(RuntimeError("encoder broke"))
    assert code(failing) == 500 and as_json(failing) == {"error": "internal error"}
    assert "encoder broke" in caplog.text
