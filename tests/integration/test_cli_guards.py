"""Guards on destructive commands (issue 23 items 1, 2 and 4), through the real CLI against a real
ZooKeeper and real bookieds: metaformat under running bookies, trigger-audit with nothing to
trigger, replace-id to an id the cluster does not know, and dry runs that check what real runs check."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from bkctl.sandbox.zookeeper import free_port
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import bkctl
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(240)
AR = "/api/v1/autorecovery"


def put(port: int, path: str) -> tuple[int, str]:
    """PUT to bookied's HTTP admin: (status, body)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"", method="PUT")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_metaformat_refuses_while_a_bookie_runs(bookie_cluster, metadata_uri, zkstore):
    [bookie] = bookie_cluster(1)
    ledger_id, _ = zkstore.ledgers.create(LedgerMetadata.new([bookie.bookie_id], 1, 1))
    old_instance = zkstore.cluster.instance_id()

    r = bkctl(metadata_uri, "metaformat", "--force")
    assert r.returncode == 4
    assert bookie.bookie_id in one_line(r) and "--with-registered-bookies" in r.stderr
    assert zkstore.ledgers.exists(ledger_id) and zkstore.cluster.instance_id() == old_instance

    r = bkctl(metadata_uri, "--json", "metaformat", "--force", "--with-registered-bookies")
    assert r.returncode == 0, r.stderr
    assert not zkstore.ledgers.exists(ledger_id) and zkstore.cluster.instance_id() != old_instance

    bookie.stop()
    zkstore.registration.unregister(bookie.bookie_id)  # its session may outlive it for a while
    assert bkctl(metadata_uri, "metaformat", "--force").returncode == 0


def test_trigger_audit_refuses_as_the_http_endpoint_does(bookie_cluster, metadata_uri, zkstore):
    port = free_port()
    bookie_cluster(1, httpServerEnabled="true", httpServerPort=port, httpServerHost="127.0.0.1")
    assert zkstore.underreplication.lost_bookie_recovery_delay() is None

    # no autorecovery daemon: no auditor
    r = bkctl(metadata_uri, "autorecovery", "trigger-audit")
    assert r.returncode == 5 and "no auditor" in one_line(r)
    status, text = put(port, f"{AR}/trigger_audit")
    assert status == 503 and "No auditor elected" in json.loads(text)["error"]
    assert zkstore.underreplication.lost_bookie_recovery_delay() is None  # never written

    # disabled: refused by both, whatever the auditor
    zkstore.underreplication.disable()
    r = bkctl(metadata_uri, "autorecovery", "trigger-audit")
    assert r.returncode == 4 and "disabled" in one_line(r)
    assert put(port, f"{AR}/trigger_audit")[0] == 409
    assert zkstore.underreplication.lost_bookie_recovery_delay() is None


def test_trigger_audit_rewrites_the_auditors_delay_unchanged(bookie_cluster, metadata_uri, zkstore, zk_client):
    bookie_cluster(1, autoRecoveryDaemonEnabled="true", lostBookieRecoveryDelay=600)
    wait_for(
        lambda: zkstore.underreplication.lost_bookie_recovery_delay() == 600, timeout=60, what="the auditor's delay"
    )
    delay_node = zkstore.root + "/underreplication/lostBookieRecoveryDelay"
    before = zk_client.get(delay_node)[1].version
    r = bkctl(metadata_uri, "--json", "autorecovery", "trigger-audit")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["lost_bookie_recovery_delay"] == 600 and doc["auditor"] == zkstore.auditor.current()
    value, stat = zk_client.get(delay_node)
    assert value == b"600" and stat.version == before + 1  # rewritten: the auditor's watch fires


def test_replace_id_takes_only_a_known_well_formed_id(bookie_cluster, metadata_uri, zkstore):
    [running] = bookie_cluster(1)
    dead, unknown = "10.0.0.1:3181", "10.0.0.9:3181"
    ledger_id, _ = zkstore.ledgers.create(LedgerMetadata.new([dead, running.bookie_id], 2, 2))

    for to in ("junk", unknown):  # never registered, no cookie
        for extra in ((), ("--dry-run",)):
            r = bkctl(metadata_uri, "bookie", "replace-id", dead, to, "--force", *extra)
            assert r.returncode == 3, (to, extra, r.stderr)
            assert "unknown bookie" in one_line(r) and "--allow-unknown-id" in r.stderr
    assert "no port" in bkctl(metadata_uri, "bookie", "replace-id", dead, "junk", "--force").stderr
    assert bkctl(metadata_uri, "bookie", "replace-id", dead, "bad id!", "--force").returncode == 2
    assert zkstore.ledgers.read(ledger_id)[0].bookies == (dead, running.bookie_id)

    # the dry run refuses a running source exactly as the real run does
    for extra in ((), ("--dry-run",)):
        r = bkctl(
            metadata_uri, "bookie", "replace-id", running.bookie_id, unknown, "--force", "--allow-unknown-id", *extra
        )
        assert r.returncode == 4 and "registered" in one_line(r), extra

    r = bkctl(metadata_uri, "--json", "bookie", "replace-id", dead, unknown, "--force", "--allow-unknown-id")
    assert r.returncode == 0, r.stderr
    assert zkstore.ledgers.read(ledger_id)[0].bookies == (unknown, running.bookie_id)
