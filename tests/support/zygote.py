"""A fork server for the suite's bookieds: each starts as a fork of a process that has already
imported what a bookied imports.

The suite starts some 1,000 bookieds on 2 cores, and two thirds of a bookied's start-up CPU
was Python importing Twisted, kazoo and bookied itself, the same modules every time.  One
*zygote* per pytest worker imports them once (never installing a reactor, starting a thread
or opening a connection); each bookied is then a fork of it that runs ``python -m
bkctl.bookied`` from there: its own process with its own pid, session, environment,
working directory and standard streams (passed over a Unix socket), killed and restarted for
real by pid.  What differs from an exec is only what it did not have to import.

The zygote is a child of the worker (it dies with it, its bookieds die with it); a bookied's
exit status comes back over the request's connection, so :class:`ForkedProcess` answers
``poll``, ``wait``, ``returncode``, ``send_signal`` and ``kill`` as :class:`subprocess.Popen`.
A request whose environment differs from the zygote's in a variable read at import time
(``BKCTL_*``, ``PYTHON*``) is refused, and the caller execs as before; so is everything when
``BKCTL_TEST_EXEC=1`` (every bookied exec'd, as the product's own launchers do).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from tests.support.interrupts import die_with_parent

__all__ = ["ForkedProcess", "run", "spawn", "zygote_pid"]

#: what the zygote imports: a bookied's modules and its reactor's, not the reactor itself
PRELOAD = (
    "twisted.internet.epollreactor",
    "twisted.internet.tcp",
    "twisted.internet.ssl",
    "twisted.internet.error",
    "twisted.internet.defer",
    "twisted.internet.task",
    "twisted.internet.threads",
    "twisted.web.server",
    "twisted.web.resource",
    "kazoo.client",
    "kazoo.protocol.connection",
    "kazoo.handlers.threading",
    "bkctl.bookied.main",
    "bkctl.bookied.service",
    "bkctl.bookied.server",
    "bkctl.bookied.bookie",
    "bkctl.bookied.journal",
    "bkctl.bookied.storage.store",
    "bkctl.bookied.garbage_collector",
    "bkctl.bookied.http",
    "bkctl.bookied.metrics",
    "bkctl.wire.metadata.zk",
    "bkctl.wire.metadata.zksecurity",
    "bkctl.wire.codecs.v2",
    "bkctl.wire.codecs.v3",
    "bkctl.wire.fastpath",
    # and a bkctl command's
    "click",
    "bkctl.cli",
    "bkctl.app",
    "bkctl.commands.ledger",
    "bkctl.commands.ledger_client",
    "bkctl.ops.ledgers",
    "bkctl.wire.client.blocking",
    "rich.console",
    "rich.table",
)

#: what a process reads when it starts or imports: a request must agree with the zygote on these
_START_TIME = ("PYTHON", "LD_", "MALLOC")
_REPO = str(Path(__file__).resolve().parents[2])


def _start_time_env(env: dict[str, str]) -> dict[str, object]:
    """The part of ``env`` read before a module runs: the interpreter's variables, and the fast
    paths' switch (read once, possibly at import); ``PYTHONPATH`` as its entries besides this
    tree's root, which the zygote's own path holds."""
    kept: dict[str, object] = {k: v for k, v in env.items() if k.startswith(_START_TIME) and k != "PYTHONPATH"}
    kept["BKCTL_FASTPATHS"] = env.get("BKCTL_FASTPATHS")
    kept["PYTHONPATH"] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != _REPO]
    return kept


class ForkedProcess:
    """A process the zygote forked, as much of :class:`subprocess.Popen` as the suite uses."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, buffered: bytes = b""):
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        #: its standard streams' other ends, where the caller made pipes (:func:`tests.support.cli.start`)
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        self._conn = conn
        self._buffer = buffered  # what came with the pid (:func:`read_pid`)

    def _read_status(self, timeout: float | None) -> bool:
        self._conn.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                data = self._conn.recv(64)
                if not data:  # the zygote went away: so did its children
                    self.returncode = -9 if self.returncode is None else self.returncode
                    self._conn.close()
                    return True
                self._buffer += data
        except (TimeoutError, BlockingIOError):
            return False
        self.returncode = int(self._buffer.split(b"\n", 1)[0])
        self._conn.close()
        return True

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._read_status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Read :attr:`stdout` and :attr:`stderr` to their ends, then wait: (out, err), as
        :meth:`subprocess.Popen.communicate` (no input; TimeoutExpired past ``timeout``)."""
        import selectors

        deadline = None if timeout is None else time.monotonic() + timeout
        streams = [f for f in (self.stdout, self.stderr) if f is not None]
        chunks: dict[int, list[Any]] = {id(f): [] for f in streams}
        with selectors.DefaultSelector() as sel:
            for f in streams:
                sel.register(f, selectors.EVENT_READ)
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _ in sel.select(left):
                    f = key.fileobj
                    data = f.read1(65536) if hasattr(f, "read1") else os.read(f.fileno(), 65536)  # type: ignore[union-attr]
                    if data:
                        chunks[id(f)].append(data)
                    else:
                        sel.unregister(f)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        joined = [b"".join(chunks[id(f)]) if f is not None else None for f in (self.stdout, self.stderr)]
        return joined[0], joined[1]

    def send_signal(self, sig: int) -> None:
        """As :meth:`subprocess.Popen.send_signal`: nothing once it has ended, and nothing when
        the zygote has reaped it while its status is still on the way here."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


def read_pid(conn: socket.socket) -> tuple[int, bytes]:
    """The zygote's first line, the child's pid, and what came after it: a child quick to exit
    has its status line sent at once, and one read may bring both."""
    answer = b""
    while b"\n" not in answer:
        data = conn.recv(32)
        if not data:
            raise RuntimeError("the zygote closed the connection before it forked")
        answer += data
    pid, rest = answer.split(b"\n", 1)
    return int(pid), rest


class _Zygote:
    """This worker's zygote, started on first use."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="bkctl-zygote-")
        atexit.register(shutil.rmtree, self._dir, True)
        self.path = os.path.join(self._dir, "sock")
        self.env = dict(os.environ)
        # its own output (nothing, unless it fails) in a file: not a terminal, as a bookied's log
        # is not, so the children's streams buffer as an exec'd bookied's do
        with open(os.path.join(self._dir, "zygote.log"), "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.zygote", self.path],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_parent,
                cwd=Path(__file__).resolve().parents[2],
            )
        deadline = time.monotonic() + 120
        while not os.path.exists(self.path + ".ready"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the zygote did not start (exit {self.proc.poll()})")
            time.sleep(0.02)

    def spawn(
        self,
        module: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        stdin: int,
        stdout: int,
        stderr: int,
        new_session: bool,
    ) -> ForkedProcess | None:
        if _start_time_env(env) != _start_time_env(self.env):
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        request = json.dumps(
            {"module": module, "args": args, "env": env, "cwd": cwd, "new_session": new_session}
        ).encode()
        socket.send_fds(conn, [len(request).to_bytes(4, "big") + request], [stdin, stdout, stderr])
        pid, rest = read_pid(conn)
        return ForkedProcess([sys.executable, "-m", module, *args], pid, conn, rest)


def run(
    module: str, args: list[str], *, env: dict[str, str], cwd: str | None, input: bytes, timeout: float
) -> subprocess.CompletedProcess[bytes] | None:
    """:func:`subprocess.run` of ``python -m module args`` with ``input`` on its stdin and its
    stdout and stderr captured (bytes), forked from the zygote; None where :func:`spawn` is."""
    import selectors

    pipes = [os.pipe(), os.pipe(), os.pipe()]  # (read, write) each: stdin, stdout, stderr
    try:
        proc = spawn(module, args, env=env, cwd=cwd, stdin=pipes[0][0], stdout=pipes[1][1], stderr=pipes[2][1])
    finally:
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
    if proc is None:
        for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
            os.close(fd)
        return None
    to_child, outputs = pipes[0][1], {pipes[1][0]: bytearray(), pipes[2][0]: bytearray()}
    pending = memoryview(input)
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        if pending:
            os.set_blocking(to_child, False)
            sel.register(to_child, selectors.EVENT_WRITE)
        else:
            os.close(to_child)
        for fd in outputs:
            sel.register(fd, selectors.EVENT_READ)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    proc.kill()
                    proc.wait()
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                for key, _ in sel.select(left):
                    if key.fd == to_child:
                        try:
                            pending = pending[os.write(to_child, pending[:65536]) :]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(to_child)
                            os.close(to_child)
                        continue
                    data = os.read(key.fd, 65536)
                    if data:
                        outputs[key.fd] += data
                    else:
                        sel.unregister(key.fd)
                        os.close(key.fd)
        finally:
            # each pipe end is closed once: here those still open (a timeout, an error), the
            # others where they ended (a second close could hit a number another thread reused)
            for key in list(sel.get_map().values()):
                os.close(key.fd)
    out, err = (bytes(v) for v in outputs.values())
    return subprocess.CompletedProcess(proc.args, proc.wait(max(1.0, deadline - time.monotonic())), out, err)


_zygote: _Zygote | None = None
_lock = threading.Lock()


def zygote_pid() -> int | None:
    """The pid of this process's zygote, if it started one."""
    zygote = _zygote
    return None if zygote is None else zygote.proc.pid


def spawn(
    module: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: str | None = None,
    stdin: int,
    stdout: int,
    stderr: int,
    new_session: bool = True,
) -> ForkedProcess | None:
    """``python -m module args`` forked from this worker's zygote, or None when it cannot be
    (``BKCTL_TEST_EXEC=1``, or ``env`` differs in what imports read): then exec it."""
    global _zygote
    if os.environ.get("BKCTL_TEST_EXEC") == "1" or env.get("BKCTL_TEST_EXEC") == "1":
        return None
    with _lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            if threading.current_thread() is not threading.main_thread():
                return None  # it would die with this thread (die_with_parent)
            _zygote = _Zygote()
        zygote = _zygote
    return zygote.spawn(module, args, env, cwd, stdin, stdout, stderr, new_session)


# -- the zygote itself ------------------------------------------------------------------------


def _serve(path: str) -> None:
    import importlib
    import selectors
    import signal

    for name in PRELOAD:
        importlib.import_module(name)
    assert "twisted.internet.reactor" not in sys.modules, "a preloaded module installed a reactor"
    assert threading.active_count() == 1, "a preloaded module started a thread"
    import gc

    gc.collect()
    gc.freeze()  # the children's copy-on-write pages stay shared

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    children: dict[int, socket.socket] = {}
    Path(path + ".ready").touch()
    while True:
        for key, _ in sel.select():
            if key.data == "accept":
                conn, _ = listener.accept()
                child = _fork_one(conn, listener, wake_r, wake_w, sel, children)
                if child is not None:
                    children[child] = conn
                else:
                    conn.close()
            else:
                try:
                    while wake_r.recv(512):
                        pass
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    if conn is not None:
                        code = os.waitstatus_to_exitcode(status)
                        try:
                            conn.sendall(b"%d\n" % code)
                        except OSError:
                            pass
                        conn.close()


def _fork_one(conn, listener, wake_r, wake_w, sel, children) -> int | None:
    import signal

    header = b""
    fds: list[int] = []
    while len(header) < 4:
        data, got, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
        if not data:
            return None
        header += data
        fds += got
    size = int.from_bytes(header[:4], "big")
    body = header[4:]
    while len(body) < size:
        data = conn.recv(size - len(body))
        if not data:
            return None
        body += data
    request = json.loads(body)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        conn.sendall(b"%d\n" % pid)
        return pid
    # the child: become the process that was asked for, then run it as `python -m` would
    try:
        sel.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for s in (conn, listener, wake_r, wake_w, *children.values()):
            s.close()
        if request["new_session"]:
            os.setsid()
        die_with_parent()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        if request["cwd"]:
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["module"], *request["args"]]
    except BaseException:  # noqa: BLE001 - the child must never return into the server loop
        os._exit(70)
    raise _RunModule(request["module"])


class _RunModule(BaseException):
    """Unwinds the forked child out of the server loop to the top level, which runs the module."""

    def __init__(self, module: str):
        self.module = module


def main() -> None:
    module = None
    try:
        _serve(sys.argv[1])
    except _RunModule as run:
        module = run.module
    # out of the except block: the server's frames, and what they held, are gone
    import runpy

    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
