"""``./dev lint`` is wired in and its configuration names what exists (issue 53): ``./dev test`` and so CI
run it; ``ruff format --check`` holds the whole tree; every module the mypy overrides name (strict, not
yet strict, not yet checked) is one of the product's, and the not-yet lists name each module once."""

from __future__ import annotations

import fnmatch
import tomllib

from tests.repo.sources import MODULES, ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: the protobuf modules tools/genproto.py writes: not product sources (tests.repo.sources leaves them
#: out), but mypy reads their stubs, and an override may name them
GENERATED = {f"bkctl.wire.proto.{path.stem}" for path in (ROOT / "wire" / "proto").glob("*_pb2.py")}


def test_dev_test_and_ci_run_the_lint():
    dev = (ROOT / "dev").read_text()
    test_branch = dev.split("\n    test)\n", 1)[1].split(";;", 1)[0]
    assert "test_all" in test_branch
    # test_all runs the lint beside the runs, and its exit status fails the whole command
    test_all = dev.split("\ntest_all() {\n", 1)[1].split("\n}\n", 1)[0]
    assert 'lint >"$lint_log" 2>&1 &' in test_all and 'wait "$lint_pid" || lint_rc=$?' in test_all
    assert test_all.rstrip().endswith('&& [ "$lint_rc" = 0 ]')
    assert "exec ./dev test" in (ROOT / ".ci" / "run").read_text()
    extra = " ".join(PYPROJECT["project"]["optional-dependencies"]["test"])
    assert "ruff>=" in extra and "mypy>=" in extra


def test_the_format_check_covers_the_whole_tree():
    dev = (ROOT / "dev").read_text()
    assert 'ruff" format --check --quiet . ' in dev and "tool.bkctl" not in PYPROJECT.get("tool", {})


def test_the_mypy_overrides_name_product_modules():
    overrides = PYPROJECT["tool"]["mypy"]["overrides"]
    assert any(o.get("disallow_untyped_defs") is True for o in overrides)  # the strict packages
    for override in overrides:
        patterns = override["module"]
        if all(p.startswith("bkctl") for p in patterns):
            known = set(MODULES) | GENERATED
            for pattern in patterns:
                assert fnmatch.filter(known, pattern) or fnmatch.filter(known, pattern[:-2]), pattern
            if "*" not in "".join(patterns):
                assert len(patterns) == len(set(patterns))
