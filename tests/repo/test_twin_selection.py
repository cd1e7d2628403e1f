"""The twins are chosen in one place (issue 67), read from the sources with ast, nothing imported.

The twin selector (:mod:`bkctl.wire.fastpath`, :data:`SELECTOR`) loads the C extensions and
records which implementation of each fast path the process uses; components receive the record
(``twins=``) and use what it holds.  Outside the selector, no module

* imports a C extension (or names one, for ``importlib``): :func:`c_imports`;
* asks for the process's record (``fastpath.selected()``) except the entry points that read the
  switch at start (:data:`ENTRY_POINTS`), or builds a record of its own (``fastpath.build``):
  :func:`selections`;
* branches on which twin it holds (a field of the record compared with None, or looked into with
  ``getattr``, or a name bound to one -- a parameter a call in the module hands one included), or
  falls back by itself when a C twin answers None (a value of a call of a ``c_*``/``_c_*``
  binding, or of a call given a twin or made of one, compared with None, or such a binding
  compared with None): :func:`choices`.  A twin handed to another module's function is not
  followed there.

The sites that still do are listed in :data:`REMAINING`, each to be moved behind a whole
interface; the list only shrinks: a new site fails the test, and so does a listed one that is
gone (take it off the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.repo.sources import MODULES, nodes, tree

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
    for node in nodes(tree(path)):
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
    for node in nodes(tree(path)):
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
        for n in nodes(tree(path))
    )


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    a = fn.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def _holds_twin(node: ast.expr, names: set[str]) -> bool:
    """A field of a twins record, or one of ``names`` (bound to one)."""
    return _twin_field(node) or (isinstance(node, ast.Name) and node.id in names)


def _twin_params(module_tree: ast.AST, twin_names: dict[ast.AST, set[str]]) -> dict[ast.AST, set[str]]:
    """The parameters of this module's functions that a call in the module hands a twin: a field
    of a twins record, or a name bound to one (``_typed(rows, twins.avro_columns)``, then
    ``_typed(..., avrocols)`` compared with None); by the callee's name, methods through ``self``."""
    by_name: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in nodes(module_tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            by_name.setdefault(node.name, []).append(node)
    out: dict[ast.AST, set[str]] = {}
    for caller, names in twin_names.items():
        for call in nodes(caller):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if isinstance(func, ast.Name):
                callees, skip = by_name.get(func.id, []), 0
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                callees, skip = by_name.get(func.attr, []), 1
            else:
                continue
            for callee in callees:
                params = _params(callee)
                given = {
                    params[i + skip]
                    for i, arg in enumerate(call.args)
                    if _holds_twin(arg, names) and i + skip < len(params)
                }
                given |= {k.arg for k in call.keywords if k.arg in params and _holds_twin(k.value, names)}
                if given:
                    out.setdefault(callee, set()).update(given)
    return out


def _bound(node: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """``(target, value)`` of an assignment, tuples taken apart where both sides are tuples."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return []
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        return list(zip(target.elts, value.elts))
    return [(target, value)]


def _names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for t in target.elts for n in _names(t)}
    return set()


def choices(path: Path) -> list[str]:
    """``what`` for each place that branches on a twin or falls back from a C twin's None: a twin
    (a field of a twins record, a ``c_*`` binding, or a name bound to either, a parameter given one
    included) compared with None or looked into with ``getattr``, or what a call of a ``c_*``
    binding or a call given a twin returned compared with None."""
    found = []
    module_tree = tree(path)
    functions = [fn for fn in nodes(module_tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    # names bound to a field of a twins record, in each function; then the parameters given one
    twin_names = {
        fn: {t.id for node in nodes(fn) for t, v in _bound(node) if isinstance(t, ast.Name) and _twin_field(v)}
        for fn in functions
    }
    for _ in range(3):  # a twin handed on through a few calls
        for fn, params in _twin_params(module_tree, twin_names).items():
            twin_names[fn] |= params
    for fn in functions:
        names = twin_names[fn]

        def twin(node: ast.expr, names: set[str] = names) -> bool:
            return _c_prefixed(node) or _holds_twin(node, names)

        # names bound to what a c_* binding returned, or a call given a twin (or one of its members)
        from_c = set()
        for node in nodes(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                func = call.func
                given = [*call.args, *(k.value for k in call.keywords)]
                if (
                    _c_prefixed(func)
                    or (isinstance(func, ast.Attribute) and twin(func.value))
                    or any(twin(a) for a in given)
                ):
                    from_c |= {n for t in node.targets for n in _names(t)}
        for node in nodes(fn):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
                left, right = node.left, node.comparators[0]
                if not _is_none(right):
                    continue
                if twin(left) or (isinstance(left, ast.Name) and left.id in from_c):
                    found.append(ast.unparse(node))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and node.args
                and twin(node.args[0])
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
        "def g(reader, rows):\n"
        "    return h(rows, twins=reader.twins.avro_columns), k(rows, reader.twins.avro_columns)\n"
        "def h(rows, view=None, twins=None):\n"
        "    column = view.arrow_values(rows, twins)\n"
        "    if column is None:\n"
        "        column = slow(rows)\n"
        "    values = twins.values(rows)\n"
        "    return values is None, rows is None, view is None\n"
        "def k(rows, columns):\n"
        "    return columns is None\n"
    )
    assert c_imports("bkctl.probe", probe) == [
        "3: from bkctl.wire.codecs import _plain",
        "7: 'bkctl.wire.client._addpath'",
    ]
    assert sorted(selections(probe)) == ["fastpath.build()", "fastpath.selected()", "fastpath.selected()"]
    assert choices(probe) == [
        "body is None",
        "column is None",
        "columns is None",
        "getattr(r, 'span_records', None)",
        "getattr(twins.records, 'span_records', None)",
        "twins.codec is None",
        "values is None",
    ]
