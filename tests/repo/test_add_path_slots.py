"""The add path's C modules are tied to the interface slots they fill (issue 76), read from the
sources with ast, nothing imported:

* each of its ``*_of`` functions (``wire/client/add_twins.py``) takes the slot's Protocol, not a
  bare ``ModuleType``, and the twin selector holds the C module's stub to that Protocol under
  ``TYPE_CHECKING`` (``import bkctl.wire.client._x as x_c``; ``_X_FITS: Slot = x_c``), so that ``./dev lint``'s mypy fails
  when a C function (its ``.pyi``) does not fit its slot;
* the add path's interfaces are typed: no ``Callable[..., ...]`` in its modules or stubs.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TWINS = ROOT / "wire" / "client" / "add_twins.py"
SELECTOR = ROOT / "wire" / "fastpath.py"
#: ``*_of`` function -> (the Protocol of its slot, the C module that fills it)
SLOTS = {
    "connection_adds_of": ("AddPathModule", "bkctl.wire.client._addpath"),
    "writer_adds_of": ("AddEntriesModule", "bkctl.wire.client._addentries"),
}
#: the add path: the connection's and the writer's modules, their twins and the C modules' stubs
ADD_PATH = [
    "wire/client/connection.py",
    "wire/client/channel.py",
    "wire/client/ledger_handle.py",
    "wire/client/entry_requests.py",
    "wire/client/add_twins.py",
    "wire/client/acks.py",
    "wire/client/pending_add.py",
    "wire/client/_addpath.pyi",
    "wire/client/_addentries.pyi",
]


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def test_each_twins_of_takes_its_slot_and_the_selector_holds_the_c_stub_to_it():
    tree = _parse(TWINS)
    protocols = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in node.bases)
    }
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    fits, aliases = set(), {}
    for node in ast.walk(_parse(SELECTOR)):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.Import):
                    aliases.update({a.asname or a.name: a.name for a in stmt.names})
                if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                    value = ast.unparse(stmt.value)
                    fits.add((ast.unparse(stmt.annotation), aliases.get(value, value)))
    for name, (slot, module) in SLOTS.items():
        assert slot in protocols, f"add_twins.py declares no Protocol {slot}"
        (param,) = functions[name].args.args
        assert param.annotation is not None and ast.unparse(param.annotation) == f"{slot} | None", name
        assert (slot, module) in fits, f"fastpath.py does not hold {module}'s stub to {slot} under TYPE_CHECKING"


def test_the_add_path_interfaces_are_typed():
    untyped = []
    for rel in ADD_PATH:
        for node in ast.walk(_parse(ROOT / rel)):
            if (
                isinstance(node, ast.Subscript)
                and ast.unparse(node.value).endswith("Callable")
                and isinstance(node.slice, ast.Tuple)
                and node.slice.elts
                and isinstance(node.slice.elts[0], ast.Constant)
                and node.slice.elts[0].value is Ellipsis
            ):
                untyped.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not untyped, untyped
