"""The bookie's add and read paths alone: bookied CPU per request, in process.

One BookieProtocol (the server's) on a StringTransport (Twisted's fake: no
sockets), over a real Bookie: a real journal in a temporary folder (its writer
thread, group commit and fdatasync, as bookied runs it by default) and a real
entry store.  Requests are built outside the timed part the way the Java
client lays them out (v3, or v2 with ``--protocol v2``), 100 B entries with
CRC32C digests, and fed ``--chunk`` at a time through dataReceived, as
bytes read from one socket; after each chunk of adds the journal's group
completions are run in this thread (the reactor's part of a group: the
callbacks and their answers).  Reads then ask for the same entries, again
``--chunk`` at a time.

What is timed is everything the bookie does per request except the socket
system calls and the reactor's loop: frame cutting, request parsing, the
entry store, the journal record, the hand-off to the journal thread and
back, the answers.  CPU is the process's (both threads), user and system
apart (fdatasync is system time).  The figure is steadier than
bench_bookie.py's on a shared machine, steadier still as instructions:
``valgrind --tool=callgrind`` around it (``--passes 1``).  Run it with
BKCTL_FASTPATHS=0 for the general path.

``--batch-reads K`` times instead v2 BATCH_READ_ENTRYs, one per ledger of K entries
flushed to the entry logs (``bkctl ledger fsck`` asks a bookie for a small ledger's
copies so): CPU per BATCH_READ.
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load_note  # noqa: E402
from twisted.internet import task  # noqa: E402
from twisted.internet.testing import StringTransport  # noqa: E402

from bkctl.bookied.bookie import Bookie  # noqa: E402
from bkctl.bookied.journal import Journal  # noqa: E402
from bkctl.bookied.metrics import Metrics  # noqa: E402
from bkctl.bookied.server import BookieServerFactory  # noqa: E402
from bkctl.bookied.storage import EntryStore  # noqa: E402
from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.codecs import v2, v3_fast  # noqa: E402
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key  # noqa: E402
from bkctl.wire.codecs.framing import frame  # noqa: E402

KEY = master_key(b"bench")


def requests(protocol: str, ledger: int, count: int, size: int) -> tuple[list[bytes], list[bytes]]:
    """Framed ADDs and READs of entries 0..count-1 of ``ledger``."""
    dm = DigestManager(ledger, DigestType.CRC32C, b"bench")
    payload = b"x" * size
    adds, reads = [], []
    enc = v3_fast.RequestEncoder()
    for e in range(count):
        body = dm.package(e, e - 1, size * (e + 1), payload)
        if protocol == "v3":
            adds.append(frame(enc.add(e + 1, ledger, e, KEY, body)))
            reads.append(enc.read_frame(count + e + 1, ledger, e)[0])
        else:
            adds.append(frame(v2.AddRequest(2, 0, KEY, body, ledger, e).encode()))
            reads.append(frame(v2.ReadRequest(2, 0, ledger, e, None).encode()))
    return adds, reads


def callgrind(command: str, *args: str) -> None:
    """Under ``valgrind --tool=callgrind`` with BENCH_CALLGRIND=1: zero its counters
    (``-z``) or dump them (``-d NAME``), so that only the timed parts are counted."""
    if os.environ.get("BENCH_CALLGRIND") == "1":
        import subprocess

        subprocess.run(["callgrind_control", command, *args, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


class Bed:
    """A bookie (journal + entry store) in ``folder`` and one connection to it."""

    def __init__(self, folder: str, inline: bool = False):
        self.groups: queue.Queue = queue.Queue()
        self._records = 0  # of the group being called back (on_group runs just before its dispatch)
        #: with ``inline``: the commits the journal asked this thread to run (bookied's
        #: journalFlushWhenQueueEmpty, its default: run at the end of the reactor's iteration)
        self.inline_due: list = []
        self.journal = Journal(
            os.path.join(folder, "journal"),
            dispatch=lambda callbacks, error: self.groups.put((callbacks, error, self._records)),
            on_group=self._group,
            twins=fastpath.selected(),
            **(
                {"max_group_wait_ms": 0, "inline": self.inline_due.append, "inline_dispatch": self._inline_done}
                if inline
                else {}
            ),
        )
        self._inline_records = 0
        self.store = EntryStore(
            os.path.join(folder, "ledgers"),
            write_cache_max_bytes=256 * 1024 * 1024,
            index_map_size=1 << 30,
            twins=fastpath.selected(),
        )  # address space: callgrind refuses the default
        self.bookie = Bookie([self.journal], [self.store], clock=task.Clock())
        self.journal.start()
        self.factory = BookieServerFactory(self.bookie, Metrics(), twins=fastpath.selected())
        self.proto = self.factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def answers(self) -> int:
        """Bytes answered so far (the transport is emptied)."""
        n = len(self.transport.value())
        self.transport.clear()
        return n

    def _group(self, records: int) -> None:
        self._records = records

    def _complete(self, callbacks: list, error) -> None:
        complete = getattr(self.factory, "complete_group", None)
        if complete is not None:  # as bookied completes a group
            complete(callbacks, error, Journal.call_all)
        else:  # an older bookied, to compare with
            Journal.call_all(callbacks, error)
            self.factory.send_answers()

    def _inline_done(self, callbacks: list, error) -> None:
        self._inline_records += self._records
        self._complete(callbacks, error)

    def complete_groups(self, records_due: int) -> None:
        """Run journal groups' completions here until ``records_due`` records' callbacks ran
        (a run of adds has one callback for all its records): the commits due in this
        thread, then those of the writer thread."""
        while records_due > 0:
            while self.inline_due:
                self.inline_due.pop(0)()
            records_due -= self._inline_records
            self._inline_records = 0
            if records_due <= 0:
                break
            try:
                callbacks, error, records = self.groups.get(timeout=0.001 if self.inline_due else 60)
            except queue.Empty:
                continue
            self._complete(callbacks, error)
            records_due -= records

    def feed_timed(self, chunks: list[bytes], name: str) -> tuple[tuple[float, float], tuple[float, float]]:
        """Each of ``chunks`` through dataReceived: the process's (user, sys) CPU before and
        after (callgrind's counters zeroed before, dumped as ``name`` after)."""
        callgrind("-z")
        before = cpu()
        for data in chunks:
            self.proto.dataReceived(data)
        after = cpu()
        callgrind("-d", name)
        return before, after

    def close(self) -> None:
        self.proto.connectionLost(None)
        self.journal.close()
        self.store.close()


def one_pass(folder: str, protocol: str, ledger: int, count: int, size: int, chunk: int, inline: bool = False) -> tuple:
    """Adds then reads of ``count`` entries: ((user, sys) us per add, (user, sys) us per read)."""
    adds, reads = requests(protocol, ledger, count, size)
    add_chunks = [b"".join(adds[i : i + chunk]) for i in range(0, count, chunk)]
    read_chunks = [b"".join(reads[i : i + chunk]) for i in range(0, count, chunk)]
    bed = Bed(folder, inline)
    try:
        bed.proto.dataReceived(add_chunks[0][: len(adds[0])])  # the ledger's master key: a first add
        bed.complete_groups(1)
        bed.answers()
        add_chunks[0] = add_chunks[0][len(adds[0]) :]
        callgrind("-z")
        u0, s0 = cpu()
        for i, data in enumerate(add_chunks):
            bed.proto.dataReceived(data)
            bed.complete_groups(min(chunk, count - i * chunk) - (1 if i == 0 else 0))
        u1, s1 = cpu()
        callgrind("-d", "adds")
        if not bed.answers():
            raise SystemExit("no add was answered")
        (u2, s2), (u3, s3) = bed.feed_timed(read_chunks, "reads")
        if bed.answers() < count * size:
            raise SystemExit("the reads were not answered")
    finally:
        bed.close()
    return ((u1 - u0) * 1e6 / count, (s1 - s0) * 1e6 / count), ((u3 - u2) * 1e6 / count, (s3 - s2) * 1e6 / count)


def batch_pass(folder: str, ledgers: int, per_ledger: int, size: int, chunk: int) -> tuple[float, float]:
    """``ledgers`` ledgers of ``per_ledger`` entries each, added over v2 and flushed to the
    entry logs, then each read back with one v2 BATCH_READ_ENTRY (as ``bkctl ledger fsck``
    asks a bookie for a small ledger's copies), ``chunk`` requests per dataReceived:
    (user, sys) us per BATCH_READ."""
    dms = {}
    payload = b"x" * size
    adds = []
    for n in range(ledgers):
        ledger = 1 + n
        dm = dms[ledger] = DigestManager(ledger, DigestType.CRC32C, b"bench")
        for e in range(per_ledger):
            body = dm.package(e, e - 1, size * (e + 1), payload)
            adds.append(frame(v2.AddRequest(2, 0, KEY, body, ledger, e).encode()))
    reads = [
        frame(v2.BatchReadRequest(2, 0, 1 + n, 0, n, per_ledger, 4 * 1024 * 1024).encode()) for n in range(ledgers)
    ]
    read_chunks = [b"".join(reads[i : i + chunk]) for i in range(0, ledgers, chunk)]
    bed = Bed(folder)
    try:
        for i in range(0, len(adds), chunk):
            part = adds[i : i + chunk]
            for a in part:  # one at a time: each ledger's first add makes it
                bed.proto.dataReceived(a)
            bed.complete_groups(len(part))
        bed.answers()
        bed.store.flush()
        (u0, s0), (u1, s1) = bed.feed_timed(read_chunks, "batch_reads")
        got = bed.answers()
        if got < ledgers * per_ledger * size:
            raise SystemExit(f"the batch reads were not answered ({got} bytes)")
    finally:
        bed.close()
    return (u1 - u0) * 1e6 / ledgers, (s1 - s0) * 1e6 / ledgers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=("v3", "v2"), default="v3")
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=100, help="requests per dataReceived (default 100)")
    parser.add_argument("--passes", type=int, default=5, help="medians of this many passes (default 5)")
    parser.add_argument(
        "--inline",
        action="store_true",
        help="the journal commits in this thread while fsyncs are fast, as bookied's does by default "
        "(journalFlushWhenQueueEmpty); otherwise its writer thread commits every group",
    )
    parser.add_argument(
        "--batch-reads",
        type=int,
        metavar="K",
        default=0,
        help="instead: --entries ledgers of K entries each, each read back with one v2 BATCH_READ_ENTRY "
        "(fsck's requests): us of CPU per BATCH_READ",
    )
    args = parser.parse_args()
    if args.batch_reads:
        batch_main(args)
        return
    commits = "inline commits" if args.inline else "the writer thread commits"
    heading(f"{args.protocol}, {args.entries:,} entries of {args.size} B, {commits}", args.chunk)
    results = []
    for n, folder in passes(args.passes):
        got = one_pass(folder, args.protocol, 1000 + n, args.entries, args.size, args.chunk, args.inline)
        results.append(got)
        (au, as_), (ru, rs) = got
        print(
            f"  pass {n + 1}: add {au + as_:5.2f} us CPU (user {au:5.2f})   read {ru + rs:5.2f} us CPU "
            f"(user {ru:5.2f})",
            flush=True,
        )
    med = [statistics.median(r[i][j] for r in results) for i in (0, 1) for j in (0, 1)]
    print(
        f"median: add {med[0] + med[1]:.2f} us CPU (user {med[0]:.2f}); read {med[2] + med[3]:.2f} us CPU "
        f"(user {med[2]:.2f}); {load_note()}"
    )


def heading(what: str, chunk: int) -> None:
    state = "on" if fastpath.selected().enabled else "off"
    print(f"{what}, {chunk} requests per read, fast paths {state}; {load_note()}", flush=True)


def passes(count: int) -> Iterator[tuple[int, str]]:
    """``(n, folder)`` of each pass: a new temporary folder, removed after it."""
    for n in range(count):
        folder = tempfile.mkdtemp(prefix="bench-bookie-path-")
        try:
            yield n, folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def batch_main(args) -> None:
    heading(
        f"v2 BATCH_READ_ENTRY of {args.entries:,} ledgers of {args.batch_reads} entries of {args.size} B (flushed)",
        args.chunk,
    )
    results = []
    for n, folder in passes(args.passes):
        u, s = batch_pass(folder, args.entries, args.batch_reads, args.size, args.chunk)
        results.append((u, s))
        print(f"  pass {n + 1}: {u + s:6.2f} us CPU per BATCH_READ (user {u:6.2f})", flush=True)
    mu, ms = (statistics.median(r[i] for r in results) for i in (0, 1))
    print(f"median: {mu + ms:.2f} us CPU per BATCH_READ (user {mu:.2f}); {load_note()}")


if __name__ == "__main__":
    main()
