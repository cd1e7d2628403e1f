"""A throw-away CA and a bookie certificate for ``bkctl sandbox up --tls``.

Made with the ``cryptography`` library (which Twisted's TLS needs anyway):
an EC P-256 CA valid for a year and a certificate for 127.0.0.1/localhost
signed by it, written as PEM files (``ca.pem``, ``bookie.pem``,
``bookie.key``).  Existing files are kept, so a restarted sandbox keeps its CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path


def ensure_sandbox_certs(directory: Path) -> dict[str, str]:
    """``{"ca", "cert", "key"}`` paths in ``directory``, made when missing."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"ca": directory / "ca.pem", "cert": directory / "bookie.pem", "key": directory / "bookie.key"}
    if not all(p.exists() for p in paths.values()):
        _make(paths)
    return {k: str(v) for k, v in paths.items()}


def _make(paths: dict[str, Path]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=365)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bkctl sandbox CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bkctl sandbox bookie")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths["key"].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    paths["key"].chmod(0o600)
    paths["cert"].write_bytes(cert.public_bytes(pem))
    paths["ca"].write_bytes(ca.public_bytes(pem))
