"""Every C extension has a stub beside its source, which ``./dev lint`` checks against the built
module (mypy's stubtest), and mypy reads it: no extension is left to ``ignore_missing_imports``."""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from pathlib import Path

from tests.support import tools

ROOT = Path(__file__).resolve().parents[2]


def extensions() -> dict[str, str]:
    """setup.py's extensions: module name -> its first source."""
    return {ext.module: ext.sources[0] for ext in tools.c_builds().extensions()}


def extension_files() -> set[str]:
    """Every file setup.py's extensions are built from: their sources and what they depend on."""
    return {name for ext in tools.c_builds().extensions() for name in ext.files}


def test_setup_and_the_dev_stamp_name_every_c_file():
    """A C file setup.py does not name is not built (or not rebuilt when it changes), and one the
    stamp of ``./dev setup`` leaves out does not reinstall the extensions when it changes."""
    on_disk = {
        str(path.relative_to(ROOT))
        for folder in ("wire", "bookied", "bkctl", "shell")
        for path in (ROOT / folder).rglob("*.[ch]")
    }
    assert extension_files() == on_disk
    stamp = re.search(r"want=\$\(cat ([^|]*)\|", (ROOT / "dev").read_text())
    assert stamp, "./dev setup stamps the install with the sha256 of its sources: want=$(cat ... | sha256sum ...)"
    assert stamp.group(1).split() == [
        "pyproject.toml",
        "setup.py",
        '$("$VENV/bin/python"',
        "tools/c_builds.py",
        "--files)",
    ]
    listed = io.StringIO()
    with contextlib.redirect_stdout(listed):
        assert tools.c_builds().main(["--files"]) == 0
    assert listed.getvalue().split() == sorted(on_disk)  # what the stamp hashes: every C file


def test_setup_builds_the_extensions_we_know():
    assert len(extensions()) == 9


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
