"""Length-prefixed framing shared by v2 and v3: ``i32 length | payload``.

:class:`FrameDecoder` accepts bytes in any chunking and returns whole
payloads.  It never buffers more than one frame: a declared length above the
limit raises :class:`~bkctl.wire.errors.FrameTooLarge` before anything is kept.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from bkctl.wire.codecs.protocol import DEFAULT_MAX_FRAME_SIZE
from bkctl.wire.errors import CodecError, FrameTooLarge

_LEN = struct.Struct(">i")


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its 4-byte big-endian length."""
    return _LEN.pack(len(payload)) + payload


#: ``length_prefix(n)``: the 4 bytes :func:`frame` puts before a payload of n bytes
#: (for writers that build a frame from parts).
length_prefix = _LEN.pack


def split_frames(buf: bytes, limit: int) -> tuple[list[bytes], int]:
    """The payloads of the whole frames at the start of ``buf`` and the position after them:
    it stops at a frame that is not whole, or whose length is negative or above ``limit`` (the
    caller looks at that one).  Its C twin is ``_fastcodec.split_frames``
    (:mod:`.codec_twins`)."""
    frames = []
    pos, end = 0, len(buf)
    unpack = _LEN.unpack_from
    while end - pos >= 4:
        (length,) = unpack(buf, pos)
        stop = pos + 4 + length
        if length < 0 or length > limit or stop > end:
            break
        frames.append(buf[pos + 4 : stop])
        pos = stop
    return frames, pos


class FrameDecoder:
    """Incremental decoder: ``feed(chunk)`` returns the payloads completed by ``chunk``.

    A bad length raises at once, unless frames before it in the same chunk
    are complete: those are returned and the next ``feed`` raises.  After an
    error the decoder stays broken (every later ``feed`` raises the same
    error): the stream has lost its framing and the connection should be
    closed.

    The whole frames of a chunk are cut by ``split_frames`` (:func:`split_frames`, or its C
    twin: ``Twins.codec.split_frames`` of :mod:`bkctl.wire.fastpath`); the frame it stops at
    (not whole, or a bad length) is this class's to look at.
    """

    __slots__ = ("max_frame_size", "_pending", "_pending_len", "_need", "_error", "_split")

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        split: Callable[[bytes, int], tuple[list[bytes], int]] = split_frames,
    ):
        if max_frame_size <= 0:
            raise ValueError("max_frame_size must be positive")
        self.max_frame_size = max_frame_size
        self._split = split
        # Chunks of an incomplete frame, joined only once the frame is whole,
        # so a large frame arriving in many small chunks costs O(n), not O(n^2).
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._need = 4
        self._error: CodecError | None = None

    @property
    def failed(self) -> CodecError | None:
        """The error that broke the stream (raised by the next ``feed``), or None."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes held for a frame that is not complete yet."""
        return self._pending_len

    def feed(self, data: bytes) -> list[bytes]:
        if self._error is not None:
            raise self._error
        if self._pending:
            self._pending.append(bytes(data))
            self._pending_len += len(data)
            if self._pending_len < self._need:
                return []
            buf = b"".join(self._pending)
        else:
            buf = bytes(data)
        limit = self.max_frame_size
        frames, pos = self._split(buf, limit)  # the whole frames; the loop looks at the one after
        end = len(buf)
        unpack = _LEN.unpack_from
        need = 4
        while end - pos >= 4:
            (length,) = unpack(buf, pos)
            if length < 0 or length > limit:
                self._pending, self._pending_len = [], 0
                self._error = (
                    FrameTooLarge(length, limit) if length > limit else CodecError(f"negative frame length {length}")
                )
                if frames:  # hand over the good frames first; the next feed raises
                    return frames
                raise self._error
            stop = pos + 4 + length
            if stop > end:
                need = 4 + length
                break
            frames.append(buf[pos + 4 : stop])
            pos = stop
        if pos < end:
            rest = buf[pos:]
            self._pending, self._pending_len, self._need = [rest], len(rest), need
        else:
            self._pending, self._pending_len, self._need = [], 0, 4
        return frames
