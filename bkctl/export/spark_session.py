"""The Spark session of ``bkctl export``: started, quietened, stopped.

:func:`spark_session` gives the SparkSession already running in this process
(used as it is, and left running) or starts one for a master URL: WARN logs
on stderr (none at all with ``quiet``), nothing ever on stdout (a ``--json``
document is all that goes there), no UI, UTC, and on a local master the
workers run this interpreter and everything listens on 127.0.0.1.
:func:`stop_spark` stops a session this process started, and the gateway JVM
behind it.  Both wait through Ctrl-C (then raised): a JVM left half started
or half stopped breaks every later export of the process (the shell).

The JVM's stdout and stderr reach our stderr through :class:`JvmStderr`, which drops the
one line every start printed and no user can act on, "WARNING: Using incubator modules:
jdk.incubator.vector": Spark's launcher gives the JVM ``--add-modules=jdk.incubator.vector``
(its hard-coded JavaModuleOptions), and no JVM option silences the module system's warning.
Every other line passes as written.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from contextlib import contextmanager

__all__ = ["spark_session", "stop_spark"]

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

#: A failed task is logged by the executor and the task set manager with its whole Python
#: traceback and JVM stack (a full disk: some 200 lines), before the job's failure reaches bkctl,
#: which says it in one line -- and with -v prints the traceback, Spark's logs included.
_QUIET_TASK_FAILURES = """logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
"""


def _log4j2_file(verbose: bool = False) -> str:
    text = _LOG4J2 if verbose else _LOG4J2 + _QUIET_TASK_FAILURES
    path = os.path.join(
        tempfile.gettempdir(), f"bkctl-export-log4j2{'-verbose' if verbose else ''}-{os.getuid()}.properties"
    )
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix="bkctl-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


#: what the JVM says at every start, Spark's launcher having given it --add-modules=jdk.incubator.vector
INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector"


class JvmStderr:
    """A pipe for the JVM's stdout and stderr, copied line by line by a thread to the
    file descriptor ``out`` until every writer has closed it (the JVM and the Python
    workers it spawned have exited): every line but :data:`INCUBATOR_WARNING`, as
    written; a partial line as soon as it cannot be that warning."""

    def __init__(self, out: int) -> None:
        self.read_end, self.write_end = os.pipe()
        self.out = out
        self.thread = threading.Thread(target=self._copy, name="bkctl-jvm-stderr", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        pending = b""
        try:
            while chunk := os.read(self.read_end, 65536):
                *lines, pending = (pending + chunk).split(b"\n")
                kept = b"".join(line + b"\n" for line in lines if line.rstrip(b"\r") != INCUBATOR_WARNING)
                if pending and not INCUBATOR_WARNING.startswith(pending):
                    kept, pending = kept + pending, b""
                if kept:
                    _write_all(self.out, kept)
            if pending:
                _write_all(self.out, pending)
        except OSError:
            pass  # our stderr went away: nothing to say it on
        finally:
            os.close(self.read_end)
            os.close(self.out)

    def wait(self, timeout: float) -> None:
        """Until the JVM's last words are copied (its writers all closed), at most ``timeout`` s."""
        self.thread.join(timeout)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


#: the copier of the JVM this process started (None: none started, or a quiet one)
_jvm_stderr: JvmStderr | None = None


@contextmanager
def _stdout_to_stderr(quiet: bool = False):
    """Point file descriptors 1 and 2 at a :class:`JvmStderr` pipe while the JVM starts, so
    that neither it nor the Python workers it spawns ever write to our stdout, and their
    stderr reaches ours without the incubator-module warning; ``quiet`` points both 1 and
    2 at /dev/null (its warnings included)."""
    global _jvm_stderr
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    if quiet:
        sink = os.open(os.devnull, os.O_WRONLY)
    else:
        _jvm_stderr = JvmStderr(os.dup(2))
        sink = _jvm_stderr.write_end
    try:
        os.dup2(sink, 1)
        os.dup2(sink, 2)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, sink):
            os.close(fd)


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster")


#: The export's driver JVM only plans, schedules and collects file names (the
#: tasks read and write in Python), so it needs neither C2's compiled code nor
#: G1's concurrent threads: measured during exports with local[1], those two
#: used 10% of a core, taken from the bookies and the readers sharing it.
_DRIVER_JIT_AND_GC = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


#: Spark's switch for Python data sources' filter pushdown (off by default): a source whose
#: reader takes filters (``bookkeeper``'s does) fails to load without it, Spark naming it
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def spark_session(
    master: str = "local[*]", conf: dict[str, str] | None = None, quiet: bool = False, verbose: bool = False
):
    """``(spark, created)``: the SparkSession running in this process, else a
    new one for ``master`` (WARN logs on stderr -- a failed task's only with
    ``verbose`` --, none at all with ``quiet``; no console progress, no UI)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        spark = SparkSession.builder.getOrCreate()
        spark.conf.set(PUSHDOWN_CONF, "true")
        return spark, False
    builder = (
        SparkSession.builder.master(master)
        .appName("bkctl export")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config(PUSHDOWN_CONF, "true")  # the bookkeeper data source narrows its reads by SQL filters
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile=file:{_log4j2_file(verbose)} {_DRIVER_JIT_AND_GC}",
        )
    )
    if _is_local(master):
        # the workers must be this interpreter (where bkctl is installed), and
        # a single machine has no business listening on other interfaces
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    with _stdout_to_stderr(quiet):
        spark = _shielded(builder.getOrCreate, undo=stop_spark)
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def _shielded(fn, undo=None):
    """``fn()`` in a thread of its own, waited for through Ctrl-C: a
    KeyboardInterrupt is raised once it is over (after ``undo`` of its result).

    Ctrl-C in the middle of a call into the JVM stops only the Python side:
    the JVM goes on building the SparkContext (the next export in the shell
    then failed with "Only one SparkContext should be running in this JVM"),
    or a gateway JVM is left running with no Python side to stop it."""
    outcome: dict = {}
    over = threading.Event()  # not Thread.join: interrupted, it can say a running thread is over

    def call() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc
        finally:
            over.set()

    threading.Thread(target=call, name="bkctl-spark", daemon=True).start()
    interrupted = False
    while not over.is_set():
        try:
            over.wait()
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                print("bkctl: stopping Spark...", file=sys.stderr, flush=True)
    if interrupted:
        if "value" in outcome and undo is not None:
            _shielded(lambda: undo(outcome["value"]))
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def stop_spark(spark, timeout: float = 60.0) -> None:
    """Stop the session and the JVM behind it (``SparkSession.stop`` alone
    leaves the gateway JVM running until this process exits); Ctrl-C waits
    for the stop to finish (a JVM stopped half way would be left behind)."""
    _shielded(lambda: _stop_spark(spark, timeout))


def _stop_spark(spark, timeout: float) -> None:
    import subprocess

    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM goes away below anyway
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
        proc.wait(timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait(timeout=timeout)
    if _jvm_stderr is not None:
        _jvm_stderr.wait(5.0)  # its last lines before ours
