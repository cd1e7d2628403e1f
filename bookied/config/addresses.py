"""The bookie's identity and addresses: bookieId, or the address Java's rules
derive from advertisedAddress, listeningInterface (an interface's IPv4
address), the local host name and DNS; and the address to listen on.

The lookups go through a :class:`Resolver`, which tests replace.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

from bkctl.wire.metadata.bookieid import bookie_id_problem

from .errors import ConfigError, bad_value
from .loading import BookieConfig

__all__ = ["Resolver", "resolve_bookie_address", "resolve_bookie_id", "resolve_listen_host", "validate_bookie_id"]


def validate_bookie_id(value: str) -> str:
    """Return ``value`` if it is a valid bookie id (:mod:`bkctl.wire.metadata.bookieid`'s
    rule), else raise ``ConfigError``."""
    problem = bookie_id_problem(value)
    if problem:
        raise ConfigError(f"bookieId: {value!r} {problem}", key="bookieId", value=value)
    return value


def _host_address(name: str) -> str:
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"no address for {name}")
    for family, _type, _proto, _canon, sockaddr in infos:
        if family == socket.AF_INET:  # Java prefers IPv4 by default
            return str(sockaddr[0])
    return str(infos[0][4][0])


def _canonical_name(address: str) -> str:
    try:
        return socket.gethostbyaddr(address)[0]
    except OSError:
        return address  # as Java's getCanonicalHostName does on failure


def _interface_address(name: str) -> str:
    try:
        socket.if_nametoindex(name)
    except OSError:
        raise OSError(f"no such network interface {name!r}") from None
    import fcntl  # POSIX only; only needed when listeningInterface is set

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
        except OSError:
            raise OSError(f"network interface {name!r} has no IPv4 address") from None
    return socket.inet_ntoa(packed[20:24])


@dataclass(frozen=True)
class Resolver:
    """Network lookups used to work out the bookie address; replace them in tests.

    Each function raises ``OSError`` when the lookup fails.
    """

    local_hostname: Callable[[], str] = socket.gethostname
    host_address: Callable[[str], str] = _host_address  # name -> IP
    interface_address: Callable[[str], str] = _interface_address  # interface -> IP
    canonical_name: Callable[[str], str] = _canonical_name  # IP -> host name


_DEFAULT_RESOLVER = Resolver()


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def resolve_bookie_address(cfg: BookieConfig, resolver: Resolver | None = None) -> tuple[str, int]:
    """``(host, port)`` the bookie advertises, following Java's rules.

    advertisedAddress if set; otherwise the address of listeningInterface
    (or of the local host name when unset), as an IP, or as a host name with
    useHostNameAsBookieID (cut at the first dot with useShortHostName).  A
    loopback result is refused unless allowLoopback is true; an explicit
    advertisedAddress is taken as given, as in Java.
    """
    res = resolver or _DEFAULT_RESOLVER
    port = cfg.bookie_port
    if cfg.advertised_address:
        return cfg.advertised_address, port
    iface = cfg.listening_interface
    try:
        if iface is None:
            hostname = res.local_hostname()
            try:
                address = res.host_address(hostname)
            except OSError as exc:
                raise ConfigError(
                    f"cannot resolve the local host name {hostname!r} ({exc}); set "
                    "listeningInterface or advertisedAddress",
                    key="listeningInterface",
                ) from None
        else:
            address = res.interface_address(iface)
    except OSError as exc:
        raise bad_value(
            "listeningInterface", iface or "", f"cannot be used: {exc}", cfg.origin_of("listeningInterface")
        ) from None
    host = address
    checked = address
    if cfg.use_host_name_as_bookie_id:
        host = res.canonical_name(address)
        if cfg.use_short_host_name:
            host = host.split(".", 1)[0]
        try:
            checked = res.host_address(host)
        except OSError:
            checked = address
    if _is_loopback(checked) and not cfg.allow_loopback:
        raise ConfigError(
            f"bookie address {host}:{port} is the loopback address {checked}, which is refused "
            "while allowLoopback is false; set listeningInterface (e.g. eth0) or "
            "advertisedAddress, or allowLoopback=true",
            key="allowLoopback",
            value=f"{host}:{port}",
        )
    return host, port


def resolve_bookie_id(cfg: BookieConfig, resolver: Resolver | None = None) -> str:
    """The id this bookie registers under: bookieId if set, else ``host:port``
    from ``resolve_bookie_address``.  Raises ``ConfigError``."""
    if cfg.bookie_id is not None:
        return validate_bookie_id(cfg.bookie_id)
    host, port = resolve_bookie_address(cfg, resolver)
    ident = f"{host}:{port}"
    problem = bookie_id_problem(ident)
    if problem:
        raise ConfigError(f"derived bookie id {ident!r} {problem}; set bookieId", key="bookieId", value=ident)
    return ident


def resolve_listen_host(cfg: BookieConfig, resolver: Resolver | None = None) -> str:
    """Address to bind the bookie port to: the listeningInterface address, or
    ``0.0.0.0`` (all interfaces) when it is unset."""
    if cfg.listening_interface is None:
        return "0.0.0.0"
    res = resolver or _DEFAULT_RESOLVER
    try:
        return res.interface_address(cfg.listening_interface)
    except OSError as exc:
        raise bad_value(
            "listeningInterface", cfg.listening_interface, f"cannot be used: {exc}", cfg.origin_of("listeningInterface")
        ) from None
