"""The metadata service's keys: where ZooKeeper is and how the bookie authenticates to it (section
``metadata``); :func:`parse_metadata_uri` reads ``metadataServiceUri`` for the loader too.
"""

from __future__ import annotations

from bkctl.wire.metadata.layout import (
    MetadataServiceURI,
    MetadataServiceURIError,
    root_path_problem,
    zk_server_problem,
)

from ..errors import InvalidValue
from .option import JAVA_INT_MAX, Option

__all__ = ["OPTIONS", "parse_metadata_uri"]


def _check_zk_path(value: str) -> None:
    problem = root_path_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_zk_server(value: str) -> None:
    problem = zk_server_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_metadata_uri(value: str) -> None:
    parse_metadata_uri(value)


def parse_metadata_uri(value: str) -> MetadataServiceURI:
    try:
        return MetadataServiceURI.parse(value)
    except MetadataServiceURIError as exc:
        raise InvalidValue(exc.problem) from None


OPTIONS: tuple[Option, ...] = (
    # -- metadata -----------------------------------------------------------
    Option(
        "metadataServiceUri",
        "str",
        None,
        "Metadata store location, such as zk+hierarchical://zk1:2181;zk2:2181/ledgers.",
        "metadata",
        fallback="zkServers and zkLedgersRootPath",
        metavar_name="URI",
        check=_check_metadata_uri,
    ),
    Option(
        "zkServers",
        "list",
        None,
        "ZooKeeper servers as host:port, comma-separated; superseded by metadataServiceUri.",
        "metadata",
        metavar_name="HOST:PORT[,...]",
        check=_check_zk_server,
    ),
    Option(
        "zkLedgersRootPath",
        "str",
        "/ledgers",
        "ZooKeeper path under which the cluster's metadata lives; superseded by metadataServiceUri.",
        "metadata",
        metavar_name="PATH",
        check=_check_zk_path,
    ),
    Option(
        "zkTimeout",
        "int",
        10000,
        "ZooKeeper session timeout; the bookie exits if its session expires.",
        "metadata",
        unit="ms",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "zkEnableSecurity",
        "bool",
        False,
        "Create every znode with Java's creator-all ACL (only the identity that created a znode may "
        "read or change it); use with zkDigestAuthPath or SASL.",
        "metadata",
    ),
    Option(
        "zkDigestAuthPath",
        "str",
        None,
        "A file holding USER:PASSWORD, sent to ZooKeeper with the digest scheme "
        "(what a Java bookie's JAAS Client section or addAuthInfo gives).",
        "metadata",
        metavar_name="PATH",
    ),
    Option(
        "zkSaslMechanism",
        "str",
        None,
        "Authenticate to ZooKeeper with this SASL mechanism, such as DIGEST-MD5 (Java's DigestLoginModule) "
        "or GSSAPI (Kerberos; needs a ticket).",
        "metadata",
        metavar_name="MECHANISM",
    ),
    Option("zkSaslUsername", "str", None, "The SASL user name for ZooKeeper.", "metadata", metavar_name="USER"),
    Option(
        "zkSaslPasswordPath",
        "str",
        None,
        "A file holding the SASL password for ZooKeeper.",
        "metadata",
        metavar_name="PATH",
    ),
    Option(
        "zkTlsEnabled",
        "bool",
        False,
        "Connect to ZooKeeper over TLS (its secureClientPort; implied by zkTlsCaPath).",
        "metadata",
    ),
    Option(
        "zkTlsCaPath",
        "str",
        None,
        "PEM CA bundle the ZooKeeper server's certificate must chain to.",
        "metadata",
        metavar_name="PATH",
    ),
    Option(
        "zkTlsCertificatePath",
        "str",
        None,
        "PEM client certificate for ZooKeeper servers that ask for one.",
        "metadata",
        metavar_name="PATH",
    ),
    Option("zkTlsKeyPath", "str", None, "PEM private key of zkTlsCertificatePath.", "metadata", metavar_name="PATH"),
)
