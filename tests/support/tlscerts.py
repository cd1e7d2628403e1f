"""Throw-away CAs and certificates for TLS tests (trustme), written as PEM files."""

from __future__ import annotations

from pathlib import Path


def write_certs(d: Path, leaves: dict[str, str], *, pkcs8: bool = False) -> Path:
    """In ``d``: ``ca.pem`` and ``other-ca.pem`` (a CA that signed nothing here), and for each
    ``name: identity`` of ``leaves`` ``name.key`` and ``name.pem`` (the chain) signed by ``ca.pem``
    -- or, with ``pkcs8``, one ``name.pem`` holding the PKCS#8 key then the chain (what ZooKeeper's
    PEM key store reads).  A leaf named ``stranger`` is signed by the other CA."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    for name, identity in leaves.items():
        leaf = (other if name == "stranger" else ca).issue_cert(identity)
        chain = b"".join(c.bytes() for c in leaf.cert_chain_pems)
        if pkcs8:
            key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
            (d / f"{name}.pem").write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
                + chain
            )
        else:
            leaf.private_key_pem.write_to_path(str(d / f"{name}.key"))
            (d / f"{name}.pem").write_bytes(chain)
    return d


#: Java's TLS provider class, as bk_server.conf names it.
TLS_FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"


def bookie_tls_settings(certs: Path, **extra) -> dict:
    """bk_server.conf keys of a bookie serving TLS with ``certs``' ``bookie`` certificate (PEM), trusting
    ``ca.pem`` for client certificates; ``extra`` adds keys (``tlsClientAuthentication="true"``)."""
    return dict(
        tlsProviderFactoryClass=TLS_FACTORY,
        tlsKeyStoreType="PEM",
        tlsKeyStore=certs / "bookie.key",
        tlsCertificatePath=certs / "bookie.pem",
        tlsTrustStore=certs / "ca.pem",
        **extra,
    )
