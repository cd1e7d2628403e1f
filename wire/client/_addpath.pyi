"""Types of the C extension ``_addpath.c`` (a connection's copies of a writer's ADDs, built,
registered and answered); its Python twins are :class:`bkctl.wire.client.requests.Request` (with
``EntryRequests.encoded_adds`` and ``RequestTable``).  ``./dev lint`` checks this stub against the
built module (mypy's stubtest)."""

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias, final

#: ``on_done(ctx, slot, bookie_id, result)`` (channel.AddDone: a stub imports none of the project's modules)
_OnDone: TypeAlias = Callable[[Any, Any, str, Any], object]

API: Final[int]
#: ``requests.QUEUED, SENT, DONE`` as the C module counts them (a test holds them equal)
REQUEST_STATES: Final[tuple[int, int, int]]
#: ``OperationType.ADD_ENTRY`` as the C module writes it (a test holds it equal)
OP_ADD: Final[int]

@final
class AddCopy:
    key: int
    op: int
    frame: bytes
    decode: Any
    on_done: Any
    ctx: Any
    slot: Any
    deadline: float
    timeouts: Any
    state: int
    conn: Any
    @property
    def ok(self) -> bytes: ...
    @property
    def fast(self) -> bytes: ...
    @property
    def what(self) -> str: ...
    @property
    def ids(self) -> tuple[int, int]: ...
    @property
    def deferred(self) -> None: ...
    @deferred.setter
    def deferred(self, value: object) -> None: ...
    @property
    def is_batch(self) -> bool: ...
    @property
    def verb(self) -> str: ...
    def call_back(self, on_done: _OnDone, bookie_id: str, result: Any, /) -> None: ...
    def callback_to(self, on_done: _OnDone, ctx: Any, slot: Any, /) -> None: ...
    def complete(self, bookie_id: str, result: Any, /) -> None: ...

def add_copies(
    adds: Sequence[Any],
    slots: Sequence[Any],
    on_done: _OnDone,
    ids: Any,
    decode: Callable[[Any], tuple[int, Any]],
    general: Callable[[Any, int], tuple[Any, bytes | None]],
    /,
) -> tuple[list[Any], bytes]: ...
def register_all(reqs: list[Any], start: int, sent: Any, pending: dict[int, Any], fast: dict[bytes, Any], /) -> int: ...
def take_adds(
    payloads: list[bytes],
    start: int,
    fast: dict[bytes, Any],
    pending: dict[int, Any],
    sent: Any,
    table: Any,
    queue: Any,
    pump: Callable[[], object],
    bookie_id: str,
    /,
) -> int: ...
