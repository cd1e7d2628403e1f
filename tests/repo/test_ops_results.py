"""An operation returns a named type, not a JSON-shaped dict (issue 76; the project's rule: the
boundaries between modules pass named types).  A public function of ``bkctl/ops`` returns a frozen
dataclass, a NamedTuple or an Enum (or a list, an iterator of them), and the one conversion to the
``--json`` document is :func:`bkctl.ops.results.to_json`; read from the sources with ast, a public
function breaks the rule when its return annotation names a bare ``dict`` or a ``dict[str, Any]``
(``list[dict]``, ``Iterator[dict]``, ``dict | None`` too), or when it returns a dict literal keyed
by words (``return {"ledger_id": ...}``, ``{**doc, "reason": ...}``).  A mapping that is one by
nature -- ``dict[str, bytes]`` custom metadata, ``dict[int, str]`` a ledger's cause -- is not a
record and passes.  :data:`EXCEPTIONS` names each function that breaks it today, with why; each
entry must still be needed, so the list only shrinks."""

from __future__ import annotations

import ast

import pytest

from tests.repo.sources import MODULES, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: (module, function) -> why it returns a JSON-shaped dict today
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("bkctl.ops.results", "fields_of"): "the one conversion itself: a result's keys and values, for the encoder",
}


def _returns_record_literal(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """``line: return {...}`` for each dict literal keyed by words (or spreading one) that ``fn``
    itself returns (not its nested functions; ``{}`` is any mapping's empty one)."""
    found = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Return) and isinstance(child.value, ast.Dict):
                keys = child.value.keys
                if any(k is None or (isinstance(k, ast.Constant) and isinstance(k.value, str)) for k in keys):
                    found.append(f"{child.lineno}: return {{...}}")
            visit(child)

    visit(fn)
    return found


def _record_annotation(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The return annotation, when it names a bare ``dict`` or a ``dict[str, Any]`` anywhere in it."""
    if fn.returns is None:
        return []
    for node in ast.walk(fn.returns):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("dict", "Dict", "typing.Dict"):
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if [ast.unparse(a) for a in args] in (["str", "Any"], ["str", "typing.Any"]):
                return [f"{fn.lineno}: -> {ast.unparse(fn.returns)}"]
        elif isinstance(node, ast.Name) and node.id in ("dict", "Dict"):
            parent_subscripted = any(isinstance(s, ast.Subscript) and s.value is node for s in ast.walk(fn.returns))
            if not parent_subscripted:
                return [f"{fn.lineno}: -> {ast.unparse(fn.returns)}"]
    return []


def records_returned(path) -> dict[str, list[str]]:
    """Public function of the module at ``path`` -> how it returns a JSON-shaped dict."""
    out = {}
    for fn in tree(path).body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not fn.name.startswith("_"):
            found = _record_annotation(fn) + _returns_record_literal(fn)
            if found:
                out[fn.name] = found
    return out


def _broken() -> dict[tuple[str, str], list[str]]:
    return {
        (m, name): how
        for m in sorted(MODULES)
        if m.startswith("bkctl.ops.")
        for name, how in records_returned(MODULES[m]).items()
    }


def test_an_operation_returns_a_named_type():
    bad = {k: how for k, how in _broken().items() if k not in EXCEPTIONS}
    assert not bad, bad


def test_the_exceptions_are_still_needed():
    stale = sorted(set(EXCEPTIONS) - set(_broken()))
    assert not stale, stale


def test_the_rule_sees_a_violation(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import Any\n"
        "def doc(x) -> dict:\n    return {'a': x}\n"
        "def rows(x) -> list[dict[str, Any]]:\n    return []\n"
        "def spread(x):\n    return {**x, 'reason': 'r'}\n"
        "def maybe(x) -> dict | None:\n    return None\n"
        "def mapping(x) -> dict[str, bytes]:\n    return {k: v for k, v in x}\n"
        "def causes(x) -> dict[int, str]:\n    return {1: 'a'}\n"
        "def _private(x) -> dict:\n    return {'a': x}\n"
        "def nested(x) -> int:\n    def inner():\n        return {'a': x}\n    return 1\n"
    )
    assert records_returned(probe) == {
        "doc": ["2: -> dict", "3: return {...}"],
        "rows": ["4: -> list[dict[str, Any]]"],
        "spread": ["7: return {...}"],
        "maybe": ["8: -> dict | None"],
    }
