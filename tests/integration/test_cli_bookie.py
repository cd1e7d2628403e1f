"""bkctl bookie list, bookieformat and upgrade on real bookie directories, real ZooKeeper, real bookied."""

import json
import os
from pathlib import Path

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.cookie import parse_cookie
from tests.support.bookieproc import BookieProcess, WireClient
from tests.support.cli import bkctl


def test_bookie_list(metadata_uri, zkstore):
    zkstore.registration.register("127.0.0.1:4001")
    zkstore.registration.register("127.0.0.1:4002", readonly=True)
    zkstore.cookies.put("127.0.0.1:4003", b'5\nbookieHost: "127.0.0.1:4003"\n')

    def rows(*flags):  # JSON lines, one per bookie
        out = bkctl(metadata_uri, "--json", "bookie", "list", *flags).stdout
        return {r["bookie_id"]: r["state"] for r in map(json.loads, out.splitlines())}

    everyone = {"127.0.0.1:4001": "writable", "127.0.0.1:4002": "read-only", "127.0.0.1:4003": "down"}
    assert rows() == rows("--all") == everyone  # every state by default
    assert rows("--readonly") == {"127.0.0.1:4002": "read-only"}
    assert rows("--writable", "--down") == {"127.0.0.1:4001": "writable", "127.0.0.1:4003": "down"}
    assert rows("--readonly", "--all") == everyone  # no flag is silently dropped
    table = bkctl(metadata_uri, "bookie", "list").stdout.splitlines()
    assert table[0].split() == ["bookie", "state"]
    assert [line.split() for line in table[1:]] == [[b, s] for b, s in everyone.items()]


def test_bookieformat_refuses_prompts_and_formats(tmp_path, metadata_uri, zkstore):
    b = BookieProcess(tmp_path / "b", metadata_uri)
    b.start()
    c = WireClient(b.port)
    body = DigestManager(1, DigestType.CRC32C).package(0, -1, 1, b"x")
    assert c.v2(v2.AddRequest(2, 0, master_key(b""), body, 1, 0)).rc == RC.EOK
    c.close()
    conf = str(b.base / "bk_server.conf")

    running = bkctl(metadata_uri, "bookieformat", "--conf", conf, "--force")
    assert running.returncode == 4 and "stop it first" in running.stderr
    b.stop()

    refused = bkctl(metadata_uri, "bookieformat", "--conf", conf)  # no terminal, no --force
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert (b.journal_dir / "current").exists()

    done = bkctl(metadata_uri, "--json", "bookieformat", "--conf", conf, "--force", "--delete-cookie")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cookie_deleted"] is True
    assert os.listdir(b.journal_dir) == [] and os.listdir(b.ledger_dir) == []
    assert zkstore.cookies.get(b.bookie_id) is None
    # the wiped bookie starts again as a new bookie, without the old data
    b.start()
    c = WireClient(b.port)
    assert c.v2(v2.ReadRequest(2, 0, 1, 0)).rc == RC.ENOLEDGER
    c.close()
    b.stop()
    again = bkctl(metadata_uri, "bookieformat", "--conf", conf, "--force", "--delete-cookie")
    assert again.returncode == 0
    missing = bkctl(metadata_uri, "bookieformat", "--conf", conf, "--force", "--delete-cookie")
    assert missing.returncode == 3


def make_v2_layout(d: Path, files: dict[str, bytes]) -> None:
    """A pre-current/ (layout 2) BookKeeper directory: data files in D, D/VERSION holding 2."""
    d.mkdir(parents=True)
    (d / "VERSION").write_text("2\n")
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)


def test_upgrade_rollback_finalize(tmp_path, metadata_uri, zkstore):
    b = BookieProcess(tmp_path / "b", metadata_uri)
    make_v2_layout(b.journal_dir, {"1a2b.txn": b"journal"})
    make_v2_layout(b.ledger_dir, {"0.log": b"entrylog", "lastId": b"0\n", "0/5/5.idx": b"index"})
    b.base.mkdir(exist_ok=True)
    conf = b.base / "bk_server.conf"
    conf.write_text(b.conf_text())

    up = bkctl(metadata_uri, "--json", "upgrade", "--conf", str(conf), "--upgrade")
    assert up.returncode == 0, up.stderr
    assert sorted(json.loads(up.stdout)["upgraded"]) == sorted([str(b.journal_dir), str(b.ledger_dir)])
    linked = b.ledger_dir / "current" / "0" / "5" / "5.idx"
    assert linked.read_bytes() == b"index"
    assert os.stat(linked).st_ino == os.stat(b.ledger_dir / "0" / "5" / "5.idx").st_ino  # a hard link
    cookie = parse_cookie((b.journal_dir / "current" / "VERSION").read_bytes())
    assert cookie.bookie_id == b.bookie_id and cookie.instance_id == zkstore.cluster.instance_id()
    assert zkstore.cookies.get(b.bookie_id)[0] == cookie

    back = bkctl(metadata_uri, "upgrade", "--conf", str(conf), "--rollback")
    assert back.returncode == 0, back.stderr
    assert not (b.ledger_dir / "current").exists() and (b.ledger_dir / "0.log").read_bytes() == b"entrylog"
    assert zkstore.cookies.get(b.bookie_id) is None

    assert bkctl(metadata_uri, "upgrade", "--conf", str(conf), "--upgrade").returncode == 0
    fin = bkctl(metadata_uri, "upgrade", "--conf", str(conf), "--finalize")
    assert fin.returncode == 0, fin.stderr
    assert sorted(os.listdir(b.ledger_dir)) == ["current"]
    assert (b.ledger_dir / "current" / "0.log").read_bytes() == b"entrylog"
    refused = bkctl(metadata_uri, "upgrade", "--conf", str(conf), "--rollback")
    assert refused.returncode == 1 and "nothing to roll back" in refused.stderr
    assert bkctl(metadata_uri, "upgrade", "--conf", str(conf)).returncode == 2


def test_an_upgraded_empty_old_layout_serves_as_a_bookie(tmp_path, metadata_uri):
    b = BookieProcess(tmp_path / "b", metadata_uri)
    make_v2_layout(b.journal_dir, {})
    make_v2_layout(b.ledger_dir, {})
    b.base.mkdir(exist_ok=True)
    (b.base / "bk_server.conf").write_text(b.conf_text())
    b.launch()
    assert b.proc.wait(timeout=30) == 3 and "upgrade needed" in b.log_tail()
    assert bkctl(metadata_uri, "upgrade", "--conf", str(b.base / "bk_server.conf"), "--upgrade").returncode == 0
    b.start()
    c = WireClient(b.port)
    body = DigestManager(9, DigestType.CRC32C).package(0, -1, 1, b"after upgrade")
    assert c.v2(v2.AddRequest(2, 0, master_key(b""), body, 9, 0)).rc == RC.EOK
    c.close()
    b.kill()
