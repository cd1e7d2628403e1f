"""bookied.http: Java's /api/v1/autorecovery/* endpoints on a fake ZooKeeper store (DummyRequest and
the full twisted.web stack on a StringTransport), and the autorecovery figures on /metrics."""

from __future__ import annotations

import io
import json

import pytest
from twisted.internet import defer, task
from twisted.web import server
from twisted.web.test.requesthelper import DummyRequest

from bkctl.bookied.exposition import own_text
from bkctl.bookied.http import AdminResource, make_site
from bkctl.bookied.metrics import Metrics, Refreshed, register_autorecovery
from bkctl.wire.autorecovery.config import AutoRecoveryStats
from bkctl.wire.metadata.errors import MetadataStoreError, ZKUnavailable
from tests.support.fake_store import FakeMetadataStore
from tests.support.http import FakeStatus, exchange

AR = "/api/v1/autorecovery"


AUDITOR = "10.0.0.1:3181"


def make_store(auditor: str | None = AUDITOR, delay: int | None = 30) -> FakeMetadataStore:
    """A cluster with an auditor, a recovery delay, three marked ledgers and one
    writable bookie; its call log empty."""
    store = FakeMetadataStore().start()
    if auditor is not None:
        store.auditor.cast_vote(auditor)
    if delay is not None:
        store.underreplication.set_lost_bookie_recovery_delay(delay)
    store.underreplication.mark(5, ["b1:3181"])
    store.underreplication.mark(9, ["b1:3181", "b2:3181"])
    store.underreplication.mark(12, ["b3:3181"])
    store.registration.register(AUDITOR)
    store.calls.clear()
    return store


def delay_writes(store: FakeMetadataStore) -> list[int]:
    return [args[0] for args in store.called("underreplication.set_lost_bookie_recovery_delay")]


class ZKStatus(FakeStatus):
    def __init__(self, store):
        super().__init__()
        self.zk = store


def inline(fn, *args):
    """run_blocking that runs the call at once (the real one uses the reactor's thread pool)."""
    return defer.maybeDeferred(fn, *args)


def call(status, path, method=b"GET", body=None, args=None, run_blocking=inline):
    res = AdminResource(status, run_blocking=run_blocking)
    req = DummyRequest([s.encode() for s in path.split("/")[1:]])
    req.method = method
    if body is not None:
        req.content = io.BytesIO(body if isinstance(body, bytes) else json.dumps(body).encode())
    req.args = args or {}
    result = res.render(req)
    if result is not server.NOT_DONE_YET:
        req.write(result)
        req.finish()
    return req


def code(req):
    return req.responseCode or 200


def text(req):
    return b"".join(req.written).decode()


def ctype(req):
    return req.responseHeaders.getRawHeaders(b"content-type")[-1].decode()


def error(req):
    assert ctype(req) == "application/json"
    return json.loads(text(req))["error"]


@pytest.fixture
def store():
    return make_store()


@pytest.fixture
def status(store):
    return ZKStatus(store)


# -- who_is_auditor ------------------------------------------------------------------


def test_who_is_auditor(status):
    req = call(status, f"{AR}/who_is_auditor")
    assert (code(req), text(req), ctype(req)) == (200, "Auditor: 10.0.0.1:3181", "text/plain; charset=utf-8")


def test_who_is_auditor_none_elected_is_404():
    status = ZKStatus(make_store(auditor=None))
    req = call(status, f"{AR}/who_is_auditor")
    assert code(req) == 404 and error(req) == "No auditor elected"


def test_zookeeper_unreachable_is_503(status, store):
    store.fail_with(ZKUnavailable("connection lost"))
    req = call(status, f"{AR}/who_is_auditor")
    assert code(req) == 503 and "ZooKeeper is unreachable" in error(req)


def test_zookeeper_not_connected_is_503_without_a_call(status, store):
    store.lose_connection()
    calls = []
    req = call(status, f"{AR}/status", run_blocking=lambda fn, *a: calls.append(fn))
    assert code(req) == 503 and error(req) == "ZooKeeper is not connected" and calls == []
    status.zk = None
    assert code(call(status, f"{AR}/status")) == 503


def test_other_zookeeper_error_is_500(status, store, caplog):
    store.fail_with(MetadataStoreError("corrupt auditor vote"))
    req = call(status, f"{AR}/who_is_auditor")
    assert code(req) == 500 and "corrupt auditor vote" in error(req)


@pytest.mark.parametrize(
    "path, method, allowed",
    [
        ("who_is_auditor", b"PUT", "GET, HEAD"),
        ("trigger_audit", b"GET", "PUT"),
        ("lost_bookie_recovery_delay", b"DELETE", "GET, HEAD, PUT"),
        ("list_under_replicated_ledger", b"POST", "GET, HEAD"),
        ("status", b"POST", "GET, HEAD, PUT"),
        ("decommission", b"GET", "PUT"),
        ("bookie", b"GET", "PUT"),
    ],
)
def test_wrong_method_is_405(status, path, method, allowed):
    req = call(status, f"{AR}/{path}", method)
    assert code(req) == 405
    assert req.responseHeaders.getRawHeaders(b"allow") == [allowed.encode()]


def test_before_the_store_exists_the_answer_is_503():
    """A bookie starting up has no ZooKeeper store yet (``zk`` None)."""
    req = call(FakeStatus(), f"{AR}/who_is_auditor")
    assert code(req) == 503 and error(req) == "ZooKeeper is not connected"


def test_answer_waits_for_the_blocking_call(status):
    """The ZooKeeper call goes to run_blocking; the request stays open until it answers."""
    pending: list = []

    def later(fn, *args):
        d = defer.Deferred()
        pending.append((d, fn, args))
        return d

    req = call(status, f"{AR}/who_is_auditor", run_blocking=later)
    assert req.finished == 0 and req.written == []
    d, fn, args = pending[0]
    d.callback(fn(*args))
    assert req.finished == 1 and text(req) == "Auditor: 10.0.0.1:3181"


# -- trigger_audit ---------------------------------------------------------------------


def test_trigger_audit_rewrites_the_delay(status, store):
    req = call(status, f"{AR}/trigger_audit", b"PUT")
    assert (code(req), text(req)) == (200, "Success trigger audit.")
    assert delay_writes(store) == [30]


def test_trigger_audit_without_auditor_is_503():
    store = make_store(auditor=None)
    status = ZKStatus(store)
    req = call(status, f"{AR}/trigger_audit", b"PUT")
    assert code(req) == 503 and "No auditor elected" in error(req)
    assert delay_writes(store) == []


def test_trigger_audit_while_disabled_is_409(status, store):
    store.underreplication.disable()
    req = call(status, f"{AR}/trigger_audit", b"PUT")
    assert code(req) == 409 and "disabled" in error(req)
    assert delay_writes(store) == []


# -- lost_bookie_recovery_delay ----------------------------------------------------------


def test_get_delay(status):
    req = call(status, f"{AR}/lost_bookie_recovery_delay")
    assert (code(req), text(req)) == (200, "lostBookieRecoveryDelay value: 30")


def test_get_delay_missing_is_404():
    status = ZKStatus(make_store(delay=None))
    req = call(status, f"{AR}/lost_bookie_recovery_delay")
    assert code(req) == 404 and "not set" in error(req)


def test_put_delay(status, store):
    req = call(status, f"{AR}/lost_bookie_recovery_delay", b"PUT", {"delay_seconds": 120})
    assert (code(req), text(req)) == (200, "Success set lostBookieRecoveryDelay to 120")
    assert store.underreplication.lost_bookie_recovery_delay() == 120


@pytest.mark.parametrize(
    "raw, word",
    [
        (b"", "JSON like"),
        (b"{", "JSON like"),
        (b"[]", "JSON like"),
        (b'{"delay": 5}', "JSON like"),
        (b'{"delay_seconds": "5"}', "JSON like"),
        (b'{"delay_seconds": true}', "JSON like"),
        (b'{"delay_seconds": 1.5}', "JSON like"),
        (b'{"delay_seconds": -1}', "between 0 and"),
        (b'{"delay_seconds": 2147483648}', "between 0 and"),
    ],
)
def test_put_delay_bad_body_is_400(status, store, raw, word):
    req = call(status, f"{AR}/lost_bookie_recovery_delay", b"PUT", raw)
    assert code(req) == 400 and word in error(req)
    assert delay_writes(store) == []


# -- list_under_replicated_ledger ----------------------------------------------------------


def listing(status, **params):
    req = call(status, f"{AR}/list_under_replicated_ledger", args={k.encode(): [v.encode()] for k, v in params.items()})
    return code(req), (json.loads(text(req)) if code(req) == 200 else error(req))


def test_list_under_replicated(status):
    assert listing(status) == (200, [5, 9, 12])


def test_list_under_replicated_filters(status):
    assert listing(status, missingreplica="b1:3181") == (200, [5, 9])
    assert listing(status, missingreplica="b1:3181", excludingmissingreplica="b2:3181") == (200, [5])
    assert listing(status, excludingmissingreplica="b1:3181") == (200, [12])
    assert listing(status, missingreplica=" ") == (200, [5, 9, 12])  # blank: no filter, as Java


def test_list_under_replicated_with_missing_replicas(status):
    assert listing(status, printmissingreplica="", missingreplica="b1:3181") == (
        200,
        {"5": ["b1:3181"], "9": ["b1:3181", "b2:3181"]},
    )


def test_list_under_replicated_none_is_404(status, store):
    assert listing(status, missingreplica="nobody:1") == (404, "No under replicated ledgers found")
    for mark in list(store.underreplication.marks()):
        store.underreplication.mark_replicated(mark.ledger_id, 0)
    assert listing(status) == (404, "No under replicated ledgers found")


# -- status ------------------------------------------------------------------------------


def test_status_get_and_put(status, store):
    assert json.loads(text(call(status, f"{AR}/status"))) == {"enabled": True}
    req = call(status, f"{AR}/status", b"PUT", args={b"enabled": [b"false"]})
    assert (code(req), json.loads(text(req))) == (
        200,
        {"enabled": False},
    ) and store.underreplication.is_enabled() is False
    req = call(status, f"{AR}/status", b"PUT", args={b"enabled": [b"False"]})  # idempotent
    assert json.loads(text(req)) == {"enabled": False}
    req = call(status, f"{AR}/status", b"PUT", args={b"enabled": [b"TRUE"]})
    assert json.loads(text(req)) == {"enabled": True} and store.underreplication.is_enabled() is True


@pytest.mark.parametrize("args", [{}, {b"enabled": [b"yes"]}, {b"enabled": [b""]}, {b"enabled": [b"true", b"false"]}])
def test_status_put_bad_parameter_is_400(status, store, args):
    req = call(status, f"{AR}/status", b"PUT", args=args)
    assert code(req) == 400 and "'enabled' must be true or false" in error(req)
    assert store.underreplication.is_enabled() is True


# -- decommission and bookie ---------------------------------------------------------------


def test_decommission_triggers_the_audit(status, store):
    req = call(status, f"{AR}/decommission", b"PUT", {"bookie_src": "10.0.0.9:3181"})
    assert (code(req), text(req)) == (200, "Success send decommission Bookie command 10.0.0.9:3181")
    assert delay_writes(store) == [30]


@pytest.mark.parametrize("writable, readonly", [(["10.0.0.9:3181"], []), ([], ["10.0.0.9:3181"])])
def test_decommission_of_a_running_bookie_is_409(status, store, writable, readonly):
    for bookie in writable:
        store.registration.register(bookie)
    for bookie in readonly:
        store.registration.register(bookie, readonly=True)
    req = call(status, f"{AR}/decommission", b"PUT", {"bookie_src": "10.0.0.9:3181"})
    assert code(req) == 409 and "stop it before" in error(req)
    assert delay_writes(store) == []


def test_decommission_without_auditor_is_503():
    store = make_store(auditor=None)
    status = ZKStatus(store)
    req = call(status, f"{AR}/decommission", b"PUT", {"bookie_src": "10.0.0.9:3181"})
    assert code(req) == 503 and delay_writes(store) == []


@pytest.mark.parametrize(
    "raw, word",
    [
        (b"nope", "JSON like"),
        (b"{}", "JSON like"),
        (b'{"bookie_src": ["a:1"]}', "JSON like"),
        (b'{"bookie_src": "bad id!"}', "invalid bookie id"),
    ],
)
def test_decommission_bad_body_is_400(status, store, raw, word):
    req = call(status, f"{AR}/decommission", b"PUT", raw)
    assert code(req) == 400 and word in error(req)


def test_recover_bookie_is_501(status):
    req = call(status, f"{AR}/bookie", b"PUT", {"bookie_src": ["10.0.0.9:3181"], "delete_cookie": False})
    assert code(req) == 501 and "bkctl recover" in error(req)


# -- the full stack ----------------------------------------------------------------------


def test_stack_put_delay_and_list(store):
    site = make_site(ZKStatus(store), reactor=task.Clock(), run_blocking=inline)
    body = b'{"delay_seconds": 7}'
    status_code, _headers, answer = exchange(
        site,
        b"PUT " + AR.encode() + b"/lost_bookie_recovery_delay HTTP/1.1\r\n"
        b"Host: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
    )
    assert (status_code, answer) == (200, b"Success set lostBookieRecoveryDelay to 7")
    status_code, _headers, answer = exchange(
        site,
        b"GET " + AR.encode() + b"/list_under_replicated_ledger?missingreplica=b3:3181 HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert (status_code, json.loads(answer)) == (200, [12])


# -- /metrics -------------------------------------------------------------------------------


class FakeDaemon:
    def __init__(self):
        self.stats = AutoRecoveryStats()
        self.is_auditor = False
        self.pid = None
        self.restarts = 0


def scrape(metrics):
    lines = own_text(metrics).splitlines()
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in lines if line and not line.startswith("#")}, lines


def test_refreshed_asks_at_most_every_max_age_and_off_the_render():
    clock = task.Clock()
    pending: list[defer.Deferred] = []
    computed = []

    def run_blocking(fn):
        d = defer.Deferred()
        pending.append(d)
        d.addCallback(lambda _: fn())
        return d

    value = Refreshed(lambda: computed.append(1) or 42, run_blocking, clock, max_age=5)
    assert value() is None and len(pending) == 1 and computed == []  # started, not run inline
    assert value() is None and len(pending) == 1  # one refresh at a time
    pending[0].callback(None)
    assert value() == 42 and len(pending) == 1
    clock.advance(4.9)
    assert value() == 42 and len(pending) == 1
    clock.advance(0.1)
    assert value() == 42 and len(pending) == 2


def test_refreshed_forgets_the_value_on_failure(caplog):
    clock = task.Clock()
    outcomes = [7, ZKUnavailable("gone")]

    def compute():
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    value = Refreshed(compute, inline, clock, max_age=1)
    assert value() == 7
    clock.advance(1)
    assert value() is None
    assert "gone" in caplog.text


def test_autorecovery_metrics():
    metrics, daemon = Metrics(), FakeDaemon()
    current = {"daemon": None}
    count = {"value": None}
    register_autorecovery(metrics, lambda: current["daemon"], lambda: count["value"])
    samples, lines = scrape(metrics)
    assert "autorecovery_num_under_replicated_ledgers" not in samples  # not known yet: no sample
    assert "# TYPE autorecovery_num_under_replicated_ledgers gauge" in lines
    assert samples["autorecovery_is_auditor"] == 0 and samples["autorecovery_audits_total"] == 0
    assert samples["autorecovery_daemon_running"] == 0 and samples["autorecovery_daemon_restarts_total"] == 0

    current["daemon"], count["value"] = daemon, 3
    daemon.is_auditor = True
    daemon.pid, daemon.restarts = 4242, 2
    s = daemon.stats
    s.elections_won, s.audits, s.ledgers_marked, s.failures = 1, 4, 6, 2
    s.ledgers_rereplicated, s.entries_rereplicated, s.bytes_rereplicated = 5, 500, 51200
    s.recovery_seconds_sum, s.recovery_seconds_count = 12.5, 5
    samples, lines = scrape(metrics)
    assert samples["autorecovery_num_under_replicated_ledgers"] == 3
    assert samples["autorecovery_is_auditor"] == 1
    assert samples["autorecovery_daemon_running"] == 1 and samples["autorecovery_daemon_restarts_total"] == 2
    assert samples["autorecovery_elections_won_total"] == 1
    assert samples["autorecovery_audits_total"] == 4
    assert samples["autorecovery_ledgers_marked_total"] == 6
    assert samples["autorecovery_num_full_or_partial_ledgers_replicated_total"] == 5
    assert samples["autorecovery_num_entries_written_total"] == 500
    assert samples["autorecovery_num_bytes_written_total"] == 51200
    assert samples["autorecovery_rereplicate_failures_total"] == 2
    assert samples["autorecovery_ledger_recovery_seconds_sum"] == 12.500000
    assert samples["autorecovery_ledger_recovery_seconds_count"] == 5
    assert "# TYPE autorecovery_audits_total counter" in lines
    assert "# TYPE autorecovery_daemon_restarts_total counter" in lines
    daemon.pid = None  # ended, not yet started again
    assert scrape(metrics)[0]["autorecovery_daemon_running"] == 0
    assert "# TYPE autorecovery_ledger_recovery_seconds summary" in lines


def test_worker_records_mark_to_replicated_time():
    from types import SimpleNamespace

    from bkctl.wire.autorecovery.config import AutoRecoveryConfig
    from bkctl.wire.autorecovery.worker import ReplicationWorker

    clock = task.Clock()
    clock.advance(1_000_000)
    stats = AutoRecoveryStats()
    worker = ReplicationWorker(SimpleNamespace(store=None), AutoRecoveryConfig(), clock, stats, "host")
    worker._marked_at.update({1: 1_000_000_000 - 90_000, 2: None, 3: 1_000_000_000 + 5_000})
    for ledger_id in (1, 2, 3):
        worker._record_recovery_time(ledger_id)
    # ledger 1: marked 90 s ago; 2: no ctime in its mark; 3: the marking host's clock is ahead
    assert (stats.recovery_seconds_sum, stats.recovery_seconds_count) == (90.0, 1)
    assert worker._marked_at == {}


def test_stack_print_missing_replica_flag_without_value(store):
    """Java tests the key's presence: ``?printmissingreplica`` alone (twisted drops it from args)."""
    site = make_site(ZKStatus(store), reactor=task.Clock(), run_blocking=inline)
    status_code, _headers, answer = exchange(
        site,
        b"GET " + AR.encode() + b"/list_under_replicated_ledger?printmissingreplica&missingreplica=b3:3181"
        b" HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert (status_code, json.loads(answer)) == (200, {"12": ["b3:3181"]})
