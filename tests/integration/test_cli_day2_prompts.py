"""The destructive day-2 commands ask on a terminal: 'n' changes nothing (exit 1), 'y' goes on."""

import os
import sys

import pytest

from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import REPO
from tests.support.terminal import ended

pytestmark = pytest.mark.integration


def _ask(uri, args, question, answer):
    import pexpect

    env = dict(os.environ, BKCTL_METADATA_URI=uri, NO_COLOR="1", PYTHONPATH=str(REPO))
    child = pexpect.spawn(sys.executable, ["-m", "bkctl", *args], env=env, cwd=str(REPO), timeout=60, encoding="utf-8")
    child.expect(question)
    child.sendline(answer)
    child.expect(pexpect.EOF)
    return ended(child).exitstatus


def test_cookie_delete_and_replace_id_ask(metadata_uri, zkstore):
    zkstore.cookies.put("127.0.0.1:7", b'5\nbookieHost: "127.0.0.1:7"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n')
    assert _ask(metadata_uri, ["cookie", "delete", "127.0.0.1:7"], "Delete the cookie of bookie", "n") == 1
    assert zkstore.cookies.get("127.0.0.1:7") is not None
    assert _ask(metadata_uri, ["cookie", "delete", "127.0.0.1:7"], "Delete the cookie of bookie", "y") == 0
    assert zkstore.cookies.get("127.0.0.1:7") is None

    ledger_id, _ = zkstore.ledgers.create(LedgerMetadata.new(["127.0.0.1:1", "127.0.0.1:2"], 2, 2))
    zkstore.registration.register("127.0.0.1:3")  # the new id is running
    assert _ask(metadata_uri, ["bookie", "replace-id", "127.0.0.1:1", "127.0.0.1:3"], r"in 1 ledgers\?", "n") == 1
    assert "127.0.0.1:1" in zkstore.ledgers.read(ledger_id)[0].bookies
    assert _ask(metadata_uri, ["bookie", "replace-id", "127.0.0.1:1", "127.0.0.1:3"], r"in 1 ledgers\?", "y") == 0
    assert "127.0.0.1:3" in zkstore.ledgers.read(ledger_id)[0].bookies


def test_restore_over_a_ledger_and_nuke_ask(tmp_path, metadata_uri, zkstore):
    ledger_id, _ = zkstore.ledgers.create(LedgerMetadata.new(["127.0.0.1:1"], 1, 1))
    dump = tmp_path / "dump"
    dump.write_bytes(zkstore.ledgers.read_bytes(ledger_id)[0])
    args = ["ledger", "metadata", "restore", str(dump), "--ledger-id", str(ledger_id)]
    assert _ask(metadata_uri, args, "Replace its metadata", "n") == 1
    assert _ask(metadata_uri, args, "Replace its metadata", "y") == 0

    instance = zkstore.cluster.instance_id()
    assert _ask(metadata_uri, ["cluster", "nuke", "--instance-id", instance], "Delete the whole", "n") == 1
    assert zkstore.cluster.exists()
    assert _ask(metadata_uri, ["cluster", "nuke", "--instance-id", instance], "Delete the whole", "y") == 0
    assert not zkstore.cluster.exists()
