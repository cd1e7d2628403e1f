"""Real bookied processes for integration tests, and a small blocking wire client to poke them.

Every process is started in its own session and stopped by pid (SIGKILL as
a last resort); :class:`BookieProcess` keeps its directories between
restarts so fault tests can kill and restart the same bookie.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bkctl.sandbox.zookeeper import child_pids, process_cmdline
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import FrameDecoder, frame
from tests.support import zygote
from tests.support.folders import integration_only
from tests.support.interrupts import die_with_parent
from tests.support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


class BookieProcess:
    def __init__(self, base: Path, uri: str, port: int | None = None, **settings):
        self.base = Path(base)
        self.uri = uri
        self.port = port or free_port()
        self.settings = settings
        self.proc: subprocess.Popen | zygote.ForkedProcess | None = None
        self.env_extra: dict[str, str] = {}
        #: the module run as bookied and its arguments before bookied's own: a test launcher
        #: (e.g. ``["tests.support.stopping_bookied", "copied"]``) or bookied itself
        self.launcher: list[str] = ["bkctl.bookied"]
        self.http_port: int | None = None

    def serve_http(self) -> BookieProcess:
        """Turn the HTTP admin on (127.0.0.1, a free ``http_port``), before starting."""
        self.http_port = free_port()
        self.settings.update(httpServerEnabled="true", httpServerPort=self.http_port, httpServerHost="127.0.0.1")
        return self

    def admin(self, path: str, method: str = "GET", body=None):
        """The HTTP admin's JSON answer to ``method path`` (see :meth:`serve_http`)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as ``{'name{labels}': value}``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        return samples

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def journal_dir(self) -> Path:
        return self.base / "journal"

    @property
    def ledger_dir(self) -> Path:
        return self.base / "ledgers"

    @property
    def log_path(self) -> Path:
        return self.base / "bookied.log"

    def conf_text(self) -> str:
        settings = {
            "bookiePort": self.port,
            "advertisedAddress": "127.0.0.1",
            "listeningInterface": "lo",
            "allowLoopback": "true",
            "journalDirectories": self.journal_dir,
            "ledgerDirectories": self.ledger_dir,
            "metadataServiceUri": self.uri,
            "zkTimeout": 10000,
            "flushInterval": 1000,
            "journalPreAllocSizeMB": 1,
            "dbStorage_writeCacheMaxSizeMb": 16,
        }
        settings.update(self.settings)
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def launch(self, *extra_args: str) -> subprocess.Popen:
        """Start the process without waiting for anything."""
        integration_only("a bookied")
        self.base.mkdir(parents=True, exist_ok=True)
        conf = self.base / "bk_server.conf"
        conf.write_text(self.conf_text())
        env = dict(os.environ, **self.env_extra)
        if self.launcher[0].startswith("tests."):  # the launcher is in this checkout's tests package
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        module, *args = [*self.launcher, "--conf", str(conf), *extra_args]
        with open(self.log_path, "ab") as log, open(os.devnull, "rb") as devnull:
            # forked from the worker's zygote (tests/support/zygote.py) where it can be
            self.proc = zygote.spawn(
                module, args, env=env, stdin=devnull.fileno(), stdout=log.fileno(), stderr=log.fileno()
            )
            if self.proc is None:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", module, *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
        return self.proc

    def start(self, timeout: float = 60.0) -> BookieProcess:
        """Start and wait until it answers on its port."""
        self.launch()
        try:
            self.wait_listening(time.monotonic() + timeout)
        except RuntimeError:
            self.kill()
            raise
        return self

    def wait_listening(self, deadline: float) -> None:
        """Until the launched process accepts connections; RuntimeError (with its log) if it
        exits first or ``deadline`` (a ``time.monotonic()`` value) passes."""
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"bookied exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"bookied did not listen in time:\n{self.log_tail()}") from None
                time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        """Send ``sig`` to the bookied, wait for it (SIGKILL after 30 s), then SIGKILL
        what it left running: its children seen before the signal (its autorecovery
        daemon's process, in a session of its own, which would otherwise end on its
        own once it sees its input close) and whatever is left in its session."""
        if self.proc is None:
            return None
        children = [(pid, process_cmdline(pid)) for pid in self.children()]
        self.proc.send_signal(sig)  # (not to one that ended: its pid may be reaped already)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            code = self.proc.wait(timeout=10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # started with start_new_session: its pid is the group's
        except (ProcessLookupError, PermissionError):
            pass
        for pid, cmdline in children:
            if cmdline and process_cmdline(pid) == cmdline:  # still that process, not a reused pid
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return code

    def children(self) -> list[int]:
        """The pids of the live processes whose parent is this bookied."""
        return child_pids(self.proc.pid) if self.proc is not None else []

    def stop(self) -> int | None:
        return self.kill(signal.SIGTERM)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def registration_sessions(uri: str, bookie_ids: list[str]) -> dict[str, int | None]:
    """The ZooKeeper session holding each bookie's registration now (None: not registered):
    what :func:`wait_registered` must see replaced after a restart."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        return {b: store.registration.session_of(b) for b in bookie_ids}


def wait_registered(
    uri: str,
    bookie_ids: list[str],
    timeout: float = 60.0,
    procs: list[BookieProcess] = (),
    replacing: dict[str, int | None] | None = None,
) -> None:
    """Until every one of ``bookie_ids`` is registered writable at ``uri`` -- by a session
    other than ``replacing[id]`` (from :func:`registration_sessions` before a restart: a
    SIGKILLed bookie's registration stays until its session expires); RuntimeError
    with its log at once if one of ``procs`` exits meanwhile."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk import ZKMetadataStore

    replacing = {b: s for b, s in (replacing or {}).items() if s is not None}
    deadline = time.monotonic() + timeout
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        while True:
            writable = set(store.registration.writable_bookies())
            missing = {
                b
                for b in bookie_ids
                if b not in writable or (b in replacing and store.registration.session_of(b) == replacing[b])
            }
            if not missing:
                return
            for p in procs:
                if p.proc is not None and p.proc.poll() is not None:
                    raise RuntimeError(f"bookied {p.bookie_id} exited with {p.proc.returncode}:\n{p.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"bookies {sorted(missing)} did not register (anew) within {timeout}s")
            time.sleep(0.05)


def start_bookies(procs: list[BookieProcess], uri: str, timeout: float = 60.0) -> list[BookieProcess]:
    """Launch all at once, wait until each listens and is registered writable -- by its own
    session: one restarted after a kill -9 waits for its predecessor's session to expire."""
    replacing = registration_sessions(uri, [p.bookie_id for p in procs])
    for p in procs:
        p.launch()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.wait_listening(deadline)
    wait_registered(uri, [p.bookie_id for p in procs], timeout, procs, replacing)
    return procs


class WireClient:
    """A blocking client for tests: send requests, wait for the replies."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.decoder = FrameDecoder()
        self.pending: list[bytes] = []
        self.txn = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, payload: bytes) -> None:
        self.sock.sendall(frame(payload))

    def recv(self) -> bytes:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("bookie closed the connection")
            self.pending += self.decoder.feed(data)
        return self.pending.pop(0)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the bookie closes the connection (data received meanwhile is dropped)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def v2(self, req) -> object:
        self.send(req.encode())
        return v2.decode_response(self.recv())

    def v3(self, req) -> object:
        self.send(v3.serialize(req))
        return v3.parse_response(self.recv())

    def next_txn(self) -> int:
        self.txn += 1
        return self.txn
