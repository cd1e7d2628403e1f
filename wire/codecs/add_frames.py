"""One entry's ADD request, encoded once for every bookie of its write set.

An entry goes to Qw bookies with only the v3 txnId changing between the
copies (a v2 ADD has no per-request field at all), so the writer encodes it
once: :class:`AddEncoder` turns a packaged entry into an :class:`EncodedAdd`
holding the bytes every copy shares -- v3: the addRequest field and what the
bookie's EOK answer holds after its header field; v2: the whole frame.  A
connection then only adds a header (v3) and writes.  The bytes are exactly
``frame(serialize(add_request(...)))`` / ``frame(v2.AddRequest(...).encode())``.
DEFERRED_SYNC adds are not covered (they go through the request builders).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .answers import v2_add_frame
from .protocol import Flag

if TYPE_CHECKING:
    from .codec_twins import CodecTwins

__all__ = ["AddEncoder", "AddFields", "EncodedAdd"]

_FLAG_RECOVERY_ADD = int(Flag.RECOVERY_ADD)
_FLAG_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)


class AddFields(Protocol):
    """What a connection reads of an ADD encoded once for its write set: an :class:`EncodedAdd`,
    or a writer's entry that is its own (``bkctl.wire.client.pending_add.PendingAdd``, and its C
    twin ``_addentries.Entry``: one object per add, not two)."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def entry_id(self) -> int: ...

    @property
    def master_key(self) -> bytes: ...

    @property
    def body(self) -> bytes: ...

    @property
    def recovery(self) -> bool: ...

    @property
    def high_priority(self) -> bool: ...

    @property
    def v3_part(self) -> bytes | None: ...

    @property
    def v3_tail(self) -> bytes | None: ...

    @property
    def v2_frame(self) -> bytes | None: ...


class EncodedAdd:
    """The shared bytes of one entry's ADD (see the module's text), with what
    it was made of (for a connection that cannot use them and builds the
    request the general way)."""

    __slots__ = (
        "ledger_id",
        "entry_id",
        "master_key",
        "body",
        "recovery",
        "high_priority",
        "deferred_sync",
        "v3_part",
        "v3_tail",
        "v2_frame",
    )

    def __init__(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        recovery: bool,
        high_priority: bool,
        deferred_sync: bool = False,
    ):
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.master_key = master_key
        self.body = body
        self.recovery = recovery
        self.high_priority = high_priority
        #: v3 DEFERRED_SYNC (acknowledged before the journal's fsync): never encoded here, an
        #: ADD of its fields only that each connection builds the general way
        self.deferred_sync = deferred_sync
        #: v3: the request's addRequest field, and the EOK answer after its header field
        self.v3_part: bytes | None = None
        self.v3_tail: bytes | None = None
        #: v2: the whole framed request
        self.v2_frame: bytes | None = None


class AddEncoder:
    """Encodes the ADDs of one writer for ``protocol`` (``"v3"`` or ``"v2"``), v3's with
    ``codec.add_part`` (``codec``: the twins of the client's codecs in use, ``Twins.codec`` of
    :mod:`bkctl.wire.fastpath`)."""

    __slots__ = ("use_v3", "_add_part")

    def __init__(self, protocol: str, codec: CodecTwins):
        if protocol not in ("v2", "v3"):
            raise ValueError(f"protocol must be 'v2' or 'v3', not {protocol!r}")
        self.use_v3 = protocol == "v3"
        self._add_part = codec.add_part

    def encode(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        recovery: bool = False,
        high_priority: bool = False,
    ) -> EncodedAdd:
        """``body`` is the digest-packaged entry (bytes); ``master_key`` 20 bytes."""
        add = EncodedAdd(ledger_id, entry_id, master_key, body, recovery, high_priority)
        self.fill(add)
        return add

    def fill(self, add: EncodedAdd) -> None:
        """Encode ``add``, made of its fields, in place: its shared bytes for this writer's
        protocol (a writer's entry that is its own encoded ADD is filled so)."""
        if self.use_v3:
            add.v3_part, add.v3_tail = self._add_part(
                add.ledger_id, add.entry_id, add.master_key, add.body, add.recovery
            )
        else:
            flags = (_FLAG_RECOVERY_ADD if add.recovery else 0) | (_FLAG_HIGH_PRIORITY if add.high_priority else 0)
            add.v2_frame = v2_add_frame(flags, add.master_key, add.body)
