"""The TLS keys (bkctl.wire.tls; Java's keys; the autorecovery daemon's client uses them too)
(section ``tls``).
"""

from __future__ import annotations

from ..errors import InvalidValue
from .option import JAVA_INT_MAX, Option

__all__ = ["OPTIONS"]


def _check_tls_factory(value: str) -> None:
    if not value.rsplit(".", 1)[-1] == "TLSContextFactory":
        raise InvalidValue("is not supported (only org.apache.bookkeeper.tls.TLSContextFactory)")


OPTIONS: tuple[Option, ...] = (
    # -- tls (bkctl.wire.tls; Java's keys; the autorecovery daemon's client uses them too) --
    Option(
        "tlsProviderFactoryClass",
        "str",
        None,
        "Set (to Java's org.apache.bookkeeper.tls.TLSContextFactory) to turn TLS on: clients must then "
        "send START_TLS (v3) before anything else, other requests are refused with EUA.",
        "tls",
        metavar_name="CLASS",
        check=_check_tls_factory,
    ),
    Option(
        "tlsProvider",
        "str",
        "OpenSSL",
        "Java's choice of TLS engine; bookied always uses OpenSSL (through pyOpenSSL).",
        "tls",
        choices=("OpenSSL", "JDK"),
    ),
    Option(
        "tlsKeyStoreType",
        "str",
        "PEM",
        "Format of tlsKeyStore: PEM (a private key file, with tlsCertificatePath) or PKCS12.",
        "tls",
        choices=("PEM", "PKCS12"),
    ),
    Option(
        "tlsKeyStore", "str", None, "The bookie's private key (PEM) or key store (PKCS12).", "tls", metavar_name="PATH"
    ),
    Option(
        "tlsKeyStorePasswordPath",
        "str",
        None,
        "A file holding the password of tlsKeyStore (of the PEM key, or of the PKCS12 store).",
        "tls",
        metavar_name="PATH",
    ),
    Option(
        "tlsCertificatePath",
        "str",
        None,
        "The bookie's PEM certificate chain (with a PEM tlsKeyStore).",
        "tls",
        metavar_name="PATH",
    ),
    Option(
        "tlsTrustStoreType",
        "str",
        "PEM",
        "Format of tlsTrustStore (PEM CA certificates only).",
        "tls",
        choices=("PEM",),
    ),
    Option(
        "tlsTrustStore",
        "str",
        None,
        "PEM CA certificates that client certificates (and, for autorecovery, other bookies' "
        "certificates) must chain to.",
        "tls",
        metavar_name="PATH",
    ),
    Option(
        "tlsTrustStorePasswordPath",
        "str",
        None,
        "Accepted for Java's configurations; a PEM trust store has no password.",
        "tls",
        metavar_name="PATH",
    ),
    Option(
        "tlsClientAuthentication",
        "bool",
        False,
        "Mutual TLS: clients must present a certificate that chains to tlsTrustStore.",
        "tls",
    ),
    Option(
        "tlsCertFilesRefreshDurationSeconds",
        "int",
        0,
        "How often the bookie checks its TLS files and reloads them when changed (0: never).",
        "tls",
        unit="s",
        min=0,
        max=JAVA_INT_MAX,
    ),
)
