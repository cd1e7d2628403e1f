"""Types of the C extension ``_addentries.c`` (a writer's entries, their addressing and their
acknowledgement counter); its Python twins are :class:`bkctl.wire.client.pending_add.PendingAdd`
(with :func:`~bkctl.wire.client.pending_add.address_run`), :class:`bkctl.wire.codecs.add_frames.EncodedAdd`
and :class:`bkctl.wire.client.acks.Acks`.  ``./dev lint`` checks this stub against
the built module (mypy's stubtest)."""

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, final

API: Final[int]

@final
class Entry:
    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...
    @property
    def master_key(self) -> bytes: ...
    @property
    def body(self) -> bytes: ...
    @property
    def length(self) -> int: ...
    @property
    def recovery(self) -> bool: ...
    @property
    def high_priority(self) -> bool: ...
    @property
    def v3_part(self) -> bytes: ...
    @property
    def v3_tail(self) -> bytes: ...
    deferred: Any
    bookies: Any
    acked: int
    acks: int
    @property
    def encoded(self) -> Any: ...
    @encoded.setter
    def encoded(self, value: Any) -> None: ...
    @property
    def v2_frame(self) -> None: ...
    def reassign(self, slot: int, bookie: str, /) -> None: ...

@final
class Entries:
    def __new__(
        cls,
        package: Callable[[int, int, int, int, bytes], bytes],
        add_part: Callable[[int, int, bytes, bytes, bool], tuple[bytes, bytes]],
        ledger_id: int,
        master_key: bytes,
        recovery: bool,
    ) -> Entries: ...
    def __call__(self, entry_id: int, lac: int, length: int, payload: bytes, deferred: Any, /) -> Entry: ...

@final
class Acks:
    def __new__(
        cls,
        unanswered: dict[str, int],
        behind: set[str],
        pending: deque[Any],
        ack_quorum: int,
        cork: Any,
        writer: Any,
        answered: Callable[[str, int], Any],
        add_error: Callable[[BaseException, Any, int, str], Any],
        complete: Callable[[], Any],
    ) -> Acks: ...
    @property
    def unanswered(self) -> dict[str, int]: ...
    @property
    def behind(self) -> set[str]: ...
    @property
    def pending(self) -> deque[Any]: ...
    @property
    def ack_quorum(self) -> int: ...
    @property
    def cork(self) -> Any: ...
    @property
    def writer(self) -> Any: ...
    @property
    def answered(self) -> Callable[[str, int], Any]: ...
    @property
    def add_error(self) -> Callable[[BaseException, Any, int, str], Any]: ...
    @property
    def complete(self) -> Callable[[], Any]: ...
    held: bool
    def __call__(self, p: Any, slot: int, bookie: str, error: BaseException | None, /) -> None: ...

def address_run(
    run: Sequence[Any], cursor: Any, encode: Callable[[Any], Any], /
) -> dict[str, tuple[list[Any], list[Any], list[int]]]: ...
