"""The ledger-manager LAYOUT znode and the metadata service URI (metadata.md sections 1-2).

Pure codecs, no I/O.

LAYOUT content (no trailing newline)::

    <layoutFormatVersion>\\n<managerFactoryClass>:<managerVersion>

Format 2 (what current writers use) names a factory class; format 1 names a
manager type (``flat`` or ``hierarchical``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import CodecError

__all__ = [
    "DEFAULT_LEDGERS_ROOT",
    "FACTORY_CLASSES",
    "LAYOUT_FORMAT_VERSION",
    "LedgerLayout",
    "MetadataServiceURI",
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
    def for_manager(cls, manager: str = "hierarchical") -> "LedgerLayout":
        """The layout current writers create for ``manager``."""
        name = manager.lower()
        return cls(factory_class_for(name), MANAGER_VERSIONS[name], LAYOUT_FORMAT_VERSION)

    @property
    def manager(self) -> str | None:
        """``flat``, ``hierarchical``, ... or ``None`` for an unknown factory."""
        return manager_for_factory(self.manager_factory_class)

    def matches(self, other: "LedgerLayout", tolerate_shading: bool = False) -> bool:
        """Whether a configured layout and a stored one name the same factory and version."""
        if self.manager_version != other.manager_version:
            return False
        if tolerate_shading:
            return self.manager is not None and self.manager == other.manager
        mine, theirs = self.manager_factory_class, other.manager_factory_class
        if mine == theirs:
            return True
        # a format-1 type name and its class are the same manager
        return self.manager is not None and self.manager == other.manager and (
            self.format_version == 1 or other.format_version == 1
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
        return f"{fmt}\n{factory}:{self.manager_version}".encode("utf-8")

    @classmethod
    def parse(cls, data: bytes) -> "LedgerLayout":
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
    if not version.isascii() or not version.lstrip("-").isdigit():
        raise CodecError(f"LAYOUT has an invalid manager version: {parts[1]!r}")
    return LedgerLayout(parts[0], int(version), fmt)


# ---------------------------------------------------------------------------
# metadataServiceUri
# ---------------------------------------------------------------------------
URI_MANAGERS = ("flat", "hierarchical", "longhierarchical", "ms", "null")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(?::(\d{1,5}))?")


@dataclass(frozen=True)
class MetadataServiceURI:
    """``zk+<manager>://h1:2181;h2:2181/ledgers``.

    * ``scheme``: the metadata backend, always ``"zk"`` here;
    * ``manager``: ``flat``, ``hierarchical``, ``longhierarchical``, ``ms`` or
      ``null`` (plain ``zk://``: use whatever LAYOUT says);
    * ``hosts``: kazoo connect string, ``"h1:2181,h2:2181"``;
    * ``root``: the ledgers root, ``/ledgers`` when the URI has no path.

    ``str()`` gives ``zk+<manager>://h1:2181;h2:2181/root`` (``zk://`` for
    ``null``), which :meth:`parse` reads back to an equal object.
    """

    scheme: str
    manager: str
    hosts: str
    root: str = DEFAULT_LEDGERS_ROOT

    @classmethod
    def parse(cls, uri: str) -> "MetadataServiceURI":
        if not isinstance(uri, str) or "://" not in uri:
            raise ValueError(f"invalid metadata service URI {uri!r}: expected zk+<manager>://host:port/root")
        scheme_part, rest = uri.split("://", 1)
        backend, plus, manager = scheme_part.lower().partition("+")
        if backend != "zk":
            raise ValueError(f"invalid metadata service URI {uri!r}: only the zk backend is supported, not {backend!r}")
        if not plus:
            manager = "null"
        if manager not in URI_MANAGERS:
            raise ValueError(
                f"invalid metadata service URI {uri!r}: unknown ledger manager {manager!r}"
                f" (one of {', '.join(URI_MANAGERS)})"
            )
        authority, slash, path = rest.partition("/")
        if "?" in rest or "#" in rest:
            raise ValueError(f"invalid metadata service URI {uri!r}: query strings and fragments are not allowed")
        hosts = []
        for item in re.split(r"[;,]", authority):
            item = item.strip()
            if not item:
                raise ValueError(f"invalid metadata service URI {uri!r}: empty host in {authority!r}")
            m = _HOST.fullmatch(item)
            if not m or (m.group(2) is not None and not 0 < int(m.group(2)) < 65536):
                raise ValueError(f"invalid metadata service URI {uri!r}: bad host:port {item!r}")
            hosts.append(item)
        root = ("/" + path).rstrip("/") if slash else ""
        if not root:
            root = DEFAULT_LEDGERS_ROOT
        if "//" in root:
            raise ValueError(f"invalid metadata service URI {uri!r}: bad path {root!r}")
        return cls("zk", manager, ",".join(hosts), root)

    @property
    def servers(self) -> list[str]:
        return self.hosts.split(",")

    @property
    def layout_manager(self) -> str | None:
        """The manager the URI forces, or ``None`` for ``null`` (read LAYOUT)."""
        return None if self.manager == "null" else self.manager

    def __str__(self) -> str:
        scheme = self.scheme if self.manager == "null" else f"{self.scheme}+{self.manager}"
        return f"{scheme}://{self.hosts.replace(',', ';')}{self.root}"

