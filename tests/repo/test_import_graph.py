"""The import graph the design fixes, read from the sources (ast, nothing imported):

* ``wire`` imports none of ``bkctl``'s other modules, ``bookied`` or ``shell``, at any level;
* ``bookied`` imports ``wire`` and nothing else of ``bkctl``;
* module-level imports have no cycle (the issue allowed command registration's;
  the command modules are imported lazily, so there is none);
* no part of the tree has an import cycle even counting imports inside functions and under
  ``TYPE_CHECKING`` (such an import still ties the modules together, and only hides the cycle
  from the import system): bkctl/export, wire/client, the rest of wire, bookied and the
  CLI, each reported on its own;
* ``bkctl.ops`` imports nothing of ``bkctl.export``.
"""

from __future__ import annotations

import functools

import pytest

from tests.repo.sources import MODULES, imports

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once


@functools.cache
def graph(top_level_only: bool) -> dict[str, frozenset[str]]:
    """Every module -> the project modules it imports (only at module level, or at any level)."""
    return {m: frozenset(imports(m, p, top_level_only)) for m, p in MODULES.items()}


def test_the_sources_are_found():
    assert {"bkctl.cli", "bkctl.wire.client.ledger_handle", "bkctl.bookied.server", "bkctl.shell.repl"} <= set(MODULES)


def test_wire_imports_nothing_of_the_programs_built_on_it():
    bad = {
        (m, i)
        for m, targets in graph(False).items()
        if m.startswith("bkctl.wire")
        for i in targets
        if not i.startswith("bkctl.wire")
    }
    assert not bad, sorted(bad)


def test_bookied_imports_only_wire_of_bkctl():
    bad = {
        (m, i)
        for m, targets in graph(False).items()
        if m.startswith("bkctl.bookied")
        for i in targets
        if not i.startswith(("bkctl.bookied", "bkctl.wire"))
    }
    assert not bad, sorted(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_module_level_imports_have_no_cycle():
    assert sum(map(len, graph(True).values())) > 300  # the graph was read
    cycles = _cycles(graph(True))
    assert not cycles, cycles


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: the parts of the tree a cycle is reported for, by package prefix (the first that matches)
AREAS = {
    "bkctl/export": "bkctl.export",
    "wire/client": "bkctl.wire.client",
    "the rest of wire": "bkctl.wire",
    "bookied": "bkctl.bookied",
    "the CLI (bkctl, shell)": "bkctl",
}
#: the parts checked: all of them now (issue 34 took the last cycles, the CLI's, apart)
CYCLE_FREE = list(AREAS)


def area_of(module: str) -> str:
    return next(area for area, prefix in AREAS.items() if module == prefix or module.startswith(prefix + "."))


@pytest.mark.parametrize("area", CYCLE_FREE)
def test_no_import_cycle_counting_lazy_and_type_checking_imports(area):
    assert sum(map(len, graph(False).values())) > sum(map(len, graph(True).values()))  # lazy imports were read
    cycles = [cycle for cycle in _cycles(graph(False)) if area in map(area_of, cycle)]
    assert not cycles, cycles


def test_ops_imports_nothing_of_export():
    """``export`` builds on ``ops`` (a topic's managed ledgers and cursors), never the other way."""
    bad = {
        (m, i)
        for m, imported in graph(False).items()
        if m.startswith("bkctl.ops")
        for i in imported
        if i.startswith("bkctl.export")
    }
    assert not bad, sorted(bad)


def test_ops_imports_nothing_of_render():
    """The operations return data and messages; rendering them (``bkctl.render``, built on the
    App) sits above them: sizes and counts in words are :mod:`bkctl.humanize`'s (issue 76)."""
    bad = {
        (m, i)
        for m, imported in graph(False).items()
        if m.startswith("bkctl.ops")
        for i in imported
        if i == "bkctl.render"
    }
    assert not bad, sorted(bad)
    assert graph(False)["bkctl.humanize"] == set()  # importing it costs nothing and closes no circle


def test_imports_inside_functions_and_under_type_checking_are_read(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from bkctl import exitcodes\n"
        "if TYPE_CHECKING:\n"
        "    from bkctl.app import App\n"
        "def later():\n"
        "    from bkctl.export import job\n"
        "    import bkctl.ops.pulsar\n"
    )
    assert imports("bkctl.probe", source, top_level_only=True) == {"bkctl.exitcodes"}
    assert imports("bkctl.probe", source, top_level_only=False) == {
        "bkctl.exitcodes",
        "bkctl.app",
        "bkctl.export.job",
        "bkctl.ops.pulsar",
    }


def test_the_client_has_no_cycle_even_counting_lazy_imports():
    """wire.client is composed, not split: its modules import each other one way
    only, counting imports inside functions and under TYPE_CHECKING."""
    client = {
        m: {i for i in targets if i.startswith("bkctl.wire.client")}
        for m, targets in graph(False).items()
        if m.startswith("bkctl.wire.client")
    }
    assert len(client) > 20 and sum(map(len, client.values())) > 40  # the graph was read
    assert _cycles(client) == []
