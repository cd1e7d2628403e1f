"""The integration marker comes from the folder (tests/support/folders.py): every test under
tests/integration has it and no other test does, and a test outside that folder that asks for
the session's real ZooKeeper fails before one starts -- so ``pytest -m "not integration"`` runs
no test that starts ZooKeeper or a bookied."""

from __future__ import annotations

import pytest

from tests.support.inner_suite import run_inner_suite


def test_not_integration_runs_no_test_that_starts_zookeeper_or_a_bookied(tmp_path):
    done = run_inner_suite(
        tmp_path,
        {
            # marked by their folder: left out, though they ask for ZooKeeper
            "tests/integration/test_real.py": "def test_real(zookeeper):\n    pass\n",
            "tests/integration/deeper/test_deeper.py": "def test_deeper(zk_namespace):\n    pass\n",
            "tests/unit/test_pure.py": """
            from tests.support.bookieproc import BookieProcess

            def test_unmarked(request):
                assert request.node.get_closest_marker("integration") is None

            def test_asks_through_another_fixture(zk_namespace):
                pass

            def test_asks_while_running(request):
                request.getfixturevalue("zookeeper")

            def test_starts_a_bookied(tmp_path):
                BookieProcess(tmp_path, "zk+hierarchical://127.0.0.1:1/ledgers").launch()
        """,
        },
        "-m",
        "not integration",
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "2 failed, 1 passed, 2 deselected, 1 error" in done.stdout, done.stdout
    assert "PASSED tests/unit/test_pure.py::test_unmarked" in done.stdout, done.stdout
    only_integration = "which only tests under tests/integration/ may start"
    assert f"test_asks_through_another_fixture asks for a real ZooKeeper, {only_integration}" in done.stdout
    assert f"test_starts_a_bookied asks for a bookied, {only_integration}" in done.stdout
    # the session fixture keeps its failure: a later test asking for it fails with the same message
    assert "FAILED tests/unit/test_pure.py::test_asks_while_running" in done.stdout
    assert done.stdout.count(only_integration) == 3, done.stdout
    assert not list(tmp_path.rglob("zookeeper*")), "a ZooKeeper was set up"
