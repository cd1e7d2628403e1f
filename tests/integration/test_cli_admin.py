"""bkctl's metadata commands as one-shot processes against a real ZooKeeper: output, JSON, exit codes."""

import json
import os
import sys

from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import REPO, bkctl, json_lines
from tests.support.terminal import ended


def make_ledger(zkstore, bookies=("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"), closed_at=None):
    md = LedgerMetadata.new(list(bookies), 2, 2, password=b"pw", custom_metadata={"app": b"test"})
    if closed_at is not None:
        md = md.closed(closed_at, 10 * (closed_at + 1))
    ledger_id, _ = zkstore.ledgers.create(md)
    return ledger_id


def test_cluster_info_json_matches_the_metadata(metadata_uri, zkstore):
    zkstore.registration.register("127.0.0.1:3181")
    r = bkctl(metadata_uri, "--json", "cluster", "info")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["instance_id"] == zkstore.cluster.instance_id()
    assert doc["layout"]["manager"] == "hierarchical"
    assert doc["bookies"]["writable"] == ["127.0.0.1:3181"]
    assert doc["autorecovery"] == {
        "enabled": True,
        "lost_bookie_recovery_delay": None,
        "underreplicated": 0,
        "auditor": None,
    }


def test_autorecovery_disable_enable_at_the_spec_znode(metadata_uri, zkstore, zk_client):
    disable_node = zkstore.root + "/underreplication/disable"
    r = bkctl(metadata_uri, "autorecovery", "disable")
    assert r.returncode == 0 and "disabled" in r.stdout
    assert zk_client.exists(disable_node) is not None
    assert zk_client.get(disable_node)[0] == b""
    r = bkctl(metadata_uri, "--json", "autorecovery", "disable")
    assert json.loads(r.stdout) == {"enabled": False, "changed": False}
    assert json.loads(bkctl(metadata_uri, "--json", "autorecovery", "status").stdout)["enabled"] is False
    r = bkctl(metadata_uri, "autorecovery", "enable")
    assert r.returncode == 0 and zk_client.exists(disable_node) is None


def test_lost_bookie_delay_and_underreplicated(metadata_uri, zkstore, zk_client):
    assert bkctl(metadata_uri, "autorecovery", "lost-bookie-delay", "45").returncode == 0
    assert zk_client.get(zkstore.root + "/underreplication/lostBookieRecoveryDelay")[0] == b"45"
    ledger_id = make_ledger(zkstore)
    zkstore.underreplication.mark(ledger_id, ["127.0.0.1:3182"])
    rows = json_lines(bkctl(metadata_uri, "--json", "autorecovery", "underreplicated").stdout)
    [row] = rows
    assert {k: row[k] for k in ("ledger_id", "missing_replicas", "ctime", "worker", "state")} == {
        "ledger_id": ledger_id,
        "missing_replicas": ["127.0.0.1:3182"],
        "ctime": None,
        "worker": None,
        "state": "waiting-worker",
    }
    assert json.loads(bkctl(metadata_uri, "--json", "autorecovery", "underreplicated", "--count").stdout) == {
        "count": 1
    }
    assert bkctl(metadata_uri, "autorecovery", "lost-bookie-delay", "-5").returncode == 2

    other = make_ledger(zkstore)
    zkstore.underreplication.mark(other, ["127.0.0.1:3183", "127.0.0.1:3184"])
    assert zkstore.underreplication.acquire("worker-7", skip=[ledger_id])[0].ledger_id == other

    def listed(*args):
        out = bkctl(metadata_uri, "--json", "autorecovery", "underreplicated", *args)
        assert out.returncode == 0, out.stderr
        return [(r["ledger_id"], r["lock"]) for r in json_lines(out.stdout)]

    assert listed() == [(ledger_id, None), (other, "worker-7")]
    assert listed("--include-bookie", "127.0.0.1:3184") == [(other, "worker-7")]
    assert listed("--include-bookie", "127.0.0.1:3184", "--include-bookie", "127.0.0.1:3182") == [
        (ledger_id, None),
        (other, "worker-7"),
    ]
    assert listed("--exclude-bookie", "127.0.0.1:3183") == [(ledger_id, None)]
    assert json.loads(
        bkctl(
            metadata_uri, "--json", "autorecovery", "underreplicated", "--count", "--include-bookie", "127.0.0.1:3183"
        ).stdout
    ) == {"count": 1}
    status = json_lines(bkctl(metadata_uri, "--json", "autorecovery", "query-status").stdout)
    # no daemon publishes its status here and the lock names a host (as Java's worker writes it):
    # which ledger is held and by which host is all that is known
    [row] = status
    assert (row["ledger_id"], row["worker"], row["lock"], row["state"]) == (other, None, "worker-7", "locked")
    assert "keeps no status" in row["text"] and row["last_failure"] is None
    assert "worker-7" in bkctl(metadata_uri, "autorecovery", "underreplicated").stdout


def test_status_does_not_call_javas_workers_none(metadata_uri, zkstore):
    assert "workers            none" in bkctl(metadata_uri, "autorecovery", "status").stdout  # no auditor: none
    zkstore.auditor.cast_vote("10.0.0.5:3181")  # a Java auditor: no status of its own, nor its workers'
    done = bkctl(metadata_uri, "autorecovery", "status")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("workers"))
    assert line.split(None, 1)[1].startswith("not known: the auditor keeps no status (Java's?)"), line
    assert json.loads(bkctl(metadata_uri, "--json", "autorecovery", "status").stdout)["workers_note"].startswith(
        "not known"
    )


def test_whoisauditor_and_trigger_audit(metadata_uri, zkstore, zk_client):
    out = bkctl(metadata_uri, "--json", "autorecovery", "whoisauditor")
    assert out.returncode == 0 and json.loads(out.stdout) == {"auditor": None}
    assert bkctl(metadata_uri, "autorecovery", "whoisauditor").stdout.strip() == "none"
    zkstore.auditor.cast_vote("10.0.0.5:3181")
    zkstore.auditor.cast_vote("10.0.0.6:3181")
    assert json.loads(bkctl(metadata_uri, "--json", "autorecovery", "whoisauditor").stdout) == {
        "auditor": "10.0.0.5:3181"
    }
    assert (
        json.loads(bkctl(metadata_uri, "--json", "cluster", "info").stdout)["autorecovery"]["auditor"]
        == "10.0.0.5:3181"
    )
    delay_node = zkstore.root + "/underreplication/lostBookieRecoveryDelay"
    zkstore.underreplication.set_lost_bookie_recovery_delay(30)
    version = zk_client.get(delay_node)[1].version
    doc = json.loads(bkctl(metadata_uri, "--json", "autorecovery", "trigger-audit").stdout)
    assert doc == {"triggered": True, "auditor": "10.0.0.5:3181", "lost_bookie_recovery_delay": 30}
    data, stat = zk_client.get(delay_node)
    assert data == b"30" and stat.version == version + 1  # rewritten with its own value


def test_autorecovery_run_rejects_bad_settings(metadata_uri):
    for bad in ("nope=1", "lostBookieRecoveryDelay", "rereplicationEntryBatchSize=0", "lostBookieRecoveryDelay=x"):
        r = bkctl(metadata_uri, "autorecovery", "run", "--set", bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for bad_id in ("readonly", "a/b:1", "has space:1"):
        r = bkctl(metadata_uri, "autorecovery", "run", "--bookie-id", bad_id)
        assert r.returncode == 2 and "bookie id" in r.stderr, (bad_id, r.stderr)


def test_ledger_list_show_delete_and_exit_codes(metadata_uri, zkstore):
    open_id = make_ledger(zkstore)
    closed_id = make_ledger(zkstore, closed_at=4)
    r = bkctl(metadata_uri, "--json", "ledger", "list")
    rows = [json.loads(line) for line in r.stdout.splitlines()]  # one shape, with or without a filter
    assert [(row["ledger_id"], row["state"]) for row in rows] == [(open_id, "OPEN"), (closed_id, "CLOSED")]
    assert rows[1]["last_add_confirmed"] == 4
    r = bkctl(metadata_uri, "--json", "ledger", "list", "--state", "closed")
    [row] = [json.loads(line) for line in r.stdout.splitlines()]
    assert (row["ledger_id"], row["state"], row["last_entry_id"], row["length"]) == (closed_id, "CLOSED", 4, 50)
    shown = json.loads(bkctl(metadata_uri, "--json", "ledger", "show", str(open_id)).stdout)
    assert shown["custom_metadata"] == {"app": "test"} and shown["password_set"] is True
    assert shown["segments"] == [
        {"first_entry_id": 0, "bookies": ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"]}
    ]
    human = bkctl(metadata_uri, "ledger", "show", str(open_id))
    assert "OPEN" in human.stdout and "2/2/2" not in human.stdout and "3/2/2" in human.stdout

    missing = bkctl(metadata_uri, "ledger", "show", "999999")
    assert missing.returncode == 3 and missing.stderr.count("\n") == 1 and "999999" in missing.stderr

    refused = bkctl(metadata_uri, "ledger", "delete", str(open_id))  # stdin is not a terminal
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert zkstore.ledgers.exists(open_id)
    assert bkctl(metadata_uri, "ledger", "delete", str(open_id), "--force").returncode == 0
    assert not zkstore.ledgers.exists(open_id)
    assert bkctl(metadata_uri, "ledger", "delete", str(open_id), "--force").returncode == 3


def test_metaformat_refuses_without_force_and_formats_with_it(metadata_uri, zkstore, zk_client):
    ledger_id = make_ledger(zkstore)
    zkstore.cookies.put("127.0.0.1:3181", b'5\nbookieHost: "127.0.0.1:3181"\n')
    zkstore.underreplication.disable()
    old_instance = zkstore.cluster.instance_id()
    r = bkctl(metadata_uri, "metaformat")
    assert r.returncode == 2 and "--force" in r.stderr
    r = bkctl(metadata_uri, "metaformat", "--non-interactive")
    assert r.returncode == 2
    assert zkstore.ledgers.exists(ledger_id)
    r = bkctl(metadata_uri, "--json", "metaformat", "--force")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["formatted"] and doc["instance_id"] != old_instance
    assert not zkstore.ledgers.exists(ledger_id)
    assert zkstore.registration.all_bookies() == []
    assert not zkstore.underreplication.is_enabled()  # the switch is kept, as BookKeeper's metaformat keeps it


def test_metaformat_prompts_on_a_terminal(metadata_uri, zkstore):
    import pexpect

    make_ledger(zkstore)
    env = dict(os.environ, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1", PYTHONPATH=str(REPO))
    child = pexpect.spawn(
        sys.executable, ["-m", "bkctl", "metaformat"], env=env, cwd=str(REPO), timeout=30, encoding="utf-8"
    )
    child.expect("Are you sure to format bookkeeper metadata")
    child.sendline("n")
    child.expect(pexpect.EOF)
    assert ended(child).exitstatus == 1
    assert list(zkstore.ledgers.ids())


def test_unreachable_zookeeper_is_exit_5():
    # --timeout: the default waits 10 s for a port that refuses every connection
    r = bkctl("zk+hierarchical://127.0.0.1:1/ledgers", "--timeout", "1", "cluster", "info", env={})
    assert r.returncode == 5
    assert len(r.stderr.strip().splitlines()) == 1


def test_usage_errors_are_exit_2(metadata_uri):
    assert bkctl(metadata_uri, "ledger", "show", "not-a-number").returncode == 2
    assert bkctl(metadata_uri, "no-such-command").returncode == 2
