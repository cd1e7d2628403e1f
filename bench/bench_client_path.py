"""The client's read and add paths alone: client CPU per entry, in process.

Reads (``--op read``, v3): one BookieConnection on a StringTransport
(Twisted's fake: no sockets, no bookie processes), a closed E1/Qw1/Qa1
ledger of 100 B entries with CRC32C digests, read with ReadHandle's window of
256.  Adds (``--op add``, ``--protocol v3|v2``, ``--quorum 3/2/2|1/1/1``): a
LedgerHandle over one BookieConnection per bookie, each on a
StringTransport, adding 100 B entries with ``add_entries`` (1,000 in
flight).  Either way the bookies' EOK answers are built outside the timed
part and fed back ``--chunk`` at a time per bookie through dataReceived.
What is timed is everything the client's reactor thread does per entry
except the system calls: packaging, encoding and registering requests,
matching and cutting answers, digest checks, quorum and window bookkeeping.
Re-replication (``--op rereplicate``): one fragment of an E3/Qw2 ledger
whose second bookie is lost, copied by ``replicate_fragment`` (``--window``
entries at a time) from the two survivors to a replacement, all three on
StringTransports: CPU per entry copied (a read and a recovery add).
The figure is steadier than bench_client.py's on a shared machine; run it
with BKCTL_FASTPATHS=0 for the general path.
"""
from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load_note  # noqa: E402
from twisted.internet.testing import MemoryReactorClock, StringTransport  # noqa: E402

from bkctl.wire import fastpath
from bkctl.wire.codecs import v3  # noqa: E402
from bkctl.wire.client.connection import BookieConnection  # noqa: E402
from bkctl.wire.client.ledger_handle import LedgerHandle  # noqa: E402
from bkctl.wire.codecs import v2  # noqa: E402
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


def _connected(bookie: str, reactor, protocol: str):
    """A connection to ``bookie`` on a StringTransport, ready for requests."""
    conn = BookieConnection(bookie, reactor, protocol=protocol)
    conn.read_with_callback(0, 0, lambda *_a: None, None, 0)  # starts the connection; never answered
    proto = reactor.tcpClients[-1][2].buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    transport.clear()
    return conn, proto, transport


def _frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        out.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out


def _add_answers(data: bytes, protocol: str) -> list[bytes]:
    """The bookie's EOK answers to the ADD requests written in ``data``."""
    out = []
    for payload in _frames(data):
        if protocol == "v3":
            req = v3.parse_request(payload)
            if req.header.operation != v3.pb.ADD_ENTRY:
                continue  # the unanswered read that started the connection
            out.append(frame(v3.serialize(v3.add_response(req, 0))))
        else:
            req = v2.decode_request(payload)
            if not isinstance(req, v2.AddRequest):
                continue
            out.append(frame(v2.add_response_for(req, 0)))
    return out


def run_adds(n: int, chunk: int, protocol: str, quorum: tuple[int, int, int]) -> float:
    """Client CPU (us) per entry added by a LedgerHandle, the bookies answered in process."""
    e, qw, qa = quorum
    reactor = MemoryReactorClock()
    bookies = [f"bookie{i}:3181" for i in range(e)]
    conns = {b: _connected(b, reactor, protocol) for b in bookies}
    md = LedgerMetadata.new(bookies, qw, qa, password=b"", digest_type=DigestType.CRC32C)
    client = types.SimpleNamespace(pool=types.SimpleNamespace(get=lambda b: conns[b][0]), protocol=protocol,
                                   max_inflight=1000, explicit_lac_interval=0.0, closed=False,
                                   reactor=reactor, max_frame_size=5 * 1024 * 1024)
    handle = LedgerHandle(client, 1, md, 0, b"", DigestType.CRC32C, max_inflight=1000)
    payload = b"x" * 100
    done: list = []
    start = time.process_time()
    handle.add_entries(payload for _ in range(n)).addBoth(done.append)
    cpu = time.process_time() - start
    pending = {b: [] for b in bookies}
    while not done:
        fed = False
        for b in bookies:
            _conn, proto, transport = conns[b]
            pending[b].extend(_add_answers(transport.value(), protocol))
            transport.clear()
            batch, pending[b] = pending[b][:chunk], pending[b][chunk:]
            if batch:
                fed = True
                start = time.process_time()
                proto.dataReceived(b"".join(batch))
                cpu += time.process_time() - start
        if not fed:
            raise AssertionError(f"stalled after {handle.last_add_confirmed + 1} of {n} entries")
    assert done[0] == n - 1, done[0]
    return cpu / n * 1e6


def run_rereplication(n: int, chunk: int, window: int) -> float:
    """Client CPU (us) per entry copied by replicate_fragment, the bookies answered in process."""
    from bkctl.wire.client.rereplication import Fragment, replicate_fragment
    from bkctl.wire.codecs.digest import master_key

    reactor = MemoryReactorClock()
    ensemble = ("bookieA:3181", "bookieB:3181", "bookieC:3181")
    target = "bookieD:3181"
    conns = {b: _connected(b, reactor, "v3") for b in (ensemble[0], ensemble[2], target)}
    dm = DigestManager(1, DigestType.CRC32C, b"")
    bodies = [dm.package(e, e - 1, 100 * (e + 1), b"x" * 100) for e in range(n)]
    client = types.SimpleNamespace(pool=types.SimpleNamespace(get=lambda b: conns[b][0]), protocol="v3")
    fragment = Fragment(1, 0, n - 1, ensemble, (ensemble[1],), 2)

    def answers(data: bytes) -> list[bytes]:
        out = []
        for payload in _frames(data):
            req = v3.parse_request(payload)
            if req.header.operation == v3.pb.ADD_ENTRY:
                out.append(frame(v3.serialize(v3.add_response(req, 0))))
            elif req.readRequest.entryId >= 0 and req.readRequest.ledgerId == 1:
                e = req.readRequest.entryId
                out.append(frame(v3.read_answer(payload[:2 + payload[1]], 1, e, bodies[e], e - 1)))
        return out

    done: list = []
    start = time.process_time()
    d = replicate_fragment(client, fragment, {ensemble[1]: target}, dm, master_key(b""), window=window)
    from twisted.internet import defer
    defer.ensureDeferred(d).addBoth(done.append)
    cpu = time.process_time() - start
    pending = {b: [] for b in conns}
    while not done:
        fed = False
        for b, (_conn, proto, transport) in conns.items():
            pending[b].extend(answers(transport.value()))
            transport.clear()
            batch, pending[b] = pending[b][:chunk], pending[b][chunk:]
            if batch:
                fed = True
                start = time.process_time()
                proto.dataReceived(b"".join(batch))
                cpu += time.process_time() - start
        if not fed:
            raise AssertionError("the copy stalled")
    copied = done[0]
    assert copied == fragment.entry_count(), copied
    return cpu / copied * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("read", "add", "rereplicate"), default="read")
    parser.add_argument("--window", type=int, default=64, help="re-replication: entries in flight")
    parser.add_argument("--protocol", choices=("v3", "v2"), default="v3", help="adds only")
    parser.add_argument("--quorum", default="3/2/2", help="E/Qw/Qa of the added ledger")
    parser.add_argument("--entries", type=int, default=60_000)
    parser.add_argument("--chunk", type=int, default=16, help="answers per dataReceived")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    switch = "on" if fastpath.ENABLED else "off"
    if args.op == "read":
        best = min(run(args.entries, args.chunk) for _ in range(args.runs))
        print(f"client read path (in process, fast paths {switch}): "
              f"{best:.2f} us CPU per entry, best of {args.runs}, {args.chunk} answers per chunk; {load_note()}")
        return
    if args.op == "rereplicate":
        best = min(run_rereplication(args.entries, args.chunk, args.window) for _ in range(args.runs))
        print(f"client re-replication path (in process, fast paths {switch}): {best:.2f} us CPU per entry "
              f"copied, window {args.window}, best of {args.runs}, {args.chunk} answers per chunk per bookie; "
              f"{load_note()}")
        return
    quorum = tuple(int(q) for q in args.quorum.split("/"))
    best = min(run_adds(args.entries, args.chunk, args.protocol, quorum) for _ in range(args.runs))
    print(f"client add path {args.protocol} E{quorum[0]}/Qw{quorum[1]}/Qa{quorum[2]} (in process, fast paths "
          f"{switch}): {best:.2f} us CPU per entry, best of {args.runs}, {args.chunk} answers per chunk "
          f"per bookie; {load_note()}")


if __name__ == "__main__":
    main()
