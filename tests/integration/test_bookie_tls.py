"""Bookies that speak TLS (v3 START_TLS, then the handshake on the same socket), for real:
the ledger life cycle, export and recover through bkctl --tls-ca; a plain client refused;
a wrong CA; mutual TLS with tlsClientAuthentication=true.  Certificates are made here."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bkctl_bytes as bkctl
from tests.support.cli import json_lines, ok, one_line_error
from tests.support.tlscerts import bookie_tls_settings as tls_settings
from tests.support.tlscerts import write_certs

pytestmark = pytest.mark.xdist_group("bookie_tls")  # module-scoped fixtures: one xdist worker runs the whole module


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_certs(
        tmp_path_factory.mktemp("bookie-certs"),
        {"bookie": "127.0.0.1", "client": "bkctl-client", "stranger": "stranger"},
    )


def test_tls_bookies_life_cycle_export_recover_and_refusals(bookie_cluster, metadata_uri, zkstore, certs, tmp_path):
    procs = bookie_cluster(4, **tls_settings(certs))
    uri = metadata_uri
    tls = ["--tls-ca", certs / "ca.pem"]
    lid = json.loads(ok(bkctl(uri, *tls, "--json", "ledger", "create", "-e", "3", "-w", "2", "-a", "2")))["ledger_id"]
    lines = "".join(f"entry-{i}\n" for i in range(50)).encode()
    ok(bkctl(uri, *tls, "ledger", "add", lid, "-", stdin=lines))
    ok(bkctl(uri, *tls, "ledger", "close", lid))
    read = ok(bkctl(uri, *tls, "ledger", "read", lid))
    assert "entry-0" in read and "entry-49" in read
    # the registration says so, as Java's: the bookie-rpc endpoint has the "tls" extension
    info = zkstore.registration.service_info(procs[0].bookie_id)
    assert info.endpoint().extensions == ("tls",)
    # v2 inside TLS, as Pulsar's client: the START_TLS exchange is v3, the reads (batch reads) v2
    assert ok(bkctl(uri, *tls, "--protocol", "v2", "ledger", "read", lid)) == read

    # a client that did not start TLS is refused (EUA for every request), clearly
    err = one_line_error(bkctl(uri, "ledger", "read", lid), 1)
    assert "TLS" in err, err

    # a CA that did not sign the bookies' certificates
    err = one_line_error(bkctl(uri, "--tls-ca", certs / "other-ca.pem", "ledger", "read", lid), 5)
    assert "certificate verify failed" in err, err

    doc = json.loads(
        ok(bkctl(uri, *tls, "--json", "export", "--out", tmp_path / "export", "--ledgers", lid, timeout=300))
    )
    assert doc["entries"] == 50

    victim = zkstore.ledgers.read(lid)[0].last_ensemble[0]
    next(p for p in procs if p.bookie_id == victim).kill()
    ok(bkctl(uri, *tls, "--json", "recover", victim, "--force", timeout=300))
    md = zkstore.ledgers.read(lid)[0]
    assert victim not in md.bookies
    assert "entry-49" in ok(bkctl(uri, *tls, "ledger", "read", lid))


def test_mutual_tls(bookie_cluster, metadata_uri, certs):
    bookie_cluster(2, **tls_settings(certs, tlsClientAuthentication="true"))
    uri = metadata_uri
    mine = ["--tls-ca", certs / "ca.pem", "--tls-cert", certs / "client.pem", "--tls-key", certs / "client.key"]
    lid = json.loads(ok(bkctl(uri, *mine, "--json", "ledger", "create", "-e", "2", "-w", "2", "-a", "2")))["ledger_id"]
    ok(bkctl(uri, *mine, "ledger", "add", lid, "x"))
    # no client certificate, or one from another CA: the handshake fails
    err = one_line_error(bkctl(uri, "--tls-ca", certs / "ca.pem", "ledger", "add", lid, "y"), 5)
    assert "TLS" in err
    one_line_error(
        bkctl(
            uri,
            "--tls-ca",
            certs / "ca.pem",
            "--tls-cert",
            certs / "stranger.pem",
            "--tls-key",
            certs / "stranger.key",
            "ledger",
            "add",
            lid,
            "y",
        ),
        5,
    )
    ok(bkctl(uri, *mine, "ledger", "close", lid))
    assert [r["ledger_id"] for r in json_lines(ok(bkctl(uri, "--json", "ledger", "list")))] == [lid]


def test_autorecovery_inside_tls_bookies_copies_over_tls_within_the_lost_bookies_rack(
    bookie_cluster, metadata_uri, zkstore, rack_map, certs
):
    """bookied's autorecovery daemon is a TLS client of the other bookies (same files) and
    chooses replacements with the rack-aware policy (Java's default): the lost bookie's
    rack-mate takes its place."""
    import time

    # a failed attempt (a copy timed out on a loaded machine) is tried again after 2 s, not
    # after Java's default 300 s that would outlast the wait below
    procs = bookie_cluster(
        4,
        **tls_settings(
            certs,
            autoRecoveryDaemonEnabled="true",
            zkTimeout=4000,
            auditorPeriodicBookieCheckInterval=0,
            auditorPeriodicCheckInterval=0,
            lockReleaseOfFailedLedgerGracePeriod=2000,
        ),
    )
    uri = metadata_uri
    tls = ["--tls-ca", certs / "ca.pem"]
    racks = {p.bookie_id: f"/rack{i // 2}" for i, p in enumerate(procs)}
    for bookie, rack in racks.items():
        ok(bkctl(uri, "bookie", "rack", "set", bookie, "--rack", rack))
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    lid = json.loads(ok(bkctl(uri, *tls, "--json", "ledger", "create", "-e", "2", "-w", "2", "-a", "2")))["ledger_id"]
    ok(bkctl(uri, *tls, "ledger", "add", lid, "-", stdin=b"".join(b"e%d\n" % i for i in range(30))))
    ok(bkctl(uri, *tls, "ledger", "close", lid))
    ensemble = zkstore.ledgers.read(lid)[0].last_ensemble
    assert {racks[b] for b in ensemble} == {"/rack0", "/rack1"}
    victim = ensemble[0]
    mate = next(b for b in racks if racks[b] == racks[victim] and b != victim)
    next(p for p in procs if p.bookie_id == victim).kill()
    deadline = time.monotonic() + 120
    while victim in zkstore.ledgers.read(lid)[0].bookies:
        if time.monotonic() > deadline:
            status = bkctl(uri, *tls, "autorecovery", "status")
            logs = "\n".join(f"--- {p.bookie_id}\n{p.log_tail(15)}" for p in procs if p.bookie_id != victim)
            pytest.fail(
                "the daemons did not re-replicate the lost bookie's ledger\n"
                f"{status.stdout.decode(errors='replace')}{status.stderr.decode(errors='replace')}\n{logs}"
            )
        time.sleep(0.5)
    assert zkstore.ledgers.read(lid)[0].last_ensemble[0] == mate
    assert "e29" in ok(bkctl(uri, *tls, "ledger", "read", lid))
