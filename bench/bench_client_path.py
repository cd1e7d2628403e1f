"""The client's read and add paths alone: client CPU per entry, in process.

Reads (``--op read``, v3): one BookieConnection on a StringTransport
(Twisted's fake: no sockets, no bookie processes), a closed E1/Qw1/Qa1
ledger of 100 B entries with CRC32C digests, read with ReadHandle's window of
256.  Adds (``--op add``, ``--protocol v3|v2``, ``--quorum 3/2/2|1/1/1``): a
LedgerHandle over one BookieConnection per bookie, each on a
StringTransport, adding 100 B entries with 1,000 in flight: one
``add_entry`` and its Deferred each, as ``bkctl bench`` adds
(:func:`bkctl.ops.bench.drive_adds`; ``--api bulk``: ``add_entries``).  Either way the bookies' EOK answers are built outside the timed
part and fed back ``--chunk`` at a time per bookie through dataReceived.
What is timed is everything the client's reactor thread does per entry
except the system calls: packaging, encoding and registering requests,
matching and cutting answers, digest checks, quorum and window bookkeeping.
Re-replication (``--op rereplicate``): one fragment of an E3/Qw2 ledger
whose second bookie is lost, copied by ``replicate_fragment`` (``--window``
entries at a time) from the two survivors to a replacement, all three on
StringTransports: CPU per entry copied (a read and a recovery add).
The figure is steadier than bench_client.py's on a shared machine; run it
with BKCTL_FASTPATHS=0 for the general path.  ``--size`` sets the payload of
reads and adds (default 100 B).  ``--instructions`` also counts the
instructions per entry of one run under valgrind's callgrind, only inside
the timed calls: a figure that does not move with the machine's load (CPU
time on a loaded 2-core machine does, by tens of percent).  The garbage
collector is settled as bkctl and bench_client.py settle it
(``--default-gc`` leaves it as CPython has it).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load_note  # noqa: E402
from twisted.internet.testing import MemoryReactorClock, StringTransport  # noqa: E402

from bkctl.ops.bench import drive_adds, handle_window  # noqa: E402
from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.client.connection import BookieConnection  # noqa: E402
from bkctl.wire.client.cork import Cork  # noqa: E402
from bkctl.wire.client.ledger_handle import LedgerHandle  # noqa: E402
from bkctl.wire.client.read_handle import ReadHandle  # noqa: E402
from bkctl.wire.codecs import (  # noqa: E402
    v2,  # noqa: E402
    v3,
    v3_fast,
)
from bkctl.wire.codecs.digest import DigestManager, DigestType  # noqa: E402
from bkctl.wire.codecs.framing import frame  # noqa: E402
from bkctl.wire.codecs.protocol import RC  # noqa: E402
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState  # noqa: E402


class Timer:
    """CPU time of the timed calls (process time); under ``--instructions``
    each one runs inside ``functools.reduce``, the function callgrind's
    collection is toggled on, so only the client's work is counted."""

    def __init__(self):
        self.cpu = 0.0

    def __call__(self, fn, *args):
        start = time.process_time()
        if _COUNTED:
            functools.reduce(lambda _acc, _x: fn(*args), (None,), None)
        else:
            fn(*args)
        self.cpu += time.process_time() - start


#: set by --instructions in the child run under callgrind
_COUNTED = False


def run(n: int, chunk: int, size: int = 100) -> float:
    reactor = MemoryReactorClock()
    conn = BookieConnection("bookie:1", reactor, protocol="v3", twins=fastpath.selected())
    conn.bookie_info()  # starts the connection; never answered
    factory = reactor.tcpClients[-1][2]
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    transport.clear()
    dm = DigestManager(1, DigestType.CRC32C, b"")
    bodies = [dm.package(e, e - 1, size * (e + 1), b"x" * size) for e in range(n)]
    md = LedgerMetadata(1, 1, 1, LedgerState.CLOSED, n - 1, size * n, ((0, ("bookie:1",)),))
    client = types.SimpleNamespace(
        pool=types.SimpleNamespace(get=lambda _b: conn, cork=conn.writer.cork),
        protocol="v3",
        read_window=256,
        twins=fastpath.selected(),
    )
    handle = ReadHandle(client, 1, md, 0, b"", DigestType.CRC32C)

    def answers(data: bytes) -> list[bytes]:
        out, pos = [], 0
        while pos < len(data):
            size = int.from_bytes(data[pos : pos + 4], "big")
            payload = data[pos + 4 : pos + 4 + size]
            pos += 4 + size
            e = v3.parse_request(payload).readRequest.entryId
            out.append(frame(v3_fast.read_answer(payload[: 2 + payload[1]], 1, e, bodies[e], e - 1)))
        return out

    done: list = []
    handle._read_span(0, n - 1).addCallback(done.append)
    pending: deque[bytes] = deque()
    timed = Timer()
    while not done:
        pending.extend(answers(transport.value()))
        transport.clear()
        batch = [pending.popleft() for _ in range(min(chunk, len(pending)))]
        timed(proto.dataReceived, b"".join(batch))
    assert len(done[0]) == n and done[0][-1] == (n - 1, b"x" * size)
    return timed.cpu / n * 1e6


def _connected(bookie: str, reactor, protocol: str, cork: Cork):
    """A connection to ``bookie`` on a StringTransport, ready for requests, its
    bursts those of ``cork`` (a client's connections share their pool's)."""
    conn = BookieConnection(bookie, reactor, protocol=protocol, cork=cork, twins=fastpath.selected())
    conn.read_with_callback(0, 0, lambda *_a: None, None, 0)  # starts the connection
    proto = reactor.tcpClients[-1][2].buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    # answered (no such entry): left on the wire, it would take one of the connection's
    # max_outstanding slots that a real bench's adds have, and queue an add at every window
    (payload,) = _frames(transport.value())
    if protocol == "v3":
        answer = v3.serialize(v3.read_response(v3.parse_request(payload), RC.ENOENTRY))
    else:
        req = v2.decode_request(payload)
        answer = v2.ReadResponse(2, RC.ENOENTRY, req.ledger_id, req.entry_id).encode()
    proto.dataReceived(frame(answer))
    transport.clear()
    return conn, proto, transport


def _frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        out.append(data[pos + 4 : pos + 4 + size])
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


def run_adds(
    n: int, chunk: int, protocol: str, quorum: tuple[int, int, int], size: int = 100, api: str = "entry"
) -> float:
    """Client CPU (us) per entry added by a LedgerHandle, the bookies answered in process
    (``api``: ``"entry"``, one ``add_entry`` each as ``bkctl bench``; ``"bulk"``: ``add_entries``)."""
    e, qw, qa = quorum
    reactor = MemoryReactorClock()
    bookies = [f"bookie{i}:3181" for i in range(e)]
    cork = Cork()
    conns = {b: _connected(b, reactor, protocol, cork) for b in bookies}
    md = LedgerMetadata.new(bookies, qw, qa, password=b"", digest_type=DigestType.CRC32C)
    client = types.SimpleNamespace(
        pool=types.SimpleNamespace(get=lambda b: conns[b][0], cork=cork),
        protocol=protocol,
        twins=fastpath.selected(),
        max_inflight=1000,
        explicit_lac_interval=0.0,
        closed=False,
        reactor=reactor,
        max_frame_size=5 * 1024 * 1024,
    )
    window = 1000 if api == "bulk" else handle_window(1000)  # as bkctl bench writes
    handle = LedgerHandle(client, 1, md, 0, b"", DigestType.CRC32C, max_inflight=window)
    payload = b"x" * size
    done: list = []
    timed = Timer()
    if api == "bulk":
        timed(lambda: handle.add_entries(payload for _ in range(n)).addBoth(done.append))
    else:
        timed(
            lambda: drive_adds(client, handle, n, payload, 1000, None).addBoth(
                lambda latencies: done.append(n - 1 if len(latencies) == n else latencies)
            )
        )
    pending: dict[str, deque[bytes]] = {b: deque() for b in bookies}
    while not done:
        fed = False
        for b in bookies:
            _conn, proto, transport = conns[b]
            waiting = pending[b]
            waiting.extend(_add_answers(transport.value(), protocol))
            transport.clear()
            if waiting:
                fed = True
                batch = [waiting.popleft() for _ in range(min(chunk, len(waiting)))]
                timed(proto.dataReceived, b"".join(batch))
        if not fed:
            raise AssertionError(f"stalled after {handle.last_add_confirmed + 1} of {n} entries")
    assert done[0] == n - 1, done[0]
    return timed.cpu / n * 1e6


def run_rereplication(n: int, chunk: int, window: int) -> float:
    """Client CPU (us) per entry copied by replicate_fragment, the bookies answered in process."""
    from bkctl.wire.client.fragments import Fragment
    from bkctl.wire.client.rereplication import replicate_fragment
    from bkctl.wire.codecs.digest import master_key

    reactor = MemoryReactorClock()
    ensemble = ("bookieA:3181", "bookieB:3181", "bookieC:3181")
    target = "bookieD:3181"
    cork = Cork()
    conns = {b: _connected(b, reactor, "v3", cork) for b in (ensemble[0], ensemble[2], target)}
    dm = DigestManager(1, DigestType.CRC32C, b"")
    bodies = [dm.package(e, e - 1, 100 * (e + 1), b"x" * 100) for e in range(n)]
    client = types.SimpleNamespace(
        pool=types.SimpleNamespace(get=lambda b: conns[b][0], cork=cork), protocol="v3", twins=fastpath.selected()
    )
    fragment = Fragment(1, 0, n - 1, ensemble, (ensemble[1],), 2)

    def answers(data: bytes) -> list[bytes]:
        out = []
        for payload in _frames(data):
            req = v3.parse_request(payload)
            if req.header.operation == v3.pb.ADD_ENTRY:
                out.append(frame(v3.serialize(v3.add_response(req, 0))))
            elif req.readRequest.entryId >= 0 and req.readRequest.ledgerId == 1:
                e = req.readRequest.entryId
                out.append(frame(v3_fast.read_answer(payload[: 2 + payload[1]], 1, e, bodies[e], e - 1)))
        return out

    from twisted.internet import defer

    done: list = []
    timed = Timer()
    timed(
        lambda: defer.ensureDeferred(
            replicate_fragment(client, fragment, {ensemble[1]: target}, dm, master_key(b""), window=window)
        ).addBoth(done.append)
    )
    pending: dict[str, deque[bytes]] = {b: deque() for b in conns}
    while not done:
        fed = False
        for b, (_conn, proto, transport) in conns.items():
            waiting = pending[b]
            waiting.extend(answers(transport.value()))
            transport.clear()
            if waiting:
                fed = True
                batch = [waiting.popleft() for _ in range(min(chunk, len(waiting)))]
                timed(proto.dataReceived, b"".join(batch))
        if not fed:
            raise AssertionError("the copy stalled")
    copied = done[0]
    assert copied == fragment.entry_count(), copied
    return timed.cpu / copied * 1e6


def count_instructions(argv: list[str], entries: int) -> float:
    """This bench re-run under callgrind (one run of ``entries``), counting
    only the timed calls (see :class:`Timer`): instructions per entry.  Steady
    where CPU time is not: it does not depend on what else the machine runs."""
    with tempfile.TemporaryDirectory(prefix="bench-client-path-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                f"--callgrind-out-file={out}",
                sys.executable,
                os.path.abspath(__file__),
                *argv,
                "--runs",
                "1",
                "--counted",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(out) as f:
            totals = re.search(r"^(?:totals|summary): (\d+)", f.read(), re.M)
    return int(totals.group(1)) / entries


def main() -> None:
    global _COUNTED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("read", "add", "rereplicate"), default="read")
    parser.add_argument("--window", type=int, default=64, help="re-replication: entries in flight")
    parser.add_argument("--protocol", choices=("v3", "v2"), default="v3", help="adds only")
    parser.add_argument(
        "--api",
        choices=("entry", "bulk"),
        default="entry",
        help="adds: one add_entry and its Deferred each, as bkctl bench (default), or add_entries",
    )
    parser.add_argument("--quorum", default="3/2/2", help="E/Qw/Qa of the added ledger")
    parser.add_argument("--entries", type=int, default=60_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes per entry (reads and adds)")
    parser.add_argument("--chunk", type=int, default=16, help="answers per dataReceived")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions per entry of one run under valgrind's callgrind "
        "(steady on a loaded machine; slow: use --entries 10000 or so)",
    )
    parser.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)  # the run under callgrind
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="leave CPython's garbage collector as it is (bkctl settles it: wire.process.runtime)",
    )
    args = parser.parse_args()
    _COUNTED = args.counted
    if not args.default_gc:
        from bkctl.wire.process.runtime import settle_garbage_collector

        settle_garbage_collector()  # as bkctl and bench_client.py do
    switch = "on" if fastpath.selected().enabled else "off"
    if args.op == "read":
        what = f"client read path ({args.size} B"
        best = min(run(args.entries, args.chunk, args.size) for _ in range(args.runs))
    elif args.op == "rereplicate":
        what = f"client re-replication path (window {args.window}"
        best = min(run_rereplication(args.entries, args.chunk, args.window) for _ in range(args.runs))
    else:
        quorum = tuple(int(q) for q in args.quorum.split("/"))
        what = f"client add path ({args.api}) {args.protocol} E{quorum[0]}/Qw{quorum[1]}/Qa{quorum[2]} ({args.size} B"
        best = min(
            run_adds(args.entries, args.chunk, args.protocol, quorum, args.size, args.api) for _ in range(args.runs)
        )
    if args.counted:
        return
    note = ""
    if args.instructions:
        argv = [a for a in sys.argv[1:] if a != "--instructions"]
        note = f", {count_instructions(argv, args.entries):,.0f} instructions per entry (callgrind)"
    print(
        f"{what}, in process, fast paths {switch}): {best:.2f} us CPU per entry, best of {args.runs}, "
        f"{args.chunk} answers per chunk per bookie{note}; {load_note()}"
    )


if __name__ == "__main__":
    main()
