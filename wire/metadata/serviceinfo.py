"""BookieServiceInfo: the data of ``available/<bookieId>`` (BookKeeper's
discover/ZKRegistrationClient.java, DataFormats.proto's BookieServiceInfoFormat).

Pure codecs, no I/O.  The value is the **binary** ``BookieServiceInfoFormat``
protobuf (BookKeeper 4.12+); an empty value is "legacy": the bookie id itself
is the ``host:port`` to connect to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bkctl.wire.codecs.varint import encode as _varint
from bkctl.wire.errors import CodecError
from bkctl.wire.proto import formats_pb2
from bkctl.wire.text import split_host_port

__all__ = [
    "BOOKIE_RPC",
    "BookieServiceInfo",
    "Endpoint",
    "parse_bookie_id_address",
    "parse_service_info",
]

BOOKIE_RPC = "bookie-rpc"
HTTP = "http"
BOOKIE_ENDPOINT_ID = "bookie"
HTTP_ENDPOINT_ID = "httpserver"
#: Java publishes the HTTP endpoint with this host (it listens on every interface).
HTTP_ENDPOINT_HOST = "0.0.0.0"
TLS_EXTENSION = "tls"


def parse_bookie_id_address(bookie_id: str) -> tuple[str, int]:
    """The address of a legacy bookie id (``"10.0.0.1:3181"`` -> ``("10.0.0.1", 3181)``),
    by :func:`bkctl.wire.text.split_host_port`; ``ValueError`` if it is not host:port."""
    try:
        return split_host_port(bookie_id)
    except ValueError as exc:
        raise ValueError(f"bookie id {exc}") from None


@dataclass(frozen=True)
class Endpoint:
    id: str
    port: int
    host: str
    protocol: str
    auth: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "auth", tuple(self.auth))
        object.__setattr__(self, "extensions", tuple(self.extensions))


def _pairs(properties: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``(key, value)`` pairs of a mapping or of pairs (BookieServiceInfo sorts them)."""
    return tuple(properties.items() if isinstance(properties, Mapping) else properties)


#: the property ``bookied --salvage`` publishes ("true"): its bookie id's copies are to be copied
#: off, not counted as live (:func:`~bkctl.wire.metadata.store.registered_bookies`)
SALVAGE_PROPERTY = "bkctl.salvage"


@dataclass(frozen=True)
class BookieServiceInfo:
    """Endpoints and free-form properties a bookie publishes.

    ``properties`` is kept as a sorted tuple of ``(key, value)`` pairs so the
    object is hashable; :attr:`property_map` gives a dict.  Binary map entries
    are written in that sorted order (protobuf does not fix an order).
    """

    endpoints: tuple[Endpoint, ...] = ()
    properties: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(self.endpoints))
        props = self.properties
        pairs = props.items() if isinstance(props, Mapping) else props
        object.__setattr__(self, "properties", tuple(sorted((str(k), str(v)) for k, v in pairs)))

    @property
    def property_map(self) -> dict[str, str]:
        return dict(self.properties)

    @property
    def is_salvage(self) -> bool:
        """Published by ``bookied --salvage``: a dead bookie's directories served read-only,
        to be copied off (:data:`SALVAGE_PROPERTY`)."""
        return self.property_map.get(SALVAGE_PROPERTY) == "true"

    @property
    def is_legacy(self) -> bool:
        """No endpoints published: derive the address from the bookie id."""
        return not self.endpoints

    @classmethod
    def for_bookie(
        cls,
        host: str,
        port: int,
        http_port: int | None = None,
        tls: bool = False,
        properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> BookieServiceInfo:
        """What a Java bookie publishes: a ``bookie-rpc`` endpoint (+ ``tls`` extension),
        and an ``http`` endpoint when the HTTP server is enabled."""
        eps = [Endpoint(BOOKIE_ENDPOINT_ID, port, host, BOOKIE_RPC, (), (TLS_EXTENSION,) if tls else ())]
        if http_port is not None:
            eps.append(Endpoint(HTTP_ENDPOINT_ID, http_port, HTTP_ENDPOINT_HOST, HTTP))
        return cls(tuple(eps), _pairs(properties))

    @classmethod
    def legacy(cls) -> BookieServiceInfo:
        return cls()

    def endpoint(self, protocol: str = BOOKIE_RPC) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.protocol == protocol:
                return ep
        return None

    def rpc_address(self, bookie_id: str | None = None) -> tuple[str, int]:
        """``(host, port)`` of the ``bookie-rpc`` endpoint.

        For legacy (empty) info, or info without that endpoint, the address is
        derived from ``bookie_id`` (``ValueError`` if not given or not host:port).
        """
        ep = self.endpoint(BOOKIE_RPC)
        if ep is not None:
            return ep.host, ep.port
        if bookie_id is None:
            raise ValueError("no bookie-rpc endpoint published and no bookie id to derive the address from")
        return parse_bookie_id_address(bookie_id)

    def serialize(self) -> bytes:
        """Binary ``BookieServiceInfoFormat``; legacy (no endpoints, no properties) is ``b""``."""
        pb = formats_pb2.BookieServiceInfoFormat()
        for ep in self.endpoints:
            e = pb.endpoints.add()
            e.id = ep.id
            e.port = ep.port
            e.host = ep.host
            e.protocol = ep.protocol
            e.auth.extend(ep.auth)
            e.extensions.extend(ep.extensions)
        body = pb.SerializeToString()
        # map entries appended by hand so their order is deterministic
        for key, value in self.properties:
            entry = formats_pb2.BookieServiceInfoFormat.PropertiesEntry(key=key, value=value)
            raw = entry.SerializeToString()
            body += b"\x3a" + _varint(len(raw)) + raw
        return body

    def __bytes__(self) -> bytes:
        return self.serialize()

    @classmethod
    def parse(cls, data: bytes) -> BookieServiceInfo:
        return parse_service_info(data)


def parse_service_info(data: bytes) -> BookieServiceInfo:
    """Decode ``available/<id>`` data; ``b""`` is legacy.  Raises only :class:`CodecError`."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"bookie service info must be bytes, not {type(data).__name__}")
    pb = formats_pb2.BookieServiceInfoFormat()
    try:
        pb.ParseFromString(bytes(data))
        # protobuf's upb backend checks a string field's UTF-8 when it is read, not when parsed
        eps = tuple(
            Endpoint(e.id, e.port, e.host, e.protocol, tuple(e.auth), tuple(e.extensions)) for e in pb.endpoints
        )
        properties = tuple(pb.properties.items())
    except Exception as exc:
        raise CodecError(f"malformed bookie service info: {exc}") from None
    return BookieServiceInfo(eps, properties)
