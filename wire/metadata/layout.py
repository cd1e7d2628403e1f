"""The ledger-manager LAYOUT znode and the metadata service URI (BookKeeper's
meta/LedgerLayout.java, meta/zk/ZKMetadataDriverBase.java).

Pure codecs, no I/O.

LAYOUT content (no trailing newline)::

    <layoutFormatVersion>\\n<managerFactoryClass>:<managerVersion>

Format 2 (what current writers use) names a factory class; format 1 names a
manager type (``flat`` or ``hierarchical``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bkctl.wire.errors import AddressError, CodecError
from bkctl.wire.text import PORT_OUT_OF_RANGE, split_host_port

__all__ = [
    "DEFAULT_LEDGERS_ROOT",
    "FACTORY_CLASSES",
    "LAYOUT_FORMAT_VERSION",
    "LedgerLayout",
    "MetadataServiceURI",
    "MetadataServiceURIError",
    "SUPPORTED_URI_MANAGERS",
    "URI_MANAGERS",
    "root_path_problem",
    "zk_server_problem",
    "factory_class_for",
    "manager_for_factory",
    "parse_layout",
]

DEFAULT_LEDGERS_ROOT = "/ledgers"
LAYOUT_FORMAT_VERSION = 2
MIN_LAYOUT_FORMAT_VERSION = 1
_PACKAGE = "org.apache.bookkeeper.meta."

#: Short manager name -> factory class.
FACTORY_CLASSES = {
    "flat": _PACKAGE + "FlatLedgerManagerFactory",
    "hierarchical": _PACKAGE + "HierarchicalLedgerManagerFactory",
    "longhierarchical": _PACKAGE + "LongHierarchicalLedgerManagerFactory",
    "legacyhierarchical": _PACKAGE + "LegacyHierarchicalLedgerManagerFactory",
    "ms": _PACKAGE + "MSLedgerManagerFactory",
}
_BY_SIMPLE_CLASS = {cls.rsplit(".", 1)[1]: name for name, cls in FACTORY_CLASSES.items()}
#: Manager version written next to each factory (the spec gives none for ``ms``; 1 is assumed).
MANAGER_VERSIONS = {"flat": 1, "hierarchical": 1, "longhierarchical": 1, "legacyhierarchical": 1, "ms": 1}


def factory_class_for(manager: str) -> str:
    """``"hierarchical"`` -> ``org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory``."""
    try:
        return FACTORY_CLASSES[manager.lower()]
    except KeyError:
        raise ValueError(f"unknown ledger manager {manager!r} (one of {', '.join(FACTORY_CLASSES)})") from None


def manager_for_factory(factory: str) -> str | None:
    """Short manager name of a factory class (shaded prefixes tolerated) or of a format-1 type name."""
    if factory.lower() in FACTORY_CLASSES:
        return factory.lower()
    return _BY_SIMPLE_CLASS.get(factory.rsplit(".", 1)[-1])


@dataclass(frozen=True)
class LedgerLayout:
    """Content of ``<root>/LAYOUT``.

    ``manager_factory_class`` is a class name in format 2 and a manager type
    name (``flat``/``hierarchical``) in format 1; :attr:`manager` gives the
    short name in both cases.
    """

    manager_factory_class: str
    manager_version: int = 1
    format_version: int = LAYOUT_FORMAT_VERSION

    @classmethod
    def for_manager(cls, manager: str = "hierarchical") -> LedgerLayout:
        """The layout current writers create for ``manager``."""
        name = manager.lower()
        return cls(factory_class_for(name), MANAGER_VERSIONS[name], LAYOUT_FORMAT_VERSION)

    @property
    def manager(self) -> str | None:
        """``flat``, ``hierarchical``, ... or ``None`` for an unknown factory."""
        return manager_for_factory(self.manager_factory_class)

    def matches(self, other: LedgerLayout, tolerate_shading: bool = False) -> bool:
        """Whether a configured layout and a stored one name the same factory and version."""
        if self.manager_version != other.manager_version:
            return False
        if tolerate_shading:
            return self.manager is not None and self.manager == other.manager
        mine, theirs = self.manager_factory_class, other.manager_factory_class
        if mine == theirs:
            return True
        # a format-1 type name and its class are the same manager
        return (
            self.manager is not None
            and self.manager == other.manager
            and (self.format_version == 1 or other.format_version == 1)
        )

    def serialize(self, format_version: int | None = None) -> bytes:
        """``b"<fmt>\\n<factory>:<version>"``; format 2 unless asked (or stored) otherwise.

        Writing a format-1 layout as format 2 converts its type name to the class name.
        """
        fmt = LAYOUT_FORMAT_VERSION if format_version is None else format_version
        factory = self.manager_factory_class
        if fmt == 2 and self.format_version == 1 and factory.lower() in FACTORY_CLASSES:
            factory = FACTORY_CLASSES[factory.lower()]
        elif fmt == 1:
            name = self.manager
            if name not in ("flat", "hierarchical"):
                raise ValueError(f"format-1 layouts only know flat and hierarchical, not {factory!r}")
            factory = name
        elif fmt != 2:
            raise ValueError(f"unsupported layout format {fmt!r} (1 or 2)")
        return f"{fmt}\n{factory}:{self.manager_version}".encode()

    @classmethod
    def parse(cls, data: bytes) -> LedgerLayout:
        return parse_layout(data)


def parse_layout(data: bytes) -> LedgerLayout:
    """Decode a LAYOUT znode (format 1 or 2); raises only :class:`CodecError`."""
    try:
        text = bytes(data).decode("utf-8")
    except (UnicodeDecodeError, TypeError) as exc:
        raise CodecError(f"LAYOUT is not UTF-8 text: {exc}") from None
    lines = text.split("\n")
    head = lines[0].strip()
    if not head.isascii() or not head.isdigit():
        raise CodecError(f"LAYOUT does not start with a format version: {text!r}")
    fmt = int(head)
    if not MIN_LAYOUT_FORMAT_VERSION <= fmt <= LAYOUT_FORMAT_VERSION:
        raise CodecError(f"LAYOUT format {fmt} is not supported (1 to 2)")
    if len(lines) < 2 or not lines[1].strip():
        raise CodecError(f"LAYOUT lacks the ledger manager line: {text!r}")
    if any(ln.strip() for ln in lines[2:]):
        raise CodecError(f"LAYOUT has unexpected extra lines: {text!r}")
    parts = lines[1].strip().split(":")
    if len(parts) != 2 or not parts[0]:
        raise CodecError(f"LAYOUT has an invalid ledger manager line: {lines[1]!r}")
    version = parts[1].strip()
    if not version.isascii() or not version.removeprefix("-").isdigit():  # Integer.parseInt's form
        raise CodecError(f"LAYOUT has an invalid manager version: {parts[1]!r}")
    return LedgerLayout(parts[0], int(version), fmt)


# ---------------------------------------------------------------------------
# metadataServiceUri
# ---------------------------------------------------------------------------
#: Ledger managers a ``zk+<manager>://`` URI may name in Java 4.17 (``null``:
#: whatever LAYOUT says, as plain ``zk://``).
URI_MANAGERS = ("flat", "hierarchical", "longhierarchical", "ms", "null")
#: Those bkctl and bookied can work with: Java's ``ms`` (a deprecated
#: MetaStore-backed manager) keeps ledger metadata outside ZooKeeper.
SUPPORTED_URI_MANAGERS = ("flat", "hierarchical", "longhierarchical", "null")
_URI = re.compile(r"(?P<scheme>[^:/?#]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<rest>.*)", re.S)
_HOST_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+")
_EXAMPLE = "zk+hierarchical://zk1:2181;zk2:2181/ledgers"


class MetadataServiceURIError(ValueError):
    """A metadataServiceUri that cannot be used.  ``problem`` is the phrase
    that follows the quoted URI in the message (``has no ledgers root path``)."""

    def __init__(self, uri: str, problem: str):
        super().__init__(f"metadata service URI {uri!r} {problem}")
        self.uri = uri
        self.problem = problem


def root_path_problem(root: str) -> str | None:
    """None for a usable ledgers root (``/ledgers``, ``/a/b``), else a phrase
    such as ``must not end with '/'``."""
    if not root.startswith("/"):
        return "must be an absolute ZooKeeper path starting with '/'"
    if root == "/" or root.endswith("/"):
        return "must not end with '/'"
    if any(part in ("", ".", "..") for part in root[1:].split("/")):
        return "must not contain an empty, '.' or '..' component"
    if any(ch.isspace() or ord(ch) < 0x20 for ch in root):
        return "must not contain blanks or control characters"
    return None


def zk_server_problem(server: str) -> str | None:
    """None for a ``host[:port]`` ZooKeeper server (``[v6]:port`` too), else a phrase."""
    try:
        host, _port = split_host_port(server, default_port=2181)
    except AddressError as exc:
        return exc.problem if exc.problem == PORT_OUT_OF_RANGE else "is not a host[:port] ZooKeeper server"
    if not (_IPV6 if server.startswith("[") else _HOST_NAME).fullmatch(host):
        return "is not a host[:port] ZooKeeper server"
    return None


@dataclass(frozen=True)
class MetadataServiceURI:
    """``zk+<manager>://h1:2181;h2:2181/ledgers``, parsed as Java's metadata drivers read it.

    * ``scheme``: the metadata backend, always ``"zk"``;
    * ``manager``: ``flat``, ``hierarchical``, ``longhierarchical`` or
      ``null`` (plain ``zk://`` or ``zk+null://``: use whatever LAYOUT says);
    * ``hosts``: the servers as ZooKeeper takes them, ``"h1:2181,h2:2181"``
      (the URI separates them with ``;`` or ``,``; a server without a port
      gets ZooKeeper's 2181);
    * ``root``: the ledgers root, the URI's path, which it must have.

    ``str()`` gives ``zk+<manager>://h1:2181;h2:2181/root`` (``zk://`` for
    ``null``), which :meth:`parse` reads back to an equal object.
    """

    scheme: str
    manager: str
    hosts: str
    root: str = DEFAULT_LEDGERS_ROOT

    @classmethod
    def parse(cls, uri: str) -> MetadataServiceURI:
        """Raises :class:`MetadataServiceURIError` (a ValueError) saying what is wrong."""
        if not isinstance(uri, str):
            raise MetadataServiceURIError(repr(uri), "is not a string")
        m = _URI.fullmatch(uri.strip())
        if m is None:
            raise MetadataServiceURIError(uri, f"is not a metadata service URI such as {_EXAMPLE}")
        backend, plus, manager = m.group("scheme").lower().partition("+")
        if backend != "zk":
            raise MetadataServiceURIError(
                uri, f"uses metadata driver {backend or m.group('scheme')!r}; only ZooKeeper (zk) is supported"
            )
        if not plus:
            manager = "null"
        if manager not in URI_MANAGERS:
            raise MetadataServiceURIError(
                uri, f"names unknown ledger manager {manager!r} (known: {', '.join(URI_MANAGERS)})"
            )
        if manager not in SUPPORTED_URI_MANAGERS:
            raise MetadataServiceURIError(
                uri,
                f"names ledger manager {manager!r} (Java's deprecated MetaStore manager), which "
                f"bkctl and bookied do not support (use {', '.join(SUPPORTED_URI_MANAGERS)})",
            )
        if m.group("rest"):
            raise MetadataServiceURIError(
                uri, f"has a query or fragment ({m.group('rest')!r}), which a metadata service URI does not take"
            )
        authority = m.group("authority")
        hosts = []
        for item in re.split(r"[;,]", authority):
            item = item.strip()
            if not item:
                what = "names no ZooKeeper server" if not authority.strip() else f"has an empty server in {authority!r}"
                raise MetadataServiceURIError(uri, what)
            problem = zk_server_problem(item)
            if problem:
                raise MetadataServiceURIError(uri, f"has server {item!r} that {problem}")
            hosts.append(item)
        root = m.group("path")
        if not root:
            raise MetadataServiceURIError(
                uri,
                f"has no ledgers root path (such as /ledgers in {_EXAMPLE}); "
                "Java would put the cluster at the ZooKeeper root",
            )
        problem = root_path_problem(root)
        if problem:
            raise MetadataServiceURIError(uri, f"has root path {root!r} that {problem}")
        return cls("zk", manager, ",".join(hosts), root)

    @classmethod
    def for_servers(
        cls, servers: Iterable[str], root: str = DEFAULT_LEDGERS_ROOT, manager: str = "hierarchical"
    ) -> MetadataServiceURI:
        """The URI Java derives from zkServers and zkLedgersRootPath (checked like a parsed one)."""
        return cls.parse(f"zk+{manager}://{';'.join(servers)}{root}")

    @property
    def servers(self) -> tuple[str, ...]:
        """``("h1:2181", "h2:2181")``."""
        return tuple(self.hosts.split(","))

    @property
    def layout_manager(self) -> str | None:
        """The manager the URI forces, or ``None`` for ``null`` (read LAYOUT)."""
        return None if self.manager == "null" else self.manager

    def __str__(self) -> str:
        scheme = self.scheme if self.manager == "null" else f"{self.scheme}+{self.manager}"
        return f"{scheme}://{self.hosts.replace(',', ';')}{self.root}"
