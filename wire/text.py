"""The small text rules every package reads by: booleans and host:port.

One home each, so that a value means the same in bk_server.conf, a
``--set KEY=VALUE``, an environment variable (``BKCTL_FASTPATHS``), a Spark
data source option and ``~/.config/bkctl/config.toml``.

* Booleans: ``true``/``false``, ``yes``/``no``, ``on``/``off`` and ``1``/``0``,
  in any case, blanks around ignored; anything else is refused with a
  one-line error naming the key.  Java's bk_server.conf goes through Apache
  Commons Configuration (commons-lang's ``BooleanUtils``), which takes
  true/false, yes/no and on/off, and also single letters (``y``, ``t``...),
  left out here as too easy to mistype; ``1``/``0`` are for environment
  variables (``BKCTL_FASTPATHS=0``) and Spark options.
* ``host:port``: the port is the digits after the last colon (1 to 65535).
  A host may be an IPv6 address in brackets (``[::1]:3181``; the brackets are
  dropped) or bare, as Java's ``BookieSocketAddress`` writes a bookie id
  (``hostname + ":" + port``, so ``fe80::1:3181``).
"""
from __future__ import annotations

from collections.abc import Mapping

from bkctl.wire.errors import AddressError

__all__ = ["BOOLEAN_WORDS", "NOT_A_BOOLEAN", "NOT_HOST_PORT", "PORT_OUT_OF_RANGE", "join_host_port", "parse_bool",
           "split_host_port"]

#: Every word :func:`parse_bool` takes (lower case) and what it means.
BOOLEAN_WORDS: Mapping[str, bool] = {
    "true": True, "yes": True, "on": True, "1": True,
    "false": False, "no": False, "off": False, "0": False,
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
