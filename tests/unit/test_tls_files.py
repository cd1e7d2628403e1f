"""TLS files for bookies and clients (wire/tls.py): PEM and PKCS#12, encrypted keys, reloading,
and a real handshake between the contexts they build (in memory, Twisted's loopback)."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from bkctl.wire.tls import ReloadingServerTLS, TLSConfigError, TLSFiles, describe_tls_failure
from tests.support.tlscerts import write_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_certs(tmp_path_factory.mktemp("tls"), {"bookie": "127.0.0.1", "client": "c", "stranger": "s"})


def _handshake(server_ctx, client_ctx) -> tuple[bool, str]:
    """Run a TLS handshake in memory; (succeeded, what failed)."""
    from OpenSSL import SSL

    server = SSL.Connection(server_ctx.getContext(), None)
    server.set_accept_state()
    client = SSL.Connection(client_ctx.getContext(), None)
    client.set_connect_state()
    for _ in range(20):
        for a, b in ((client, server), (server, client)):
            try:
                a.do_handshake()
            except SSL.WantReadError:
                pass
            except SSL.Error as exc:
                return False, str(exc)
            try:
                data = a.bio_read(65536)
            except SSL.WantReadError:
                data = b""
            if data:
                b.bio_write(data)
    try:  # TLS 1.3: a refused client certificate shows on the first read
        server.recv(1)
    except SSL.WantReadError:
        pass
    except SSL.Error as exc:
        return False, str(exc)
    return True, ""


def test_pem_handshake_and_a_wrong_ca(certs):
    server = TLSFiles(cert=str(certs / "bookie.pem"), key=str(certs / "bookie.key")).server_context()
    assert _handshake(server, TLSFiles(ca=str(certs / "ca.pem")).client_context())[0]
    ok, why = _handshake(server, TLSFiles(ca=str(certs / "other-ca.pem")).client_context())
    assert not ok and "certificate verify failed" in describe_tls_failure(Exception(why))


def test_mutual_tls_needs_a_client_certificate_from_the_trusted_ca(certs):
    server = TLSFiles(
        cert=str(certs / "bookie.pem"),
        key=str(certs / "bookie.key"),
        ca=str(certs / "ca.pem"),
        require_client_cert=True,
    ).server_context()
    ca = str(certs / "ca.pem")
    assert _handshake(
        server, TLSFiles(ca=ca, cert=str(certs / "client.pem"), key=str(certs / "client.key")).client_context()
    )[0]
    assert not _handshake(server, TLSFiles(ca=ca).client_context())[0]
    assert not _handshake(
        server, TLSFiles(ca=ca, cert=str(certs / "stranger.pem"), key=str(certs / "stranger.key")).client_context()
    )[0]
    with pytest.raises(TLSConfigError, match="tlsTrustStore"):
        TLSFiles(
            cert=str(certs / "bookie.pem"), key=str(certs / "bookie.key"), require_client_cert=True
        ).server_context()


def test_pkcs12_store_and_encrypted_pem_key_with_password_files(certs, tmp_path):
    key = serialization.load_pem_private_key((certs / "bookie.key").read_bytes(), None)
    from cryptography import x509

    chain = x509.load_pem_x509_certificates((certs / "bookie.pem").read_bytes())
    (tmp_path / "pw").write_text("s3cret\n")
    store = pkcs12.serialize_key_and_certificates(
        b"bookie", key, chain[0], chain[1:] or None, serialization.BestAvailableEncryption(b"s3cret")
    )
    (tmp_path / "bookie.p12").write_bytes(store)
    enc = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"s3cret")
    )
    (tmp_path / "enc.key").write_bytes(enc)
    client = TLSFiles(ca=str(certs / "ca.pem")).client_context()
    p12 = TLSFiles(pkcs12=str(tmp_path / "bookie.p12"), pkcs12_password_path=str(tmp_path / "pw"))
    assert _handshake(p12.server_context(), client)[0]
    pem = TLSFiles(
        cert=str(certs / "bookie.pem"), key=str(tmp_path / "enc.key"), key_password_path=str(tmp_path / "pw")
    )
    assert _handshake(pem.server_context(), client)[0]
    with pytest.raises(TLSConfigError, match="wrong password"):
        TLSFiles(pkcs12=str(tmp_path / "bookie.p12")).server_context()
    with pytest.raises(TLSConfigError, match="cannot read"):
        TLSFiles(cert=str(certs / "bookie.pem"), key=str(tmp_path / "missing.key")).server_context()


def test_reloading_picks_up_changed_files(certs, tmp_path):
    cert, key = tmp_path / "b.pem", tmp_path / "b.key"
    cert.write_bytes((certs / "bookie.pem").read_bytes())
    key.write_bytes((certs / "bookie.key").read_bytes())
    now = [0.0]
    tls = ReloadingServerTLS(TLSFiles(cert=str(cert), key=str(key)), refresh=10, clock=lambda: now[0])
    first = tls.context()
    cert.write_bytes((certs / "stranger.pem").read_bytes())
    key.write_bytes((certs / "stranger.key").read_bytes())
    os.utime(cert, ns=(1, 1))
    assert tls.context() is first  # not checked before refresh seconds
    now[0] = 11
    second = tls.context()
    assert second is not first
    assert _handshake(second, TLSFiles(ca=str(certs / "other-ca.pem")).client_context())[0]
    key.write_text("garbage")
    os.utime(key, ns=(2, 2))
    now[0] = 30
    assert tls.context() is second  # unusable files: the previous certificate stays
    never = ReloadingServerTLS(TLSFiles(cert=str(certs / "bookie.pem"), key=str(certs / "bookie.key")), refresh=0)
    assert never.context() is never.context()
