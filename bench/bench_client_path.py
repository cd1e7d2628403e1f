"""The client's read path alone: client CPU per entry read over v3, in process.

One BookieConnection on a StringTransport (Twisted's fake: no sockets, no
bookie processes), a closed E1/Qw1/Qa1 ledger of 100 B entries with CRC32C
digests, read with ReadHandle's window of 256; the bookie's EOK answers are
built outside the timed part and fed back ``--chunk`` at a time through
dataReceived.  What is timed is everything the client's reactor thread does
per entry except the system calls: encoding and registering requests,
matching and cutting answers, digest checks, the window's bookkeeping.  The
figure is steadier than bench_client.py's on a shared machine; run it with
BKCTL_FASTPATHS=0 for the general path.
"""
from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_client import load_note  # noqa: E402
from twisted.internet.testing import MemoryReactorClock, StringTransport  # noqa: E402

from bkctl.wire import fastpath
from bkctl.wire.codecs import v3  # noqa: E402
from bkctl.wire.client.connection import BookieConnection  # noqa: E402
from bkctl.wire.client.read_handle import ReadHandle  # noqa: E402
from bkctl.wire.codecs.digest import DigestManager, DigestType  # noqa: E402
from bkctl.wire.codecs.framing import frame  # noqa: E402
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState  # noqa: E402


def run(n: int, chunk: int) -> float:
    reactor = MemoryReactorClock()
    conn = BookieConnection("bookie:1", reactor, protocol="v3")
    conn.bookie_info()  # starts the connection; never answered
    factory = reactor.tcpClients[-1][2]
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    transport.clear()
    dm = DigestManager(1, DigestType.CRC32C, b"")
    bodies = [dm.package(e, e - 1, 100 * (e + 1), b"x" * 100) for e in range(n)]
    md = LedgerMetadata(1, 1, 1, LedgerState.CLOSED, n - 1, 100 * n, ((0, ("bookie:1",)),))
    client = types.SimpleNamespace(pool=types.SimpleNamespace(get=lambda _b: conn), protocol="v3",
                                   read_window=256)
    handle = ReadHandle(client, 1, md, 0, b"", DigestType.CRC32C)

    def answers(data: bytes) -> list[bytes]:
        out, pos = [], 0
        while pos < len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            payload = data[pos + 4:pos + 4 + size]
            pos += 4 + size
            e = v3.parse_request(payload).readRequest.entryId
            out.append(frame(v3.read_answer(payload[:2 + payload[1]], 1, e, bodies[e], e - 1)))
        return out

    done: list = []
    handle._read_span(0, n - 1).addCallback(done.append)
    pending: list[bytes] = []
    cpu = 0.0
    while not done:
        pending.extend(answers(transport.value()))
        transport.clear()
        batch, pending = pending[:chunk], pending[chunk:]
        start = time.process_time()
        proto.dataReceived(b"".join(batch))
        cpu += time.process_time() - start
    assert len(done[0]) == n and done[0][-1] == (n - 1, b"x" * 100)
    return cpu / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=60_000)
    parser.add_argument("--chunk", type=int, default=16, help="answers per dataReceived")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    best = min(run(args.entries, args.chunk) for _ in range(args.runs))
    print(f"client read path (in process, fast paths {'on' if fastpath.ENABLED else 'off'}): "
          f"{best:.2f} us CPU per entry, best of {args.runs}, {args.chunk} answers per chunk; {load_note()}")


if __name__ == "__main__":
    main()
