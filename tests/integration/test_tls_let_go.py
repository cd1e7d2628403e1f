"""Connections that always let go (issue 23): against a TLS bookie that behaves as Java's does on
close -- it completes START_TLS and the handshake, serves requests (a real bookied behind it), and
never answers the client's close_notify nor closes the socket -- every command still exits, the shell
too.  Each process gets a generous timeout: a command that waited for the peer to close would hang
until it, and the test fails on the timeout, not on a measured duration."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bkctl_bytes as bkctl
from tests.support.cli import env_for, ok
from tests.support.java_tls_peer import JavaTLSPeer

pytestmark = pytest.mark.timeout(400)


@pytest.fixture
def java_peer(bookie_cluster, zk_client, zkstore, tls_certs):
    [bookie] = bookie_cluster(1)
    peer = JavaTLSPeer(bookie.port, str(tls_certs / "bookie.pem"), str(tls_certs / "bookie.key"))
    peer.advertise(zk_client, zkstore.root, bookie.bookie_id)
    try:
        yield peer
    finally:
        peer.stop()


def test_every_command_exits_although_the_peer_never_closes(java_peer, metadata_uri, tls_certs):
    uri = metadata_uri
    tls = ["--tls-ca", tls_certs / "ca.pem"]

    def run(*args, stdin=None):
        # a command still waiting for the peer to close is killed at the timeout: TimeoutExpired fails the test
        return ok(bkctl(uri, *tls, *args, stdin=stdin, timeout=90))

    lid = json.loads(run("--json", "ledger", "create", "-e", "1", "-w", "1", "-a", "1"))["ledger_id"]
    run("ledger", "add", lid, "-", stdin=b"one\ntwo\nthree\n")
    run("ledger", "read", lid)
    run("ledger", "close", lid)
    assert run("ledger", "read", lid).splitlines()[:3] == ["0\tone", "1\ttwo", "2\tthree"]
    assert "simpletest OK" in run("simpletest", "-e", "1", "-w", "1", "-a", "1", "-n", "5")
    rows = [json.loads(line) for line in run("--json", "bookie", "list", "--disk").splitlines()]
    assert rows[-1]["total"]["answered"] == 1
    # each command went through the Java-like front and closed with a close_notify it never answered
    assert java_peer.served >= 6
    assert java_peer.close_notifies >= 6


def test_the_shell_exits_although_the_peer_never_closes(java_peer, metadata_uri, tls_certs, tmp_path):
    import sys

    import pexpect

    child = pexpect.spawn(
        sys.executable,
        ["-m", "bkctl", "--tls-ca", str(tls_certs / "ca.pem"), "shell", "-m", metadata_uri],
        env=dict(env_for(metadata_uri), HOME=str(tmp_path)),
        encoding="utf-8",
        timeout=90,
        dimensions=(40, 160),
    )
    try:
        child.expect(r"bkctl(:\S+)?>")
        child.sendline("simpletest -e 1 -w 1 -a 1 -n 3")
        child.expect("simpletest OK")
        child.expect(r"bkctl(:\S+)?>")
        served = java_peer.served
        child.sendline("exit")
        child.expect(pexpect.EOF)  # within the timeout, although the connection's peer never closes
    finally:
        child.close(force=True)
    assert served >= 1 and java_peer.close_notifies >= 1
