"""TLS between clients and bookies (the v3 protocol's START_TLS).

The exchange, as Java's ``PerChannelBookieClient`` and bookie do it: on a
fresh connection the client sends a v3 ``START_TLS`` request in the clear;
the bookie answers ``EOK`` with an empty ``StartTLSResponse`` (``EBADREQ``
when TLS is not configured), still in the clear, and then both run the TLS
handshake on the same socket -- the client sends the ClientHello.  A v2
client does the same (START_TLS is a v3 message even then) and speaks v2
inside TLS: the bookie tells v3 from v2 frame by frame (BookKeeper's
proto/BookieProtoEncoding.java, RequestDecoder).

:class:`TLSFiles` names the files (PEM, or a PKCS#12 key store) and builds
Twisted context factories from them: :meth:`TLSFiles.client_context` verifies
the bookie's certificate chain against ``ca`` (no host name check, as Java's
default ``tlsHostnameVerificationEnabled=false``) and presents ``cert`` when
given; :meth:`TLSFiles.server_context` presents the bookie's certificate and,
with ``require_client_cert`` (``tlsClientAuthentication=true``), asks for and
verifies the client's.  :class:`ReloadingServerTLS` re-reads the files when
they change (``tlsCertFilesRefreshDurationSeconds``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Twisted's TLS loads OpenSSL: only when a context is built
    from twisted.internet import ssl

    # the type of ssl.trustRootFromCertificates(), which twisted.internet.ssl does not re-export
    from twisted.internet._sslverify import IOpenSSLTrustRoot
    from twisted.python.failure import Failure

__all__ = ["TLSConfigError", "TLSFiles", "ReloadingServerTLS", "describe_tls_failure", "tls_error_reason"]


class TLSConfigError(ValueError):
    """A TLS file that is missing, unreadable or not what its key says."""


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TLSConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def _password(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    return _read(path, f"{what} password file").strip() or None


def _first_sentence(exc: BaseException) -> str:
    """cryptography's message without its FAQ link and error code names."""
    return str(exc).split(". ")[0].rstrip(".") or type(exc).__name__


@dataclass(frozen=True)
class TLSFiles:
    """``ca``: PEM CA certificates to verify the peer with; ``cert``/``key``:
    our PEM certificate chain and private key (``key_password_path``: a file
    holding the key's password); or ``pkcs12`` (+ ``pkcs12_password_path``):
    key and chain in one PKCS#12 key store."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password_path: str | None = None
    pkcs12: str | None = None
    pkcs12_password_path: str | None = None
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise TLSConfigError("a TLS certificate needs both its certificate and its key file")
        if self.pkcs12 and self.cert:
            raise TLSConfigError("give either a PKCS#12 key store or PEM certificate and key, not both")

    @property
    def has_identity(self) -> bool:
        return bool(self.cert or self.pkcs12)

    def files(self) -> list[str]:
        return [
            p
            for p in (self.ca, self.cert, self.key, self.key_password_path, self.pkcs12, self.pkcs12_password_path)
            if p
        ]

    # -- loading -------------------------------------------------------------------
    def _identity_pem(self) -> tuple[bytes, list[bytes]] | None:
        """(unencrypted PKCS#8 key PEM, [certificate PEM, ...]) of our identity."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        plain = serialization.NoEncryption()
        pem = serialization.Encoding.PEM
        if self.pkcs12:
            from cryptography.hazmat.primitives.serialization import pkcs12

            data = _read(self.pkcs12, "PKCS#12 key store")
            try:
                key, cert, extra = pkcs12.load_key_and_certificates(
                    data, _password(self.pkcs12_password_path, "key store")
                )
            except ValueError as exc:
                raise TLSConfigError(f"{self.pkcs12}: not a PKCS#12 key store or wrong password ({exc})") from None
            if key is None or cert is None:
                raise TLSConfigError(f"{self.pkcs12} holds no private key and certificate")
            chain = [cert] + list(extra or [])
        elif self.cert and self.key:  # (both or neither: __post_init__)
            try:
                key = serialization.load_pem_private_key(
                    _read(self.key, "TLS key"), _password(self.key_password_path, "key")
                )
            except (ValueError, TypeError) as exc:
                raise TLSConfigError(
                    f"{self.key}: not a PEM private key or wrong password ({_first_sentence(exc)})"
                ) from None
            try:
                chain = x509.load_pem_x509_certificates(_read(self.cert, "TLS certificate"))
            except ValueError as exc:
                raise TLSConfigError(f"{self.cert}: not PEM certificates ({_first_sentence(exc)})") from None
        else:
            return None
        key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, plain)
        return key_pem, [c.public_bytes(pem) for c in chain]

    def _trust(self) -> IOpenSSLTrustRoot | None:
        from twisted.internet import ssl

        if not self.ca:
            return None
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        try:
            certs = x509.load_pem_x509_certificates(_read(self.ca, "CA file"))
        except ValueError as exc:
            raise TLSConfigError(f"{self.ca}: not PEM CA certificates ({_first_sentence(exc)})") from None
        root: IOpenSSLTrustRoot = ssl.trustRootFromCertificates(  # untyped in Twisted
            [ssl.Certificate.loadPEM(c.public_bytes(serialization.Encoding.PEM)) for c in certs]
        )
        return root

    def _options(self, trust: IOpenSSLTrustRoot | None = None) -> ssl.CertificateOptions:
        """Our identity (if any), and ``trust`` to verify the peer with (None: no verification)."""
        from twisted.internet import ssl

        identity = self._identity_pem()
        if identity is None:
            return ssl.CertificateOptions(trustRoot=trust)
        key_pem, chain = identity
        own = ssl.PrivateCertificate.loadPEM(chain[0] + key_pem)
        return ssl.CertificateOptions(
            trustRoot=trust,
            privateKey=own.privateKey.original,
            certificate=own.original,
            extraCertChain=[ssl.Certificate.loadPEM(c).original for c in chain[1:]],
        )

    def client_context(self) -> ssl.CertificateOptions:
        """A Twisted context factory for a client: the bookie's chain is
        verified against ``ca`` (the system's CAs when none is given)."""
        from twisted.internet import ssl

        trust = self._trust()
        if trust is None:
            trust = ssl.platformTrust()  # OpenSSL's default paths
        return self._options(trust)

    def server_context(self) -> ssl.CertificateOptions:
        """A Twisted context factory for a bookie (needs its certificate)."""
        if not self.has_identity:
            raise TLSConfigError(
                "a TLS bookie needs its certificate and key (tlsCertificatePath and "
                "tlsKeyStore, or a PKCS12 tlsKeyStore)"
            )
        if self.require_client_cert:
            trust = self._trust()
            if trust is None:
                raise TLSConfigError("tlsClientAuthentication=true needs tlsTrustStore (the CA of client certificates)")
            return self._options(trust)
        return self._options()


class ReloadingServerTLS:
    """The bookie's server context, rebuilt when a file changed (checked at most
    every ``refresh`` seconds; 0: never)."""

    def __init__(self, files: TLSFiles, refresh: float = 0, clock: Callable[[], float] = time.monotonic):
        self.files = files
        self.refresh = refresh
        self._clock = clock
        self._context = files.server_context()
        self._stamp = self._stamps()
        self._checked = clock()

    def _stamps(self) -> tuple[tuple[str, int | None, int | None], ...]:
        out: list[tuple[str, int | None, int | None]] = []
        for p in self.files.files():
            try:
                st = os.stat(p)
                out.append((p, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((p, None, None))
        return tuple(out)

    def context(self) -> ssl.CertificateOptions:
        if self.refresh > 0 and self._clock() - self._checked >= self.refresh:
            self._checked = self._clock()
            stamp = self._stamps()
            if stamp != self._stamp:
                try:
                    self._context = self.files.server_context()
                    self._stamp = stamp
                except TLSConfigError as exc:
                    import logging

                    logging.getLogger(__name__).error(
                        "TLS files changed but cannot be loaded (%s): keeping the previous certificate", exc
                    )
        return self._context


def tls_error_reason(reason: Failure | BaseException) -> str:
    """OpenSSL's reason(s) for a failed handshake (a Twisted Failure or
    exception), e.g. ``peer did not return a certificate``; else its text."""
    exc = getattr(reason, "value", reason)
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], list):
        reasons = [item[-1] for item in args[0] if isinstance(item, tuple) and item and item[-1]]
        if reasons:
            return "; ".join(reasons)
    return str(exc) or type(exc).__name__


def describe_tls_failure(reason: Failure | BaseException) -> str:
    """One line for a failed TLS handshake (a Twisted Failure or exception)."""
    exc = getattr(reason, "value", reason)
    text = str(exc)
    if "certificate verify failed" in text:
        return "certificate verify failed (the bookie's certificate does not chain to the trusted CA)"
    if "certificate required" in text or "peer did not return a certificate" in text:
        return "the bookie requires a client certificate (--tls-cert/--tls-key)"
    if "unknown ca" in text or "bad certificate" in text:
        return "the bookie rejected our client certificate"
    return text or type(exc).__name__
