"""bkctl's own settings: named clusters in ``~/.config/bkctl/config.toml``.

default = "prod"

[clusters.prod]
metadata_uri = "zk+hierarchical://zk1:2181;zk2:2181/ledgers"
placement = "rack"                    # random | rack | region (--placement)
min_racks_per_write_quorum = 2
enforce_min_racks_per_write_quorum = false
rack_map_file = "/etc/bkctl/racks.json"   # racks besides ZooKeeper's /bookies
network_topology_script = "/usr/local/bin/rack-of"
zk_digest = "bkctl:secret"            # or zk_sasl_mechanism/zk_sasl_username/zk_sasl_password
zk_tls_ca = "/etc/bkctl/zk-ca.pem"    # zk_tls_cert, zk_tls_key: a client certificate
zk_enable_security = true             # creator-all ACLs on znodes bkctl creates
tls_ca = "/etc/bkctl/bookie-ca.pem"   # TLS to the bookies (tls_cert, tls_key: mutual TLS)
"""

from __future__ import annotations

import os
import pathlib

from .exitcodes import USAGE, CommandError


def config_path() -> pathlib.Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return pathlib.Path(base) / "bkctl" / "config.toml"


def load() -> dict:
    path = config_path()
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return {}
    import tomllib  # only with a config to read: most runs have none

    with f:
        try:
            return tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise CommandError(f"{path}: {e}", USAGE) from None


def cluster_names() -> list[str]:
    return sorted(load().get("clusters", {}))


def resolve_cluster(uri: str | None, cluster: str | None) -> tuple[str | None, str | None]:
    """The cluster to use, as ``(metadata URI, configured name or None)``.

    kubectl's precedence: an explicit ``--metadata-uri``/``-m`` or
    ``--cluster`` wins, then ``$BKCTL_METADATA_URI``, then the config file's
    ``default``.  ``-m`` and ``--cluster`` naming different clusters is a
    usage error (exit 2) rather than a silent choice.
    """
    if cluster:
        named = _configured_uri(load(), cluster)
        if uri and uri != named:
            raise CommandError(
                f"--metadata-uri {uri} and --cluster {cluster} ({named}) name different clusters: give one of them",
                USAGE,
            )
        return named, cluster
    if uri:
        return uri, cluster_name_for(uri)
    settings = load()
    env = os.environ.get("BKCTL_METADATA_URI")
    if env:
        return env, cluster_name_for(env, settings)
    name = settings.get("default")
    if name is None:
        return None, None
    return _configured_uri(settings, name), name


def resolve_metadata_uri(uri: str | None, cluster: str | None) -> str | None:
    """The metadata URI :func:`resolve_cluster` chooses."""
    return resolve_cluster(uri, cluster)[0]


def cluster_profile(name: str | None) -> dict:
    """The keys of the named cluster's profile (``[clusters.NAME]``; {} for a bare URI)."""
    if name is None:
        return {}
    entry = load().get("clusters", {}).get(name, {})
    return dict(entry) if isinstance(entry, dict) else {}


def cluster_name_for(uri: str, settings: dict | None = None) -> str | None:
    """The name the config file gives the cluster at ``uri`` (the default's first), or None."""
    try:
        settings = load() if settings is None else settings
    except CommandError:
        return None
    clusters = settings.get("clusters", {})
    default = settings.get("default")
    for name in sorted(clusters, key=lambda n: n != default):
        entry = clusters[name]
        if isinstance(entry, dict) and entry.get("metadata_uri") == uri:
            return name
    return None


def _configured_uri(settings: dict, name: str) -> str:
    clusters = settings.get("clusters", {})
    try:
        return clusters[name]["metadata_uri"]
    except (KeyError, TypeError):
        known = ", ".join(sorted(clusters)) or "none"
        raise CommandError(f"unknown cluster {name!r} in {config_path()} (known: {known})", USAGE) from None


def zk_security(
    profile: dict,
    digest: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
):
    """ZooKeeper credentials and TLS: flags (and their environment variables)
    over the profile's ``zk_*`` keys; SASL and ``zk_enable_security`` from the
    profile or ``BKCTL_ZK_SASL_*`` / ``BKCTL_ZK_ENABLE_SECURITY``."""
    from bkctl.wire.metadata.zksecurity import ZKSecurity
    from bkctl.wire.text import parse_bool

    env = os.environ

    def pick(key: str, flag=None, var: str | None = None):
        if flag is not None:
            return flag
        if var and env.get(var):
            return env[var]
        return profile.get(key)

    def switch(key: str, var: str | None = None) -> bool:
        """A yes/no from ``$var`` or the profile (off when neither says)."""
        if var and env.get(var):
            value, where = env[var], var
        else:
            value, where = profile.get(key, False), f"{config_path()}: {key}"
        try:
            return parse_bool(value, where)
        except ValueError as e:
            raise CommandError(str(e), USAGE) from None

    enable = switch("zk_enable_security", "BKCTL_ZK_ENABLE_SECURITY")
    tls = switch("zk_tls")
    try:
        return ZKSecurity(
            digest=pick("zk_digest", digest),
            sasl_mechanism=pick("zk_sasl_mechanism", None, "BKCTL_ZK_SASL_MECHANISM"),
            sasl_username=pick("zk_sasl_username", None, "BKCTL_ZK_SASL_USERNAME"),
            sasl_password=pick("zk_sasl_password", None, "BKCTL_ZK_SASL_PASSWORD"),
            tls=tls,
            tls_ca=pick("zk_tls_ca", tls_ca),
            tls_cert=pick("zk_tls_cert", tls_cert),
            tls_key=pick("zk_tls_key", tls_key),
            enable_security=enable,
        )
    except ValueError as e:
        raise CommandError(str(e), USAGE) from None


def bookie_tls(profile: dict, ca: str | None = None, cert: str | None = None, key: str | None = None):
    """TLS to the bookies (:class:`bkctl.wire.tls.TLSFiles`), or False for plain
    text: flags (and ``BKCTL_TLS_*``) over the profile's ``tls_*`` keys."""
    from bkctl.wire.tls import TLSConfigError, TLSFiles

    ca = ca or profile.get("tls_ca")
    cert = cert or profile.get("tls_cert")
    key = key or profile.get("tls_key")
    if not (ca or cert or key):
        return False
    for path in (ca, cert, key):
        if path and not os.path.isfile(path):
            raise CommandError(f"TLS file {path} does not exist", USAGE)
    try:
        return TLSFiles(ca=ca, cert=cert, key=key)
    except TLSConfigError as e:
        raise CommandError(str(e), USAGE) from None
