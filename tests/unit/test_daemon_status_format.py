"""The daemons' status nodes as named types (wire/autorecovery/status.py): a node a daemon of
the previous release wrote decodes and encodes again to the same bytes, a node this release's
daemons write has the same keys, and a node of another version that is partial or unreadable
is read as far as it goes -- ``autorecovery status`` never fails on it."""

from __future__ import annotations

import json

import pytest
from twisted.internet import task

from bkctl.ops.autorecovery import autorecovery_report, query_status
from bkctl.wire.autorecovery import status as S
from bkctl.wire.autorecovery.auditor import Auditor
from bkctl.wire.autorecovery.config import AutoRecoveryConfig
from bkctl.wire.autorecovery.worker import ReplicationWorker
from tests.support.fake_store import FakeMetadataStore

NOW = 1_795_924_700_000
REASON = "need 1 writable bookie outside the ensemble to replace b:3181, found 0"

#: as the previous release's daemons wrote them (a sandbox's nodes, two bookies killed)
OLD_AUDITOR = (
    b'{"auditor": "a:3181", "delay": 0, "disabled": false, "held_back": 0, "lost": [{"bookie_id": "b:3181", '
    b'"due": null, "lost_since": 1795924690369, "named_by": 6, "not_waited": "lostBookieRecoveryDelay is 0"}], '
    b'"updated": 1795924690369}'
)
OLD_WORKER = (
    b'{"active": {"9": 1795924691500}, "attempts": {"2": [{"at": 1795924691099, "cause": "no-bookie", "reason": "'
    + REASON.encode()
    + b'", "retry_at": 1795924991099}, {"at": 1795924691199, "reason": "old", "retry_at": 1795924691199}]}, '
    b'"current": 9, "done": [{"at": 1795924664608, "ledger_id": 0, "result": "replicated"}, {"at": 1795924664633, '
    b'"ledger_id": 4, "lost_entries": 3, "result": "replicated"}], "held": [2], "holds": {"2": {"since": '
    b'1795924691099, "until": 1795924991099, "why": "failed"}}, "host": "vm", "last_failure": {"at": 1795924691199, '
    b'"ledger_id": 2, "lock_kept": 0, "reason": "old"}, "updated": 1795924691137, "worker": "a:3181"}'
)


def test_a_node_of_the_previous_release_decodes_and_encodes_again_byte_for_byte():
    auditor = S.AuditorStatus.from_json(json.loads(OLD_AUDITOR))
    worker = S.WorkerStatus.from_json(json.loads(OLD_WORKER))
    assert auditor is not None and worker is not None
    assert S.encode(auditor) == OLD_AUDITOR and S.encode(worker) == OLD_WORKER
    assert auditor.lost == (S.AuditedBookie("b:3181", 1795924690369, None, "lostBookieRecoveryDelay is 0", 6),)
    assert worker.active == {9: 1795924691500} and worker.held == (2,) and worker.current == 9
    assert worker.holds == {2: S.Hold("failed", 1795924691099, 1795924991099)}
    assert worker.attempts is not None
    assert [a.cause for a in worker.attempts[2]] == ["no-bookie", None]
    assert worker.done[1] == S.FinishedRepair(4, 1795924664633, "replicated", 3)
    assert worker.last_failure == S.WorkerFailure(2, "old", 1795924691199, 0)


def _keys(doc: object, path: str = "") -> set[str]:
    """Every key path of a JSON document, a ledger id or a list index as ``*``."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            key = f"{path}/{'*' if k.isdigit() else k}"
            out |= {key} | _keys(v, key)
    elif isinstance(doc, list):
        for v in doc:
            out |= _keys(v, f"{path}/*")
    return out


class _Client:
    def __init__(self, store):
        self.store = store


def test_this_releases_daemons_write_the_same_keys():
    store = FakeMetadataStore().start()
    clock = task.Clock()
    clock.advance(NOW / 1000)
    cfg = AutoRecoveryConfig(lock_release_of_failed_ledger_grace_period=300.0)
    w = ReplicationWorker(_Client(store), cfg, clock, hostname="vm", worker_id="a:3181")  # type: ignore[arg-type]
    w.active[9], w.current, w.held[2] = NOW, 9, clock.callLater(300, lambda: None)
    w.holds[2] = S.Hold("failed", NOW, NOW + 300_000)
    w.attempts[2] = [S.FailedAttempt(REASON, NOW, NOW + 300_000, "no-bookie"), S.FailedAttempt("old", NOW, NOW)]
    w.done = [S.FinishedRepair(0, NOW, "replicated"), S.FinishedRepair(4, NOW, "replicated", 3)]
    w.last_failure = S.WorkerFailure(2, "old", NOW, 0)
    assert _keys(json.loads(S.encode(w.status()))) == _keys(json.loads(OLD_WORKER))
    auditor = Auditor(_Client(store), AutoRecoveryConfig(), clock, clock=clock.seconds, auditor_id="a:3181")  # type: ignore[arg-type]
    auditor.lost_since["b:3181"] = NOW / 1000
    assert _keys(json.loads(S.encode(auditor.status()))) == _keys(json.loads(OLD_AUDITOR))
    for call in clock.getDelayedCalls():
        call.cancel()


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b"null",
        b"{}",
        b'{"active": [1], "held": {"2": 1}, "holds": [], "attempts": {"x": 1, "2": [3, {"at": "soon"}]}}',
        b'{"worker": 7, "current": "9", "done": [null, {"ledger_id": true}], "last_failure": "boom"}',
        b'{"holds": {"2": {"why": 1, "until": "later"}}, "active": {"2": "now"}, "held": [2, "x"]}',
    ],
)
def test_a_partial_or_unreadable_node_is_read_as_far_as_it_goes(raw):
    store = FakeMetadataStore(now_ms=lambda: NOW).start()
    store.registration.register("a:3181")
    store.auditor.cast_vote("a:3181")
    store.underreplication.mark(2, ["b:3181"])
    store.underreplication.acquire("w1:3181")
    store.underreplication.publish_daemon_status(S.AUDITOR, raw)
    store.underreplication.publish_daemon_status(f"{S.WORKERS}/w1:3181", raw)
    read = S.read_daemon_status(store)
    report = autorecovery_report(store, NOW)
    [row] = query_status(store, NOW)
    assert row.repair.ledger_id == 2 and report.underreplicated == 1
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        assert read.auditor is None and read.workers == {}
        return
    assert (read.auditor is None) == (doc == {})  # an empty node is no status, as before
    worker = read.workers["w1:3181"]
    assert all(isinstance(lid, int) for lid in worker.active) and all(isinstance(lid, int) for lid in worker.held)
    assert worker.worker is None or isinstance(worker.worker, str)
    assert worker.current is None or isinstance(worker.current, int)
