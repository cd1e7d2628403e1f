"""How to authenticate to ZooKeeper and protect what we create there.

:class:`ZKSecurity` gathers what a ZooKeeper session needs on a locked-down
cluster; the store's session turns it into kazoo's arguments
(:func:`bkctl.wire.metadata.zk.session.kazoo_args`: only the store speaks kazoo):

* ``digest``: ``user:password`` for the ``digest`` scheme (kazoo's
  ``auth_data``; Java clients send the same with ``addAuthInfo("digest", ...)``).
* ``sasl_mechanism`` / ``sasl_username`` / ``sasl_password``: SASL (e.g.
  ``DIGEST-MD5``, what Java's ``DigestLoginModule`` JAAS section gives; or
  ``GSSAPI`` for Kerberos), through kazoo's ``sasl_options`` and the
  ``pure-sasl`` library.
* ``tls`` with ``tls_ca`` (the CA bundle the server's certificate must chain
  to), ``tls_cert`` / ``tls_key`` (our certificate, when the server asks for
  one): kazoo's ``use_ssl``, ``ca``, ``certfile``, ``keyfile``.
* ``enable_security``: every znode we create gets Java's creator-all ACL
  (``zkEnableSecurity=true``: ``auth`` scheme, all permissions: only the
  identity that created it may read or change it).

The process-wide default (:func:`set_default`, what bkctl sets from its
options) is what a :class:`~bkctl.wire.metadata.zk.ZKMetadataStore` uses when it
is given none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

__all__ = ["ZKSecurity", "get_default", "set_default"]


@dataclass(frozen=True)
class ZKSecurity:
    digest: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    enable_security: bool = False

    def __post_init__(self) -> None:
        if self.digest is not None and ":" not in self.digest:
            raise ValueError("ZooKeeper digest credentials must be USER:PASSWORD")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("a ZooKeeper TLS client certificate needs both its certificate and key files")
        for name in ("tls_ca", "tls_cert", "tls_key"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"ZooKeeper TLS file {path} does not exist")

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.tls_ca is not None or self.tls_cert is not None

    def merged(self, **changes: Any) -> ZKSecurity:
        """A copy with the non-None ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_json(self) -> str:
        """The settings that differ from the defaults, as JSON (to hand to another process)."""
        import json

        default = ZKSecurity()
        return json.dumps(
            {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ZKSecurity:
        import json

        doc = json.loads(text)
        known = {f.name for f in fields(cls)}
        if not isinstance(doc, dict) or set(doc) - known:
            raise ValueError(f"not ZooKeeper security settings: {text[:80]!r}")
        return cls(**doc)

    def describe(self) -> str:
        """What is configured, without secrets (for messages)."""
        parts = []
        if self.digest:
            parts.append(f"digest as {self.digest.split(':', 1)[0]}")
        if self.sasl_mechanism:
            parts.append(
                f"SASL {self.sasl_mechanism.upper()}" + (f" as {self.sasl_username}" if self.sasl_username else "")
            )
        if self.uses_tls:
            parts.append("TLS")
        return ", ".join(parts) or "no authentication"


def tls_client_context(security: ZKSecurity) -> ssl.SSLContext:
    """The client side of TLS with ZooKeeper as kazoo does it: the chain is checked against
    ``tls_ca`` (the system's CAs without one), the name is not; ``tls_cert``/``tls_key`` as
    the client's certificate."""
    import ssl

    ctx = ssl.create_default_context(cafile=security.tls_ca)
    ctx.check_hostname = False  # kazoo does not check the name either, only the chain
    if security.tls_cert:
        ctx.load_cert_chain(security.tls_cert, security.tls_key)
    return ctx


def tls_problem(hosts: str, security: ZKSecurity, timeout: float = 5.0) -> str | None:
    """A TLS handshake with the first of ``hosts`` (``h1:p1,h2:p2/chroot``);
    the reason it fails (e.g. "certificate verify failed: ..."), or None."""
    import socket
    import ssl

    from bkctl.wire.text import split_host_port

    first = hosts.split("/", 1)[0].split(",")[0].strip()
    try:
        host, port = split_host_port(first, default_port=2181)
        ctx = tls_client_context(security)
        with (
            socket.create_connection((host, int(port)), timeout=timeout) as sock,
            ctx.wrap_socket(sock, server_hostname=host),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        return f"certificate verify failed: {exc.verify_message}"
    except (ssl.SSLError, OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__


_default = ZKSecurity()


def set_default(security: ZKSecurity | None) -> None:
    global _default
    _default = security if security is not None else ZKSecurity()


def get_default() -> ZKSecurity:
    return _default


assert {f.name for f in fields(ZKSecurity)} >= {"digest", "tls", "enable_security"}
