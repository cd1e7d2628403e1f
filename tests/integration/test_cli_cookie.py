"""bkctl cookie get/create/update/delete/generate/admin against real ZooKeeper and real bookieds."""

import json
import time

import pytest

from bkctl.wire.metadata.cookie import parse_cookie
from tests.support.bookieproc import BookieProcess
from tests.support.cli import bkctl


def _registered(zkstore, bookie_id, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if zkstore.registration.is_registered(bookie_id):
            return True
        time.sleep(0.1)
    return False


def test_cookie_crud(tmp_path, metadata_uri, zkstore):
    b = "127.0.0.1:4100"
    out = tmp_path / "cookie"
    gen = bkctl(metadata_uri, "--json", "cookie", "generate", b, "-j", "/j1", "-l", "/l1,/l2", "-o", str(out))
    assert gen.returncode == 0, gen.stderr
    cookie = parse_cookie(out.read_bytes())
    assert cookie.bookie_id == b and cookie.ledger_dirs == ("/l1", "/l2")
    assert cookie.instance_id == zkstore.cluster.instance_id()  # read from the cluster when not given

    assert bkctl(metadata_uri, "cookie", "get", b).returncode == 3
    assert bkctl(metadata_uri, "cookie", "update", b, "--from-file", str(out)).returncode == 3
    other = tmp_path / "other"
    bkctl(metadata_uri, "cookie", "generate", "127.0.0.1:9", "-j", "/j", "-l", "/l", "-o", str(other))
    wrong = bkctl(metadata_uri, "cookie", "create", b, "--from-file", str(other))
    assert wrong.returncode == 2 and "not of" in wrong.stderr
    garbage = tmp_path / "garbage"
    garbage.write_text("hello\n")
    bad = bkctl(metadata_uri, "cookie", "create", b, "--from-file", str(garbage))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr

    assert bkctl(metadata_uri, "cookie", "create", b, "--from-file", str(out)).returncode == 0
    assert bkctl(metadata_uri, "cookie", "create", b, "--from-file", str(out)).returncode == 4
    got = json.loads(bkctl(metadata_uri, "--json", "cookie", "get", b).stdout)
    assert got["bookie_id"] == b and got["ledger_dirs"] == ["/l1", "/l2"] and got["version"] == 0
    raw = bkctl(metadata_uri, "cookie", "get", b, "--raw")
    assert raw.stdout.encode() == out.read_bytes()

    bkctl(metadata_uri, "cookie", "generate", b, "-i", "abc", "-j", "/j1", "-l", "/l1", "-o", str(out))
    upd = json.loads(bkctl(metadata_uri, "--json", "cookie", "update", b, "--from-file", str(out)).stdout)
    assert upd["version"] == 1 and upd["previous"]["ledger_dirs"] == ["/l1", "/l2"]
    assert zkstore.cookies.get(b)[0].instance_id == "abc"

    refused = bkctl(metadata_uri, "cookie", "delete", b)  # no terminal, no --force
    assert refused.returncode == 2 and "--force" in refused.stderr
    zkstore.registration.register(b)
    running = bkctl(metadata_uri, "cookie", "delete", b, "--force")
    assert running.returncode == 4
    zkstore.registration.unregister(b)
    assert bkctl(metadata_uri, "cookie", "delete", b, "--force").returncode == 0
    assert zkstore.cookies.get(b) is None


def test_cookie_admin_after_address_change_lets_bookie_start(tmp_path, metadata_uri, zkstore):
    first = BookieProcess(tmp_path / "b", metadata_uri)
    first.start()
    assert _registered(zkstore, first.bookie_id)
    first.stop()
    moved = BookieProcess(tmp_path / "b", metadata_uri)  # same directories, new port: new bookie id
    with pytest.raises(RuntimeError):
        moved.start(timeout=20)  # its directories carry the old id's cookie
    conf = str(moved.base / "bk_server.conf")

    listed = json.loads(bkctl(metadata_uri, "--json", "cookie", "admin", "-c", conf, "--list").stdout)
    assert listed["zookeeper"]["exists"] is False
    assert {r["bookie_host"] for r in listed["local"]} == {first.bookie_id}

    done = bkctl(metadata_uri, "--json", "cookie", "admin", "-c", conf, "--from-id", first.bookie_id)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["old_cookie_deleted"] and len(doc["rewritten_dirs"]) == 2
    assert zkstore.cookies.get(first.bookie_id) is None
    assert zkstore.cookies.get(moved.bookie_id)[0].bookie_id == moved.bookie_id
    again = bkctl(metadata_uri, "cookie", "admin", "-c", conf, "--from-id", first.bookie_id)
    assert again.returncode == 0, again.stderr  # idempotent
    moved.start()
    try:
        assert _registered(zkstore, moved.bookie_id)
        busy = bkctl(metadata_uri, "cookie", "admin", "-c", conf, "--delete", "--force")
        assert busy.returncode == 4
    finally:
        moved.stop()
    refused = bkctl(metadata_uri, "cookie", "admin", "-c", conf, "--delete")
    assert refused.returncode == 2
    gone = json.loads(bkctl(metadata_uri, "--json", "cookie", "admin", "-c", conf, "--delete", "--force").stdout)
    assert len(gone["deleted_files"]) == 2 and gone["zookeeper_deleted"]
    assert zkstore.cookies.get(moved.bookie_id) is None


class _NoAdvertised(BookieProcess):
    def conf_text(self) -> str:
        return "".join(
            line + "\n" for line in super().conf_text().splitlines() if not line.startswith("advertisedAddress=")
        )


def test_cookie_admin_hostname_switch_and_expand(tmp_path, metadata_uri, zkstore):
    b = _NoAdvertised(tmp_path / "b", metadata_uri)
    b.start()
    ip_id = f"127.0.0.1:{b.port}"
    assert _registered(zkstore, ip_id)
    b.stop()
    conf = str(b.base / "bk_server.conf")
    early = bkctl(metadata_uri, "cookie", "admin", "-c", conf, "--hostname")
    assert early.returncode == 2 and "useHostNameAsBookieID=true" in early.stderr

    b.settings["useHostNameAsBookieID"] = "true"
    b.settings["ledgerDirectories"] = f"{b.ledger_dir},{tmp_path / 'more'}"
    (b.base / "bk_server.conf").write_text(b.conf_text())
    switched = bkctl(metadata_uri, "--json", "cookie", "admin", "-c", conf, "--hostname")
    assert switched.returncode == 0, switched.stderr
    host_id = json.loads(switched.stdout)["bookie_id"]
    assert host_id != ip_id and host_id.endswith(f":{b.port}")
    assert zkstore.cookies.get(ip_id) is None
    expanded = json.loads(bkctl(metadata_uri, "--json", "cookie", "admin", "-c", conf, "--expand").stdout)
    assert expanded["added_dirs"] == [str(tmp_path / "more")]
    assert zkstore.cookies.get(host_id)[0].ledger_dirs == (str(b.ledger_dir), str(tmp_path / "more"))
    b.start()
    try:
        assert _registered(zkstore, host_id)
    finally:
        b.stop()


def test_cookie_admin_on_a_java_bookies_directories(tmp_path, metadata_uri, zkstore):
    """bk1's journal and ledger directories as a Java 4.17.2 bookie left them (VERSION cookies
    from the vectors) and its ZooKeeper cookie: listed, then moved to a new bookie id."""
    import shutil
    from pathlib import Path

    vectors = Path(__file__).resolve().parents[1] / "vectors"
    for kind in ("journal", "ledgers"):
        (tmp_path / kind / "current").mkdir(parents=True)
        shutil.copy(vectors / "disk" / f"bk1__{kind}__current__VERSION.bin", tmp_path / kind / "current" / "VERSION")
    zkstore.cookies.put(
        "127.0.0.1:3181", (vectors / "zk" / "raw" / "ledgers__cookies__127.0.0.1:3181.bin").read_bytes()
    )
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        f"journalDirectories={tmp_path}/journal\nledgerDirectories={tmp_path}/ledgers\n"
        f"bookiePort=3181\nadvertisedAddress=bk1.example.com\nmetadataServiceUri={metadata_uri}\n"
    )
    listed = json.loads(bkctl(metadata_uri, "--json", "cookie", "admin", "-c", str(conf), "--list").stdout)
    assert listed["bookie_id"] == "bk1.example.com:3181" and listed["zookeeper"]["exists"] is False
    assert [r["bookie_host"] for r in listed["local"]] == ["127.0.0.1:3181", "127.0.0.1:3181"]

    moved = bkctl(metadata_uri, "--json", "cookie", "admin", "-c", str(conf), "--from-id", "127.0.0.1:3181")
    assert moved.returncode == 0, moved.stderr
    new, _ = zkstore.cookies.get("bk1.example.com:3181")
    assert new.bookie_id == "bk1.example.com:3181" and new.journal_dirs == ("/data/bk1/journal",)
    assert new.instance_id == "f2102f9c-59f2-47c2-8e7f-f85b6701affc"  # everything but the id kept
    for kind in ("journal", "ledgers"):
        assert parse_cookie((tmp_path / kind / "current" / "VERSION").read_bytes()) == new
    assert zkstore.cookies.get("127.0.0.1:3181") is None
