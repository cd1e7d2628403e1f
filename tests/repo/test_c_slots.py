"""Every C extension is held to the interface slot it fills (issue 76), read from the sources with
ast, nothing imported:

* setup.py's every extension has its conformance assignment in the twin selector
  (``wire/fastpath.py``), under ``TYPE_CHECKING``: ``import bkctl.wire.x._c as c_c`` and
  ``_C_FITS: Slot = c_c``, so that ``./dev lint``'s mypy fails when the C module's stub (its
  ``.pyi``, which stubtest holds to the module) no longer fits its slot; a new extension without
  one fails here;
* each slot is a ``Protocol`` declared beside the C module's Python twin (a module that names
  no ``ModuleType``), and every ``twins_of`` of wire takes a slot, not a bare ``ModuleType``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo.sources import MODULES
from tests.repo.test_c_stubs import extensions

ROOT = Path(__file__).resolve().parents[2]
SELECTOR = ROOT / "wire" / "fastpath.py"


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def held_slots(selector: ast.Module) -> dict[str, tuple[str, str]]:
    """The selector's conformance assignments under ``TYPE_CHECKING``: C module -> (the slot's
    Protocol, the module it is imported from)."""
    aliases: dict[str, str] = {}
    names: dict[str, str] = {}
    fits: list[tuple[str, str]] = []
    for node in ast.walk(selector):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.Import):
                    aliases.update({a.asname or a.name: a.name for a in stmt.names})
                elif isinstance(stmt, ast.ImportFrom) and stmt.module:
                    names.update({a.asname or a.name: stmt.module for a in stmt.names})
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.value, ast.Name):
                    fits.append((ast.unparse(stmt.annotation), stmt.value.id))
    return {aliases[value]: (slot, names.get(slot, "")) for slot, value in fits if value in aliases}


def protocols(tree: ast.Module) -> set[str]:
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in node.bases)
    }


def test_every_c_extension_is_held_to_its_slot():
    held = held_slots(_parse(SELECTOR))
    missing = sorted(set(extensions()) - set(held))
    assert not missing, (
        f"wire/fastpath.py holds no stub of {missing} to a slot: declare the slot's Protocol beside the "
        "module's Python twin and assign the module to it under TYPE_CHECKING (_X_FITS: XModule = x_c)"
    )


def test_each_slot_is_a_protocol_and_every_twins_of_takes_one():
    held = held_slots(_parse(SELECTOR))
    for module, (slot, owner) in held.items():
        assert owner in MODULES, f"{module}'s slot {slot} is imported from {owner!r}, not a module of the product"
        tree = _parse(MODULES[owner])
        assert slot in protocols(tree), f"{owner} declares no Protocol {slot} (the slot of {module})"
        assert "ModuleType" not in ast.unparse(tree), f"{owner} names ModuleType: its C module is a {slot}"
    slots = {f"{slot} | None" for slot, _owner in held.values()}
    loose = []
    for name, path in MODULES.items():
        if not name.startswith("bkctl.wire."):
            continue
        for node in _parse(path).body:
            if isinstance(node, ast.FunctionDef) and (node.name == "twins_of" or node.name.endswith("_adds_of")):
                (param,) = node.args.args
                taken = ast.unparse(param.annotation) if param.annotation is not None else "anything"
                if taken not in slots:
                    loose.append(f"{name}.{node.name} takes {taken}, not a slot")
    assert not loose, loose


def test_the_rule_reads_a_missing_assignment():
    """The reading above sees an assignment, and misses one that is not there."""
    source = (
        "if TYPE_CHECKING:\n"
        "    import bkctl.wire.x._c as c_c\n"
        "    import bkctl.wire.x._d as d_c\n"
        "    from bkctl.wire.x.owner import CModule\n"
        "    _C_FITS: CModule = c_c\n"
    )
    assert held_slots(ast.parse(source)) == {"bkctl.wire.x._c": ("CModule", "bkctl.wire.x.owner")}


def test_the_report_of_c_twins_names_every_extension():
    """``bkctl --version``, ``bookied --version`` and the benches report each C extension's state from
    ``fastpath.C_EXTENSIONS``: an extension missing there would never be reported stale."""
    from bkctl.wire import fastpath

    assert set(fastpath.C_EXTENSIONS) == set(extensions())
