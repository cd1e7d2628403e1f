"""bkctl's own settings: named clusters in ``~/.config/bkctl/config.toml``.

    default = "prod"

    [clusters.prod]
    metadata_uri = "zk+hierarchical://zk1:2181;zk2:2181/ledgers"
"""
from __future__ import annotations

import os
import pathlib
import tomllib

from .exitcodes import USAGE, CommandError


def config_path() -> pathlib.Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return pathlib.Path(base) / "bkctl" / "config.toml"


def load() -> dict:
    path = config_path()
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
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
    settings = load() if (cluster or not uri) else None
    if cluster:
        named = _configured_uri(settings, cluster)
        if uri and uri != named:
            raise CommandError(f"--metadata-uri {uri} and --cluster {cluster} ({named}) name different "
                               "clusters: give one of them", USAGE)
        return named, cluster
    if uri:
        return uri, cluster_name_for(uri)
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
