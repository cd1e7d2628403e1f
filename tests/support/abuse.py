"""Abuse of a live bookie: mutated frames, and a valid client that must be served throughout.

:class:`Mutator` makes frames out of the captured Java frames (and the fuzz
corpus of requests) by flipping bits, overwriting, cutting, growing and
splicing, and knows, by the bookie's own decoders, which of them the bookie
must close the connection on (a frame that does not frame, or that the
connection's protocol cannot decode).  :func:`hammer` sends them over a few
connections at once, each frame the bookie must take on a connection that
must stay open, ending a connection with a fatal frame now and then; a
connection the bookie closes early, or does not close after a fatal frame,
is counted as a failure.  :class:`ValidClient` writes and reads a ledger of
its own meanwhile and checks every answer.  :func:`rss_kb` samples the
bookie's resident memory.

Used by tests/integration/test_bookie_abuse.py (short) and bench/bench_abuse.py (>= 10^7 frames).
"""

from __future__ import annotations

import random
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.framing import FrameDecoder, frame
from bkctl.wire.errors import CodecError

_LEN = struct.Struct(">i")
#: bk_server.conf for the abused bookie: the ledgers written here have no metadata in
#: ZooKeeper, which garbage collection would take for deleted ones (the valid client's too)
QUIET_GC = {"gcWaitTime": 24 * 3600 * 1000, "minorCompactionInterval": 0, "majorCompactionInterval": 0}


def rss_kb(pid: int, field_name: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise ValueError(f"no {field_name} for {pid}")


def source_frames() -> list[bytes]:
    """Request payloads to mutate: every captured Java request, and the fuzz corpus of requests."""
    from tests.support import fuzz_targets as ft
    from tests.support.golden import frames

    out = {f["raw"][4:] for f in frames() if f["kind"] == "request"}
    for name in ("v2_request", "v3_request"):
        out.update(ft.corpus(name))
    return sorted(out)


class Mutator:
    """Mutated request payloads, and whether the bookie takes each one on a connection."""

    def __init__(self, seed: int, max_frame_size: int = 5 * 1024 * 1024):
        self.rng = random.Random(seed)
        self.sources = source_frames()
        self.max_frame_size = max_frame_size

    def payload(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice(self.sources))
        for _ in range(rng.randint(1, 4)):
            how = rng.random()
            if how < 0.45 and data:  # flip a bit
                bit = rng.randrange(len(data) * 8)
                data[bit // 8] ^= 1 << (bit % 8)
            elif how < 0.65 and data:  # an interesting byte somewhere
                data[rng.randrange(len(data))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            elif how < 0.75:  # cut
                del data[rng.randrange(len(data) + 1) :]
            elif how < 0.85:  # grow
                data += rng.randbytes(rng.randint(1, 32))
            else:  # splice with another source
                other = rng.choice(self.sources)
                cut = rng.randrange(len(data) + 1)
                data[cut:] = other[rng.randrange(len(other) + 1) :]
        return bytes(data)

    @staticmethod
    def takes(is_v3: bool, payload: bytes) -> tuple[bool, bool]:
        """``(taken, is_v3 after)``: whether a bookie whose connection is still v3
        (``is_v3``) or fell back to v2 answers ``payload`` and keeps the connection,
        and whether the connection is v3 after it (the first frame that is not a v3
        Request makes it v2 for good: bkctl.wire.codecs.detect)."""
        if is_v3:
            try:
                v3.parse_request(payload)
                return True, True
            except CodecError:
                pass
        try:
            v2.decode_request(payload)
        except CodecError:
            return False, False
        return True, False

    def fatal_frame(self) -> bytes:
        """A frame no connection survives: a bad length."""
        rng = self.rng
        length = rng.choice((-1, -(1 << 31), self.max_frame_size + 1, (1 << 31) - 1))
        return _LEN.pack(length) + rng.randbytes(rng.randint(0, 16))


@dataclass
class HammerResult:
    frames: int = 0
    connections: int = 0
    closed_as_expected: int = 0
    failures: list[str] = field(default_factory=list)
    answered_bytes: int = 0


class _Conn:
    __slots__ = ("sock", "is_v3", "out", "left", "doomed", "closing_since", "frames")

    def __init__(self, sock, frames_left: int):
        self.sock = sock
        self.is_v3 = True  # as the bookie's ProtocolDetector starts
        self.out = bytearray()
        self.left = frames_left
        self.doomed = False  # a fatal frame was queued: the bookie must close
        self.closing_since = 0.0
        self.frames = 0


def hammer(
    port: int,
    frames: int,
    *,
    seed: int = 1,
    connections: int = 8,
    max_frames_per_connection: int = 3000,
    fatal_share: float = 0.01,
    close_timeout: float = 30.0,
    stop: threading.Event | None = None,
    progress=None,
) -> HammerResult:
    """Send ``frames`` mutated frames at the bookie on ``port`` over ``connections`` connections at once."""
    mut = Mutator(seed)
    rng = mut.rng
    sel = selectors.DefaultSelector()
    result = HammerResult()
    queued = 0

    def connect() -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setblocking(False)
        conn = _Conn(sock, rng.randint(1, max_frames_per_connection))
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        result.connections += 1

    def fill(conn: _Conn) -> None:
        nonlocal queued
        while len(conn.out) < 65536 and conn.left > 0 and queued < frames and not conn.doomed:
            payload = mut.payload()
            conn.left -= 1
            queued += 1
            conn.frames += 1
            taken, is_v3 = mut.takes(conn.is_v3, payload)
            if taken:
                conn.out += frame(payload)
                conn.is_v3 = is_v3
            elif rng.random() < fatal_share:
                conn.out += frame(payload)
                conn.doomed = True
            else:
                queued -= 1  # not sent: the bookie would close on it
                conn.frames -= 1
        if (conn.left == 0 or queued >= frames) and not conn.doomed and rng.random() < fatal_share / 4:
            conn.out += mut.fatal_frame()
            conn.doomed = True

    def finish(conn: _Conn, closed_by_bookie: bool) -> None:
        sel.unregister(conn.sock)
        conn.sock.close()
        if closed_by_bookie and not conn.doomed:
            result.failures.append(f"the bookie closed a connection after {conn.frames} frames it should take")
        elif conn.doomed and closed_by_bookie:
            result.closed_as_expected += 1
        elif conn.doomed:
            result.failures.append("the bookie did not close a connection after a frame it cannot take")

    for _ in range(connections):
        connect()
    last_report = time.monotonic()
    while sel.get_map():
        if stop is not None and stop.is_set():
            break
        for key, events in sel.select(timeout=1.0):
            conn: _Conn = key.data
            if events & selectors.EVENT_READ:
                try:
                    data = conn.sock.recv(1 << 20)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                except BlockingIOError:
                    data = None
                if data == b"":
                    finish(conn, True)
                    if queued < frames:
                        connect()
                    continue
                if data:
                    result.answered_bytes += len(data)
            if events & selectors.EVENT_WRITE:
                if not conn.out and not conn.doomed:
                    fill(conn)
                if conn.out:
                    try:
                        sent = conn.sock.send(conn.out)
                        del conn.out[:sent]
                    except BlockingIOError:
                        pass
                    except (ConnectionResetError, BrokenPipeError):
                        finish(conn, True)
                        if queued < frames:
                            connect()
                        continue
                if not conn.out:
                    if conn.doomed:
                        if not conn.closing_since:
                            conn.closing_since = time.monotonic()
                            sel.modify(conn.sock, selectors.EVENT_READ, conn)
                    elif conn.left == 0 or queued >= frames:
                        finish(conn, False)  # a clean end: we close
                        if queued < frames:
                            connect()
                        continue
        now = time.monotonic()
        for key in list(sel.get_map().values()):
            conn = key.data
            if conn.closing_since and now - conn.closing_since > close_timeout:
                finish(conn, False)
                if queued < frames:
                    connect()
        if progress is not None and now - last_report > 10:
            last_report = now
            progress(queued)
    result.frames = queued
    sel.close()
    return result


class ValidClient(threading.Thread):
    """Writes entries to a ledger of its own (v3 and v2 in turn) and reads each one back,
    checking every answer, until stopped; records failures and the slowest round trip."""

    def __init__(self, port: int, ledger_id: int = (1 << 40) + 77, timeout: float = 30.0):
        super().__init__(daemon=True, name="valid-client")
        self.port = port
        self.ledger_id = ledger_id
        self.timeout = timeout
        self.stop_event = threading.Event()
        self.ops = 0
        self.failures: list[str] = []
        self.slowest = 0.0
        self.key = master_key(b"valid")
        self.dm = DigestManager(ledger_id, DigestType.CRC32C, b"valid")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=self.timeout + 10)

    def _exchange(self, sock: socket.socket, decoder: FrameDecoder, payload: bytes) -> bytes:
        sock.sendall(frame(payload))
        while True:
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the bookie closed the valid client's connection")
            got = decoder.feed(data)
            if got:
                return got[0]

    def run(self) -> None:
        entry = 0
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
            v2sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        except OSError as e:
            self.failures.append(f"connect: {e}")
            return
        dec, dec2 = FrameDecoder(), FrameDecoder()
        lac = -1
        while not self.stop_event.is_set():
            body = self.dm.package(entry, lac, 0, b"valid-%d" % entry)
            started = time.monotonic()
            try:
                if entry % 2 == 0:
                    r = v3.parse_response(
                        self._exchange(
                            sock, dec, v3.serialize(v3.add_request(entry + 1, self.ledger_id, entry, self.key, body))
                        )
                    )
                    ok = r.status == 0
                else:
                    r = v2.decode_response(
                        self._exchange(
                            v2sock, dec2, v2.AddRequest(2, 0, self.key, body, self.ledger_id, entry).encode()
                        )
                    )
                    ok = r.rc == 0
                if not ok:
                    self.failures.append(f"add {entry}: {r}")
                    break
                r = v3.parse_response(
                    self._exchange(sock, dec, v3.serialize(v3.read_request(entry + 2, self.ledger_id, entry)))
                )
                if r.status != 0 or r.readResponse.body != body:
                    self.failures.append(f"read {entry}: status {r.status}")
                    break
            except (OSError, CodecError) as e:
                self.failures.append(f"entry {entry}: {type(e).__name__}: {e}")
                break
            self.slowest = max(self.slowest, time.monotonic() - started)
            lac = entry
            entry += 1
            self.ops += 2
        sock.close()
        v2sock.close()


class Bystanders:
    """The other abusers, held for as long as the bookie is hammered: ``held``
    connections (half of them holding a frame announced at 5 MiB and never
    completed), a client that sends adds and never reads their answers, and one
    that floods long polls that never come due.  :meth:`close` lets them all go."""

    def __init__(self, port: int, held: int, key: bytes, dm: DigestManager):
        self.socks: list[socket.socket] = []
        for i in range(held):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(_LEN.pack(5 * 1024 * 1024 - 1) + b"x" * 1000)
            self.socks.append(s)
        self._stop = threading.Event()
        adds = frame(v3.serialize(v3.add_request(1, (1 << 40) + 5, 0, key, dm.package(0, -1, 0, b"g" * 100))))
        polls = b"".join(
            frame(v3.serialize(v3.read_request(n, (1 << 40) + 5, -1, previous_lac=1 << 40, timeout_ms=3_600_000)))
            for n in range(100)
        )
        self.threads = [
            threading.Thread(target=self._flood, args=(port, adds * 100, 4096), daemon=True),
            threading.Thread(target=self._flood, args=(port, polls, None), daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _flood(self, port: int, chunk: bytes, rcvbuf: int | None) -> None:
        """Send ``chunk`` over and over, never reading, as fast as the bookie takes it."""
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", port))
        s.settimeout(0.5)
        self.socks.append(s)
        pending = memoryview(chunk)
        while not self._stop.is_set():
            try:
                n = s.send(pending)
            except TimeoutError:
                continue
            except OSError:
                return
            pending = pending[n:] if n < len(pending) else memoryview(chunk)

    def close(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join(timeout=10)
        for s in self.socks:
            s.close()
