"""One Spark session per test process (tests/support/spark.py): a session is a JVM, some 20
CPU-seconds to start and to run its first job, and the suite's modules that read through Spark
each started and stopped one of their own.  Now an integration test or fixture gets the process's
(``worker_spark``); one that starts a session itself (an environment its JVM must inherit) stops
the process's first, or it would be handed that one (``spark_session`` returns a running session)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo.sources import ROOT, nodes, tree

#: what starts a session, or returns the running one
STARTERS = {"local_spark", "spark_session"}


def _called(fn: ast.AST) -> list[ast.Call]:
    return [n for n in nodes(fn) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def starts_its_own(path: Path) -> list[str]:
    """The functions of ``path`` that start a session without stopping the process's first."""
    bad = []
    for fn in nodes(tree(path)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = _called(fn)
        starts = [c for c in calls if _name(c) in STARTERS]
        if not starts:
            continue
        stops = [c for c in calls if ast.unparse(c) == "worker_spark.stop()"]
        if not stops or min(c.lineno for c in stops) > min(c.lineno for c in starts):
            bad.append(f"{path.name}:{fn.lineno} {fn.name}")
    return bad


def test_integration_tests_take_the_process_spark_session():
    integration = sorted((ROOT / "tests" / "integration").glob("test_*.py"))
    bad = [site for path in integration for site in starts_its_own(path)]
    assert not bad, "take the process's session (the worker_spark fixture), or stop it first:\n" + "\n".join(bad)
    fixtures = [
        fn for path in integration for fn in nodes(tree(path)) if isinstance(fn, ast.FunctionDef) and fn.name == "spark"
    ]
    assert fixtures and all("worker_spark" in [a.arg for a in fn.args.args] for fn in fixtures)


def test_the_check_sees_a_session_of_its_own(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def spark(cluster):\n"
        "    yield from local_spark()\n"
        "def test_own(worker_spark):\n"
        "    worker_spark.stop()\n"
        "    for s in local_spark():\n"
        "        pass\n"
        "def test_late(worker_spark):\n"
        "    s, _ = spark_session('local[1]')\n"
        "    worker_spark.stop()\n"
    )
    assert [site.split(" ")[1] for site in starts_its_own(probe)] == ["spark", "test_late"]
