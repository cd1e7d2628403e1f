"""Bookies that speak TLS (v3 START_TLS, then the handshake on the same socket), for real:
the ledger life cycle, export and recover through bkctl --tls-ca; a plain client refused;
a wrong CA; mutual TLS with tlsClientAuthentication=true.  Certificates are made here."""
from __future__ import annotations

import json

import pytest

from tests.integration.test_cli_ledger import bkctl, json_lines, ok, one_line_error
from tests.tlscerts import write_certs

pytestmark = pytest.mark.integration

TLS_FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_certs(tmp_path_factory.mktemp("bookie-certs"),
                       {"bookie": "127.0.0.1", "client": "bkctl-client", "stranger": "stranger"})


def tls_settings(certs, **extra) -> dict:
    return dict(tlsProviderFactoryClass=TLS_FACTORY, tlsKeyStoreType="PEM", tlsKeyStore=certs / "bookie.key",
                tlsCertificatePath=certs / "bookie.pem", tlsTrustStore=certs / "ca.pem", **extra)


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

    # a client that did not start TLS is refused (EUA for every request), clearly
    err = one_line_error(bkctl(uri, "ledger", "read", lid), 1)
    assert "TLS" in err, err

    # a CA that did not sign the bookies' certificates
    err = one_line_error(bkctl(uri, "--tls-ca", certs / "other-ca.pem", "ledger", "read", lid), 5)
    assert "certificate verify failed" in err, err

    doc = json.loads(ok(bkctl(uri, *tls, "--json", "export", "--out", tmp_path / "export", "--ledgers", lid,
                              timeout=300)))
    assert doc["entries"] == 50

    victim = zkstore.read_ledger(lid)[0].last_ensemble[0]
    next(p for p in procs if p.bookie_id == victim).kill()
    ok(bkctl(uri, *tls, "--json", "recover", victim, "--force", timeout=300))
    md = zkstore.read_ledger(lid)[0]
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
    one_line_error(bkctl(uri, "--tls-ca", certs / "ca.pem", "--tls-cert", certs / "stranger.pem",
                         "--tls-key", certs / "stranger.key", "ledger", "add", lid, "y"), 5)
    ok(bkctl(uri, *mine, "ledger", "close", lid))
    assert [r["ledger_id"] for r in json_lines(ok(bkctl(uri, "--json", "ledger", "list")))] == [lid]
