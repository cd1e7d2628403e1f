"""The state one bkctl invocation (or one shell session) shares between commands."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .exitcodes import USAGE, CommandError
from .ops.results import fields_of

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from bkctl.wire.fastpath import Twins


@dataclass
class App:
    metadata_uri: str | None = None
    #: The config file's name for :attr:`metadata_uri` (None when it has none).
    cluster_name: str | None = None
    #: Seconds to wait for ZooKeeper when connecting (``--timeout``).
    zk_timeout: float = 10.0
    json: bool = False
    color: bool = True
    verbose: int = 0
    quiet: bool = False
    #: Bookie wire protocol of :attr:`bk` ("v3" or "v2").
    protocol: str = "v3"
    #: ``--placement`` (random, rack, region); None: rack when the rack map names the cluster's bookies
    placement: str | None = None
    #: the keys of the cluster profile in use (``[clusters.NAME]`` of config.toml)
    profile: dict = field(default_factory=dict, repr=False)
    #: ZooKeeper credentials/TLS/ACLs in use (:class:`bkctl.wire.metadata.zksecurity.ZKSecurity`; None: not yet set)
    zk_security: Any = None
    #: TLS to the bookies (:class:`bkctl.wire.tls.TLSFiles`), False for plain text, None: not yet set
    bookie_tls: Any = None
    #: True inside ``bkctl shell``: connections stay open between commands.
    interactive: bool = False
    #: True when the process ends with the one command line it runs (``bkctl``'s main; not a
    #: program or test calling :func:`bkctl.cli.run`, whose later calls may want anything)
    one_shot: bool = False
    #: the implementations in use (:mod:`bkctl.wire.fastpath`): the process's record, which the
    #: command line's start (:mod:`bkctl.cli`) gives; the store's walks and decoding use it
    twins: Twins | None = field(default=None, repr=False)
    #: Ledgers this session created and still writes (shell only): ledger id ->
    #: :class:`bkctl.ops.ledgers.HeldLedger` (live write handle + append lock).
    handles: dict = field(default_factory=dict, repr=False)
    _store: Any = field(default=None, repr=False)
    _cluster_checked: bool = field(default=False, repr=False)
    _bk: Any = field(default=None, repr=False)
    #: the placement policy :meth:`placement_policy` built for the current setting and store
    _placement: Any = field(default=None, repr=False)
    _console: Any = field(default=None, repr=False)
    _err_console: Any = field(default=None, repr=False)

    # -- connections ---------------------------------------------------------
    def require_uri(self) -> str:
        """The metadata service URI, checked by the parser the store uses (bad: exit 2)."""
        if not self.metadata_uri:
            raise CommandError("no cluster given: use --metadata-uri/-m, $BKCTL_METADATA_URI or --cluster", USAGE)
        from bkctl.wire.metadata.layout import MetadataServiceURI, MetadataServiceURIError

        try:
            MetadataServiceURI.parse(self.metadata_uri)
        except MetadataServiceURIError as e:
            raise CommandError(str(e), USAGE) from None
        return self.metadata_uri

    def require_twins(self) -> Twins:
        """:attr:`twins`, which the command line's start gives every App it runs a command on."""
        if self.twins is None:
            raise RuntimeError("this App was given no twins record (bkctl.cli gives it the process's)")
        return self.twins

    @property
    def store(self):
        """The ZooKeeper metadata store, connected on first use; its root must
        hold a BookKeeper cluster (else exit 3, with a hint)."""
        store = self.connect_store()
        if not self._cluster_checked:
            from .ops.cluster import require_cluster

            require_cluster(store)
            self._cluster_checked = True
        return store

    def connect_store(self):
        """The store even when its root holds no cluster yet (metaformat)."""
        if self._store is None:
            from bkctl.wire.metadata.zk import ZKMetadataStore

            store = ZKMetadataStore(self.require_uri(), timeout=self.zk_timeout, twins=self.require_twins())
            store.start()
            self._store = store
            self._cluster_checked = False
        return self._store

    @property
    def bk(self):
        """A :class:`~bkctl.wire.client.blocking.BlockingBookKeeper` on :attr:`store`'s
        ZooKeeper session, created on first use (starts the reactor thread)."""
        if self._bk is None:
            from bkctl.wire.client.blocking import BlockingBookKeeper
            from bkctl.wire.process.runtime import frozen_when_loaded, settle_garbage_collector, twisted_without_tls

            options = {"tls": self.bookie_tls} if self.bookie_tls else {}
            if self.bookie_tls:
                check_tls_files(self.bookie_tls)
            store, placement = self.store, self.placement_policy()
            settle_garbage_collector()  # what the commands that talk to bookies move dies young
            # the reactor, crochet and the client load here: frozen as they load, and without TLS
            # when the process uses none
            with frozen_when_loaded(), twisted_without_tls(unless=self.may_use_tls):
                self._bk = BlockingBookKeeper(store, protocol=self.protocol, placement=placement, **options)
        return self._bk

    @property
    def may_use_tls(self) -> bool:
        """Whether this process may yet talk TLS to bookies: when it is given bookie TLS, and
        in the shell (a later line may give it) or a caller's process (a later call may).  A
        one-shot command without TLS loads Twisted without it (pyOpenSSL, cryptography's
        X.509, service_identity: ~60 ms of CPU; :func:`~bkctl.wire.process.runtime.twisted_without_tls`)."""
        return bool(self.bookie_tls) or self.interactive or not self.one_shot

    def placement_policy(self):
        """The placement policy ``--placement`` (or the profile's ``placement``)
        names; by default rack-aware when the profile names a rack source or
        the rack map names one of the cluster's bookies (as Pulsar with its
        rack-aware policy), else random.
        The profile's ``rack_map_file``, ``network_topology_script``,
        ``min_racks_per_write_quorum``, ``enforce_min_racks_per_write_quorum``
        and ``min_regions`` tune it.  One policy while the setting and the store
        hold (the session's client and its commands share it, and its one watch
        of the rack map); :meth:`use_placement` and :meth:`close` close it."""
        if self._placement is None:
            self._placement = self._build_placement()
        return self._placement

    def _build_placement(self):
        from bkctl.wire.metadata.racks import RackMapError, RackSource, build_placement
        from bkctl.wire.text import parse_bool

        prof = self.profile
        name = self.placement or prof.get("placement")
        try:
            if name is None and (prof.get("rack_map_file") or prof.get("network_topology_script")):
                name = "rack"
            if name is None:
                source = RackSource(store=self.store)
                try:
                    source.refresh()
                finally:
                    source.close()  # (a look, once: the policy's own source keeps the watch)
                registered = self.store.registration.writable_bookies() + self.store.registration.readonly_bookies()
                name = "rack" if source.names_any(registered) else "random"
            return build_placement(
                name,
                store=self.store,
                rack_file=prof.get("rack_map_file"),
                script=prof.get("network_topology_script"),
                min_racks=int(prof.get("min_racks_per_write_quorum", 2)),
                enforce=parse_bool(
                    prof.get("enforce_min_racks_per_write_quorum", False), "enforce_min_racks_per_write_quorum"
                ),
                min_regions=int(prof.get("min_regions", 2)),
            )
        except (RackMapError, ValueError, TypeError) as e:
            raise CommandError(f"placement: {e}", USAGE) from None

    def use_placement(self, name: str) -> None:
        """``--placement``; a session's open client switches policy at once, and the
        policy it leaves stops watching the rack map."""
        self.placement = name
        old, self._placement = self._placement, None
        if self._bk is not None:
            self._bk.client.placement = self.placement_policy()
        if old is not None:
            old.close()

    def use_bookie_tls(self, tls) -> None:
        """TLS settings for the bookie connections; a change drops the open ones."""
        if self.bookie_tls is not None and tls != self.bookie_tls and self._bk is not None:
            bk, self._bk = self._bk, None
            bk.close()
        self.bookie_tls = tls

    def use_zk_security(self, security) -> None:
        """ZooKeeper credentials/TLS/ACLs for every session this process opens
        (:func:`bkctl.wire.metadata.zksecurity.set_default`); a change drops open connections."""
        from bkctl.wire.metadata import zksecurity

        if security != zksecurity.get_default():
            self.close()
            zksecurity.set_default(security)
        self.zk_security = security

    def use_protocol(self, protocol: str) -> None:
        """Speak ``protocol`` to the bookies.  A session whose connections are
        open keeps their protocol: switching would drop its held ledgers."""
        if protocol == self.protocol:
            return
        if self._bk is not None:
            raise CommandError(
                f"this session already talks {self.protocol} to the bookies; start it with --protocol {protocol}", USAGE
            )
        self.protocol = protocol

    def close(self) -> None:
        """Let go of everything: held ledgers (left OPEN, their append locks
        released), the bookie connections, the ZooKeeper session."""
        handles, self.handles = dict(self.handles), {}
        for held in handles.values():
            try:
                held.release()
            except Exception:  # noqa: BLE001 - closing must go on
                pass
        if self._bk is not None:
            bk, self._bk = self._bk, None
            try:
                bk.close()
            except Exception:  # noqa: BLE001
                pass
        placement, self._placement = self._placement, None
        if placement is not None:
            placement.close()  # (its rack map watch; the store it watches may outlive this App's use)
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- progress ------------------------------------------------------------
    def progress(self, total: int | None, description: str, lines: bool = False) -> ProgressBar:
        """A rich progress bar on stderr when stderr is a terminal (and not
        --quiet); otherwise a no-op with the same methods -- or, with
        ``lines`` (a long wait a script or cron runs), progress lines on stderr
        (:class:`_Lines`).  Use as a context manager; ``advance(n)``,
        ``update(total=..., description=...)`` and ``note(text)`` (a line of
        its own, above the bar) are thread-safe."""
        if self.quiet:
            return ProgressBar()
        if not sys.stderr.isatty():
            return _Lines(total, description) if lines else ProgressBar()
        return _Progress(self.err_console, total, description)

    def walk_progress(self, description: str, delay: float = 2.0):
        """The progress of a walk over every ledger (a ``WalkProgress``): a bar with
        the count and an ETA on stderr once the walk has taken ``delay`` seconds, when
        stderr is a terminal (and not --quiet); nothing otherwise, so that a pipe or
        a cron job's log gets no progress noise.  A context manager."""
        if self.quiet or not sys.stderr.isatty():
            return ProgressBar()
        return _DelayedProgress(self.err_console, description, delay)

    # -- output --------------------------------------------------------------
    @property
    def console(self):
        if self._console is None:
            self._console = _console(no_color=not self.color, highlight=False, soft_wrap=True)
        return self._console

    @property
    def err_console(self):
        if self._err_console is None:
            self._err_console = _console(stderr=True, no_color=not self.color, highlight=False)
        return self._err_console

    def emit_json(self, doc: Any, pretty: bool = False, flush: bool = True) -> None:
        """One JSON document on one line (``pretty``: indented, for the shell on a terminal);
        ``flush=False`` for the lines of a long listing, flushed by the buffer (and at exit)."""
        sys.stdout.write(encode_json(doc, pretty) + "\n")
        if flush:
            sys.stdout.flush()

    def info(self, message: str) -> None:
        """A progress or status line for people, on stderr (silent with -q or --json)."""
        if not self.quiet and not self.json:
            self.err_console.print(message)


def _console(**kw):
    """A rich Console whose broken pipe (``| head``) is a BrokenPipeError for
    :func:`bkctl.cli.run` to end quietly (rich's own answer exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    return _Console(**kw)


class ProgressBar:
    """What :meth:`App.progress` returns: this one shows nothing; the others draw a bar or print lines."""

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def update(self, **kw) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class _Lines(ProgressBar):
    """Progress as plain lines on stderr, for a wait nobody watches on a terminal
    (a pipe, cron): ``description: done/total`` (the description alone while
    there is nothing to count) when it changes, at most every ``every``
    seconds, and the last one when it ends; ``note`` lines at once."""

    def __init__(self, total: int | None, description: str, every: float = 10.0, clock=None):
        import threading
        import time

        self.total, self.description, self.every = total, description, every
        self.clock = clock or time.monotonic
        self.done = 0
        self._said: tuple | None = None
        self._last: float | None = None
        self._lock = threading.Lock()

    def _say(self, force: bool = False) -> None:
        now = (self.description, self.done, self.total)
        if now == self._said or not (force or self._last is None or self.clock() - self._last >= self.every):
            return
        self._said, self._last = now, self.clock()
        if self.total is None and not self.done:  # nothing to count: what it does is the news
            _line(self.description)
            return
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        _line(f"{self.description}: {count}")

    def __enter__(self):
        with self._lock:
            self._say(force=True)
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._say(force=True)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            self._say()

    def update(self, **kw) -> None:
        with self._lock:
            if "total" in kw:
                self.total = kw["total"]
            if "completed" in kw:
                self.done = kw["completed"]
            if "description" in kw:
                self.description = kw["description"]
            self._say()

    def note(self, text: str) -> None:
        with self._lock:
            _line(text)


def _line(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class _Progress(ProgressBar):
    def __init__(self, console, total: int | None, description: str):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task = self._bar.add_task(description, total=total)

    def __enter__(self):
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def advance(self, n: int = 1) -> None:
        self._bar.advance(self._task, n)

    def update(self, **kw) -> None:
        self._bar.update(self._task, **kw)

    def note(self, text: str) -> None:
        self._bar.console.print(text, highlight=False, markup=False)


class _DelayedProgress(ProgressBar):
    """A rich bar (count, elapsed, ETA) that shows only once ``delay`` seconds have
    passed: a quick walk leaves no trace on the terminal."""

    def __init__(self, console, description: str, delay: float, clock: Callable[[], float] | None = None):
        import time

        self._console, self._description = console, description
        self._clock = clock or time.monotonic
        self._show_at = self._clock() + delay
        self._total: int | None = None
        self._done = 0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def update(self, **kw) -> None:
        self._total = kw.get("total", self._total)
        if self._bar is not None and self._task is not None:  # set together
            self._bar.update(self._task, **kw)

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._bar is not None:
            if self._task is not None:  # set with the bar
                self._bar.advance(self._task, n)
        elif self._clock() >= self._show_at:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._task = bar.add_task(self._description, total=self._total, completed=self._done)
            bar.start()

    @property
    def shown(self) -> bool:
        return self._bar is not None

    @property
    def completed(self) -> int:
        return self._done

    @property
    def total(self) -> int | None:
        return self._total

    def note(self, text: str) -> None:
        self._console.print(text, highlight=False, markup=False)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()


def _json_default(obj: Any) -> Any:
    if not isinstance(obj, type) and (hasattr(obj, "__dataclass_fields__") or hasattr(type(obj), "to_json")):
        return fields_of(obj)  # an operation's result, or a type of wire's that writes its own document
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    if isinstance(obj, tuple):  # a NamedTuple is a list, as json writes it
        return list(obj)
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def check_tls_files(tls) -> None:
    """Load the bookie TLS files once, before any connection: a file that cannot
    be used is one line (exit 2), not the same error from every bookie."""
    from bkctl.wire.tls import TLSConfigError

    try:
        tls.client_context()
    except TLSConfigError as e:
        raise CommandError(str(e), USAGE) from None


def color_wanted(no_color_flag: bool) -> bool:
    return not no_color_flag and "NO_COLOR" not in os.environ


def confirm_destructive(app: App, question: str, force: bool, action: str) -> None:
    """Ask ``question`` on a terminal; without one (cron, pipes) refuse unless --force.

    ``action`` completes "refusing to ..." in the refusal, e.g. "delete ledger 7".
    """
    if force:
        return
    if not sys.stdin.isatty():
        raise CommandError(f"refusing to {action} without --force (stdin is not a terminal)", USAGE)
    import click

    if not click.confirm(question, default=False, err=True):
        from .exitcodes import FAILED

        raise CommandError(f"declined: did not {action}", FAILED)


# orjson: a listing of a million ledgers is a million of these lines, and json's encoder
# cost 8 us a ledger line where orjson's costs 0.9.  Keys sorted, bytes as hex; a dataclass
# (an operation's result) goes to _json_default, whose one conversion is bkctl.ops.results';
# a datetime is refused.
_JSON_OPTIONS = (
    orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)


def encode_json(doc: Any, pretty: bool = False) -> str:
    """One document as the CLI prints it: on one line, or indented (``pretty``)."""
    options = (_JSON_OPTIONS | orjson.OPT_INDENT_2) if pretty else _JSON_OPTIONS
    return orjson.dumps(doc, default=_json_default, option=options).decode()
