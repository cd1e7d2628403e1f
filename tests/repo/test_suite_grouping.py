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
    grouped = textwrap.dedent('''
        import pytest
        pytestmark = [pytest.mark.xdist_group("together")]

        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            pass
    ''')
    (tmp_path / "test_grouped.py").write_text(grouped)
    (tmp_path / "test_loose.py").write_text("import pytest\n\n@pytest.mark.parametrize('i', range(6))\n"
                                            "def test_loose(i):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BKCTL_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3",
                           "--dist", "loadgroup", "-v", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {m.group(1) for m in re.finditer(r"\[(gw\d+)\] .*PASSED .*test_grouped", done.stdout)}
    assert len(re.findall(r"PASSED .*test_grouped", done.stdout)) == 6, done.stdout
    assert len(workers) == 1, f"one group ran on {sorted(workers)}:\n{done.stdout}"
