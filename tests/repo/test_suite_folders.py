"""The integration marker comes from the folder (tests/support/folders.py): every test under
tests/integration has it and no other test does, and a test outside that folder that asks for
the session's real ZooKeeper fails before one starts -- so ``pytest -m "not integration"`` runs
no test that starts ZooKeeper or a bookied."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _inner_suite(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """pytest on ``files`` (relative paths), with this suite's conftest (fixtures and plugins)."""
    for rel, body in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BKCTL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           "-rA", "-W", "ignore::pytest.PytestUnknownMarkWarning", "-c", os.devnull,
                           "--rootdir", str(tmp_path), *args, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


MARKED = '''
    def test_{name}(request):
        assert (request.node.get_closest_marker("integration") is not None) is {marked}
'''


def test_the_folder_marks_integration_tests_and_only_them(tmp_path):
    done = _inner_suite(tmp_path, {
        "tests/integration/test_real.py": MARKED.format(name="real", marked=True),
        "tests/integration/deeper/test_deeper.py": MARKED.format(name="deeper", marked=True),
        "tests/unit/test_pure.py": MARKED.format(name="pure", marked=False),
    })
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 3, done.stdout


def test_a_test_outside_the_integration_folder_cannot_start_zookeeper(tmp_path):
    done = _inner_suite(tmp_path, {
        "tests/unit/test_pure.py": '''
            def test_asks_through_another_fixture(zk_namespace):
                pass

            def test_asks_while_running(request):
                request.getfixturevalue("zookeeper")
        ''',
    })
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 failed, 1 error" in done.stdout, done.stdout
    assert "tests/unit/test_pure.py::test_asks_through_another_fixture asks for a real ZooKeeper, " \
           "which only tests under tests/integration/ may start" in done.stdout, done.stdout
    assert not list(tmp_path.rglob("zookeeper*")), "a ZooKeeper was set up"


def test_a_test_outside_the_integration_folder_cannot_start_a_bookied(tmp_path):
    done = _inner_suite(tmp_path, {
        "tests/unit/test_pure.py": '''
            from tests.support.bookieproc import BookieProcess

            def test_starts_a_bookied(tmp_path):
                BookieProcess(tmp_path, "zk+hierarchical://127.0.0.1:1/ledgers").launch()
        ''',
    })
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "tests/unit/test_pure.py::test_starts_a_bookied asks for a bookied, " \
           "which only tests under tests/integration/ may start" in done.stdout, done.stdout


def test_not_integration_leaves_out_the_integration_folder(tmp_path):
    done = _inner_suite(tmp_path, {
        "tests/integration/test_real.py": "def test_real(zookeeper):\n    pass\n",
        "tests/unit/test_pure.py": "def test_pure():\n    pass\n",
    }, "-m", "not integration")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 deselected" in done.stdout, done.stdout
