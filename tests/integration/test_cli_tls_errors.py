"""TLS failures name their cause (issue 23 item 3), through the real CLI against real ZooKeeper and
real TLS bookieds (tlsClientAuthentication=true): a certificate that does not verify, a plain-text
client, unusable TLS files, every bookie failing, and the bookie's own log of refused handshakes."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bkctl_bytes as bkctl
from tests.support.cli import json_lines, ok, one_line_error
from tests.support.tlscerts import bookie_tls_settings as tls_settings
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def test_tls_failures_name_their_cause(bookie_cluster, metadata_uri, tls_certs, tmp_path):
    certs = tls_certs
    procs = bookie_cluster(3, **tls_settings(certs, tlsClientAuthentication="true"))
    uri = metadata_uri
    mine = ["--tls-ca", certs / "ca.pem", "--tls-cert", certs / "client.pem", "--tls-key", certs / "client.key"]
    ok(bkctl(uri, *mine, "simpletest", "-n", "3"))
    lid = json.loads(ok(bkctl(uri, *mine, "--json", "ledger", "create", "-e", "3", "-w", "2", "-a", "2")))["ledger_id"]
    ok(bkctl(uri, *mine, "ledger", "add", lid, "x"))

    # no client certificate: the client says what is missing, each bookie logs whom it refused and why
    # (first: the bookies report one refusal per client host every 10 s)
    err = one_line_error(bkctl(uri, "--tls-ca", certs / "ca.pem", "bookie", "list", "--disk"), 5)
    assert "client certificate" in err
    for p in procs:

        def refusals(p=p):
            return [
                line
                for line in p.log_path.read_text().splitlines()
                if "WARNING" in line and "TLS handshake with 127.0.0.1:" in line
            ]

        warnings = wait_for(refusals, timeout=30, what=f"bookie {p.bookie_id} to log the refusal")
        assert "refused: peer did not return a certificate" in warnings[0], p.log_tail()

    # a CA that did not sign the bookies' certificates: exit 5 and the reason, from every command
    wrong = ["--tls-ca", certs / "other-ca.pem", "--tls-cert", certs / "client.pem", "--tls-key", certs / "client.key"]
    for args in (["simpletest", "-n", "3"], ["bookie", "list", "--disk"], ["ledger", "read", lid]):
        err = one_line_error(bkctl(uri, *wrong, *args), 5)
        assert "certificate verify failed" in err, (args, err)
        # the cause leads: not "need 1 writable bookie outside the ensemble" (no replacement for a bookie
        # this client cannot talk to) with the certificate error last
        assert "writable bookie" not in err or err.index("certificate") < err.index("writable bookie"), err

    # a plain-text client: the bookie requires TLS, never a password problem
    for args in (["simpletest", "-n", "3"], ["bookie", "list", "--all", "--disk"]):
        err = one_line_error(bkctl(uri, *args), 5)
        assert "requires TLS (use --tls-ca)" in err and "password" not in err, (args, err)
    rows = json_lines(bkctl(uri, "--json", "bookie", "list", "--disk").stdout.decode())
    assert rows[-1]["total"]["answered"] == 0
    assert all("requires TLS" in r["error"] for r in rows[:-1])

    # a CA file that is not PEM: one line, once, exit 2 (nothing is sent to any bookie)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    for args in (["simpletest", "-n", "3"], ["bookie", "list", "--disk"]):
        err = one_line_error(bkctl(uri, "--tls-ca", garbage, *args), 2)
        assert err.count(str(garbage)) == 1 and "not PEM CA certificates" in err and "http" not in err, err
