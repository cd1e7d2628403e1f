"""``./dev test`` runs part of the suite once more with every fast path off (``BKCTL_FASTPATHS=0``),
the tests listed in tests/support/fastpaths_off.txt, so that a fast path and the general path it
shortcuts cannot drift apart.  Its unit part is exactly the unit modules that reach, by their
imports, a module that consults the twin selector (:mod:`bkctl.wire.fastpath`): a new fast path or a new
unit module cannot be left out, and one that reaches none does not run twice for nothing.

"Reach" is read from the sources (ast, nothing imported): imports at any level, since the project
imports lazily inside functions, but not those under ``if TYPE_CHECKING:``, which never run; a
module's packages count (their ``__init__`` runs first).  What a test's subprocesses run is not
followed: unit tests start no bookied (tests/support/folders.py), and the CLI processes they start
reach no bookie.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque

import pytest

from tests.repo.sources import MODULES, ROOT, imports, nodes, suite_modules, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

LIST = ROOT / "tests" / "support" / "fastpaths_off.txt"
SWITCH = "bkctl.wire.fastpath"
#: the product's modules and the suite's
KNOWN = {**MODULES, **suite_modules()}


def listed() -> list[str]:
    """The list's entries (paths and node ids), comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in LIST.read_text().splitlines())
    return [line for line in lines if line]


def _packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in KNOWN]


@functools.cache
def runtime_imports() -> dict[str, frozenset[str]]:
    """Every module -> the modules importing it runs: those it imports (at any level, but not for
    type checkers) and their packages, and its own packages."""
    out = {}
    for module, path in KNOWN.items():
        found = imports(module, path, top_level_only=False, known=KNOWN, type_checking=False)
        found |= {package for name in found | {module} for package in _packages(name)}
        found.discard(module)
        out[module] = frozenset(found)
    return out


#: what takes a record of the selector: the process's (``selected``) or one for on or off (``build``)
_CONSULTING = {"selected", "build"}


def consults(module: str) -> bool:
    """Whether ``module`` imports the selector and takes a record of it (``selected()``,
    ``build()``, or replaces one of them)."""
    if SWITCH not in runtime_imports()[module]:
        return False
    for node in nodes(tree(KNOWN[module])):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _CONSULTING
            or isinstance(node, ast.alias)
            and node.name in _CONSULTING
            or isinstance(node, ast.Constant)
            and node.value in _CONSULTING
        ):
            return True
    return False


@functools.cache
def reaching() -> frozenset[str]:
    """Every module whose imports reach one that consults the switch (those included)."""
    importers: dict[str, set[str]] = {}
    for module, targets in runtime_imports().items():
        for target in targets:
            importers.setdefault(target, set()).add(module)
    found = {m for m in KNOWN if consults(m)}
    todo = deque(found)
    while todo:
        for importer in importers.get(todo.popleft(), ()):
            if importer not in found:
                found.add(importer)
                todo.append(importer)
    return frozenset(found)


def _path(module: str) -> str:
    return KNOWN[module].relative_to(ROOT).as_posix()


def test_the_switch_is_found_where_it_is_consulted():
    consulting = {m for m in KNOWN if consults(m)}
    assert {
        "bkctl.wire.client.bookkeeper",
        "bkctl.export.executor",
        "bkctl.bookied.main",
        "bkctl.cli",
        "tests.unit.test_journal_inline",
    } <= consulting
    # imports the selector for the record's type only: takes the record it is given
    assert "bkctl.bookied.journal" not in consulting and SWITCH in runtime_imports()["bkctl.bookied.journal"]


def test_the_unit_modules_run_with_fast_paths_off_are_those_that_reach_the_switch():
    unit = {_path(m) for m in KNOWN if m.startswith("tests.unit.test_")}
    expected = {_path(m) for m in reaching() if m.startswith("tests.unit.test_")}
    assert 0 < len(expected) < len(unit)
    entries = [e for e in listed() if e.startswith("tests/unit")]
    assert len(entries) == len(set(entries)), "an entry twice"
    assert "tests/unit" not in entries and not [e for e in entries if "::" in e], "whole modules only"
    assert not set(entries) - expected, f"reach no fast path, drop from {LIST.name}: {sorted(set(entries) - expected)}"
    assert not expected - set(entries), f"reach a fast path, add to {LIST.name}: {sorted(expected - set(entries))}"


def test_the_suites_own_plugins_reach_no_fast_path():
    """What every unit test loads besides its module (the conftest at module level and its plugins)
    reaches no fast path, or every unit module would have to run twice."""
    conftest = imports("tests.conftest", KNOWN["tests.conftest"], top_level_only=True, known=KNOWN)
    plugins = set(re.findall(r'"(tests\.support\.\w+)"', KNOWN["tests.conftest"].read_text()))
    assert {"tests.support.interrupts", "tests.support.folders"} <= plugins
    assert not (conftest | plugins) & reaching()


def test_the_other_entries_name_integration_tests_that_exist():
    others = [e for e in listed() if not e.startswith("tests/unit")]
    assert others and all(e.startswith("tests/integration/") for e in others), others
    for entry in others:
        path, _, name = entry.partition("::")
        name = name.split("[", 1)[0]  # a parametrized test's one case: test_x[zk]
        assert (ROOT / path).is_file(), entry
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), entry


def test_dev_runs_the_list_with_fast_paths_off():
    dev = (ROOT / "dev").read_text()
    assert str(LIST.relative_to(ROOT)) in dev
    off_run = next(line for line in dev.splitlines() if "BKCTL_FASTPATHS=0" in line and "pytest" in line)
    assert off_run.rstrip().endswith("\\")  # the suites follow on the next line
    assert '"${FASTPATHS_OFF_SUITES[@]}"' in dev.split(off_run, 1)[1].splitlines()[1]


def test_reach_follows_lazy_imports_and_packages_but_not_type_checking(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from bkctl.wire.client import connection\n"
        "def later():\n"
        "    from bkctl.bookied import journal\n"
    )
    found = imports("tests.unit.probe", probe, top_level_only=False, known=KNOWN, type_checking=False)
    assert found == {"bkctl.bookied.journal"}
    assert "bkctl.wire.metadata.zk" in runtime_imports()["bkctl.wire.metadata.zk.ledgers"]
