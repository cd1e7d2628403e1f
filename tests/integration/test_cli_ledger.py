"""bkctl ledger create/add/read/close/fence/recover/tail, bookie info, simpletest and bench:
each command a separate one-shot bkctl process, against real bookied processes and a real ZooKeeper."""

from __future__ import annotations

import base64
import json
import os
import signal

import pytest

from tests.support.cli import (
    bkctl_bytes as bkctl,
)
from tests.support.cli import (
    env_for,
    json_lines,
    ok,
    one_line_error,
    run_bkctl,
    start,
    wait_or_show_threads,
)


class Session:
    def __init__(self, uri):
        # a writer that lives across commands, like `bkctl shell` (tests/support/cli_session.py)
        self.proc = start(env_for(uri), module="tests.support.cli_session", pipe_stdin=True, text=True)

    def send(self, *args) -> None:
        self.proc.stdin.write(json.dumps([str(a) for a in args]) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        return json.loads(line)

    def run(self, *args) -> dict:
        self.send(*args)
        return self.answer()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def finish(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(30)


@pytest.fixture
def sessions(metadata_uri):
    made: list[Session] = []

    def make() -> Session:
        s = Session(metadata_uri)
        made.append(s)
        return s

    yield make
    for s in made:
        s.kill()


def test_ledger_lifecycle_one_shot_processes(bookie_cluster, metadata_uri, zkstore, tmp_path):
    bookie_cluster(3)
    uri = metadata_uri
    created = json.loads(ok(bkctl(uri, "--json", "ledger", "create")))
    lid = created["ledger_id"]
    assert (
        created["state"],
        created["ensemble_size"],
        created["write_quorum"],
        created["ack_quorum"],
        created["digest"],
        created["password_set"],
    ) == ("OPEN", 3, 2, 2, "CRC32C", False)
    assert len(created["segments"][0]["bookies"]) == 3

    assert ok(bkctl(uri, "ledger", "add", lid, "hello", "wörld")).strip().endswith("0..1")
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid, "single"))) == {"ledger_id": lid, "entry_ids": [2]}
    lines = json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid, "-", stdin=b"l1\nl2\r\n\nl4")))
    assert lines["entry_ids"] == [3, 4, 5, 6]
    blob = bytes(range(256)) + b"\nsecond line\n"
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid, "-", "--binary", stdin=blob)))["entry_ids"] == [7]
    data_file = tmp_path / "entries.txt"
    data_file.write_bytes(b"f1\nf2\n")
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid, "-f", data_file)))["entry_ids"] == [8, 9]
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid, "-f", data_file, "--binary")))["entry_ids"] == [10]
    expected = [b"hello", "wörld".encode(), b"single", b"l1", b"l2", b"", b"l4", blob, b"f1", b"f2", b"f1\nf2\n"]

    # the ledger is still OPEN and written by separate processes: readers see every acknowledged entry
    text = ok(bkctl(uri, "ledger", "read", lid))
    assert text.splitlines()[:5] == ["0\thello", "1\twörld", "2\tsingle", "3\tl1", "4\tl2"]
    assert text.splitlines()[10] == "10\tf1\\nf2\\n"
    hexed = ok(bkctl(uri, "ledger", "read", lid, "--format", "hex", "--from", "7", "--to", "7"))
    assert hexed == f"7\t{blob.hex()}\n"
    raw = bkctl(uri, "ledger", "read", lid, "--format", "raw")
    assert raw.returncode == 0 and raw.stdout == b"".join(expected)
    docs = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
    assert [d["entry_id"] for d in docs] == list(range(11))
    assert docs[1] == {
        "ledger_id": lid,
        "entry_id": 1,
        "length": len("wörld".encode()),
        "encoding": "utf-8",
        "payload": "wörld",
    }
    as_b64 = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid, "--format", "raw")))
    assert [base64.b64decode(d["payload"]) for d in as_b64] == expected
    as_hex = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid, "--format", "hex", "--from", "5")))
    assert [bytes.fromhex(d["payload"]) for d in as_hex] == expected[5:] and as_hex[0]["encoding"] == "hex"

    closed = json.loads(ok(bkctl(uri, "--json", "ledger", "close", lid)))
    assert closed == {
        "ledger_id": lid,
        "state": "CLOSED",
        "last_entry_id": 10,
        "length": sum(map(len, expected)),
        "already_closed": False,
        "fenced": True,
    }
    again = json.loads(ok(bkctl(uri, "--json", "ledger", "close", lid)))
    assert again["already_closed"] is True and again["last_entry_id"] == 10
    shown = json.loads(ok(bkctl(uri, "--json", "ledger", "show", lid)))
    assert (shown["state"], shown["last_entry_id"], shown["length"]) == ("CLOSED", 10, closed["length"])
    assert bkctl(uri, "ledger", "read", lid, "--format", "raw").stdout == b"".join(expected)

    assert "closed" in one_line_error(bkctl(uri, "ledger", "add", lid, "late"), 4)
    one_line_error(bkctl(uri, "ledger", "read", lid, "--to", "11"), 3)
    one_line_error(bkctl(uri, "ledger", "read", 987654), 3)
    one_line_error(bkctl(uri, "ledger", "add", 987654, "x"), 3)

    refused = bkctl(uri, "ledger", "delete", lid)
    assert refused.returncode == 2 and b"--force" in refused.stderr
    ok(bkctl(uri, "ledger", "delete", lid, "--force"))
    one_line_error(bkctl(uri, "ledger", "show", lid), 3)


def test_password_digest_metadata_and_usage_errors(bookie_cluster, metadata_uri):
    bookie_cluster(3)
    uri = metadata_uri
    doc = json.loads(
        ok(
            bkctl(
                uri,
                "--json",
                "ledger",
                "create",
                "-e",
                "3",
                "-w",
                "3",
                "-a",
                "2",
                "--digest",
                "mac",
                "--password",
                "s3cret",
                "--meta",
                "owner=tests",
                "--meta",
                "k=v=w",
            )
        )
    )
    lid = doc["ledger_id"]
    assert (doc["write_quorum"], doc["digest"], doc["password_set"]) == (3, "MAC", True)
    assert doc["custom_metadata"] == {"owner": "tests", "k": "v=w"}
    ok(bkctl(uri, "ledger", "add", lid, "a", "b"))  # the stored password is used
    ok(bkctl(uri, "ledger", "add", lid, "c", "--password", "s3cret"))
    err = one_line_error(bkctl(uri, "ledger", "read", lid, "--password", "wrong"), 1)
    assert "wrong password" in err
    one_line_error(bkctl(uri, "ledger", "add", lid, "x", "--password", "wrong"), 1)
    assert ok(bkctl(uri, "ledger", "read", lid, "--password", "s3cret")) == "0\ta\n1\tb\n2\tc\n"

    wrong = bkctl(uri, "ledger", "recover", lid, "--password", "wrong", "--force")  # said, then tried
    assert (
        wrong.returncode == 1
        and wrong.stderr.decode().splitlines()[-1] == f"bkctl: error: wrong password for ledger {lid}"
    )
    refused = bkctl(uri, "ledger", "recover", lid)  # an open ledger: its writer's next add fails
    assert refused.returncode == 2 and b"refusing to recover ledger" in refused.stderr, refused.stderr
    recovered = json.loads(ok(bkctl(uri, "--json", "ledger", "recover", lid, "--force")))
    assert recovered == {"ledger_id": lid, "state": "CLOSED", "last_entry_id": 2, "length": 3, "previous_state": "OPEN"}

    assert bkctl(uri, "ledger", "add", lid).returncode == 2  # nothing to add
    assert bkctl(uri, "ledger", "add", lid, "a", "-f", "/etc/hostname").returncode == 2
    assert bkctl(uri, "ledger", "create", "-e", "2", "-w", "3").returncode == 2
    assert bkctl(uri, "ledger", "create", "--meta", "novalue").returncode == 2
    assert bkctl(uri, "ledger", "create", "--digest", "md5").returncode == 2
    assert bkctl(uri, "ledger", "read", "x").returncode == 2
    assert bkctl(uri, "ledger", "create", "-e", "5").returncode == 5  # only 3 bookies


def test_killed_writer_then_concurrent_recoveries(bookie_cluster, metadata_uri, sessions):
    bookie_cluster(3)
    uri = metadata_uri
    writer = sessions()
    created = writer.run("--json", "ledger", "create")
    assert created["rc"] == 0
    lid = json.loads(created["out"])["ledger_id"]
    acked = []
    for i in range(40):  # the writer adds in a loop; each answer means acknowledged
        writer.send("--json", "ledger", "add", lid, f"entry-{i}")
    for _ in range(25):
        reply = writer.answer()
        assert reply["rc"] == 0
        acked += json.loads(reply["out"])["entry_ids"]
    writer.kill()  # SIGKILL mid-stream: adds in flight, ledger OPEN, append lock left in ZooKeeper
    assert acked == list(range(25))
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "show", lid)))["state"] == "OPEN"

    env = env_for(uri)
    racers = [start(env, "--json", "ledger", "recover", lid, "--force") for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in racers]
    assert [p.returncode for p in racers] == [0, 0], [e for _, e in outs]
    docs = [json.loads(o) for o, _ in outs]
    assert docs[0]["last_entry_id"] == docs[1]["last_entry_id"] >= 24
    assert docs[0]["length"] == docs[1]["length"]
    last = docs[0]["last_entry_id"]
    entries = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
    assert [e["entry_id"] for e in entries] == list(range(last + 1))
    assert [e["payload"] for e in entries] == [f"entry-{i}" for i in range(last + 1)]
    # the old writer's next add (here: another process continuing its ledger) is refused
    assert "closed" in one_line_error(bkctl(uri, "ledger", "add", lid, "after"), 4)


def test_live_writer_is_fenced_by_fence_and_recover(bookie_cluster, metadata_uri, sessions):
    bookie_cluster(3)
    uri = metadata_uri
    writer = sessions()
    lid = int(writer.run("ledger", "create")["out"])
    assert writer.run("ledger", "add", lid, "a", "b", "c")["rc"] == 0
    # while the session holds the ledger, other processes cannot append to it
    assert "open for append" in one_line_error(bkctl(uri, "ledger", "add", lid, "intruder"), 4)
    # its entries are visible to readers while it is still open
    assert ok(bkctl(uri, "ledger", "read", lid)) == "0\ta\n1\tb\n2\tc\n"

    fenced = json.loads(ok(bkctl(uri, "--json", "ledger", "fence", lid, "--force")))
    assert fenced["fenced"] is True and fenced["state"] == "OPEN" and len(fenced["bookies_fenced"]) == 3
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "show", lid)))["state"] == "OPEN"
    refused = writer.run("ledger", "add", lid, "d")
    assert refused["rc"] == 4
    recovered = json.loads(ok(bkctl(uri, "--json", "ledger", "recover", lid, "--force")))
    assert (recovered["state"], recovered["last_entry_id"]) == ("CLOSED", 2)
    assert writer.run("ledger", "add", lid, "e")["rc"] == 4
    nothing = json.loads(ok(bkctl(uri, "--json", "ledger", "fence", lid)))
    assert nothing["fenced"] is False and nothing["state"] == "CLOSED"

    # a ledger the session created, left open when the session ends, continues in another process
    lid2 = int(writer.run("ledger", "create")["out"])
    assert writer.run("ledger", "add", lid2, "x")["rc"] == 0
    # the session closes its own ledger through its writer (no fencing)
    lid3 = int(writer.run("ledger", "create")["out"])
    assert writer.run("ledger", "add", lid3, "p", "q")["rc"] == 0
    closed = writer.run("--json", "ledger", "close", lid3)
    assert closed["rc"] == 0
    assert json.loads(closed["out"]) == {
        "ledger_id": lid3,
        "state": "CLOSED",
        "last_entry_id": 1,
        "length": 2,
        "already_closed": False,
        "fenced": False,
    }
    assert writer.finish() == 0
    assert json.loads(ok(bkctl(uri, "--json", "ledger", "add", lid2, "y")))["entry_ids"] == [1]
    assert ok(bkctl(uri, "ledger", "read", lid2)) == "0\tx\n1\ty\n"


def test_tail_follows_until_the_ledger_closes(bookie_cluster, metadata_uri):
    bookie_cluster(3)
    uri = metadata_uri
    lid = int(ok(bkctl(uri, "ledger", "create")))
    ok(bkctl(uri, "ledger", "add", lid, "before"))
    tail = start(env_for(uri), "--json", "ledger", "tail", lid, "--from", "0", "--interval", "0.1")
    try:
        ok(bkctl(uri, "ledger", "add", lid, "one", "two"))
        ok(bkctl(uri, "ledger", "add", lid, "-", stdin=b"three\n"))
        ok(bkctl(uri, "ledger", "close", lid))
        out, err = tail.communicate(timeout=120)  # a hang guard, not a speed check
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert tail.returncode == 0, err
    assert [(d["entry_id"], d["payload"]) for d in json_lines(out.decode())] == [
        (0, "before"),
        (1, "one"),
        (2, "two"),
        (3, "three"),
    ]

    # Ctrl-C stops a tail of an open ledger with exit 0
    lid = int(ok(bkctl(uri, "ledger", "create")))
    tail = start(env_for(uri, PYTHONFAULTHANDLER="1"), "ledger", "tail", lid, "--from", "0", "--interval", "0.1")
    try:
        ok(bkctl(uri, "ledger", "add", lid, "seen"))
        line = tail.stdout.readline()  # the test's timeout guards this
        assert line == b"0\tseen\n", (line, tail.poll(), line or tail.stderr.read().decode())
        tail.send_signal(signal.SIGINT)
        assert wait_or_show_threads(tail, 60) == 0  # a loaded machine may take a while to stop
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()


def test_bookie_info(bookie_cluster, metadata_uri):
    procs = bookie_cluster(3)
    uri = metadata_uri
    target = procs[0]
    doc = json.loads(ok(bkctl(uri, "--json", "bookie", "info", target.bookie_id)))
    assert doc["bookie_id"] == target.bookie_id and doc["state"] == "writable"
    assert doc["address"] == f"127.0.0.1:{target.port}"
    assert doc["cookie"]["bookie_host"] == target.bookie_id
    assert doc["cookie"]["journal_dirs"] == [str(target.journal_dir)]
    assert {
        "id": "bookie",
        "protocol": "bookie-rpc",
        "host": "127.0.0.1",
        "port": target.port,
        "auth": [],
        "extensions": [],
    } in doc["service_info"]["endpoints"]
    assert doc["disk"]["total_bytes"] > 0 and 0 <= doc["disk"]["free_bytes"] <= doc["disk"]["total_bytes"]
    human = ok(bkctl(uri, "bookie", "info", target.bookie_id))
    assert "writable" in human and "free of" in human

    one_line_error(bkctl(uri, "bookie", "info", "127.0.0.1:1"), 3)
    assert bkctl(uri, "bookie", "info", "not a bookie id").returncode == 2
    target.kill()
    one_line_error(bkctl(uri, "bookie", "info", target.bookie_id), 5)  # has a cookie, does not answer


def test_simpletest_and_bench(bookie_cluster, metadata_uri, zkstore):
    bookie_cluster(3)
    uri = metadata_uri
    doc = json.loads(ok(bkctl(uri, "--json", "simpletest", "-n", "200")))
    assert doc["ok"] is True and doc["last_entry_id"] == 199 and doc["deleted"] is True
    assert (doc["ensemble_size"], doc["write_quorum"], doc["ack_quorum"], doc["entry_size"]) == (3, 2, 2, 100)
    assert not zkstore.ledgers.exists(doc["ledger_id"])
    assert "simpletest OK" in ok(bkctl(uri, "simpletest", "-e", "3", "-w", "3", "-a", "3"))
    failed = bkctl(uri, "simpletest", "-e", "4", "-w", "2", "-a", "2")  # 3 bookies only
    # the exit code is the cause's: too few bookies is 5 ("the needed bookies are unreachable")
    assert failed.returncode == 5 and b"simpletest failed at create: need 4 writable bookies" in failed.stderr

    bench = json.loads(ok(bkctl(uri, "--json", "bench", "--entries", "2000", "--size", "200", "--inflight", "64")))
    assert bench["entries"] == 2000 and bench["entry_size"] == 200
    assert bench["add"]["entries_per_second"] > 0 and bench["read"]["entries_per_second"] > 0
    lat = bench["add"]["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert not zkstore.ledgers.exists(bench["ledger_id"])
    assert "add latency" in ok(bkctl(uri, "bench", "--entries", "300"))


def test_protocol_v2_from_the_option_or_the_environment(bookie_cluster, metadata_uri, sessions):
    bookie_cluster(3)
    uri = metadata_uri
    # Pulsar's ledger shape (E = Qw): over v2 its entries are read with batch reads
    lid = json.loads(ok(bkctl(uri, "--protocol", "v2", "--json", "ledger", "create", "-e", "2", "-w", "2", "-a", "2")))[
        "ledger_id"
    ]
    lines = b"".join(b"entry-%d\n" % i for i in range(600))
    assert json.loads(ok(bkctl(uri, "--protocol", "v2", "--json", "ledger", "add", lid, "-", stdin=lines)))[
        "entry_ids"
    ] == list(range(600))
    ok(bkctl(uri, "--protocol", "v2", "ledger", "close", lid))
    r = run_bkctl(dict(env_for(uri), BKCTL_PROTOCOL="v2"), "ledger", "read", lid, timeout=60)
    assert ok(r).splitlines() == [f"{i}\tentry-{i}" for i in range(600)]
    bad = run_bkctl(dict(env_for(uri), BKCTL_PROTOCOL="v9"), "ledger", "read", lid, timeout=60)
    assert bad.returncode == 2 and "'v9' is not one of 'v3', 'v2'" in bad.stderr.decode()
    # a session keeps the protocol its connections speak
    s = sessions()
    assert s.run("ledger", "read", lid, "--to", "1")["rc"] == 0
    switched = s.run("--protocol", "v2", "ledger", "read", lid)
    assert switched["rc"] == 2
    assert s.run("ledger", "read", lid, "--from", "599")["out"] == "599\tentry-599\n"


def test_ledger_show_over_v2_says_why_its_lac_can_be_lower(bookie_cluster, metadata_uri):
    bookie_cluster(3)
    lid = json.loads(ok(bkctl(metadata_uri, "--json", "ledger", "create", "-e", "3", "-w", "2", "-a", "2")))[
        "ledger_id"
    ]
    ok(bkctl(metadata_uri, "ledger", "add", lid, "a", "b", "c"))  # pipelined, then an explicit LAC (v3)
    v3 = json.loads(ok(bkctl(metadata_uri, "--json", "ledger", "show", lid)))
    assert v3["last_add_confirmed"] == 2 and v3["lac_note"] is None
    v2 = json.loads(ok(bkctl(metadata_uri, "--protocol", "v2", "--json", "ledger", "show", lid)))
    assert v2["last_add_confirmed"] < 2 and "no READ_LAC request" in v2["lac_note"]
    human = ok(bkctl(metadata_uri, "--protocol", "v2", "ledger", "show", lid))
    assert "read over v2, which has no READ_LAC request" in human and "--protocol v3" in human
