"""No product module is over :data:`MAX_LINES` lines (issue 53), a C source or header of the extensions
no more than a Python one (issue 76): a module that long holds more than one concept, and is split by
owner -- a class that is its own concept in its own module, a codec apart from its dataclass, a
planning step apart from the reader, a C twin's buffers apart from its rows -- not by line count."""

from __future__ import annotations

from pathlib import Path

from tests.repo.sources import FOLDERS, MODULES, ROOT

#: the most lines a module of wire/, bookied/, bkctl/ or shell/ may have
MAX_LINES = 800


def oversized(modules: dict[str, Path], limit: int = MAX_LINES) -> list[str]:
    """``module (path): N lines`` of each module over ``limit`` lines, longest first."""
    lengths = {name: (path, len(path.read_bytes().splitlines())) for name, path in modules.items()}
    over = sorted((n, name, path) for name, (path, n) in lengths.items() if n > limit)
    return [f"{name} ({path}): {n} lines" for n, name, path in reversed(over)]


def test_no_product_module_is_over_the_limit():
    assert len(MODULES) > 100  # the product's modules were found
    assert oversized(MODULES) == [], f"split these by owner into modules of at most {MAX_LINES} lines"


def c_sources() -> dict[str, Path]:
    """Every C source and header of the product folders (the extensions setup.py builds), by path."""
    return {str(path.relative_to(ROOT)): path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.[ch]"))}


def test_no_c_source_is_over_the_limit():
    sources = c_sources()
    assert len(sources) > 10  # the extensions' sources were found
    assert "wire/pulsar/_packed.c" in sources
    assert oversized(sources) == [], f"split these by owner into files of at most {MAX_LINES} lines"


def test_the_check_names_a_module_over_the_limit_and_its_length(tmp_path):
    short, long, exact = tmp_path / "short.py", tmp_path / "long.py", tmp_path / "exact.py"
    short.write_text("x = 1\n" * 3)
    long.write_text("x = 1\n" * 5)
    exact.write_text("x = 1\n" * 3 + "y = 2")  # a last line without its newline counts too
    found = oversized({"pkg.short": short, "pkg.long": long, "pkg.exact": exact}, limit=3)
    assert found == [f"pkg.long ({long}): 5 lines", f"pkg.exact ({exact}): 4 lines"]
