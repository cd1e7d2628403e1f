"""No module reaches into another object's underscored names (issue 53), read from the sources with
ast, nothing imported:

* an attribute ``x._name`` (or ``getattr``/``setattr``/``hasattr``/``delattr`` of ``x`` and a
  constant ``"_name"``) is only taken of ``self``, ``cls`` or ``super()``: what an object offers others
  is a public method or property; a class's underscored names are its own -- ``self._store._nodes``
  too: an object's own attribute, but another object's underscored name.  The suite's stand-ins
  for the product's objects (tests/support: the fake store, bookies, clocks) are held to it as
  well: the code under test meets them where it meets the real ones; and so is the rest of the
  suite (:data:`SUITE`): a test observes an object through what it offers a user or an operator
  (or through its behaviour), not through its underscored names.  Dunder names
  (``__class__``, ``__name__``) are the language's, and the named tuple's documented API
  (``_asdict``, ``_replace``, ``_fields``, ``_make``) and ``os._exit`` are public despite the underscore.
  The few reaches into a *dependency's* internals that have no public equivalent are listed in
  :data:`THIRD_PARTY`, each with why; a new one (or one no longer there) fails the test;
* no module imports another module's underscored name (``from m import _name``): a module's
  underscored names are its own (:func:`private_imports`; the C extensions, underscored modules,
  are imported by the twin selector alone, by name: tests/repo/test_twin_selection.py);
* ``BKCTL_FASTPATHS`` is read in one module only, the twin selector (:data:`SELECTOR`): every
  component receives the choice (its constructor's ``twins``/``fastpaths``), none asks the
  environment or the selector's switch for itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.repo.sources import MODULES, nodes, suite_modules, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: names that look private and are documented public API
PUBLIC_UNDERSCORED = {"_asdict", "_replace", "_fields", "_make", "_field_defaults"}
#: ``module.name`` reaches into the standard library's documented underscored functions
PUBLIC_QUALIFIED = {"os._exit", "sys._current_frames"}

#: module -> the reaches into a dependency's internals it may make (no public equivalent exists)
THIRD_PARTY = {
    # Twisted's TCP transport: send_now sends at once only when the transport has nothing queued
    # and is not half-closed, which only these fields tell (Twisted has no public "queued bytes")
    "bkctl.wire.send_now": {"transport._writeDisconnected", "transport._tempDataBuffer"},
    # kazoo's connection thread, to tell a SASL failure that killed it from a lost connection
    "bkctl.wire.metadata.zk.session": {"getattr(zk, '_connection')", "getattr(..., '_connection_routine')"},
    # PySpark: whether a SparkContext runs in this process (SparkSession.getActiveSession is per
    # thread), and stopping its Py4J gateway JVM so that a stopped session leaves no process behind
    "bkctl.export.spark_session": {"SparkContext._active_spark_context", "SparkContext._gateway", "SparkContext._jvm"},
    # the suite's: kazoo sends every request through KazooClient._call; counting or failing the
    # requests a store sends is done there (kazoo has no request hook)
    "tests.integration.test_client_bookie_watch": {"KazooClient._call"},
    "tests.integration.test_metadata_store_conformance": {"KazooClient._call"},
    # the JVM's arguments are read through Py4J's gateway, which PySpark offers only as _jvm
    "tests.integration.test_export": {"spark.sparkContext._jvm"},
    # argparse lists a parser's options only in _actions
    "tests.repo.test_docs_in_sync": {"build_parser()._actions"},
    # what send_now reads of Twisted's transport (above), the tests read to see what it queued
    "tests.unit.test_send_now": {"transport._tempDataBuffer", "transport._tempDataLen"},
    "tests.unit.test_bookie_outbox_throttle": {"transport._tempDataBuffer"},
}

#: the suite's modules (its support modules, the fakes, among them), which the first rule holds
#: as it holds the product's
SUITE = suite_modules()

#: the suite's modules that still reach into the product's underscored names, each to be given
#: what it observes through a public accessor or through behaviour; the list only shrinks: a
#: module on it that no longer reaches fails the test (take it off), one not on it that reaches
#: fails too
NOT_YET_DONE = {
    "tests.unit.test_bookied_startup",
    "tests.unit.test_client_ledger",
    "tests.unit.test_client_read_fastpath",
    "tests.unit.test_entry_log_records",
    "tests.unit.test_fastcodec",
    "tests.unit.test_flush_pace",
    "tests.unit.test_http_autorecovery",
    "tests.unit.test_repair_state",
    "tests.unit.test_restore_stream",
    "tests.unit.test_service_readonly",
}

#: the one module that reads BKCTL_FASTPATHS
SELECTOR = "bkctl.wire.fastpath"
#: the names through which the switch could be read
_SWITCH = {"BKCTL_FASTPATHS"}


def _own(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _private(name: str) -> bool:
    return (
        name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in PUBLIC_UNDERSCORED
    )


def reaches(path: Path) -> list[str]:
    """``line: what`` for each access to an underscored name of something not self/cls/super()."""
    found = []
    for node in nodes(tree(path)):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
            what = ast.unparse(node)
            if what not in PUBLIC_QUALIFIED:
                found.append((node.lineno, what))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not _own(node.args[0])
        ):
            target = node.args[0]
            shown = ast.unparse(target) if isinstance(target, ast.Name) else "..."
            found.append((node.lineno, f"{node.func.id}({shown}, {node.args[1].value!r})"))
    return [f"{line}: {what}" for line, what in sorted(set(found))]


def private_imports(path: Path) -> list[str]:
    """``line: what`` for each ``from m import _name`` (an underscored name, not a dunder)."""
    found = []
    for node in nodes(tree(path)):
        if isinstance(node, ast.ImportFrom):
            dots = "." * node.level
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {dots}{node.module or ''} import {alias.name}")
    return found


def switch_reads(path: Path) -> list[str]:
    """``line: what`` for each mention of the switch's name in code (strings and names; docstrings
    and comments are prose) and each use of a module-level switch ``fastpath.ENABLED``."""
    docstrings = {
        id(n.body[0].value)
        for n in nodes(tree(path))
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found = []
    for node in nodes(tree(path)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and any(s in node.value for s in _SWITCH)
        ):
            found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "ENABLED" and "fastpath" in ast.unparse(node.value):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "ENABLED" for a in node.names):
            found.append(f"{node.lineno}: from {node.module} import ENABLED")
    return found


def _where(module: str, line: str) -> str:
    return f"{module}:{line}"


def test_no_module_reaches_into_another_objects_underscored_names():
    assert "tests.support.fake_store" in SUITE and "tests.unit.test_repair_state" in SUITE  # the suite is read too
    bad, allowed_seen, pending = [], {m: set() for m in THIRD_PARTY}, set()
    for module, path in {**MODULES, **SUITE}.items():
        for found in reaches(path):
            what = found.split(": ", 1)[1]
            if what in THIRD_PARTY.get(module, ()):
                allowed_seen[module].add(what)
            elif module in NOT_YET_DONE:
                pending.add(module)
            else:
                bad.append(_where(module, found))
    assert not bad, "give the owner a public method or property:\n" + "\n".join(sorted(bad))
    assert allowed_seen == THIRD_PARTY, "a listed dependency reach is gone: take it off THIRD_PARTY"
    assert pending == NOT_YET_DONE, f"these reach no more: take them off NOT_YET_DONE: {sorted(NOT_YET_DONE - pending)}"


def test_no_module_imports_another_modules_underscored_names():
    bad = [_where(m, line) for m, path in MODULES.items() for line in private_imports(path)]
    assert not bad, "make the name public, or give its owner a public function:\n" + "\n".join(sorted(bad))


def test_only_the_selector_reads_the_fast_path_switch():
    assert SELECTOR in MODULES
    assert switch_reads(MODULES[SELECTOR])  # the check sees the one read
    bad = [_where(m, line) for m, path in MODULES.items() if m != SELECTOR for line in switch_reads(path)]
    assert not bad, "components receive the twins record, they do not read the switch:\n" + "\n".join(bad)


def test_the_checks_see_what_they_look_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""BKCTL_FASTPATHS in prose is fine."""\n'
        "import os\n"
        "from bkctl.wire.fastpath import ENABLED\n"
        "class A(B):\n"
        "    def f(self, other):\n"
        "        self._mine, cls._ours, super()._base(), other.__class__, other._asdict()\n"
        "        other._theirs\n"
        "        self._store._zk\n"
        "        getattr(other, '_hidden', None)\n"
        "        os._exit(0)\n"
        "        return os.environ.get('BKCTL_FASTPATHS'), fastpath.ENABLED\n"
    )
    assert reaches(probe) == ["7: other._theirs", "8: self._store._zk", "9: getattr(other, '_hidden')"]
    imports = tmp_path / "imports.py"
    imports.write_text("from a.b import _c, d, __version__\nfrom . import _e\nfrom .f import g as _g\n")
    assert private_imports(imports) == ["1: from a.b import _c", "2: from . import _e"]
    assert set(switch_reads(probe)) == {
        "3: from bkctl.wire.fastpath import ENABLED",
        "11: 'BKCTL_FASTPATHS'",
        "11: fastpath.ENABLED",
    }
