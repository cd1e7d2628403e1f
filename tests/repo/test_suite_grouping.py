"""The suite relies on ``--dist loadgroup`` keeping each ``xdist_group`` on one worker
(modules with a module-scoped cluster or Spark session, see ``./dev``).  A pytest and
pytest-xdist pair that stops grouping runs everything anyway, only with one cluster and
one Spark JVM per worker: this runs a small suite the way ``./dev test`` runs ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap


def test_loadgroup_keeps_a_group_on_one_worker(tmp_path):
    grouped = textwrap.dedent("""
        import pytest
        pytestmark = [pytest.mark.xdist_group("together")]

        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            pass
    """)
    (tmp_path / "test_grouped.py").write_text(grouped)
    (tmp_path / "test_loose.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(6))\ndef test_loose(i):\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BKCTL_"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "-v",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {m.group(1) for m in re.finditer(r"\[(gw\d+)\] .*PASSED .*test_grouped", done.stdout)}
    assert len(re.findall(r"PASSED .*test_grouped", done.stdout)) == 6, done.stdout
    assert len(workers) == 1, f"one group ran on {sorted(workers)}:\n{done.stdout}"


def test_the_longest_groups_are_handed_out_first(tmp_path):
    """tests/support/scheduling.py: groups first (the longest named ones in their order), then the
    other integration tests, then the rest, each module's tests in their own order."""
    from tests.support.inner_suite import run_inner_suite

    group = 'import pytest\npytestmark = pytest.mark.xdist_group("{}")\n\ndef test_{}_1():\n    pass\n\ndef test_{}_2():\n    pass\n'
    done = run_inner_suite(
        tmp_path,
        {
            "tests/integration/test_a_loose.py": "def test_loose():\n    pass\n",
            "tests/integration/test_b_grouped.py": group.format("zk_security-auth", "b", "b"),
            "tests/integration/test_c_grouped.py": group.format("packaging", "c", "c"),
            "tests/integration/test_d_grouped.py": group.format("unlisted", "d", "d"),
            "tests/unit/test_e.py": "def test_unit():\n    pass\n",
        },
        "--collect-only",
        "-q",
    )
    order = [line.split("::")[1] for line in done.stdout.splitlines() if "::" in line]
    assert order == [
        "test_c_1",
        "test_c_2",
        "test_b_1",
        "test_b_2",
        "test_d_1",
        "test_d_2",
        "test_loose",
        "test_unit",
    ], done.stdout + done.stderr


def test_the_workers_are_handed_the_units_in_that_order(tmp_path):
    """xdist sorts the units again by their number of tests unless told not to: a listed group of
    one test still goes before an unlisted group of three, and that before a loose test.  One
    worker runs its units in the order it is handed them."""
    from tests.support.inner_suite import run_inner_suite

    three = 'import pytest\npytestmark = pytest.mark.xdist_group("unlisted")\n\n@pytest.mark.parametrize("i", range(3))\ndef test_many(i):\n    pass\n'
    done = run_inner_suite(
        tmp_path,
        {
            "tests/integration/test_a_loose.py": "def test_loose():\n    pass\n",
            "tests/integration/test_b_many.py": three,
            "tests/integration/test_c_one.py": 'import pytest\npytestmark = pytest.mark.xdist_group("pulsar-schema")\n\ndef test_one():\n    pass\n',
        },
        "-n",
        "1",
        "--dist",
        "loadgroup",
        "-v",
    )
    ran = re.findall(r"\[gw0\] .*PASSED .*::(test_\w+)", done.stdout)
    assert ran == ["test_one", "test_many", "test_many", "test_many", "test_loose"], done.stdout + done.stderr
