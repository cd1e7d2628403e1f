"""The options of the commands that read Pulsar's offloaded ledgers (``export``, ``pulsar offload``),
stated once: where the object store is when the managed ledger's driver metadata is not what this
machine should use, the local folder of a filesystem offload, and how long a request may take.
Credentials are never options: they come from the standard AWS chain (``AWS_*`` variables,
``AWS_PROFILE``, the shared credentials file, an instance role)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

#: seconds a request to the object store may take by default
DEFAULT_OFFLOAD_TIMEOUT = 30.0


def offload_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--offload-timeout",
        type=click.FloatRange(min=0.1),
        default=DEFAULT_OFFLOAD_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="Seconds a request to the object store may take (connecting, and each read).",
    )(fn)
    fn = click.option(
        "--offload-root",
        metavar="DIR",
        help="A local folder holding the filesystem offloader's storage base path (default: the "
        "file: path its driver metadata names).",
    )(fn)
    fn = click.option(
        "--s3-endpoint",
        metavar="URL",
        help="S3 endpoint for every offloaded ledger, instead of the serviceEndpoint its driver "
        "metadata records (bucket and region still come from there).",
    )(fn)
    return fn


def offload_settings(s3_endpoint: str | None, offload_root: str | None, offload_timeout: float) -> Any:
    from bkctl.wire.pulsar.offload_store import OffloadSettings

    return OffloadSettings(endpoint=s3_endpoint, filesystem_root=offload_root, timeout=offload_timeout)
