"""Chunked messages put back together (a message split over several entries).

Each chunk is an entry of its own whose metadata carries the message's
``uuid`` (``<producer>-<sequence id>``), ``chunk_id`` 0..n-1,
``num_chunks_from_msg`` and ``total_chunk_msg_size``.  Chunks of different
messages may interleave; a set that never completes is reported, not dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChunkAssembler", "ChunkedMessage", "IncompleteChunks"]


@dataclass
class ChunkedMessage:
    """A reassembled message: the first chunk's metadata, the joined payload,
    and the positions ``(ledger, entry)`` of its first and last chunk."""

    metadata: Any
    payload: bytes
    first: tuple[int, int]
    last: tuple[int, int]
    broker_timestamp: int | None = None
    broker_index: int | None = None


@dataclass
class IncompleteChunks:
    """Chunks of one message that do not make a whole: ``reason`` says why."""

    uuid: str
    reason: str
    metadata: Any
    positions: list[tuple[int, int]] = field(default_factory=list)


class _Pending:
    __slots__ = ("metadata", "parts", "positions", "expected", "total")

    def __init__(self, metadata: Any, position: tuple[int, int]):
        self.metadata = metadata
        self.parts: list[bytes] = []
        self.positions: list[tuple[int, int]] = []
        self.expected = metadata.num_chunks_from_msg
        self.total = metadata.total_chunk_msg_size


class ChunkAssembler:
    """Feed chunk entries in storage order; complete messages come out of
    :meth:`add`, broken sets are collected in :attr:`problems`."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self.problems: list[IncompleteChunks] = []

    @property
    def pending(self) -> dict[str, list[tuple[int, int]]]:
        """uuid -> positions of the chunks seen so far, of every unfinished message."""
        return {uuid: list(p.positions) for uuid, p in self._pending.items()}

    def started(self, uuid: str) -> bool:
        """Whether chunks of the message ``uuid`` are waiting for the rest."""
        return uuid in self._pending

    def first(self, uuid: str) -> tuple[int, int] | None:
        """Where the first chunk of the unfinished message ``uuid`` is (None: none is waiting)."""
        pending = self._pending.get(uuid)
        return pending.positions[0] if pending is not None and pending.positions else None

    def drop(self, uuid: str) -> None:
        """Forget the chunks of the message ``uuid`` so far (a reader that will not take its rest)."""
        self._pending.pop(uuid, None)

    def add(self, position: tuple[int, int], entry: Any) -> ChunkedMessage | None:
        """One chunk (a :class:`~bkctl.wire.pulsar.entry.StoredEntry`); the
        whole message once its last chunk arrives."""
        md = entry.metadata
        uuid = md.uuid
        chunk_id = md.chunk_id
        pending = self._pending.get(uuid)
        if chunk_id == 0:
            if pending is not None:
                self._give_up(uuid, "a new first chunk arrived before the message was complete")
            pending = self._pending[uuid] = _Pending(md, position)
        elif pending is None:
            self.problems.append(
                IncompleteChunks(
                    uuid, f"chunk {chunk_id} of {md.num_chunks_from_msg} without the chunks before it", md, [position]
                )
            )
            return None
        elif chunk_id != len(pending.parts):
            pending.positions.append(position)
            self._give_up(uuid, f"chunk {chunk_id} arrived after chunk {len(pending.parts) - 1}")
            return None
        pending.parts.append(entry.payload)
        pending.positions.append(position)
        if len(pending.parts) < pending.expected:
            return None
        del self._pending[uuid]
        payload = b"".join(pending.parts)
        if pending.total and len(payload) != pending.total:
            self.problems.append(
                IncompleteChunks(
                    uuid,
                    f"chunks join to {len(payload)} bytes, the metadata says {pending.total}",
                    pending.metadata,
                    pending.positions,
                )
            )
            return None
        return ChunkedMessage(
            pending.metadata,
            payload,
            pending.positions[0],
            pending.positions[-1],
            entry.broker_timestamp,
            entry.broker_index,
        )

    def _give_up(self, uuid: str, reason: str) -> None:
        pending = self._pending.pop(uuid)
        self.problems.append(
            IncompleteChunks(
                uuid,
                f"{reason} ({len(pending.parts)} of {pending.expected} chunks)",
                pending.metadata,
                pending.positions,
            )
        )

    def finish(self, reason: str = "the topic ends before the message's last chunk") -> list[IncompleteChunks]:
        """Report every unfinished message as incomplete; returns all problems."""
        for uuid in list(self._pending):
            self._give_up(uuid, reason)
        return self.problems
