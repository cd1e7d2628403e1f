"""A small suite of its own, run in a fresh pytest with this suite's conftest (its fixtures and
plugins): how the repository's checks of the suite (tests/repo/test_suite_*.py) see what a test
run does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_inner_suite(
    tmp_path: Path, files: dict[str, str], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """pytest on ``files`` (relative paths: source) below ``tmp_path``, its temporary
    directories in ``tmp_path/basetemp``; the environment without this run's ``PYTEST_*`` and
    ``BKCTL_*`` variables, plus ``env``."""
    for rel, body in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(body))
    # nor CI/BUILD_NUMBER: with them pytest prints the short summary untruncated, and each
    # message the checks count would appear twice
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "BKCTL_")) and k not in ("CI", "BUILD_NUMBER")
    }
    full["PYTHONPATH"] = str(ROOT)
    full.update(env or {})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "-rA",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            "--basetemp",
            str(tmp_path / "basetemp"),
            *args,
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
