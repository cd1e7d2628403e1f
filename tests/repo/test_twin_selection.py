"""The twins are chosen in one place (issue 67), read from the sources with ast, nothing imported.

The twin selector (:mod:`bkctl.wire.fastpath`, :data:`SELECTOR`) loads the C extensions and
records which implementation of each fast path the process uses; components receive the record
(``twins=``) and use what it holds.  Outside the selector, no module

* imports a C extension (or names one, for ``importlib``): :func:`c_imports`;
* asks for the process's record (``fastpath.selected()``) except the entry points that read the
  switch at start (:data:`ENTRY_POINTS`), or builds a record of its own (``fastpath.build``):
  :func:`selections`;
* branches on which twin it holds (a field of the record compared with None, or looked into with
  ``getattr``), or falls back by itself when a C twin answers None (a value of a call of a
  ``c_*``/``_c_*`` binding compared with None, or such a binding compared with None):
  :func:`choices`.

The sites that still do are listed in :data:`REMAINING`, each to be moved behind a whole
interface; the list only shrinks: a new site fails the test, and so does a listed one that is
gone (take it off the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.repo.sources import MODULES, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: the one module that chooses
SELECTOR = "bkctl.wire.fastpath"
#: the C extensions (setup.py; tests/repo/test_c_stubs.py holds the list)
C_EXTENSIONS = {
    "bkctl.wire.codecs._fastcodec",
    "bkctl.wire.codecs._records",
    "bkctl.wire.codecs._plain",
    "bkctl.wire.pulsar._packed",
    "bkctl.wire.pulsar._avrocols",
    "bkctl.wire.metadata._ledgerpb",
    "bkctl.wire.client._addpath",
    "bkctl.wire.client._addentries",
}
#: the commands' and the daemon's start, which read the switch once (``fastpath.check``); the
#: daemon's start hands the record to the service it builds, which hands it to every component.
#: The daemon's two child processes (``python -m``: its autorecovery and its listing of the
#: ledger metadata for the garbage collector) start there too, in the daemon's environment:
#: each takes its own process's record at its start and hands it to the store and client it builds
ENTRY_POINTS = {"bkctl.cli", "bkctl.bookied.main", "bkctl.bookied.autorecovery", "bkctl.bookied.gc_listing"}
#: the composition points of a process: the client takes the process's record by default and
#: hands it to its pool, connections, handles and the work given its client; an export's ledger
#: reader (on the driver or an executor) takes it and hands it to the decoding of what it reads
COMPOSITION_POINTS = {"bkctl.wire.client.bookkeeper", "bkctl.export.executor"}
#: the fields of :class:`~bkctl.wire.fastpath.Twins` that hold a C twin or its Python one (or None)
TWIN_FIELDS = {
    "codec",
    "codec_given",
    "records",
    "adds",
    "entries",
    "adds_given",
    "ledger_metadata",
    "avro_columns",
    "batch_rows",
}

#: module -> the sites that still choose a twin themselves or take the process's record as their
#: default (issue 67: each goes behind an interface the C and the Python module implement whole)
REMAINING: dict[str, set[str]] = {}


#: the names a binding of a C twin goes by (besides ``c_*``/``_c_*``)
C_NAMES = {"_c", "codec", "_codec"}


def _c_prefixed(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in C_NAMES or name.startswith(("c_", "_c_"))


def _twin_field(node: ast.expr) -> bool:
    """``twins.codec``, ``self.twins.adds``...: a field of a twins record."""
    return isinstance(node, ast.Attribute) and node.attr in TWIN_FIELDS and "twins" in ast.unparse(node.value)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def c_imports(module: str, path: Path) -> list[str]:
    """``line: what`` for each import of a C extension, and each string naming one."""
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in C_EXTENSIONS]
        elif isinstance(node, ast.ImportFrom):
            from tests.repo.sources import _resolve

            base = _resolve(module, path, node)
            for a in node.names:
                if base in C_EXTENSIONS or f"{base}.{a.name}" in C_EXTENSIONS:
                    found.append(f"{node.lineno}: from {base} import {a.name}")
        elif isinstance(node, ast.Constant) and node.value in C_EXTENSIONS:
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def selections(path: Path) -> list[str]:
    """``what`` for each ``fastpath.selected()``/``fastpath.build(...)`` (or the names imported)."""
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                f"{ast.unparse(func.value)}.{func.attr}"
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in ("fastpath.selected", "fastpath.build", "selected", "build") and (
                "fastpath" in name or _imported_from_fastpath(path, name)
            ):
                found.append(f"{name}()")
    return found


def _imported_from_fastpath(path: Path, name: str) -> bool:
    return any(
        isinstance(n, ast.ImportFrom) and (n.module or "").endswith("fastpath") and any(a.name == name for a in n.names)
        for n in ast.walk(tree(path))
    )


def choices(path: Path) -> list[str]:
    """``what`` for each place that branches on a twin or falls back from a C twin's None."""
    found = []
    for fn in ast.walk(tree(path)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        # names bound to what a c_* binding returned, and names bound to a field of a twins record
        from_c, twin_names = set(), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _c_prefixed(node.value.func):
                from_c |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                pairs = (
                    zip(target.elts, value.elts)
                    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                    else [(target, value)]
                )
                twin_names |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _twin_field(v)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
                left, right = node.left, node.comparators[0]
                if not _is_none(right):
                    continue
                if (
                    _twin_field(left)
                    or _c_prefixed(left)
                    or (isinstance(left, ast.Name) and left.id in from_c | twin_names)
                ):
                    found.append(ast.unparse(node))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and node.args
                and (
                    _twin_field(node.args[0])
                    or _c_prefixed(node.args[0])
                    or (isinstance(node.args[0], ast.Name) and node.args[0].id in twin_names)
                )
            ):
                found.append(ast.unparse(node))
    return sorted(set(found))


def sites(module: str, path: Path) -> set[str]:
    """Every site of ``module`` that chooses a twin itself."""
    out = set(choices(path))
    if module not in ENTRY_POINTS | COMPOSITION_POINTS:
        out |= set(selections(path))
    return out


def test_only_the_selector_loads_the_c_extensions():
    assert c_imports(SELECTOR, MODULES[SELECTOR])  # the check sees the selector's own
    bad = [f"{m}:{line}" for m, path in MODULES.items() if m != SELECTOR for line in c_imports(m, path)]
    assert not bad, "the twin selector (bkctl.wire.fastpath) loads the C extensions:\n" + "\n".join(bad)


def test_no_component_chooses_a_twin_itself():
    new, seen = [], {m: set() for m in REMAINING}
    for module, path in MODULES.items():
        if module == SELECTOR:
            continue
        for site in sites(module, path):
            if site in REMAINING.get(module, ()):
                seen[module].add(site)
            else:
                new.append(f"{module}: {site}")
    assert not new, (
        "take the twin the record holds, whole (a C twin falls back to its Python twin itself), and the "
        "record from the constructor (twins=):\n" + "\n".join(sorted(new))
    )
    gone = {m: REMAINING[m] - seen[m] for m in REMAINING if REMAINING[m] - seen[m]}
    assert not gone, f"no longer there: take them off REMAINING: {gone}"


def test_the_checks_see_what_they_look_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "from bkctl.wire import fastpath\n"
        "from bkctl.wire.codecs import _plain\n"
        "def f(twins, x):\n"
        "    r = (fastpath.selected() if twins is None else twins).records\n"
        "    span = getattr(r, 'span_records', None)\n"
        "    c = importlib.import_module('bkctl.wire.client._addpath')\n"
        "    if twins.codec is None:\n"
        "        return getattr(twins.records, 'span_records', None)\n"
        "    body = self.c_package(x)\n"
        "    if body is None:\n"
        "        body = slow(x)\n"
        "    return fastpath.selected(), fastpath.build(True), x is None\n"
    )
    assert c_imports("bkctl.probe", probe) == [
        "3: from bkctl.wire.codecs import _plain",
        "7: 'bkctl.wire.client._addpath'",
    ]
    assert sorted(selections(probe)) == ["fastpath.build()", "fastpath.selected()", "fastpath.selected()"]
    assert choices(probe) == [
        "body is None",
        "getattr(r, 'span_records', None)",
        "getattr(twins.records, 'span_records', None)",
        "twins.codec is None",
    ]
