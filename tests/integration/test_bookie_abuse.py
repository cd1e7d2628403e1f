"""A live bookied under abuse while a valid client writes and reads: mutated frames,
thousands of connections, frames announced large and never completed, frames above
nettyMaxFrameSizeBytes, a client that never reads its add answers, a flood of long
polls.  Each gets an answer or a closed connection, the bookie logs the peer (rate
limited), and the valid client is served throughout.  The long versions are
bench/bench_abuse.py."""

import socket
import struct
import time
import uuid

import pytest

from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from tests.support.abuse import QUIET_GC, ValidClient, hammer, rss_kb
from tests.support.bookieproc import BookieProcess, WireClient
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("bookie_abuse")]  # one bookie for the module


@pytest.fixture(scope="module")
def abused(zookeeper, tmp_path_factory):
    """One bookied and its valid client for the module: each abuse in turn, the client served throughout."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    uri = f"zk+hierarchical://{zookeeper.connect_string}/abuse{uuid.uuid4().hex[:8]}/ledgers"
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    b = BookieProcess(tmp_path_factory.mktemp("abused"), uri, **QUIET_GC)
    try:
        b.start()
        client = ValidClient(b.port)
        client.start()
        wait_for(lambda: client.ops >= 4 or client.failures, timeout=30, what="the valid client's first entries")
        yield b, client
        client.stop()
    finally:
        b.kill()


@pytest.fixture
def bookie(abused):
    b, client = abused
    yield b, client
    assert client.failures == [], client.failures
    assert b.proc.poll() is None, b.log_tail()
    assert client.is_alive()


def log_size(b: BookieProcess) -> int:
    return b.log_path.stat().st_size


def logged_since(b: BookieProcess, offset: int, text: str) -> bool:
    """Whether the bookie's log, past ``offset`` bytes, says ``text``."""
    with open(b.log_path, "rb") as f:
        f.seek(offset)
        return text.encode() in f.read()


def served(client: ValidClient, more: int = 6) -> None:
    """The valid client goes on: ``more`` operations after this point."""
    target = client.ops + more
    wait_for(lambda: client.ops >= target or client.failures, timeout=60, what="the valid client's operations")
    assert client.failures == []


def test_mutated_frames_while_a_client_writes_and_reads(bookie):
    b, client = bookie
    result = hammer(b.port, 5_000, seed=5, connections=4, max_frames_per_connection=400)  # 10^7: bench/bench_abuse.py
    assert result.failures == [] and result.frames == 5_000
    assert result.closed_as_expected > 0  # fatal frames were among them, and closed only their connection
    served(client)
    log = b.log_path.read_text()
    assert "closing connection from 127.0.0.1:" in log  # the peer, port included
    # rate-limited: far fewer lines than connections closed
    assert log.count("closing connection from") < result.closed_as_expected


def test_a_thousand_connections_hold_and_close_without_hurting_the_client(bookie):
    b, client = bookie
    socks = []
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        if i % 2:
            s.sendall(struct.pack(">i", 5 * 1024 * 1024 - 1) + b"x" * 1000)  # announced large, never completed
        socks.append(s)
    served(client)
    w = WireClient(b.port)
    assert w.v2(v2.ReadRequest(2, 0, 424242, 0)).rc == RC.ENOLEDGER
    w.close()
    for s in socks:
        s.close()
    served(client)


def test_frames_announced_large_and_held_open_cost_what_was_sent(bookie):
    b, client = bookie
    before = rss_kb(b.proc.pid)
    socks = []
    for _ in range(300):  # 300 x 5 MiB announced, 4 KiB sent each
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        s.sendall(struct.pack(">i", 5 * 1024 * 1024) + b"y" * 4096)
        socks.append(s)
    served(client)
    grown_mb = (rss_kb(b.proc.pid) - before) / 1024
    assert grown_mb < 100, f"{grown_mb:.0f} MB for 1.2 MB of partial frames"
    for s in socks:
        s.close()


def test_a_frame_above_the_limit_closes_its_connection_only(bookie):
    b, client = bookie

    def too_large_frames_closed() -> bool:
        for length in (5 * 1024 * 1024 + 1, (1 << 31) - 1):
            w = WireClient(b.port)
            w.sock.sendall(struct.pack(">i", length) + b"z" * 100)
            assert w.closed_by_peer()
            w.close()
        return "exceeds the 5242880-byte limit" in b.log_path.read_text()

    # the bookie reports a peer host's closed connections once per 10 s (PeerLog): within 10 s of
    # the mutated frames' closings this one's line is left out, and a later closing is named
    wait_for(
        too_large_frames_closed, timeout=60, interval=2, what="a closing for a frame above the limit named in the log"
    )
    served(client)


def test_a_client_that_sends_adds_and_never_reads_is_not_read_either(bookie):
    b, client = bookie
    before = rss_kb(b.proc.pid)
    key = client.key
    greedy = socket.socket()
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the answers back up soon
    greedy.connect(("127.0.0.1", b.port))
    greedy.setblocking(False)
    body = client.dm.package(0, -1, 0, b"g" * 100)
    one = frame(v3.serialize(v3.add_request(1, 9, 0, key, body)))
    sent = 0
    pending = memoryview(one * 1000)
    logged, hang_guard = log_size(b), time.monotonic() + 120
    # until the bookie says it stopped reading this client (or has read far too much)
    while sent < (256 << 20) and not logged_since(b, logged, "it does not take its answers"):
        assert time.monotonic() < hang_guard, f"the bookie never said it stopped reading ({sent:,} bytes sent)"
        try:
            n = greedy.send(pending)
            sent += n
            pending = pending[n:] if n < len(pending) else memoryview(one * 1000)
        except BlockingIOError:
            time.sleep(0.05)
    assert sent < (256 << 20), "the bookie read everything a client that does not read sent it"
    served(client)
    grown_mb = (rss_kb(b.proc.pid, "VmHWM") - before) / 1024
    assert grown_mb < 150, f"the bookie grew by {grown_mb:.0f} MB for a client that reads nothing"
    greedy.close()
    served(client)


def test_a_flood_of_long_polls_does_not_grow_the_bookie_or_slow_the_client(bookie):
    b, client = bookie
    w = WireClient(b.port)
    assert w.v3(v3.add_request(1, 31, 0, client.key, client.dm.package(0, -1, 0, b"p"))).status == 0
    before = rss_kb(b.proc.pid)
    flood = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    flood.setblocking(False)
    polls = b"".join(
        frame(v3.serialize(v3.read_request(n, 31, -1, previous_lac=5, timeout_ms=600_000))) for n in range(1000)
    )
    pending, sent = memoryview(polls), 0
    logged, hang_guard = log_size(b), time.monotonic() + 120
    # until the bookie says it stopped reading with 1,000 polls waiting, or 200,000 polls
    while sent < 200_000 and not logged_since(b, logged, "for now: 1000 long polls wait"):
        assert time.monotonic() < hang_guard, f"the bookie never said it stopped reading ({sent:,} polls sent)"
        try:
            n = flood.send(pending)
            sent += 1000 * n // len(polls)
            pending = pending[n:] if n < len(pending) else memoryview(polls)
        except BlockingIOError:
            time.sleep(0.05)
    wait_for(lambda: logged_since(b, logged, "for now: 1000 long polls wait"), what="the bookie to stop reading")
    served(client)
    grown_mb = (rss_kb(b.proc.pid, "VmHWM") - before) / 1024
    assert grown_mb < 150, f"the bookie grew by {grown_mb:.0f} MB for a flood of long polls"
    flood.close()
    served(client)
    w.close()
