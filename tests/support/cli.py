"""Running bkctl the way operators do: a fresh process on this source tree, stdin not a terminal.

:func:`run_bkctl` is the one runner; :func:`bkctl` (text) and :func:`bkctl_bytes`
(bytes: binary payloads, ``--format raw``) run it on a cluster's URI.  :func:`bkctl_in_process`
runs a command in the test's own process (cheap, and sees its fixtures), and so does
:func:`run_in_process`, with variables of its own: an export there runs on the process's Spark
session, where a fresh process starts a JVM of its own (some 25 CPU-seconds).
"""

from __future__ import annotations

import io
import json
import locale
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from tests.support import zygote

#: The repository's root (this source tree is what the spawned processes import).
REPO = Path(__file__).resolve().parents[2]
#: The argv prefix that runs bkctl from this tree.
BKCTL = [sys.executable, "-m", "bkctl"]


def env_for(uri: str | None, **extra: str) -> dict[str, str]:
    """The environment of a bkctl process on cluster ``uri``: no colours, this source tree."""
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO), **extra)
    if uri is not None:
        env["BKCTL_METADATA_URI"] = uri
    return env


def wait_or_show_threads(proc: subprocess.Popen, timeout: float) -> int:
    """``proc.wait(timeout)``, a hang guard: a process still running then is sent
    SIGABRT and the assertion shows every thread's stack, as Python's faulthandler
    prints them (start it with ``PYTHONFAULTHANDLER=1``, e.g. ``env_for(uri,
    PYTHONFAULTHANDLER="1")``, and stderr piped) -- a hang seen once in a loaded run
    then says where it was."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        import signal

        proc.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        raise AssertionError(f"{proc.args} still ran {timeout:g}s later; its threads then:\n{_text(err)}") from None


def run_bkctl(env: dict, *args, stdin=None, timeout: float = 120, text: bool = False) -> subprocess.CompletedProcess:
    """The runner: ``bkctl ARGS`` in a fresh process with exactly ``env``, stdin not a terminal."""
    if stdin is None:
        stdin = "" if text else b""
    argv = list(map(str, args))
    # forked from the worker's zygote (tests/support/zygote.py) where it can be
    done = zygote.run(
        "bkctl",
        argv,
        env=env,
        cwd=str(REPO),
        timeout=timeout,
        input=stdin.encode(locale.getpreferredencoding(False)) if isinstance(stdin, str) else stdin,
    )
    if done is None:
        return subprocess.run(
            [*BKCTL, *argv], input=stdin, capture_output=True, text=text, env=env, cwd=REPO, timeout=timeout
        )
    if text:  # as subprocess.run(text=True) reads them: the locale's encoding, universal newlines
        done.stdout, done.stderr = (io.TextIOWrapper(io.BytesIO(b)).read() for b in (done.stdout, done.stderr))
    done.args = [*BKCTL, *argv]
    return done


def start(env: dict, *args, module: str = "bkctl", pipe_stdin: bool = False, text: bool = False):
    """``python -m module ARGS`` started with exactly ``env`` (forked from the worker's zygote
    where it can be, as :func:`run_bkctl`), its stdout and stderr pipes, its stdin a pipe with
    ``pipe_stdin`` (else /dev/null): a :class:`subprocess.Popen`, or a
    :class:`~tests.support.zygote.ForkedProcess` answering as one (``stdin``, ``stdout``,
    ``stderr``, ``communicate``, ``poll``, ``wait``, ``send_signal``, ``kill``)."""
    argv = list(map(str, args))
    stdin_r, stdin_w = os.pipe() if pipe_stdin else (os.open(os.devnull, os.O_RDONLY), None)
    (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
    try:
        proc = zygote.spawn(module, argv, env=env, cwd=str(REPO), stdin=stdin_r, stdout=out_w, stderr=err_w)
    finally:
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
    if proc is None:
        for fd in (stdin_w, out_r, err_r):
            if fd is not None:
                os.close(fd)
        return subprocess.Popen(
            [sys.executable, "-m", module, *argv],
            stdin=subprocess.PIPE if pipe_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
            text=text,
            start_new_session=True,
        )
    mode = "" if text else "b"
    if stdin_w is not None:
        proc.stdin = os.fdopen(stdin_w, "w" + mode, **({} if text else {"buffering": 0}))
    proc.stdout = os.fdopen(out_r, "r" + mode)
    proc.stderr = os.fdopen(err_r, "r" + mode)
    return proc


def bkctl(
    uri, *args, stdin: str | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """bkctl on cluster ``uri`` (``env``: extra variables); stdout/stderr as text."""
    return run_bkctl(env_for(uri, **(env or {})), *args, stdin=stdin, timeout=timeout, text=True)


def bkctl_bytes(
    uri, *args, stdin: bytes | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """:func:`bkctl` with stdin, stdout and stderr as bytes."""
    return run_bkctl(env_for(uri, **(env or {})), *args, stdin=stdin, timeout=timeout, text=False)


def bkctl_stopping_zookeeper(zookeeper_pid: int, when: str, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """``bkctl ARGS`` (text) in a fresh process where *when* -- Python run before bkctl's
    ``main``, with ``stop_zookeeper()`` defined: a method patched to call it at the moment the
    test chose -- stops ZooKeeper (SIGSTOP, returning once it is stopped) mid-command;
    ZooKeeper is continued (SIGCONT) however the run ends."""
    script = (
        "import os, signal, sys\n"
        "from tests.support.waiting import stop_process\n"
        "def stop_zookeeper():\n"
        f"    stop_process({int(zookeeper_pid)})\n"
        f"{when}\n"
        "from bkctl.cli import main\n"
        "sys.argv = ['bkctl'] + sys.argv[1:]\n"
        "main()\n"
    )
    try:
        return subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,  # where -c finds tests.support
        )
    finally:
        os.kill(zookeeper_pid, signal.SIGCONT)


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def ok(r: subprocess.CompletedProcess) -> str:
    """The stdout of a run that must have succeeded."""
    assert r.returncode == 0, (r.returncode, _text(r.stderr))
    return _text(r.stdout)


def one_line_error(r: subprocess.CompletedProcess, code: int) -> str:
    """The stderr of a run that must have failed with exit ``code`` and a one-line message."""
    err = _text(r.stderr)
    assert r.returncode == code, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    return err


def json_lines(text: str) -> list:
    """A list printed with ``--json``: one JSON document per line."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def bkctl_in_process(capsys, uri, *args):
    """``bkctl -m URI --json ARGS`` in this process: (exit code, JSON document or None, stderr)."""
    from bkctl.cli import run

    capsys.readouterr()
    code = run(["-m", uri, "--json", *map(str, args)])
    out, err = capsys.readouterr()
    doc = None
    if out.strip():
        lines = out.strip().splitlines()
        assert len(lines) == 1, f"stdout must be one JSON document, got: {out!r}"
        doc = json.loads(lines[0])
    return code, doc, err


class Ran(NamedTuple):
    """What :func:`run_in_process` gave, under the names of :class:`subprocess.CompletedProcess`."""

    returncode: int
    stdout: str
    stderr: str


def run_in_process(capsys, env: Mapping[str, str], *args) -> Ran:
    """``bkctl ARGS`` in this process with the variables ``env`` set meanwhile (a cluster's
    ``BKCTL_METADATA_URI``, an object store's ``AWS_*``; the process's own restored afterwards),
    as :func:`run_bkctl` runs it in another.  An export runs on the process's running Spark
    session (tests/support/spark.py), whose Python workers need the variables too
    (:func:`tests.support.spark.workers_environment`)."""
    from bkctl.cli import run

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    capsys.readouterr()
    try:
        code = run(list(map(str, args)))
    finally:
        out, err = capsys.readouterr()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Ran(code, out, err)
