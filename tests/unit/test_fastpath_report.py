"""What ``bkctl --version``, ``bookied --version`` and the benches say of the C twins
(:func:`bkctl.wire.fastpath.c_twins_report`): a build older than its sources is not used, and
this report is the one place that says so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bkctl import __version__
from bkctl.wire import fastpath
from bkctl.wire.fastpath import CTwinState
from tests.support import c_twins

FASTCODEC = "bkctl.wire.codecs._fastcodec"


def states(report: list[fastpath.CTwin]) -> dict[str, CTwinState]:
    return {t.module: t.state for t in report}


def test_switched_off_names_the_switch_and_imports_nothing(monkeypatch):
    monkeypatch.setattr(fastpath, "C_EXTENSIONS", {"bkctl.no.such._module": 1, FASTCODEC: -1})
    report = fastpath.c_twins_report(False)
    assert set(states(report).values()) == {CTwinState.SWITCHED_OFF}
    assert fastpath.report_line(report) == "C twins: none in use (switched off: BKCTL_FASTPATHS=0)"


def test_a_build_older_than_its_sources_is_reported_stale_and_how_to_rebuild(monkeypatch):
    if not c_twins.expected():
        pytest.skip("no C twin is built on this interpreter")  # not CPython: nothing to report stale
    monkeypatch.setattr(fastpath, "C_EXTENSIONS", {FASTCODEC: fastpath.FASTCODEC_API + 1})
    report = fastpath.c_twins_report(True)
    assert states(report) == {FASTCODEC: CTwinState.STALE}
    assert fastpath.report_line(report) == (
        "C twins: 0 of 1 in use; _fastcodec older than its sources (rebuild: ./dev setup, or reinstall)"
    )


def test_a_module_not_built_is_named_without_a_rebuild_hint(monkeypatch):
    monkeypatch.setattr(fastpath, "C_EXTENSIONS", {"bkctl.wire.codecs._not_there": 1, FASTCODEC: None})
    report = fastpath.c_twins_report(True)
    want = CTwinState.IN_USE if c_twins.expected() else CTwinState.NOT_BUILT
    assert states(report) == {"bkctl.wire.codecs._not_there": CTwinState.NOT_BUILT, FASTCODEC: want}
    line = fastpath.report_line(report)
    assert "_not_there not built" in line and "rebuild" not in line


def test_this_build_reports_every_c_twin_it_uses_in_use():
    """The tree under test was built by ./dev setup: every extension current (test_c_twins.py
    holds the same from the Twins record's side)."""
    if not c_twins.expected():
        pytest.skip("no C twin is built on this interpreter")
    report = fastpath.c_twins_report(True)
    in_use = [t.module for t in report if t.state is CTwinState.IN_USE]
    assert len(in_use) == len(c_twins.expected()) == len(report)
    assert fastpath.report_line(report) == f"C twins: {len(report)} of {len(report)} in use"


@pytest.mark.parametrize("switch", ["1", "0"])
def test_bkctl_version_prints_the_report_for_its_switch(switch):
    env = dict(os.environ, BKCTL_FASTPATHS=switch)
    done = subprocess.run(
        [sys.executable, "-m", "bkctl", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    version, twins = done.stdout.splitlines()
    assert version == f"bkctl, version {__version__}"
    assert twins == fastpath.report_line(fastpath.c_twins_report(switch == "1"))


def test_bkctl_version_with_a_bad_switch_says_why_and_still_exits_0():
    env = dict(os.environ, BKCTL_FASTPATHS="maybe")
    done = subprocess.run(
        [sys.executable, "-m", "bkctl", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0
    assert done.stdout.splitlines()[1].startswith("C twins: BKCTL_FASTPATHS: 'maybe' is not a boolean")
