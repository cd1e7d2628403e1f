"""Stopping a test run stops what it started: SIGTERM tears fixtures down as Ctrl-C does, and
a process a test started dies with the worker that started it if that worker is killed outright
(see tests/support/interrupts.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _inner_suite(tmp_path: Path, body: str) -> subprocess.Popen:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BKCTL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.support.interrupts",
            "-q",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout  # a hang guard, not a claim about speed
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def test_sigterm_tears_the_fixtures_down(tmp_path):
    proc = _inner_suite(
        tmp_path,
        f"""
        import pathlib, time
        import pytest

        @pytest.fixture
        def started():
            yield
            pathlib.Path({str(tmp_path)!r}, "torn-down").write_text("yes")

        def test_waits(started):
            pathlib.Path({str(tmp_path)!r}, "running").write_text("yes")
            time.sleep(120)
    """,
    )
    try:
        _wait_for_file(tmp_path / "running", proc)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "torn-down").exists(), out
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out


def test_a_child_dies_with_the_worker_that_started_it(tmp_path):
    proc = _inner_suite(
        tmp_path,
        f"""
        import pathlib, subprocess, sys, time
        from tests.support.interrupts import die_with_parent

        def test_starts_a_child():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                     start_new_session=True, preexec_fn=die_with_parent)
            pathlib.Path({str(tmp_path)!r}, "child").write_text(str(child.pid))
            time.sleep(120)
    """,
    )
    try:
        _wait_for_file(tmp_path / "child", proc)
        child = int((tmp_path / "child").read_text())
        proc.kill()  # SIGKILL: no teardown at all
        proc.wait()
        deadline = time.monotonic() + 60  # a hang guard
        while _alive(child):
            assert time.monotonic() < deadline, f"child {child} outlived its killed parent"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie (not yet reaped by init) is dead
    except FileNotFoundError:
        return False
