"""`bkctl ledger delete` against a cluster that Pulsar uses: the guard that keeps a topic's,
a cursor's, a schema's and a too-young ledger, bulk deletes (ids, ranges, stdin, `pulsar orphans
--json` lines) with one confirmation and a summary, the dry run, `pulsar ledger-owner`'s
age caution, and the same owner check before `ledger fence`, `close` and `recover` touch an open
ledger that Pulsar writes.  Metadata only (no bookie is needed to delete metadata), on a real ZooKeeper."""

from __future__ import annotations

import json
import sys
import time

import pexpect
import pytest

from bkctl.ops.ledgers import live_writer
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.pulsar.managed_ledger import (
    APPLICATION,
    APPLICATION_KEY,
    COMPONENT,
    COMPONENT_KEY,
    COMPONENT_SCHEMA,
    CURSOR_KEY,
    MANAGED_LEDGER_KEY,
)
from tests.support.cli import bkctl
from tests.support.ledgers import ENSEMBLE
from tests.support.terminal import Terminal, bkctl_env, ended

NAME = "acme/prod/persistent/events"
TOPIC = "persistent://acme/prod/events"
DAY_MS = 24 * 3600 * 1000


def _pulsar_ledger(
    zkstore, ledger_id: int, *, age_ms: int = DAY_MS, cursor: str | None = None, component: str = COMPONENT
) -> None:
    custom = {
        APPLICATION_KEY: APPLICATION.encode(),
        COMPONENT_KEY: component.encode(),
        MANAGED_LEDGER_KEY: NAME.encode(),
    }
    if cursor:
        custom[CURSOR_KEY] = cursor.encode()
    md = LedgerMetadata.new(ENSEMBLE, ctime=int(time.time() * 1000) - age_ms, custom_metadata=custom)
    zkstore.ledgers.create(md, ledger_id=ledger_id)


@pytest.fixture
def cluster(metadata_uri, zkstore, zk_client, zk_namespace):
    """Ledgers 10, 11 (a topic's data), 12 (its cursor's ledger), 20-22 (old orphans), 30 (an orphan
    a minute old), 40 (a schema ledger), 50 and 51 (not Pulsar's)."""
    for lid in (10, 11, 20, 21, 22):
        _pulsar_ledger(zkstore, lid)
    _pulsar_ledger(zkstore, 12, cursor="audit")
    _pulsar_ledger(zkstore, 30, age_ms=60_000)
    _pulsar_ledger(zkstore, 40, component=COMPONENT_SCHEMA)
    for lid in (50, 51):
        zkstore.ledgers.create(LedgerMetadata.new(ENSEMBLE), ledger_id=lid)
    info = ml.ManagedLedgerInfo()
    for lid in (10, 11):
        info.ledgerInfo.add(ledgerId=lid, entries=5, size=500, timestamp=1)
    path = f"{zk_namespace}/managed-ledgers/{NAME}"
    zk_client.create(path, info.SerializeToString(), makepath=True)
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=12, markDeleteLedgerId=10, markDeleteEntryId=1)
    zk_client.create(f"{path}/audit", cursor.SerializeToString())
    return metadata_uri


def _exists(zkstore, *ids) -> dict[int, bool]:
    return {lid: zkstore.ledgers.exists(lid) for lid in ids}


def test_a_ledger_a_topic_lists_is_never_deleted_without_the_override(cluster, zkstore):
    refused = bkctl(cluster, "ledger", "delete", "10", "--force")
    assert refused.returncode == 4, refused.stderr
    assert f"ledger 10 refused: a data ledger of topic {TOPIC}" in refused.stderr
    assert zkstore.ledgers.exists(10)
    cursor = bkctl(cluster, "ledger", "delete", "12", "--force")
    assert cursor.returncode == 4 and f"the ledger of cursor audit of topic {TOPIC}" in cursor.stderr
    schema = bkctl(cluster, "ledger", "delete", "40", "--force")
    assert schema.returncode == 4 and "a Pulsar schema ledger" in schema.stderr
    young = bkctl(cluster, "ledger", "delete", "30", "--force")
    assert young.returncode == 4 and "an orphan, but created" in young.stderr and "may be listed soon" in young.stderr
    assert _exists(zkstore, 10, 12, 30, 40) == {10: True, 12: True, 30: True, 40: True}

    forced = bkctl(cluster, "--json", "ledger", "delete", "10", "30", "--force", "--even-if-owned")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["deleted"] == [10, 30]
    assert _exists(zkstore, 10, 30) == {10: False, 30: False}


def test_bulk_delete_deletes_the_rest_and_names_each_refusal(cluster, zkstore):
    done = bkctl(cluster, "--json", "ledger", "delete", "10-22", "50", "99", "--force")
    assert done.returncode == 4, done.stderr  # a refusal outranks a missing id
    doc = json.loads(done.stdout)
    assert doc["deleted"] == [20, 21, 22, 50]
    assert [(r["ledger_id"], r["owner"]) for r in doc["refused"]] == [(10, "topic"), (11, "topic"), (12, "cursor")]
    assert doc["not_found"] == [99]  # named on its own; a range's gaps are not "not found"
    assert _exists(zkstore, 10, 11, 12, 20, 21, 22, 50, 51) == {
        10: True,
        11: True,
        12: True,
        20: False,
        21: False,
        22: False,
        50: False,
        51: True,
    }


def test_orphans_json_piped_into_delete(cluster, zkstore):
    orphans = bkctl(cluster, "--json", "pulsar", "orphans")
    assert orphans.returncode == 0, orphans.stderr
    assert [json.loads(line)["ledger_id"] for line in orphans.stdout.splitlines()] == [20, 21, 22]
    dry = bkctl(cluster, "--json", "ledger", "delete", "-", "--dry-run", stdin=orphans.stdout)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {
        "dry_run": True,
        "deleted": [],
        "would_delete": [20, 21, 22],
        "refused": [],
        "not_found": [],
        "even_if_owned": [],
    }
    assert _exists(zkstore, 20, 21, 22) == {20: True, 21: True, 22: True}
    done = bkctl(cluster, "ledger", "delete", "-", "--force", stdin=orphans.stdout)
    assert done.returncode == 0, done.stderr
    assert "deleted 3 ledgers" in done.stdout
    assert _exists(zkstore, 20, 21, 22) == {20: False, 21: False, 22: False}


def test_a_dry_run_exits_as_the_run_would_and_delete_takes_the_orphans_age(cluster, zkstore):
    orphans = bkctl(cluster, "--json", "pulsar", "orphans", "--older-than", "30s")
    assert [json.loads(line)["ledger_id"] for line in orphans.stdout.splitlines()] == [20, 21, 22, 30]
    dry = bkctl(cluster, "--json", "ledger", "delete", "-", "--dry-run", stdin=orphans.stdout)
    assert dry.returncode == 4, dry.stderr  # 30 is younger than delete's hour: refused, as the run would
    assert "would refuse 1 ledger that Pulsar uses" in dry.stderr
    assert json.loads(dry.stdout)["would_delete"] == [20, 21, 22]
    same = bkctl(cluster, "--json", "ledger", "delete", "-", "--dry-run", "--older-than", "30s", stdin=orphans.stdout)
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["would_delete"] == [20, 21, 22, 30]
    missing = bkctl(cluster, "ledger", "delete", "50", "777", "--dry-run")
    assert missing.returncode == 3 and "1 ledger not found: 777" in missing.stderr
    junk = bkctl(cluster, "ledger", "delete", "50", "--older-than", "soon", "--dry-run")
    assert junk.returncode == 2 and "--older-than: not a duration" in junk.stderr
    assert _exists(zkstore, 20, 30, 50) == {20: True, 30: True, 50: True}


def test_commas_as_export_takes_them_and_the_override_names_what_it_broke(cluster, zkstore):
    done = bkctl(cluster, "--json", "ledger", "delete", "50,51", "20-21,22", "--force")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["deleted"] == [20, 21, 22, 50, 51]
    forced = bkctl(cluster, "--json", "ledger", "delete", "10,12", "--force", "--even-if-owned")
    assert forced.returncode == 0, forced.stderr
    assert f"ledger 10 deleted although it was a data ledger of topic {TOPIC} (--even-if-owned)" in forced.stderr
    assert f"ledger 12 deleted although it was the ledger of cursor audit of topic {TOPIC}" in forced.stderr
    doc = json.loads(forced.stdout)
    assert [(o["ledger_id"], o["owner"], o["topic"]) for o in doc["even_if_owned"]] == [
        (10, "topic", TOPIC),
        (12, "cursor", TOPIC),
    ]
    assert _exists(zkstore, 10, 12, 50) == {10: False, 12: False, 50: False}


def test_one_confirmation_for_many_and_refusal_without_a_terminal(cluster, zkstore):
    refused = bkctl(cluster, "ledger", "delete", "50", "51")  # stdin is not a terminal: no prompt
    assert refused.returncode == 2 and "refusing to delete 2 ledgers without --force" in refused.stderr
    assert _exists(zkstore, 50, 51) == {50: True, 51: True}


@pytest.mark.parametrize(
    "words, message",
    [
        (["abc"], "argument: not a ledger id or range A-B: 'abc'"),
        (["9-3"], "not a ledger id or range A-B: '9-3'"),
    ],
)
def test_junk_ids_are_a_usage_error(cluster, words, message):
    done = bkctl(cluster, "ledger", "delete", *words, "--force")
    assert done.returncode == 2 and message in done.stderr


def test_junk_on_stdin_names_its_line(cluster, zkstore):
    done = bkctl(cluster, "ledger", "delete", "-", "--force", stdin='50\n{"id": 3}\n')
    assert done.returncode == 2 and "stdin line 2: a JSON line without an integer ledger_id" in done.stderr
    assert zkstore.ledgers.exists(50)


def test_one_missing_ledger_is_exit_3_before_asking(cluster):
    done = bkctl(cluster, "ledger", "delete", "777")
    assert done.returncode == 3 and "no such ledger: 777" in done.stderr


def test_ledger_owner_cautions_about_a_young_orphan(cluster):
    young = bkctl(cluster, "--json", "pulsar", "ledger-owner", "30")
    doc = json.loads(young.stdout)
    assert doc["owner"] == "orphan" and doc["age_seconds"] < 3600 and "may be listed soon" in doc["caution"]
    human = bkctl(cluster, "pulsar", "ledger-owner", "30")
    assert "caution: created" in human.stdout
    old = json.loads(bkctl(cluster, "--json", "pulsar", "ledger-owner", "20").stdout)
    assert old["owner"] == "orphan" and old["caution"] is None and old["age_seconds"] > 3600


# -- fence, close and recover on a ledger Pulsar writes (the same owner check) --------------


@pytest.mark.parametrize("verb", ["fence", "close", "recover"])
def test_an_open_ledger_pulsar_writes_is_not_fenced_on_a_pipe_without_force(cluster, zkstore, verb):
    data = bkctl(cluster, "ledger", verb, "10")  # stdin is not a terminal: no prompt, a refusal
    assert data.returncode == 2, data.stderr
    assert f"ledger 10 is the open ledger of topic {TOPIC}: its broker's next add fails" in data.stderr
    assert f"refusing to {verb} ledger 10 without --force" in data.stderr
    cursor = bkctl(cluster, "ledger", verb, "12")
    assert cursor.returncode == 2 and f"the open ledger of cursor audit of topic {TOPIC}" in cursor.stderr
    young = bkctl(cluster, "ledger", verb, "30")
    assert young.returncode == 2 and "a Pulsar ledger that no topic lists yet, created" in young.stderr
    assert all(not zkstore.ledgers.read(lid)[0].is_closed for lid in (10, 12, 30))


def test_the_guard_asks_on_a_terminal_and_lets_others_pass(cluster, zkstore, tmp_path):
    term = Terminal(
        [sys.executable, "-m", "bkctl", "-m", cluster, "ledger", "close", "10"], bkctl_env(tmp_path, NO_COLOR="1")
    )
    try:
        term.expect(f"ledger 10 is the open ledger of topic {TOPIC}: its broker's next add fails")
        term.expect(r"Close it anyway\? \[y/N\]")
        term.line("n")
        term.expect("declined: did not close ledger 10")
        term.child.expect(pexpect.EOF)
        assert ended(term.child).exitstatus == 1
    finally:
        term.close()
    assert not zkstore.ledgers.read(10)[0].is_closed

    assert live_writer(zkstore, 50) is None  # not Pulsar's: closed as before, without a question
    # fence and recover stop whatever writes an open ledger: asked about whoever it is
    assert live_writer(zkstore, 50, any_writer=True).startswith("an open ledger: whatever writes it")
    assert live_writer(zkstore, 20, any_writer=True).startswith("an open ledger: whatever writes it")
    for verb in ("fence", "recover"):
        refused = bkctl(cluster, "ledger", verb, "50")
        assert refused.returncode == 2 and "ledger 50 is an open ledger: whatever writes it" in refused.stderr
        assert f"refusing to {verb} ledger 50 without --force" in refused.stderr
    assert not zkstore.ledgers.read(50)[0].is_closed
    assert live_writer(zkstore, 20) is None  # an old orphan: no broker writes it
    assert live_writer(zkstore, 777) is None  # missing: the command says so in its own words
    md, version = zkstore.ledgers.read(11)
    zkstore.ledgers.update(11, md.closed(4, 500), version)
    assert live_writer(zkstore, 11) is None  # closed: nothing left to fence
