"""A blocking facade over :class:`~bkctl.wire.client.bookkeeper.BookKeeperClient`.

For the CLI, scripts and tests: every call runs in the Twisted reactor,
which runs in a background thread (:class:`ReactorThread`, started on first
use, not at import: importing this module loads neither crochet nor a
reactor), waits for the result (crochet's calls across threads) and returns
plain values.  Library exceptions are raised unchanged; a call that takes
longer than ``timeout`` seconds is cancelled and raises
:class:`OperationTimedOut`.

    with BlockingBookKeeper("zk+hierarchical://127.0.0.1:2181/ledgers") as bk:
        with bk.create(3, 2, 2, password=b"pw") as lh:
            lh.add(b"hello")
            lh.add_many(payloads)          # pipelined, bounded memory
        for batch in bk.open(lh.ledger_id).read_range(0, batch=500):
            ...

Do not call these methods from the reactor thread itself (crochet refuses).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bkctl.wire.errors import Unreachable

if TYPE_CHECKING:
    from twisted.python.failure import Failure

    from bkctl.wire.codecs.digest import DigestType
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore

    from .bookkeeper import BookKeeperClient
    from .ledger_handle import LedgerHandle
    from .range_reader import Entries, RangeReader
    from .read_handle import ReadHandle
    from .unconfirmed_tail import Tail

__all__ = [
    "BlockingBookKeeper",
    "BlockingLedger",
    "OperationTimedOut",
    "PendingCall",
    "ReactorThread",
    "ensure_reactor",
    "handed_over",
    "run_in_reactor",
    "DEFAULT_TIMEOUT",
]

log = logging.getLogger(__name__)

#: Seconds a blocking call may take before it is cancelled.
DEFAULT_TIMEOUT = 120.0

_setup_lock = threading.Lock()
_crochet: ModuleType | None = None


class OperationTimedOut(Unreachable, TimeoutError):
    """A blocking call did not finish within its timeout (it was cancelled)."""


class _LogWriter:
    """Twisted's log events handed to stdlib logging in a thread of their own (as crochet's
    setup did): a slow logging handler does not hold the reactor up."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]):
        self._emit = emit
        self._events: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._write, name="CrochetLogWriter", daemon=True)
        self.thread.start()

    def __call__(self, event: dict[str, Any]) -> None:
        self._events.put(event)

    def _write(self) -> None:
        while (event := self._events.get()) is not None:
            try:
                self._emit(event)
            except Exception:  # noqa: BLE001, S112 - logging itself failed: nowhere left to tell
                continue

    def stop(self, wait: float) -> None:
        """Write what is queued, then end (at most ``wait`` seconds)."""
        self._events.put(None)
        self.thread.join(wait)


class ReactorThread:
    """The process's one reactor, run in a daemon thread of its own, and stopped by an atexit
    hook once the main thread and the other non-daemon threads are done.

    crochet.setup() ran the reactor in a non-daemon thread and started a watchdog thread that
    looked every 0.1 s whether the main thread had ended, and only then stopped the reactor:
    every command that talked to bookies waited 0-100 ms at exit for that look.  Here crochet
    is told the application runs the reactor (``crochet.no_setup()``: its calls across threads
    work as before) and this does what its setup did that bkctl needs: Twisted's log to stdlib
    logging, the reactor stopped at exit (an EventualResult still waited for fails with
    crochet's ReactorStopped, as before).  Not its process reaping: nothing spawns processes
    through this reactor (bookied's autorecovery child is spawned by bookied's own reactor,
    which runs in its main thread with signal handlers).  The reactor's thread pool (DNS, the
    metadata store's blocking calls) is started from this thread, so its threads are daemon
    threads too: none of them holds the exit up.  The shell, a Spark executor and the
    autorecovery daemon keep the one reactor until their process exits.

    The threads keep crochet's names (CrochetReactor, CrochetLogWriter): stack dumps and the
    test suite's leak check know them."""

    #: seconds the exit waits for the reactor's shutdown (its triggers, its thread pool)
    STOP_WAIT = 5.0

    #: the running one (None until started, or where crochet.setup() ran first)
    current: ReactorThread | None = None

    def __init__(self, reactor: Any, log_writer: _LogWriter):
        self.reactor = reactor
        self.log_writer = log_writer
        self.thread = threading.Thread(target=self._run, name="CrochetReactor", daemon=True)

    @classmethod
    def start(cls, crochet: ModuleType) -> ReactorThread | None:
        """Tell crochet the reactor is ours and run it; None where crochet.setup() ran first
        (a library or a test of its own did it: crochet's thread runs the reactor then)."""
        try:
            crochet.no_setup()
        except RuntimeError:
            return None
        import warnings

        from twisted.internet import reactor
        from twisted.python.log import PythonLoggingObserver, startLoggingWithObserver

        writer = _LogWriter(PythonLoggingObserver().emit)
        showwarning = warnings.showwarning  # Twisted's log beginner takes Python's warnings over
        startLoggingWithObserver(writer, setStdout=False)
        warnings.showwarning = showwarning
        running = cls(reactor, writer)
        running.thread.start()
        atexit.register(running.stop)
        cls.current = running
        return running

    def _run(self) -> None:
        self.reactor.run(installSignalHandlers=False)

    def stop(self, wait: float = STOP_WAIT) -> None:
        """Stop the reactor (its shutdown triggers run: crochet's fails the calls still waited
        for) and wait for its thread, then for the log writer; at most ``wait`` seconds each."""
        if self.thread.is_alive():
            self.reactor.callFromThread(self._stop_reactor)
            self.thread.join(wait)
        self.log_writer.stop(wait)

    def _stop_reactor(self) -> None:
        from twisted.internet.error import ReactorNotRunning

        try:
            self.reactor.stop()
        except ReactorNotRunning:  # stopping already
            pass


def _ensure_reactor() -> ModuleType:
    """Start the reactor thread once (:class:`ReactorThread`); returns the crochet module."""
    global _crochet
    if _crochet is None:
        with _setup_lock:
            if _crochet is None:
                import crochet

                ReactorThread.start(crochet)
                _crochet = crochet
    return _crochet


def ensure_reactor() -> None:
    """Have the process's one reactor running in its background thread (for
    services that run in it until told to stop, as ``autorecovery run``)."""
    _ensure_reactor()


def run_in_reactor(
    fn: Callable[..., object], *args: object, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: object
) -> Any:
    """Call ``fn(*args, **kwargs)`` in the reactor thread and wait for its
    result (a Deferred's result if it returns one).  A wait ended by Ctrl-C
    (KeyboardInterrupt in this thread) cancels the call, as a timeout does:
    the reactor, shared by the session's later commands, does not go on with it.
    The result is crochet's, untyped: each caller names the type its call gives."""
    crochet = _ensure_reactor()
    call = _Call(crochet, fn, args, kwargs)
    watch = SigintWatch.start()
    try:
        return _wait(crochet, call.eventual, timeout, watch)
    except crochet.TimeoutError:
        call.give_up()
        name = getattr(fn, "__name__", repr(fn))
        raise OperationTimedOut(f"{name} did not finish within {timeout:g}s") from None
    except BaseException:
        call.give_up()
        raise
    finally:
        if watch is not None:
            watch.stop()


class _Call:
    """``fn(*args, **kwargs)`` started in the reactor thread (:attr:`eventual`, crochet's
    EventualResult), which its caller may give up on (a timeout, Ctrl-C): then it is cancelled.

    crochet logs a failure that no wait took ("Unhandled error in EventualResult", CRITICAL) once
    the EventualResult is collected; the CancelledError of a call whose caller gave up, and was
    told so, is no one's to handle, and is dropped (any other failure is still logged)."""

    def __init__(
        self, crochet: ModuleType, fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object]
    ):
        self._gave_up = threading.Event()
        self.eventual = crochet.run_in_reactor(self._run)(fn, args, kwargs)

    def _run(self, fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object]) -> object:
        from twisted.internet import defer

        return defer.maybeDeferred(fn, *args, **kwargs).addErrback(self._unless_given_up)

    def _unless_given_up(self, failure: Failure) -> Failure | None:
        from twisted.internet.defer import CancelledError

        if self._gave_up.is_set() and failure.check(CancelledError):
            return None
        return failure

    def give_up(self) -> None:
        self._gave_up.set()
        self.eventual.cancel()


class SigintWatch:
    """Ctrl-C that Python swallowed, noticed all the same. SIGINT's KeyboardInterrupt is raised
    wherever the main thread is; inside a weakref callback or a ``__del__`` it is printed as
    "Exception ignored" and lost, and the wait went on to the end of the call (a rebalance
    carried out every move, then exited 0). While a wait runs in the main thread under
    Python's own handler, this one records the signal as it raises, and the wait raises it
    again at its next look if it was lost."""

    LOOK_EVERY = 0.25  # seconds between looks: a lost Ctrl-C is acted on within this

    def __init__(self) -> None:
        self.fired = False

    @classmethod
    def start(cls) -> SigintWatch | None:
        """A watch in place of Python's handler, or None where another handler is set (the
        shell's prompt, a daemon's) or this is not the main thread."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return None
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
        watch = cls()
        signal.signal(signal.SIGINT, watch.on_sigint)
        return watch

    def on_sigint(self, signum: int, frame: object) -> None:
        self.fired = True
        raise KeyboardInterrupt

    def stop(self) -> None:
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)


def _wait(crochet: ModuleType, eventual: Any, timeout: float | None, watch: SigintWatch | None) -> Any:
    """``eventual.wait(timeout)``, looking for a lost Ctrl-C every so often (see SigintWatch)."""
    if watch is None:
        return eventual.wait(timeout)
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = watch.LOOK_EVERY if deadline is None else max(0.0, min(watch.LOOK_EVERY, deadline - time.monotonic()))
        try:
            return eventual.wait(step)
        except crochet.TimeoutError:
            if watch.fired:
                raise KeyboardInterrupt from None
            if deadline is not None and time.monotonic() >= deadline:
                raise


class _BatchHandoff:
    """A :class:`~bkctl.wire.client.range_reader.RangeReader`'s batches handed
    to the thread that iterates, as they arrive.

    The reactor side asks for the next batch as soon as one is queued, until
    :attr:`QUEUED` wait unclaimed; the iterating thread only waits on the
    queue. Asking the reactor for each batch in turn (a call and a wait
    across threads per batch, 100 entries each by default) cost the reader
    more than the reading of its entries once bookies answered fast, and left
    the connections idle between batches."""

    #: batches read and not yet taken; the reader's own read-ahead comes on top
    QUEUED = 2

    def __init__(self, reader: RangeReader | None, in_reactor: Callable[[Callable[[], None]], None]):
        #: None until :meth:`begin` made it
        self.reader = reader
        self.in_reactor = in_reactor  # runs a function in the reactor thread (callFromThread)
        #: (a batch or None at the end, None) or (None, the failure)
        self.queue: queue.SimpleQueue[tuple[Entries | None, Failure | None]] = queue.SimpleQueue()
        self.queued = 0  # reactor thread: batches put and not yet known taken
        self.taken = 0  # iterating thread: batches taken
        self.stalled = False
        self.stopped = False
        self.asking = False  # a next_batch() has not fired yet
        self._pumping = False
        #: iterating thread: the last batch (None) or the failure taken -- the reactor side
        #: has stopped by itself, and nothing is left to tell it
        self.ended = False

    # -- reactor thread
    def begin(self, make: Callable[[], RangeReader]) -> None:
        """The reader made (a ledger opened and its range set up, say) and pumped, in one turn
        of the reactor; a failure to make it is the first :meth:`take`'s to raise."""
        from twisted.python.failure import Failure

        try:
            self.reader = make()
        except Exception:  # noqa: BLE001 - the iterating thread's to raise
            self._failed(Failure())
            return
        self.pump()

    def pump(self) -> None:
        """Ask for batches until :attr:`QUEUED` wait, the reader has none left,
        or one is being read (a loop: batches already read arrive at once)."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while not (self.stopped or self.asking or self.reader is None):
                if self.queued - self.taken >= self.QUEUED:
                    self.stalled = True
                    if self.queued - self.taken >= self.QUEUED:
                        return  # the taker sees the flag when it takes the next one
                    self.stalled = False  # it took one meanwhile and may have missed the flag
                self.asking = True
                self.reader.next_batch().addCallbacks(self._arrived, self._failed)
        finally:
            self._pumping = False

    def _arrived(self, entries: Entries | None) -> None:
        self.asking = False
        self.queued += 1
        self.queue.put((entries, None))
        if entries is None:
            self.stopped = True
        else:
            self.pump()

    def _failed(self, failure: Failure) -> None:
        self.asking = False
        self.stopped = True
        self.queue.put((None, failure))

    def resume(self) -> None:
        if self.stalled:
            self.stalled = False
            self.pump()

    def stop(self) -> None:
        self.stopped = True
        if self.reader is not None:
            self.reader.cancel()

    # -- iterating thread
    def take(self, timeout: float | None) -> Entries | None:
        try:
            entries, failure = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise OperationTimedOut(f"no batch arrived within {timeout:g}s") from None
        self.taken += 1
        if entries is None:
            self.ended = True
        elif self.stalled:
            self.in_reactor(self.resume)
        if failure is not None:
            failure.raiseException()
        return entries


def handed_over(make: Callable[[], RangeReader], timeout: float | None) -> Iterator[Entries]:
    """The batches of the reader ``make`` gives (called in the reactor thread, when the
    iteration begins), handed over by a :class:`_BatchHandoff`: the reader made and its first
    reads asked for in one turn of the reactor, no call waited for.  A read that ended (its
    last batch, or its failure, taken) has nothing to stop; one left midway (the caller's
    ``break``, an exception, Ctrl-C) has the reads it had ahead forgotten before this returns."""
    _ensure_reactor()
    from twisted.internet import reactor

    handoff = _BatchHandoff(None, reactor.callFromThread)
    reactor.callFromThread(handoff.begin, make)
    try:
        while True:
            entries = handoff.take(timeout)
            if entries is None:
                return
            yield entries
    finally:
        if not handoff.ended:
            run_in_reactor(handoff.stop, timeout=timeout)


class PendingCall:
    """A call started in the reactor thread and not waited for yet."""

    def __init__(self, call: _Call, timeout: float):
        self._call = call
        self._timeout = timeout

    def result(self) -> Any:
        """Wait for the call: its value, or the exception it failed with (returned, not
        raised: the caller shows it beside what it was for).  A wait past the timeout
        cancels the call and returns :class:`OperationTimedOut`; Ctrl-C cancels it too."""
        crochet = _ensure_reactor()
        try:
            return self._call.eventual.wait(self._timeout)
        except crochet.TimeoutError:
            self._call.give_up()
            return OperationTimedOut(f"the call did not finish within {self._timeout:g}s")
        except Exception as exc:  # noqa: BLE001 - returned to the caller, as documented
            return exc
        except BaseException:
            self._call.give_up()
            raise

    def cancel(self) -> None:
        self._call.give_up()


class BlockingLedger:
    """Blocking view of a ledger handle (read-only or writable)."""

    def __init__(self, owner: BlockingBookKeeper, handle: ReadHandle | LedgerHandle):
        self._owner = owner
        #: the underlying Twisted handle (:class:`~bkctl.wire.client.read_handle.ReadHandle` or
        #: :class:`~bkctl.wire.client.ledger_handle.LedgerHandle`)
        self.handle = handle

    def __repr__(self) -> str:
        return f"<BlockingLedger {self.handle!r}>"

    def _call(self, fn: Callable[..., object], *args: object, **kwargs: object) -> Any:
        return run_in_reactor(fn, *args, timeout=self._owner.timeout, **kwargs)

    # -- state ---------------------------------------------------------------------

    @property
    def ledger_id(self) -> int:
        return self.handle.ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self.handle.metadata

    @property
    def last_add_confirmed(self) -> int:
        return self.handle.last_add_confirmed

    @property
    def last_entry_id(self) -> int | None:
        return self.handle.last_entry_id

    @property
    def length(self) -> int | None:
        return self.handle.length

    @property
    def is_closed(self) -> bool:
        return self.handle.is_closed

    @property
    def writable(self) -> bool:
        return hasattr(self.handle, "add_entry")

    # -- writing --------------------------------------------------------------------

    def add(self, payload: bytes) -> int:
        """Add one entry; returns its id once acknowledged."""
        result: int = self._call(self._writer().add_entry, payload)
        return result

    def add_many(self, payloads: Iterable[bytes]) -> int | None:
        """Add every payload, pipelined (at most ``max_inflight`` outstanding;
        the iterable is consumed lazily, in the reactor thread).  Returns the
        last entry id (None if there was nothing to add)."""
        result: int | None = self._call(self._writer().add_entries, payloads)
        return result

    def _writer(self) -> LedgerHandle:
        from .ledger_handle import LedgerHandle

        if not isinstance(self.handle, LedgerHandle):
            raise TypeError(f"ledger {self.ledger_id} was opened for reading: it takes no adds")
        return self.handle

    # -- reading --------------------------------------------------------------------

    def _last(self, last: int | None) -> int:
        if last is not None:
            return last
        limit = self.handle.last_entry_id if self.handle.is_closed else None  # (a closed ledger's is set)
        return self.handle.last_add_confirmed if limit is None else limit

    def read(
        self, first: int = 0, last: int | None = None, *, allow_unconfirmed: bool = False
    ) -> list[tuple[int, bytes]]:
        """``[(entry_id, payload), ...]`` for ``first..last`` (default: up to
        the LAC / last entry; an empty ledger gives [])."""
        last = self._last(last)
        if last < first:
            return []
        result: list[tuple[int, bytes]] = self._call(
            self.handle.read_entries, first, last, allow_unconfirmed=allow_unconfirmed
        )
        return result

    def read_entry(self, entry_id: int, *, allow_unconfirmed: bool = False) -> bytes:
        result: bytes = self._call(self.handle.read_entry, entry_id, allow_unconfirmed=allow_unconfirmed)
        return result

    def read_range(
        self, first: int = 0, last: int | None = None, batch: int = 100, *, allow_unconfirmed: bool = False
    ) -> Iterator[list[tuple[int, bytes]]]:
        """Batches of ``[(entry_id, payload), ...]``, read ahead as the client's ``read_window`` allows."""
        last = self._last(last)
        if last < first:
            return iter(())
        reader = self._call(self.handle.read_range, first, last, batch, allow_unconfirmed=allow_unconfirmed)
        return handed_over(lambda: reader, self._owner.timeout)

    def read_lac(self) -> int:
        """Ask the bookies for the LAC (the last entry if closed)."""
        result: int = self._call(self.handle.read_lac)
        return result

    def read_tail(self) -> Tail:
        """The ledger's tail (``ReadHandle.read_tail``): for an open ledger the
        LAC and the entries past it that an ack quorum of their bookies hold,
        read without fencing; a :class:`~bkctl.wire.client.unconfirmed_tail.Tail`."""
        result: Tail = self._call(self.handle.read_tail)
        return result

    def wait_for_entry(self, entry_id: int, timeout_ms: int) -> tuple[int, tuple[int, bytes] | None]:
        """Long-poll the bookies (v3) until the LAC reaches ``entry_id``, at
        most ``timeout_ms``: ``(lac, (entry_id, payload) or None)`` (see
        ``ReadHandle.wait_for_entry``)."""
        result: tuple[int, tuple[int, bytes] | None] = self._call(self.handle.wait_for_entry, entry_id, timeout_ms)
        return result

    def refresh_metadata(self) -> LedgerMetadata:
        result: LedgerMetadata = self._call(self.handle.refresh_metadata)
        return result

    # -- closing --------------------------------------------------------------------

    def close(self) -> None:
        """Close the handle (a writer waits for its adds and writes CLOSED)."""
        self._call(self.handle.close)

    def __enter__(self) -> BlockingLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingBookKeeper:
    """Blocking BookKeeper client.

    ``metadata`` is a metadata service URI or a ZKMetadataStore; ``options``
    are those of :class:`~bkctl.wire.client.bookkeeper.BookKeeperClient`
    (``protocol``, ``add_timeout``, ``read_timeout``, ``max_inflight``, ...).
    ``timeout`` bounds every blocking call.
    """

    def __init__(self, metadata: str | MetadataStore, *, timeout: float = DEFAULT_TIMEOUT, **options: Any):
        self.timeout = timeout
        self.client: BookKeeperClient = run_in_reactor(self._make_client, metadata, options, timeout=timeout)

    @staticmethod
    def _make_client(metadata: str | MetadataStore, options: dict[str, Any]) -> BookKeeperClient:
        from .bookkeeper import BookKeeperClient

        return BookKeeperClient(metadata, **options)

    def __repr__(self) -> str:
        return f"<BlockingBookKeeper {self.client!r}>"

    def run(self, fn: Callable[..., object], *args: object, **kwargs: object) -> Any:
        """Run ``fn(client, *args, **kwargs)`` in the reactor thread; waits for
        the Deferred it may return (its result: what ``fn`` gives)."""
        return run_in_reactor(fn, self.client, *args, timeout=self.timeout, **kwargs)

    def _call(self, fn: Callable[..., object], *args: object, **kwargs: object) -> Any:
        return run_in_reactor(fn, *args, timeout=self.timeout, **kwargs)

    def create(
        self,
        ensemble_size: int = 3,
        write_quorum: int = 2,
        ack_quorum: int = 2,
        digest_type: DigestType | str = "CRC32C",
        password: bytes | str = b"",
        custom_metadata: Mapping[str, bytes] | None = None,
        *,
        ledger_id: int | None = None,
        max_inflight: int | None = None,
    ) -> BlockingLedger:
        """Create a ledger; returns a writable :class:`BlockingLedger`."""
        handle = self._call(
            self.client.create_ledger,
            ensemble_size,
            write_quorum,
            ack_quorum,
            digest_type,
            password,
            custom_metadata,
            ledger_id=ledger_id,
            max_inflight=max_inflight,
        )
        return BlockingLedger(self, handle)

    def start_read_lac(self, ledger_id: int, md: LedgerMetadata, version: int) -> PendingCall:
        """Start reading the last add confirmed of a ledger whose metadata a walk read
        (``BookKeeperClient.read_lac_of``) and return at once: a walk over thousands of
        open ledgers keeps many in flight and takes each :meth:`PendingCall.result` in turn."""
        crochet = _ensure_reactor()
        return PendingCall(_Call(crochet, self.client.read_lac_of, (ledger_id, md, version), {}), self.timeout)

    def open(
        self,
        ledger_id: int,
        password: bytes | str | None = None,
        *,
        recovery: bool = False,
        digest_type: DigestType | str | None = None,
        check_password: bool = True,
    ) -> BlockingLedger:
        """Open for reading (``recovery=True``: recover and close an open ledger first)."""
        handle = self._call(
            self.client.open_ledger,
            ledger_id,
            recovery,
            password,
            digest_type=digest_type,
            check_password=check_password,
        )
        return BlockingLedger(self, handle)

    def connect(self, bookie_ids: Iterable[str]) -> None:
        """Connect to the bookies not connected yet in the background (``connect_to``: looked up
        in one go, then connected); returns at once: a command about to read from them has them
        ready by its first request.  A failure is its first request's to tell."""
        _ensure_reactor()
        from twisted.internet import reactor

        reactor.callFromThread(self._connect, list(bookie_ids))

    def _connect(self, bookie_ids: list[str]) -> None:
        self.client.connect_to(bookie_ids).addErrback(
            lambda failure: log.info("connecting to %s up front failed: %s", ", ".join(bookie_ids), failure.value)
        )

    def open_closed(self, ledger_id: int, md: LedgerMetadata, version: int) -> BlockingLedger:
        """Open a closed ledger whose metadata the caller has read already
        (``BookKeeperClient.open_closed``: no second read of its znode)."""
        return BlockingLedger(self, self._call(self.client.open_closed, ledger_id, md, version))

    def read_closed(
        self, ledger_id: int, md: LedgerMetadata, version: int, first: int, last: int, batch: int
    ) -> Iterator[Entries]:
        """Batches of ``[(entry_id, payload), ...]`` of ``first..last`` of a closed ledger whose
        metadata the caller has read already: :meth:`open_closed` and
        :meth:`BlockingLedger.read_range` in one, its handle opened and its reads begun in one
        turn of the reactor when the iteration begins, no call waited for (a backup opens
        thousands of ledgers; two calls and a wait each cost 1-7 ms a ledger, loaded).  Errors,
        a bad range's too, are raised by the first batch asked for."""

        def make() -> RangeReader:
            return self.client.open_closed(ledger_id, md, version).read_range(first, last, batch)

        return handed_over(make, self.timeout)

    def recover(
        self,
        ledger_id: int,
        password: bytes | str | None = None,
        *,
        digest_type: DigestType | str | None = None,
        check_password: bool = True,
    ) -> BlockingLedger:
        """Recover (fence, re-replicate the tail, close) and open for reading."""
        return self.open(ledger_id, password, recovery=True, digest_type=digest_type, check_password=check_password)

    def open_for_append(
        self,
        ledger_id: int,
        password: bytes | str | None = None,
        *,
        digest_type: DigestType | str | None = None,
        check_password: bool = True,
        lock_timeout: float = 0.0,
        max_inflight: int | None = None,
    ) -> BlockingLedger:
        """Continue writing an OPEN ledger (see ``BookKeeperClient.open_for_append``)."""
        handle = self._call(
            self.client.open_for_append,
            ledger_id,
            password,
            digest_type=digest_type,
            check_password=check_password,
            lock_timeout=lock_timeout,
            max_inflight=max_inflight,
        )
        return BlockingLedger(self, handle)

    def delete(self, ledger_id: int) -> None:
        self._call(self.client.delete_ledger, ledger_id)

    def metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """``(LedgerMetadata, version)`` of a ledger."""
        result: tuple[LedgerMetadata, int] = self._call(self.client.read_metadata, ledger_id)
        return result

    def close(self) -> None:
        self._call(self.client.close)

    def __enter__(self) -> BlockingBookKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
