"""Run a real standalone ZooKeeper server for sandboxes and tests.

The server jars come from the first of these that has them:

1. ``$ZOOKEEPER_HOME`` (``lib/*.jar`` and ``*.jar`` of an Apache binary
   distribution),
2. Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``),
3. the ``jars/`` directory shipped inside the ``pyspark`` wheel.

:class:`ZooKeeperServer` launches ``java`` in its own session (so a Ctrl-C in
the terminal does not reach it), logs to a file in its data directory, and
only reports success once the ``srvr`` four-letter word answers.  Processes
are always stopped by pid; :func:`stop_recorded_zookeeper` checks that a pid
read back from a state file still belongs to a ZooKeeper server before it
signals it.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
DEBIAN_JAR_DIR = Path("/usr/share/java")
INSTALL_HINT = (
    "no ZooKeeper server found. Install one of: `apt-get install zookeeper` "
    "(Debian/Ubuntu), or `pip install 'bkctl[spark]'` (pyspark ships the "
    "ZooKeeper jars), or unpack an Apache ZooKeeper release and set "
    "ZOOKEEPER_HOME to its directory"
)

# Jars a standalone server needs when they are picked out of a directory that
# holds many unrelated jars (pyspark's).  snappy-java is not optional: without
# it the server never starts serving and logs nothing useful.
_REQUIRED_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "metrics-core",
    "commons-io",
    "commons-cli",
    "snappy-java",
)
# Present in pyspark: a real logger, so the log file explains failures.
_LOG4J_JARS = ("log4j-api", "log4j-core", "log4j-slf4j2-impl")

_LOG4J2_PROPERTIES = """\
status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{1} - %m%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
"""


class ZooKeeperError(RuntimeError):
    """Base class of the errors raised by this module."""


class ZooKeeperNotFound(ZooKeeperError):
    """No ZooKeeper jars or no ``java`` executable on this machine."""


class ZooKeeperStartError(ZooKeeperError):
    """The server process died or did not answer in time."""

    port_in_use = False


# --------------------------------------------------------------------------
# locating the server


def _jar_version_key(path: Path) -> tuple:
    nums = re.findall(r"\d+", path.name)
    return tuple(int(n) for n in nums)


def _pick_jar(directory: Path, name: str) -> Path | None:
    """The newest ``<name>-<version>.jar`` in *directory* (exact artifact name)."""
    pattern = re.compile(re.escape(name) + r"-\d[\w.\-]*\.jar$")
    found = [p for p in directory.glob(name + "-*.jar") if pattern.fullmatch(p.name)]
    if not found:
        return None
    return max(found, key=_jar_version_key)


def _from_zookeeper_home(home: Path) -> list[Path]:
    jars = sorted(home.glob("*.jar")) + sorted((home / "lib").glob("*.jar"))
    if not any(re.fullmatch(r"zookeeper-\d[\w.\-]*\.jar", p.name) for p in jars):
        raise ZooKeeperNotFound(
            f"ZOOKEEPER_HOME={home} holds no zookeeper-<version>.jar "
            "(expected in lib/ or the top directory); unset it or point it "
            "at an unpacked Apache ZooKeeper binary release"
        )
    return jars


def _from_debian() -> list[Path] | None:
    main = DEBIAN_JAR_DIR / "zookeeper.jar"
    if not main.is_file():
        return None
    jars = [main]
    for extra in ("slf4j-nop.jar", "slf4j-simple.jar", "slf4j-api.jar"):
        candidate = DEBIAN_JAR_DIR / extra
        if candidate.is_file():
            jars.append(candidate)
            break
    return jars


def pyspark_jars_dir() -> Path | None:
    """Where pyspark keeps its jars, found without importing pyspark."""
    try:
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if not locations and spec.origin:
        locations = [str(Path(spec.origin).parent)]
    for loc in locations:
        jars = Path(loc) / "jars"
        if jars.is_dir():
            return jars
    return None


def _from_pyspark() -> list[Path] | None:
    directory = pyspark_jars_dir()
    if directory is None:
        return None
    jars = []
    for name in _REQUIRED_JARS:
        jar = _pick_jar(directory, name)
        if jar is None:
            return None
        jars.append(jar)
    logging_jars = [_pick_jar(directory, name) for name in _LOG4J_JARS]
    if all(logging_jars):
        jars.extend(logging_jars)  # type: ignore[arg-type]
    return jars


def find_zookeeper_classpath(env: Mapping[str, str] | None = None) -> list[str]:
    """Return the jars of a ZooKeeper server, or raise :class:`ZooKeeperNotFound`."""
    home = (os.environ if env is None else env).get("ZOOKEEPER_HOME")
    if home:
        return [str(p) for p in _from_zookeeper_home(Path(home))]
    for finder in (_from_debian, _from_pyspark):
        jars = finder()
        if jars:
            return [str(p) for p in jars]
    raise ZooKeeperNotFound(INSTALL_HINT)


def find_java(env: Mapping[str, str] | None = None) -> str:
    java_home = (os.environ if env is None else env).get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found:
        return found
    raise ZooKeeperNotFound(
        "no `java` executable found (ZooKeeper needs Java 11 or later): install "
        "a JRE, e.g. `apt-get install openjdk-17-jre-headless`, or set JAVA_HOME"
    )


# --------------------------------------------------------------------------
# small network and process helpers


# Where the sandbox's servers listen: below the kernel's ephemeral range, the range every outgoing
# connection draws its local port from.  A port from that range (bind to 0) can be taken by some
# client's connection while its server is down, and the restarted server then cannot listen again.
STABLE_PORTS = range(10000, 20000)


def ephemeral_port_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing holds now, one a restarted server can listen on again.

    Drawn at random from :data:`STABLE_PORTS` when those lie below the ephemeral
    range; otherwise (a kernel set to hand out such low ports) the kernel's choice.
    """
    if STABLE_PORTS.stop <= ephemeral_port_low():
        for port in random.sample(STABLE_PORTS, min(64, len(STABLE_PORTS))):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on *port* now (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a four-letter command and return the whole answer ('' if none)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            data = sock.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def server_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        return "Zookeeper version" in four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return False


def process_cmdline(pid: int) -> list[str] | None:
    """The argv of a live, non-zombie process, or None if there is none."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    if not raw:  # zombies and kernel threads have an empty cmdline
        return None
    return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")]


def _reap(pid: int) -> None:
    """Collect the exit status if *pid* happens to be our child (else no-op)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def pid_alive(pid: int) -> bool:
    """True while *pid* runs or is still exiting (a zombie whose threads have all exited counts as gone).

    A SIGKILLed process's leader turns zombie at once, but its files (a listening
    port, a lock) stay open until its last thread exits, and a thread in a slow
    fsync can take seconds: a port tried after that zombie was seen was still in use.
    """
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # the state letter follows the parenthesised command name
    state = stat[stat.rfind(")") + 2 :][:1]
    if state in ("Z", "X", ""):
        try:
            return len(os.listdir(f"/proc/{pid}/task")) > 1
        except OSError:
            return False
    return True


def child_pids(pid: int) -> list[int]:
    """The pids of the processes whose parent is *pid* and that have not exited (zombies left out)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        state, parent = stat[stat.rfind(")") + 2 :].split()[:2]  # after "pid (comm) "
        if state not in ("Z", "X") and int(parent) == pid:
            found.append(int(name))
    return found


def process_matches(pid: int, required: Iterable[str]) -> bool:
    """True if *pid* is alive and every string in *required* is in its argv."""
    argv = process_cmdline(pid)
    if argv is None:
        return False
    joined = "\0".join(argv)
    return all(item in joined for item in required)


def terminate_pid(pid: int, grace: float = 10.0, *, popen: subprocess.Popen | None = None) -> bool:
    """SIGTERM *pid*, SIGKILL it after *grace* seconds, and wait until it is gone.

    Returns True if a signal was delivered (the process existed).
    """
    if popen is not None:
        if popen.poll() is not None:
            return False
    elif not pid_alive(pid):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    if _wait_gone(pid, grace, popen):
        return True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    _wait_gone(pid, 10.0, popen)
    return True


def _wait_gone(pid: int, timeout: float, popen: subprocess.Popen | None) -> bool:
    if popen is not None:
        try:
            popen.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def file_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a server's log, for an error message."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:])


def is_zookeeper_process(pid: int, data_dir: str | os.PathLike | None = None) -> bool:
    """True if *pid* is a ZooKeeper server (started with *data_dir*'s zoo.cfg)."""
    required = [MAIN_CLASS]
    if data_dir is not None:
        required.append(str(Path(data_dir).resolve() / "zoo.cfg"))
    return process_matches(pid, required)


def stop_recorded_zookeeper(pid: int, data_dir: str | os.PathLike | None = None, grace: float = 10.0) -> bool:
    """Stop a ZooKeeper server known only by its pid (from a state file).

    The pid is signalled only if it still is the server we started; a reused
    pid that now belongs to another program is left alone.  Returns True if
    the server was running and has been stopped.
    """
    if not is_zookeeper_process(pid, data_dir):
        return False
    return terminate_pid(pid, grace)


# --------------------------------------------------------------------------
# the server


class ZooKeeperServer:
    """A standalone ZooKeeper server listening on 127.0.0.1.

    ``ZooKeeperServer(data_dir, port=None)``: *data_dir* receives ``zoo.cfg``,
    ``zookeeper.log`` and the snapshots (``data/``); a free port is chosen
    at :meth:`start` when *port* is None.  ``extra_config`` adds zoo.cfg
    lines (authentication, ``secureClientPort``...), ``jvm_options`` java
    flags (e.g. ``-Djava.security.auth.login.config=...`` for SASL).
    """

    HOST = "127.0.0.1"

    def __init__(
        self,
        data_dir: str | os.PathLike,
        port: int | None = None,
        *,
        classpath: Sequence[str] | None = None,
        java: str | None = None,
        start_timeout: float = 60.0,
        tick_time: int = 2000,
        fsync: bool = False,
        heap_mb: int = 256,
        extra_config: dict[str, str] | None = None,
        jvm_options: Sequence[str] = (),
        preexec_fn: Callable[[], None] | None = None,
    ):
        self.data_dir = Path(data_dir).resolve()
        self._preexec_fn = preexec_fn  # run in the child before exec (tests tie the server's life to theirs)
        self._requested_port = port
        self._port: int | None = port
        self._classpath = list(classpath) if classpath is not None else None
        self._java = java
        self.start_timeout = start_timeout
        self.tick_time = tick_time
        self.fsync = fsync
        self.heap_mb = heap_mb
        self.extra_config = dict(extra_config or {})
        self.jvm_options = list(jvm_options)
        self._proc: subprocess.Popen | None = None

    # -- properties --------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ZooKeeperError("the server has no port until start() is called")
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self.HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle ---------------------------------------------------------
    def _write_config(self) -> None:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.HOST}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            "maxClientCnxns=0",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        if not self.fsync:
            lines.append("forceSync=no")
        lines += [f"{k}={v}" for k, v in self.extra_config.items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        classpath = self._classpath or find_zookeeper_classpath()
        java = self._java or find_java()
        cmd = [
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            *self.jvm_options,
        ]
        if any("log4j-core" in Path(j).name for j in classpath):
            props = self.data_dir / "log4j2.properties"
            props.write_text(_LOG4J2_PROPERTIES)
            cmd.append(f"-Dlog4j2.configurationFile={props}")
        cmd += ["-cp", os.pathsep.join(classpath), MAIN_CLASS, str(self.config_path)]
        return cmd

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log_path, lines)

    def start(self) -> ZooKeeperServer:
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        attempts = 3 if self._requested_port is None else 1
        for attempt in range(attempts):
            if self._requested_port is None:
                self._port = free_port(self.HOST)
            try:
                return self._start_once()
            except ZooKeeperStartError as exc:
                # another process may have taken the port we were given
                if attempt + 1 == attempts or not exc.port_in_use:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> ZooKeeperServer:
        if not port_free(self.HOST, self.port):
            err = ZooKeeperStartError(f"cannot start ZooKeeper: {self.HOST}:{self.port} is already in use")
            err.port_in_use = True
            raise err
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = self._command()
        self._write_config()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.data_dir),
                start_new_session=True,
                close_fds=True,
                preexec_fn=self._preexec_fn,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                err = ZooKeeperStartError(
                    f"ZooKeeper exited with status {code} before serving on "
                    f"{self.HOST}:{self.port}; last lines of {self.log_path}:\n" + self.log_tail()
                )
                err.port_in_use = "Address already in use" in self._log_since(log_offset)
                raise err
            # the answer must come while our process lives (not from a port squatter)
            if server_answers(self.HOST, self.port, timeout=0.5) and self._proc.poll() is None:
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperStartError(
                    f"ZooKeeper did not answer `srvr` on {self.HOST}:{self.port} "
                    f"within {self.start_timeout:.0f}s; last lines of {self.log_path}:\n" + self.log_tail()
                )
            time.sleep(0.05)

    def stop(self, grace: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            terminate_pid(proc.pid, grace, popen=proc)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer(data_dir={str(self.data_dir)!r}, port={self._port}, pid={self.pid})"


__all__ = [
    "MAIN_CLASS",
    "ZooKeeperError",
    "ZooKeeperNotFound",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "child_pids",
    "find_java",
    "find_zookeeper_classpath",
    "four_letter_word",
    "ephemeral_port_low",
    "free_port",
    "port_free",
    "is_zookeeper_process",
    "pid_alive",
    "process_cmdline",
    "process_matches",
    "pyspark_jars_dir",
    "server_answers",
    "stop_recorded_zookeeper",
    "terminate_pid",
]
