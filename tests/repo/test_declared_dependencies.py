"""Every third-party module the tests import comes with ``pip install .[test]``: its distribution
is one of the project's dependencies or of the ``test`` extra (read from pyproject.toml), or is
brought by an extra one of them names (``twisted[tls]`` names pyOpenSSL).  Imports are read from
the sources (ast, nothing imported), ``pytest.importorskip`` included: a test skipped for want
of a module the extra forgot is a test that never runs."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: the repository's own top-level names, and the tools a test loads by path
OURS = {PYPROJECT["name"], "tests", "gen_docs", "genproto"}


def declared(extras: tuple[str, ...] = ("test",)) -> set[str]:
    """Distributions the project declares for ``extras``: named, or brought by an extra named with them."""
    out: set[str] = set()
    requirements = [Requirement(r) for r in PYPROJECT["dependencies"]]
    requirements += [Requirement(r) for extra in extras for r in PYPROJECT["optional-dependencies"][extra]]
    while requirements:
        req = requirements.pop()
        name = canonicalize_name(req.name)
        if name == PYPROJECT["name"]:  # an extra of ours naming others ("bkctl[spark]")
            requirements += [Requirement(r) for extra in req.extras for r in PYPROJECT["optional-dependencies"][extra]]
            continue
        out.add(name)
        for text in importlib.metadata.requires(name) or () if req.extras else ():
            brought = Requirement(text)
            if brought.marker and any(brought.marker.evaluate({"extra": e}) for e in req.extras):
                out.add(canonicalize_name(brought.name))
    return out


def imported(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports, at any level, or asks ``importorskip`` for."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
    return {name.partition(".")[0] for name in names}


def undeclared(files: list[Path], allowed: set[str]) -> dict[str, list[str]]:
    """``{module: [files]}`` of the third-party modules whose distributions are not in ``allowed``."""
    distributions = importlib.metadata.packages_distributions()
    out: dict[str, list[str]] = {}
    for path in files:
        for module in imported(path) - set(sys.stdlib_module_names) - OURS:
            if not {canonicalize_name(d) for d in distributions.get(module, ())} & allowed:
                out.setdefault(module, []).append(str(path.relative_to(ROOT)))
    return out


def test_the_test_extra_brings_every_module_the_tests_import():
    files = sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 100 and "pytest" in imported(ROOT / "tests" / "conftest.py")  # the tests were read
    missing = undeclared(files, declared())
    assert not missing, f"add their distributions to pyproject.toml's `test` extra: {missing}"


def test_the_check_sees_a_module_the_extra_forgot():
    this = ROOT / "tests" / "repo" / "test_declared_dependencies.py"
    assert undeclared([this], declared() - {"packaging"}) == {"packaging": ["tests/repo/test_declared_dependencies.py"]}


def test_an_extra_named_with_a_dependency_declares_what_it_brings_and_only_that():
    base = declared(extras=())
    assert "pyopenssl" in base  # twisted[tls]
    assert "twisted" in base and "attrs" not in base  # Twisted's own dependency: not ours to import
