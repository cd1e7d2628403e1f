"""The small text rules every package reads by: booleans, times, custom metadata, host:port.

One home each, so that a value means the same in bk_server.conf, a
``--set KEY=VALUE``, an environment variable (``BKCTL_FASTPATHS``), a Spark
data source option and ``~/.config/bkctl/config.toml``.

* Booleans: ``true``/``false``, ``yes``/``no``, ``on``/``off`` and ``1``/``0``,
  in any case, blanks around ignored; anything else is refused with a
  one-line error naming the key.  Java's bk_server.conf goes through Apache
  Commons Configuration (commons-lang's ``BooleanUtils``), which takes
  true/false, yes/no and on/off in any case; ``1``/``0`` are here for
  environment variables (``BKCTL_FASTPATHS=0``) and Spark options.
* Times in epoch milliseconds as ISO 8601 in UTC with milliseconds
  (``2026-11-21T00:00:00.123Z``) and as a UTC calendar date, the way
  manifests, ``--json`` documents and Pulsar's tables write them.
* Ledger custom metadata as text: values are UTF-8, bytes that are not
  written as ``\\xNN`` escapes (so a value survives a JSON document).
* ``host:port``: the port is the digits after the last colon (1 to 65535).
  A host may be an IPv6 address in brackets (``[::1]:3181``; the brackets are
  dropped) or bare, as Java's ``BookieSocketAddress`` writes a bookie id
  (``hostname + ":" + port``, so ``fe80::1:3181``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from bkctl.wire.errors import AddressError

__all__ = [
    "BOOLEAN_WORDS",
    "NOT_A_BOOLEAN",
    "NOT_HOST_PORT",
    "PORT_OUT_OF_RANGE",
    "custom_metadata_text",
    "join_host_port",
    "parse_bool",
    "split_host_port",
    "utc_date",
    "utc_iso",
]

#: Every word :func:`parse_bool` takes (lower case) and what it means.
BOOLEAN_WORDS: Mapping[str, bool] = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}
#: What follows a quoted value that is none of them in an error message.
NOT_A_BOOLEAN = "is not a boolean (true/false, yes/no, on/off, 1/0)"
#: What follows a quoted address :func:`split_host_port` refuses.
NOT_HOST_PORT = "is not host:port"
PORT_OUT_OF_RANGE = "has a port outside 1..65535"


def parse_bool(value: str | bool, key: str) -> bool:
    """``value`` as a boolean (a bool, as TOML gives, is taken as it is).

    ``ValueError("KEY: 'maybe' is not a boolean (...)")`` for anything that
    is not one of :data:`BOOLEAN_WORDS`.
    """
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else None
    if word not in BOOLEAN_WORDS:
        raise ValueError(f"{key}: {value!r} {NOT_A_BOOLEAN}")
    return BOOLEAN_WORDS[word]


def split_host_port(address: str, default_port: int | None = None) -> tuple[str, int]:
    """``"10.0.0.1:3181"`` -> ``("10.0.0.1", 3181)``; ``"[::1]:3181"`` and
    ``"::1:3181"`` -> ``("::1", 3181)``.

    With ``default_port``, an address without one (``zk1``, ``[::1]``) gets
    it.  :class:`~bkctl.wire.errors.AddressError` (a ValueError:
    ``'h:0' has a port outside 1..65535``) when there is no host, or the
    port is not 1 to 65535.
    """
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise AddressError(address, NOT_HOST_PORT)
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text = address.rpartition(":")
        if not colon:
            host, port_text = address, None
    if port_text is None:
        port = default_port
    elif port_text.isascii() and port_text.isdigit():
        port = int(port_text)
        if not 0 < port < 65536:
            raise AddressError(address, PORT_OUT_OF_RANGE)
    else:
        port = None
    if not host or port is None:
        raise AddressError(address, NOT_HOST_PORT)
    return host, port


def join_host_port(host: str, port: int) -> str:
    """``host:port`` for a URL or a socket address: an IPv6 host in brackets
    (a bookie id is written bare, as Java writes it)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def utc_iso(ms: int | None) -> str | None:
    """ISO 8601 in UTC with milliseconds (``2026-11-21T00:00:00.123Z``) for
    epoch milliseconds; None for None."""
    if ms is None:
        return None
    moment = _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_date(ms: int | None) -> str | None:
    """The UTC calendar date (``YYYY-MM-DD``) of epoch milliseconds; None for None."""
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).date().isoformat()


def custom_metadata_text(custom: Any) -> dict[str, str]:
    """A ledger's custom metadata as text: values are UTF-8, with bytes that
    are not written as ``\\xNN`` escapes."""
    out: dict[str, str] = {}
    for key, value in dict(custom or {}).items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value).decode("utf-8", errors="backslashreplace")
        out[str(key)] = str(value)
    return out
