"""Issue 15: an operator's CLI that never surprises.

Every test runs the real ``bkctl`` (a subprocess, or the shell in a real pty)
against a real ZooKeeper (and real bookieds where entries are involved).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import BKCTL, ok
from tests.support.cli import REPO as ROOT
from tests.support.cli import one_line_error as failed
from tests.support.cli import run_bkctl as run
from tests.support.ledgers import ENSEMBLE, make_ledgers
from tests.support.ports import Silent
from tests.support.terminal import Terminal, bkctl_env, complete, ended


@pytest.fixture
def two_clusters(metadata_uri, tmp_path):
    """Clusters a (ledger 1111) and b (ledger 4242) named in the config file; the env for a bkctl process."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    other = metadata_uri.rsplit("/", 1)[0] + "/other"
    with ZKMetadataStore(other, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        make_ledgers(store, [4242])
    with ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as store:
        make_ledgers(store, [1111])
    env = bkctl_env(tmp_path, NO_COLOR="1")
    config = Path(env["XDG_CONFIG_HOME"]) / "bkctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'default = "a"\n[clusters.a]\nmetadata_uri = "{metadata_uri}"\n[clusters.b]\nmetadata_uri = "{other}"\n'
    )
    return {"a": metadata_uri, "b": other, "env": env}


# -- 1. which cluster ---------------------------------------------------------------------


def test_an_explicit_cluster_beats_the_environment(two_clusters):
    env = dict(two_clusters["env"], BKCTL_METADATA_URI=two_clusters["a"])
    assert ok(run(env, "--cluster", "b", "ledger", "list")).split() == ["4242"]
    assert ok(run(env, "-m", two_clusters["b"], "ledger", "list")).split() == ["4242"]
    assert ok(run(env, "ledger", "list")).split() == ["1111"]  # the environment beats the default...
    env.pop("BKCTL_METADATA_URI")
    assert ok(run(env, "ledger", "list")).split() == ["1111"]  # ...which is used last
    info = json.loads(ok(run(env, "--cluster", "b", "cluster", "info", "--json")))
    assert (info["cluster"], info["uri"]) == ("b", two_clusters["b"])
    assert re.search(r"cluster\s+b\n", ok(run(env, "--cluster", "b", "cluster", "info")))


def test_conflicting_explicit_clusters_are_a_usage_error(two_clusters):
    env = two_clusters["env"]
    err = failed(run(env, "-m", two_clusters["a"], "--cluster", "b", "ledger", "list"), 2)
    assert "name different clusters" in err
    assert ok(run(env, "-m", two_clusters["b"], "--cluster", "b", "ledger", "list")).split() == ["4242"]


def test_use_holds_for_every_later_shell_command(two_clusters):
    env = dict(two_clusters["env"], BKCTL_METADATA_URI=two_clusters["a"], TERM="xterm")
    env.pop("NO_COLOR")
    term = Terminal([*BKCTL, "shell"], env)
    try:
        term.expect(r"bkctl:a>")
        term.line("use b")
        term.expect(r"bkctl:b>")
        term.line("ledger list")
        term.expect(r"\b4242\b")
        term.line("cluster info")
        term.expect(re.escape(two_clusters["b"]))
        term.line("ledger show 4242")
        term.expect(r"ledger\s+4242")
        term.line("ledger list")
        term.expect(r"bkctl:b>")
        assert "1111" not in term.text[term.mark :]
    finally:
        term.close()


# -- 2. global options anywhere ------------------------------------------------------------


def test_global_options_are_accepted_after_the_command(two_clusters):
    env = two_clusters["env"]
    doc = json.loads(ok(run(env, "ledger", "show", "1111", "--json")))
    assert doc["ledger_id"] == 1111
    doc = json.loads(ok(run(env, "ledger", "show", "4242", "--cluster", "b", "--json", "--no-color")))
    assert doc["ledger_id"] == 4242
    assert ok(run(env, "ledger", "list", "-m", two_clusters["b"], "-q")).split() == ["4242"]
    assert ok(run(env, "autorecovery", "status", "--json", "-v")).startswith("{")


# -- 3. a root without a cluster -----------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["ledger", "list"], ["autorecovery", "status"], ["ledger", "show", "1"], ["bookie", "list"], ["cluster", "info"]],
)
def test_a_mistyped_root_exits_3_with_a_hint(metadata_uri, tmp_path, command):
    typo = metadata_uri[:-1] + "z"  # .../ledgerz
    err = failed(run(bkctl_env(tmp_path), "-m", typo, *command), 3)
    assert f"no BookKeeper cluster at {typo}" in err
    root = "/" + metadata_uri.split("//", 1)[1].split("/", 1)[1]
    assert f"(did you mean {root}?)" in err


def test_metaformat_still_creates_a_cluster_at_an_empty_root(uninitialised_uri, tmp_path):
    env = bkctl_env(tmp_path)
    failed(run(env, "-m", uninitialised_uri, "ledger", "list"), 3)
    ok(run(env, "-m", uninitialised_uri, "metaformat", "--force"))
    assert ok(run(env, "-m", uninitialised_uri, "ledger", "list")) == ""


# -- 13. exit codes at the edges -------------------------------------------------------------


def test_a_reader_that_leaves_early_is_not_an_error(bookie_cluster, metadata_uri, tmp_path):
    bookie_cluster(3)
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri)
    ledger_id = ok(run(env, "ledger", "create")).strip()
    ok(run(env, "ledger", "add", ledger_id, "-", stdin=b"".join(b"entry %06d\n" % i for i in range(20000))))
    for pipeline in [
        f"bkctl ledger read {ledger_id} | head -1",
        f"bkctl ledger read {ledger_id} --json | head -1",
        f"bkctl ledger read {ledger_id} --format raw | head -c 5",
    ]:
        script = f'set -o pipefail; bkctl() {{ {sys.executable} -m bkctl "$@"; }}; {pipeline}'
        r = subprocess.run(["bash", "-c", script], capture_output=True, env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0, (pipeline, r.returncode, r.stderr.decode())
        assert r.stderr == b"", r.stderr
        assert r.stdout.startswith(b"0\tentry 000000\n") or r.stdout.startswith(b"{") or r.stdout == b"entry"


def test_ctrl_c_while_zookeeper_connects_exits_130(tmp_path):
    with Silent() as silent:  # a ZooKeeper that never answers: kazoo waits for it
        child = pexpect.spawn(
            BKCTL[0],
            [*BKCTL[1:], "-m", f"zk+hierarchical://{silent.address}/ledgers", "ledger", "list"],
            env=bkctl_env(tmp_path),
            cwd=str(ROOT),
            timeout=30,
        )
        silent.wait_for_caller()  # connecting (a Ctrl-C before it would stop Python starting up)
        child.sendintr()
        child.expect(pexpect.EOF, timeout=8)  # before the 10 s connection timeout
    assert ended(child).exitstatus == 130, (child.exitstatus, child.before)
    assert b"aborted" in child.before


def test_timeout_bounds_the_zookeeper_connection(tmp_path):
    err = failed(
        run(bkctl_env(tmp_path), "ledger", "list", "--timeout", "0.5", "-m", "zk+hierarchical://127.0.0.1:1/ledgers"), 5
    )
    assert "within 0.5s" in err


def test_edge_inputs_are_usage_errors(metadata_uri, tmp_path):
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri)
    for too_big in (2**63, 2**64):
        r = run(env, "ledger", "show", str(too_big))
        assert r.returncode == 2 and b"not in the range" in r.stderr, r.stderr
    failed(run(env, "-m", "http://127.0.0.1:1/ledgers", "ledger", "list"), 2)
    r = run(env, "shell", stdin=b"use foo://127.0.0.1:1/ledgers\n", timeout=60)
    assert r.returncode == 2, r.stderr


def test_an_output_error_says_what_it_was_writing(metadata_uri, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.fail("needs /dev/full")
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri)
    with open("/dev/full", "wb") as full:
        r = subprocess.run(
            [*BKCTL, "autorecovery", "status"], stdout=full, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=60
        )
    assert r.returncode == 1
    assert r.stderr.decode().strip() == "bkctl: error: writing the output: No space left on device"


# -- 4, 5, 8, 10, 11: entries through real bookies ---------------------------------------------


@pytest.fixture
def cluster_env(bookie_cluster, metadata_uri, tmp_path):
    """Three real bookieds; the env of a bkctl process pointed at them."""
    bookie_cluster(3)
    return bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1")


def new_ledger(env, entries: bytes, *, close: bool = False, binary: bool = False) -> str:
    ledger_id = ok(run(env, "ledger", "create")).strip()
    ok(run(env, "ledger", "add", ledger_id, *(["--binary"] if binary else []), "-", stdin=entries))
    if close:
        ok(run(env, "ledger", "close", ledger_id))
    return ledger_id


def test_open_ledgers_show_the_lac_from_the_bookies(cluster_env):
    ledger_id = new_ledger(cluster_env, b"a\nb\nc\nd\ne\n")  # stays OPEN: its metadata says -1
    doc = json.loads(ok(run(cluster_env, "ledger", "show", ledger_id, "--json")))
    assert (doc["state"], doc["last_entry_id"], doc["last_add_confirmed"]) == ("OPEN", -1, 4)
    human = ok(run(cluster_env, "ledger", "show", ledger_id))
    assert re.search(r"last add confirmed\s+4 \(read from the bookies\)", human)
    assert re.search(r"last entry\s+-1 \(metadata: set when the ledger is closed\)", human)
    listed = ok(run(cluster_env, "ledger", "list", "--state", "open"))
    assert re.search(rf"^{ledger_id}\s+OPEN\s+3/2/2\s+4 \(LAC\)\s+open\b", listed, re.M), listed
    [row] = [json.loads(line) for line in ok(run(cluster_env, "ledger", "list", "--json")).splitlines()]
    assert (row["ledger_id"], row["last_add_confirmed"]) == (int(ledger_id), 4)


def test_people_get_dates_and_sizes_scripts_raw_values(cluster_env):
    import datetime

    ledger_id = new_ledger(cluster_env, b"x" * 3000, close=True, binary=True)
    doc = json.loads(ok(run(cluster_env, "ledger", "show", ledger_id, "--json")))
    assert doc["length"] == 3000 and isinstance(doc["ctime"], int)
    human = ok(run(cluster_env, "ledger", "show", ledger_id))
    assert re.search(r"length\s+2\.9 KiB \(3000 bytes\)", human), human
    # one date format across commands, pulsar's included: UTC, milliseconds, Z
    utc = datetime.datetime.fromtimestamp(doc["ctime"] / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.")
    utc += f"{doc['ctime'] % 1000:03d}Z"
    assert re.search(rf"created\s+{re.escape(utc)}\n", human), human
    assert str(doc["ctime"]) not in human and "+00:00" not in human
    listed = ok(run(cluster_env, "ledger", "list", "--state", "closed"))
    assert "2.9 KiB" in listed and utc in listed


def test_piped_tables_are_neither_wrapped_nor_padded(cluster_env):
    new_ledger(cluster_env, b"a\n")
    out = ok(run(cluster_env, "ledger", "list", "--state", "open"))
    lines = out.splitlines()
    assert len(lines) == 3 and max(map(len, lines)) > 80  # three bookie ids on one line
    assert lines[-1].startswith("1 ledger, ")  # the totals of a filtered list
    assert all(line == line.rstrip() for line in lines)


def test_read_ranges_outside_the_ledger_fail(cluster_env):
    ledger_id = new_ledger(cluster_env, b"".join(b"%d\n" % i for i in range(10)))
    assert failed(run(cluster_env, "ledger", "read", ledger_id, "--from", "30000"), 3)
    assert "past the last confirmed entry (9)" in failed(
        run(cluster_env, "ledger", "read", ledger_id, "--from", "10"), 3
    )
    assert "--to 2 is before --from 5" in failed(
        run(cluster_env, "ledger", "read", ledger_id, "--from", "5", "--to", "2"), 2
    )
    assert ok(run(cluster_env, "ledger", "read", ledger_id, "--from", "9")) == "9\t9\n"


def test_binary_entries_go_out_base64_in_json(cluster_env):
    import base64

    payload = bytes(range(256))
    ledger_id = new_ledger(cluster_env, payload, binary=True)
    ok(run(cluster_env, "ledger", "add", ledger_id, "héllo"))
    rows = [json.loads(line) for line in ok(run(cluster_env, "ledger", "read", ledger_id, "--json")).splitlines()]
    assert rows[0]["encoding"] == "base64" and base64.b64decode(rows[0]["payload"]) == payload
    assert (rows[1]["encoding"], rows[1]["payload"]) == ("utf-8", "héllo")


def test_the_shell_pages_a_long_read(cluster_env, metadata_uri, tmp_path):
    ledger_id = new_ledger(cluster_env, b"".join(b"e%d\n" % i for i in range(2500)))
    paged = tmp_path / "paged.txt"
    env = dict(cluster_env, PAGER=f"cat > {paged}", TERM="xterm")
    env.pop("NO_COLOR")
    term = Terminal([*BKCTL, "shell"], env, rows=20)
    try:
        term.expect(r"bkctl>")
        term.line(f"ledger read {ledger_id}")
        term.expect(r"bkctl>")
        deadline = time.monotonic() + 20
        while not (paged.exists() and len(paged.read_text().splitlines()) == 2500):
            assert time.monotonic() < deadline, term.text[-2000:]
            term.settle(0.2)
        assert "e1234" not in term.text
    finally:
        term.close()


# -- 7. recover and decommission check their bookies ---------------------------------------------


def test_recover_and_decommission_check_the_bookie_ids(cluster_env, zkstore):
    for command in (
        ["recover", "127.0.0.1:1.2", "--force"],
        ["decommission", "127.0.0.1:1.2", "--force"],
        ["recover", "127.0.0.1:70000", "--dry-run"],
    ):
        r = run(cluster_env, *command)
        assert r.returncode == 2 and b"not a bookie id" in r.stderr, (command, r.stderr)
    for command in (["recover", "1.2.3.4:9999", "--force"], ["decommission", "1.2.3.4:9999", "--force"]):
        assert "unknown bookie 1.2.3.4:9999" in failed(run(cluster_env, *command), 3)
    live = zkstore.registration.writable_bookies()[0]
    assert "is running (registered)" in failed(run(cluster_env, "recover", live), 4)
    r = run(cluster_env, "recover", live, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert f"warning: bookie {live} is running" in r.stderr.decode()


# -- 12. the same words for the same things ------------------------------------------------------


def test_add_close_fence_recover_word_their_outcomes_alike(cluster_env):
    ledger_id = ok(run(cluster_env, "ledger", "create")).strip()
    assert ok(run(cluster_env, "ledger", "add", ledger_id, "x")).strip() == f"ledger {ledger_id}: added 1 entry, 0"
    assert (
        ok(run(cluster_env, "ledger", "add", ledger_id, "y", "z")).strip()
        == f"ledger {ledger_id}: added 2 entries, 1..2"
    )
    assert ok(run(cluster_env, "ledger", "add", ledger_id, "w", "-q")).strip() == "3"
    assert (
        ok(run(cluster_env, "ledger", "close", ledger_id)).strip()
        == f"ledger {ledger_id} is now closed: last entry 3, length 4 B"
    )
    already = f"ledger {ledger_id} was already closed"
    assert ok(run(cluster_env, "ledger", "close", ledger_id)).startswith(already + ": last entry 3")
    assert ok(run(cluster_env, "ledger", "recover", ledger_id)).startswith(already + ": last entry 3")
    assert ok(run(cluster_env, "ledger", "fence", ledger_id)).strip() == already + ": nothing to fence"


def test_the_lost_bookie_delay_reads_the_same_everywhere(metadata_uri, tmp_path):
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1")
    assert ok(run(env, "autorecovery", "lost-bookie-delay")).strip().startswith("not set")
    assert ok(run(env, "autorecovery", "lost-bookie-delay", "1h")).strip() == "3600 s"
    assert ok(run(env, "autorecovery", "lost-bookie-delay", "90s")).strip() == "90 s"
    for command in (["autorecovery", "status"], ["cluster", "info"]):
        assert re.search(r"lost bookie delay\s+90 s\n", ok(run(env, *command))), command
    assert json.loads(ok(run(env, "autorecovery", "lost-bookie-delay", "--json"))) == {"lost_bookie_recovery_delay": 90}
    assert run(env, "autorecovery", "lost-bookie-delay", "1y").returncode == 2


def test_a_dry_run_says_a_shared_failure_once(bookie_cluster, metadata_uri, tmp_path):
    procs = bookie_cluster(3)
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1")
    for _ in range(4):
        new_ledger(env, b"a\nb\n", close=True)
    victim = procs[0]
    victim.kill()
    r = run(env, "recover", victim.bookie_id, "--dry-run")
    out = r.stdout.decode()
    assert r.returncode == 1 and "4 ledgers could not be re-replicated" in r.stderr.decode(), r.stderr
    errors = [line for line in out.splitlines() if line.startswith("4 ledgers: ")]
    assert len(errors) == 1, out
    assert out.count(errors[0][len("4 ledgers: ") :]) == 1, out


# -- 14. a bookie that is down ---------------------------------------------------------------------


def test_bookie_info_on_a_down_bookie_shows_what_zookeeper_knows(bookie_cluster, metadata_uri, tmp_path):
    procs = bookie_cluster(1)
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1")
    victim = procs[0]
    victim.kill()
    r = run(env, "bookie", "info", victim.bookie_id)
    assert r.returncode == 5 and len(r.stderr.decode().strip().splitlines()) == 1, r.stderr
    out = r.stdout.decode()
    assert re.search(r"state\s+.*unreachable", out), out
    assert re.search(r"journal dirs\s+\S", out) and re.search(r"cookie instance\s+\S", out), out
    r = run(env, "bookie", "info", victim.bookie_id, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 5 and doc["reachable"] is False and doc["error"]
    assert doc["cookie"]["journal_dirs"] and doc["disk"] == {"total_bytes": None, "free_bytes": None}


# -- 11, 16. sandbox up: the export line, and bookie_id like every other command -----------------------


def test_sandbox_up_prints_the_export_line_and_bookie_ids(tmp_path):
    env = bkctl_env(tmp_path, NO_COLOR="1")
    d = tmp_path / "sb"
    try:
        out = ok(run(env, "sandbox", "up", "--bookies", "1", "--dir", d, timeout=180))
        [uri] = re.findall(r"^metadata URI: (\S+)$", out, re.M)
        assert f"export BKCTL_METADATA_URI='{uri}'" in out
        shell = subprocess.run(
            ["bash", "-c", out.splitlines()[-1] + '\necho "$BKCTL_METADATA_URI"'], capture_output=True, text=True
        )
        assert shell.stdout.strip() == uri  # the line works when pasted
        status = json.loads(ok(run(env, "sandbox", "status", "--dir", d, "--json")))
        [bookie] = status["bookies"]
        assert bookie["registered"] == "writable" and "id" not in bookie
        listed = [json.loads(line) for line in ok(run(env, "-m", uri, "bookie", "list", "--json")).splitlines()]
        assert [b["bookie_id"] for b in listed] == [bookie["bookie_id"]]
    finally:
        down = json.loads(ok(run(env, "sandbox", "down", "--dir", d, "--json", timeout=120)))
    assert [item.get("bookie_id") for item in down["stopped"] if item["kind"] == "bookie"] == [bookie["bookie_id"]]


# -- 17. export -q says nothing; counts are words ---------------------------------------------------


def test_export_quiet_is_silent(cluster_env, tmp_path):
    """A real process with its own Spark: -q leaves neither the JVM's warnings nor a progress
    bar (the summary it would print otherwise: test_export.py, in process)."""
    ledger_id = new_ledger(cluster_env, b"a\nb\n", close=True)
    r = run(cluster_env, "export", "-q", "-o", tmp_path / "q", "-l", ledger_id, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (r.stdout, r.stderr) == (b"", b"")
    assert sorted(p.name for p in (tmp_path / "q").iterdir())[:2] == ["_SUCCESS", "_manifest.json"]


# -- 16. help and shell polish -----------------------------------------------------------------------


def shell_on(env: dict, rows: int = 40) -> Terminal:
    env = dict(env, TERM="xterm")
    env.pop("NO_COLOR", None)
    term = Terminal([*BKCTL, "shell"], env, rows=rows)
    term.expect(r"bkctl(:\S+)?>")
    return term


def test_shell_polish(cluster_env, tmp_path):

    ledger_id = new_ledger(cluster_env, b"one\n")
    editor = tmp_path / "editor.sh"  # $EDITOR: turns "show" into "read" in the file it is given
    editor.write_text('#!/bin/sh\nsed -i "s/ledger show/ledger read/" "$1"\n')
    editor.chmod(0o755)
    term = shell_on(dict(cluster_env, EDITOR=str(editor), VISUAL=str(editor)))
    try:
        term.line("ledger show --bogus")  # a usage error: one line, the shell's help
        term.expect(r"bkctl: error: No such option '--bogus'.* \(see: help ledger show\)")
        assert "Try 'bkctl" not in term.text
        term.line("ledger show \\")  # a command over two lines
        term.expect(r"(?m)^\.\.\.")  # the continuation prompt (its space may be drawn as a cursor move)
        term.line(ledger_id)
        term.expect(rf"ledger\s+{ledger_id}\b")
        term.line("\\e")  # the last command, edited: read instead of show
        term.expect(r"0\tone")
        term.line("format json")
        term.line(f"ledger show {ledger_id}")  # pretty JSON on a terminal
        term.expect(r'\{\n  "ack_quorum": 2,\n')
        term.line("format table")
        term.line("clear")
        term.expect(r"bkctl>")
        seen = complete(term, "autorecovery ", r"query-status")
        assert "doing what, since and until when" in seen  # not cut at 45 characters
        term.send("\x15")  # Ctrl-U: drop the half-typed line
        term.line(f"ledger add {ledger_id} -")  # stdin is the terminal: say how to end it
        term.expect(r"reading entries from the terminal, one per line; Ctrl-D ends them")
        term.line("two")
        term.send("\x04")
        term.expect(rf"ledger {ledger_id}: added 1 entry, 1")
    finally:
        term.close()


def test_script_errors_name_their_line(metadata_uri, tmp_path):
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1")
    script = b"autorecovery status\n\nledger show 999\nledger list \\\n  --bogus\n"
    r = run(env, "shell", stdin=script, timeout=60)
    assert r.returncode == 2
    err = r.stderr.decode().splitlines()
    assert err[0].startswith("bkctl: line 3: error: ") and "999" in err[0]
    assert err[1].startswith("bkctl: line 4: error: No such option '--bogus'")


def test_completions_offer_paths_open_ledgers_and_stopped_bookies(bookie_cluster, metadata_uri, tmp_path, zkstore):

    procs = bookie_cluster(3, zkTimeout=4000)  # the killed bookie's registration goes within 4-6 s, not 10-12
    env = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri)
    open_id, closed_id = 97531, 97532  # ids that nothing else on the screen looks like
    md = LedgerMetadata.new(ENSEMBLE)
    zkstore.ledgers.create(md, ledger_id=open_id)
    zkstore.ledgers.create(md.closed(4, 50), ledger_id=closed_id)
    (tmp_path / "exports-here").mkdir()
    procs[0].kill()
    deadline = time.monotonic() + 30
    while procs[0].bookie_id in zkstore.registration.writable_bookies():  # its ZooKeeper session ends
        assert time.monotonic() < deadline
        time.sleep(0.2)
    term = shell_on(env)
    try:
        seen = complete(term, "ledger close 975", rf"\b{open_id}\b")
        assert str(closed_id) not in seen  # closed: nothing to close
        term.send("\x15")
        assert str(closed_id) in complete(term, "ledger show 975", rf"\b{closed_id}\b")  # any ledger
        term.send("\x15")
        seen = complete(term, f"export --out {tmp_path}/exports-h", r"exports-here")
        assert "exports-here" in seen
        term.send("\x15")
        seen = complete(term, "decommission 127.0.0.1:", re.escape(procs[0].bookie_id))
        assert procs[1].bookie_id not in seen  # running: not one to decommission
    finally:
        term.close()
