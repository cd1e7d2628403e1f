"""`pulsar topic show` as an operator reads it in a terminal 120 columns wide (issue 54, item 10):
a cursor without a ledger of its own says "none", not -1, and the cursor table's last column
(`last active`) is there whole, however many columns the table needs.  Metadata only: a topic
whose ledgers are closed, on a real ZooKeeper."""

from __future__ import annotations

import re
import sys
import time

import pexpect
import pytest

from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support.ledgers import ENSEMBLE
from tests.support.terminal import Terminal, bkctl_env

pytestmark = pytest.mark.integration

NAME = "acme/prod/persistent/orders"


def test_topic_show_in_a_terminal_120_columns_wide(metadata_uri, zkstore, zk_client, zk_namespace, tmp_path):
    md = LedgerMetadata.new(ENSEMBLE, ctime=int(time.time() * 1000)).closed(4, 500)
    lid, _ = zkstore.ledgers.create(md)
    info = ml.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=lid, entries=5, size=500, timestamp=1)
    path = f"{zk_namespace}/managed-ledgers/{NAME}"
    zk_client.create(path, info.SerializeToString(), makepath=True)
    now_ms = int(time.time() * 1000)
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=lid, markDeleteEntryId=1, lastActive=now_ms)
    zk_client.create(f"{path}/a-subscription-with-a-long-name", cursor.SerializeToString())

    term = Terminal(
        [sys.executable, "-m", "bkctl", "-m", metadata_uri, "pulsar", "topic", "show", "persistent://acme/prod/orders"],
        bkctl_env(tmp_path, NO_COLOR="1"),
        rows=40,
        cols=120,
    )
    try:
        term.child.expect(pexpect.EOF, timeout=60)
        term.raw += term.child.before or ""
    finally:
        term.close()
    text = term.text
    header = next((line for line in text.splitlines() if line.startswith("cursor ")), "")
    assert re.search(r"cursor ledger\s+last active", header), text
    row = next((line for line in text.splitlines() if line.startswith("a-subscription-with-a-long-name")), "")
    stamp = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(now_ms / 1000))
    assert re.search(r"\snone\s+" + re.escape(stamp), row), text
    assert " -1 " not in row, row
