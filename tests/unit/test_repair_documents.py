"""The ``--json`` documents of the repair model, byte for byte (issue 76: the rows became named
types; the documents users' scripts parse stay what they were): ``query-status``/``underreplicated``
lines, ``autorecovery status``, and a decommission's rows of ledgers the daemons left -- with the
keys a row has only sometimes (``note``; an old daemon's attempt has no ``cause``)."""

from __future__ import annotations

import json

import pytest

from bkctl.app import encode_json
from bkctl.ops.autorecovery import autorecovery_report, query_status, underreplicated
from bkctl.ops.recovery import daemon_rows, left_rows, repair_states
from tests.support.fake_store import FakeMetadataStore

NOW = 1_800_000_000_000


@pytest.fixture
def store(monkeypatch):
    monkeypatch.setattr("time.time", lambda: NOW / 1000)
    s = FakeMetadataStore(now_ms=lambda: NOW - 42_000).start()
    for b in ("a:3181", "b:3181"):
        s.registration.register(b)
    for lid in (1, 2, 3):
        s.underreplication.mark(lid, ["c:3181"])
    s.underreplication.mark(4, ["j:3181", "c:3181"])
    return s


def _written(store, name, doc):
    """A status node as a daemon of an earlier release wrote it."""
    store.underreplication.publish_daemon_status(name, json.dumps(doc, sort_keys=True).encode("utf-8"))


def _old_daemon(store):
    """A worker of before the attempts were kept: its last failure only (no cause)."""
    store.auditor.cast_vote("w1:3181")
    store.underreplication.acquire("w2:3181")  # ledger 1
    _written(
        store,
        "workers/w2:3181",
        {"worker": "w2:3181", "current": 1, "held": [1], "last_failure": {"ledger_id": 1, "reason": "old", "at": 5}},
    )
    _written(
        store,
        "workers/w1:3181",
        {
            "worker": "w1:3181",
            "host": "vm1",
            "updated": NOW,
            "active": {},
            "holds": {},
            "attempts": {"2": [{"reason": "boom\nmore", "cause": "no-bookie", "at": 7, "retry_at": 8}]},
        },
    )


OLD_ATTEMPT = '{"at":5,"reason":"old","retry_at":null,"worker":"w2:3181"}'
HELD = (
    '{"attempts":[' + OLD_ATTEMPT + '],"ctime":null,"last_failure":' + OLD_ATTEMPT + ',"ledger_id":1,'
    '"lock":"w2:3181","missing_replicas":["c:3181"],"since":null,"state":"held-failed",'
    '"text":"held after a failed attempt by w2:3181: old","until":null,"worker":"w2:3181"}'
)
NEW_ATTEMPT = '{"at":7,"cause":"no-bookie","reason":"boom\\nmore","retry_at":8,"worker":"w1:3181"}'


def test_query_status_and_underreplicated_lines(store):
    _old_daemon(store)
    assert [encode_json(r) for r in query_status(store, NOW)] == [HELD]
    lines = [encode_json(r) for r in underreplicated(store, exclude=["j:3181"], now_ms=NOW)]
    assert lines == [
        HELD,
        '{"attempts":[' + NEW_ATTEMPT + '],"ctime":null,"last_failure":' + NEW_ATTEMPT + ',"ledger_id":2,'
        '"lock":null,"missing_replicas":["c:3181"],"since":null,"state":"waiting-worker",'
        '"text":"waiting for a worker; last failed attempt by w1:3181: boom\\nmore","until":null,"worker":null}',
        '{"attempts":[],"ctime":null,"last_failure":null,"ledger_id":3,"lock":null,"missing_replicas":["c:3181"],'
        '"since":null,"state":"waiting-worker","text":"waiting for a worker","until":null,"worker":null}',
    ]


def test_a_note_is_a_key_only_when_there_is_one(store):
    """No worker of ours runs (Java's keep no status): a waiting ledger says so under ``note``."""
    store.auditor.cast_vote("java-bookie:3181")
    [row, *_] = underreplicated(store, now_ms=NOW)
    assert encode_json(row) == (
        '{"attempts":[],"ctime":null,"last_failure":null,"ledger_id":1,"lock":null,"missing_replicas":["c:3181"],'
        '"note":"no worker of ours is running (Java\'s keep no status)","since":null,"state":"waiting-worker",'
        '"text":"waiting for a worker (no worker of ours is running (Java\'s keep no status))","until":null,'
        '"worker":null}'
    )


def test_the_status_document(store):
    _old_daemon(store)
    store.cookies.put("c:3181", b"cookie")
    doc = json.loads(encode_json(autorecovery_report(store, NOW)))
    assert sorted(doc) == [
        "auditor",
        "auditor_keeps_status",
        "auditor_waits_for",
        "enabled",
        "ledgers",
        "lost_bookie_recovery_delay",
        "lost_bookies",
        "lost_entries",
        "underreplicated",
        "workers",
        "workers_note",
    ]
    assert encode_json(doc["ledgers"][0]) == HELD
    assert doc["workers"] == [
        {"worker": "w1:3181", "host": "vm1", "active": [], "holds": 0, "updated": NOW},
        {"worker": "w2:3181", "host": None, "active": [], "holds": 0, "updated": None},
    ]
    assert doc["lost_bookies"][0] == {
        "bookie_id": "c:3181",
        "cookie": True,
        "named_by": None,
        "under_replicated": 4,
        "marked": False,
        "lost_since": None,
        "due": None,
        "due_in": None,
        "not_waited": None,
        "seen_by_auditor": False,
        "why": "has a cookie, not registered",
    }
    assert doc["workers_note"] is None and doc["lost_entries"] == []


def test_a_decommissions_rows_of_ledgers_the_daemons_left(store):
    _old_daemon(store)
    rows = daemon_rows(repair_states(store, [1, 2], "c:3181"))
    assert encode_json(rows[0]) == (
        '{"cause":"other","error":"held after a failed attempt by w2:3181: old","ledger_id":1,'
        '"reason":"w2:3181: old","repair":{"attempts":[' + OLD_ATTEMPT + '],"ctime":null,"ledger_id":1,'
        '"lock":"w2:3181","missing_replicas":["c:3181"],"reason":"old","since":null,"state":"held-failed",'
        '"text":"held after a failed attempt by w2:3181: old","until":null,"worker":"w2:3181"},"status":"waiting"}'
    )
    left = left_rows([*rows, 9], {2: "no other copy"})
    assert [encode_json(r) for r in left] == [
        '{"cause":"lost","ledger_id":2,"reason":"no other copy"}',
        '{"cause":"appeared","ledger_id":9,"reason":"its metadata names the bookie; run decommission again"}',
        '{"cause":"other","ledger_id":1,"reason":"w2:3181: old"}',
    ]
