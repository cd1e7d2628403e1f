"""Per-connection v2/v3 protocol detection on the bookie side (BookKeeper's
proto/BookieProtoEncoding.java, RequestDecoder).

A connection starts out as v3: every frame is first parsed as a v3
``Request``. The first frame that does not parse switches the connection to
v2 for good, and that frame and all later ones are handed back as raw v2
payloads. This mirrors the Java bookie, whose per-channel decoder gives up on
protobuf after the first failure.

Pure logic: one :class:`ProtocolDetector` per TCP connection, fed with frame
payloads (length prefix already stripped by :mod:`bkctl.wire.codecs.framing`).
"""

from __future__ import annotations

from typing import Literal

from bkctl.wire.codecs.v3 import parse_request
from bkctl.wire.errors import CodecError
from bkctl.wire.proto.bookkeeper_pb2 import Request

__all__ = ["ProtocolDetector", "Classified"]

Payload = bytes | bytearray | memoryview
Classified = tuple[Literal["v3"], Request] | tuple[Literal["v2"], Payload]


class ProtocolDetector:
    """Sticky v3-then-v2 classifier for the frames of one connection."""

    __slots__ = ("_v3",)

    def __init__(self) -> None:
        self._v3 = True

    @property
    def protocol(self) -> str:
        """``"v3"`` until a frame failed to parse as v3, then ``"v2"`` forever."""
        return "v3" if self._v3 else "v2"

    @property
    def is_v3(self) -> bool:
        return self._v3

    def classify(self, payload: Payload) -> Classified:
        """``("v3", Request)`` while the connection is v3 and the frame parses,
        otherwise ``("v2", payload)`` with the payload object passed through
        untouched (decode it with :mod:`bkctl.wire.codecs.v2`)."""
        if self._v3:
            try:
                return "v3", parse_request(payload)
            except CodecError:
                self._v3 = False
        return "v2", payload

    def __repr__(self) -> str:
        return f"ProtocolDetector(protocol={self.protocol!r})"
