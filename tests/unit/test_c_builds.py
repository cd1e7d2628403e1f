"""tools/c_builds.py: a C build that is not its sources' is named (``./dev setup`` rebuilds on it,
``./dev test`` and ``./dev lint`` stop on it), and the fast paths switched off keep it quiet."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest

from bkctl.wire import fastpath
from tests.support import c_twins, tools

ROOT = Path(__file__).resolve().parents[2]
PLAIN = "bkctl.wire.codecs._plain"


c_builds = tools.c_builds()


def _tree(tmp_path: Path, age: float) -> Path:
    """A copy of setup.py and of the files it builds from, each ``age`` seconds old (negative:
    in the future), beside this tree's builds."""
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    when = os.path.getmtime(importlib.util.find_spec(PLAIN).origin) - age
    for ext in c_builds.extensions(tmp_path / "setup.py"):
        for name in ext.files:
            copy = tmp_path / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes((ROOT / name).read_bytes())
            os.utime(copy, (when, when))
    return tmp_path


@pytest.fixture
def built():
    if not c_twins.expected() or c_twins.fast_paths_off():
        pytest.skip("no C twin is built (or used) here")


def test_setup_py_is_read_whole():
    found = {ext.module: ext.files for ext in c_builds.extensions()}
    assert set(found) == set(fastpath.C_EXTENSIONS)
    assert "wire/codecs/_plain_runs.c" in found[PLAIN] and "wire/codecs/_twins.h" in found[PLAIN]  # depends too
    plain = next(ext for ext in c_builds.extensions() if ext.module == PLAIN)
    assert plain.sources == ("wire/codecs/_plain.c", "wire/codecs/_plain_runs.c")  # the depends are not sources


def test_builds_newer_than_their_sources_are_current(built, tmp_path):
    assert c_builds.stale(_tree(tmp_path, 60)) == []


def test_a_build_older_than_a_file_it_is_built_from_is_named(built, tmp_path):
    root = _tree(tmp_path, 60)
    later = os.path.getmtime(root / "wire/codecs/_plain_runs.c") + 120
    os.utime(root / "wire/codecs/_plain_runs.c", (later, later))
    assert c_builds.stale(root) == ["_plain (older than wire/codecs/_plain_runs.c)"]


def test_a_build_whose_api_is_not_the_sources_is_named(built, tmp_path, monkeypatch):
    monkeypatch.setitem(fastpath.C_EXTENSIONS, PLAIN, fastpath.PLAIN_API + 1)
    assert c_builds.stale(_tree(tmp_path, 60)) == ["_plain (its API is not the sources': its Python twin runs)"]


def test_the_line_names_what_rebuilds_and_the_status_says_so(built, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(c_builds, "ROOT", _tree(tmp_path, -60))  # every source newer than its build
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))
    assert c_builds.main([]) == 1
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "_plain (older than" in line and line.endswith("./dev setup rebuilds them\n")
    assert c_builds.main(["--quiet"]) == 1 and capsys.readouterr().out == ""


def test_switched_off_it_says_nothing_but_quiet_still_tells(built, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(c_builds, "ROOT", _tree(tmp_path, -60))
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.GENERAL)  # BKCTL_FASTPATHS=0
    assert c_builds.main([]) == 0 and capsys.readouterr().out == ""
    assert c_builds.main(["--quiet"]) == 1  # (./dev setup rebuilds whatever the switch)


def test_dev_rebuilds_on_it_and_its_test_and_lint_stop_on_it():
    dev = (ROOT / "dev").read_text()
    assert re.search(r'tools/c_builds.py --quiet \|\| builds=\$\?\n.*\n.*\[ "\$builds" = 1 \]', dev)
    for command in ("test", "lint"):
        assert re.search(rf"\n    {command}\)\n        setup\n        c_builds_current\n", dev), command
