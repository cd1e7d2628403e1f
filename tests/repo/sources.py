"""The product's sources (and the suite's) as the repository checks read them: module names, their
syntax trees and the imports in them (ast, nothing imported), each file parsed once per test process."""

from __future__ import annotations

import ast
import functools
from collections.abc import Container
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the package it installs as (pyproject.toml's package-dir)
FOLDERS = {"bkctl": "bkctl", "wire": "bkctl.wire", "bookied": "bkctl.bookied", "shell": "bkctl.shell"}


def modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if folder == "wire" and "proto" in parts:
                continue  # generated protobuf modules
            out[".".join([package, *parts])] = path
    return out


#: every product module: dotted name as installed -> source file
MODULES = modules()


def suite_modules() -> dict[str, Path]:
    """Every module of the suite (``tests.unit.test_v3``, ``tests.support.ports``...) -> its file."""
    out = {}
    for path in (ROOT / "tests").rglob("*.py"):
        parts = [p for p in path.relative_to(ROOT).with_suffix("").parts if p != "__init__"]
        out[".".join(parts)] = path
    return out


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """``ast.walk(node)``, listed once per test process: the checks walk each module, and each of
    its functions, several times over (the twin checks did 4.7 million walk steps)."""
    return tuple(ast.walk(node))


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(test, (ast.Name, ast.Attribute)) and "TYPE_CHECKING" in ast.unparse(test)


def imports(
    module: str, path: Path, top_level_only: bool, *, known: Container[str] = MODULES, type_checking: bool = True
) -> set[str]:
    """The modules of ``known`` (default: the product's) that ``module`` imports (``from X import Y``:
    X.Y when it is a module): at module level only, or at any level; those under ``if TYPE_CHECKING:``
    too unless ``type_checking`` is False (they tie modules together, but never run)."""
    found: set[str] = set()

    def visit(nodes, top: bool):
        for node in nodes:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path, node)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                names = []
            for name in names:
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    found.add(name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not top_level_only:
                    visit(ast.iter_child_nodes(node), False)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, top)
            elif isinstance(node, ast.If) and _type_checking(node):
                if not top_level_only and type_checking:
                    visit(node.body, top)
                visit(node.orelse, top)
            elif not isinstance(node, (ast.Import, ast.ImportFrom)):
                visit(ast.iter_child_nodes(node), top)

    visit(tree(path).body, True)
    return found
