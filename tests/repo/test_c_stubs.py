"""Every C extension has a stub beside its source, which ``./dev lint`` checks against the built
module (mypy's stubtest), and mypy reads it: no extension is left to ``ignore_missing_imports``."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def extensions() -> dict[str, str]:
    """setup.py's extensions: module name -> its first source."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension":
            name, sources = node.args[0], node.args[1]
            assert isinstance(name, ast.Constant) and isinstance(sources, ast.List)
            first = sources.elts[0]
            assert isinstance(first, ast.Constant)
            found[name.value] = first.value
    return found


def test_setup_builds_the_extensions_we_know():
    assert len(extensions()) == 8


def test_every_extension_has_a_stub_beside_its_source():
    missing = []
    for name, source in extensions().items():
        stub = ROOT / Path(source).with_name(name.rsplit(".", 1)[1] + ".pyi")
        if not stub.is_file():
            missing.append(f"{name}: {stub.relative_to(ROOT)}")
    assert not missing, f"C extensions without a stub: {missing}"


def test_dev_lint_runs_stubtest_on_every_extension():
    text = (ROOT / "dev").read_text()
    listed = re.search(r"^C_EXTENSIONS=\(([^)]*)\)", text, re.M)
    assert listed, "./dev names its C extensions in C_EXTENSIONS=(...)"
    assert set(listed.group(1).split()) == set(extensions())
    assert '-m mypy.stubtest --concise "${C_EXTENSIONS[@]}"' in text


def test_mypy_reads_every_extension_stub():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    ignored = {
        module
        for override in config.get("overrides", [])
        if override.get("ignore_missing_imports")
        for module in override["module"]
    }
    assert not ignored & set(extensions())
