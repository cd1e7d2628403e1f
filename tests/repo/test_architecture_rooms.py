"""The map names every room: each package folder of the product has its row in docs/architecture.md's
table, no row names a folder that is gone, and ``wire/__init__.py`` names each package of wire -- a
new package that nobody mentions is one a newcomer never finds (issue 76: ``rebalance/``, ``fsck/``
and ``backup/`` had grown without a word)."""

from __future__ import annotations

import ast
import re

from tests.repo.sources import FOLDERS, ROOT

ROW = re.compile(r"^\| `([a-z_/]+/)` \|", re.M)


def package_folders() -> set[str]:
    """Every folder of the product that is a package (``wire/``, ``wire/client/``, ...)."""
    return {
        str(init.parent.relative_to(ROOT)) + "/" for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
    }


def rows(text: str) -> set[str]:
    """The folders the table's rows are about (``| `wire/client/` | ... |``)."""
    return set(ROW.findall(text))


def test_every_package_folder_has_its_row_in_the_architecture_page():
    folders = package_folders()
    assert {"wire/", "wire/client/", "bkctl/ops/", "bookied/storage/"} <= folders  # found
    documented = rows((ROOT / "docs" / "architecture.md").read_text())
    assert sorted(folders - documented) == [], "docs/architecture.md: a row each, saying what lives there"
    product_rows = {row for row in documented if row.split("/", 1)[0] in FOLDERS}
    assert sorted(product_rows - folders) == [], "docs/architecture.md: rows of folders that are not packages"


def test_wire_says_what_each_of_its_packages_is():
    doc = ast.get_docstring(ast.parse((ROOT / "wire" / "__init__.py").read_text())) or ""
    packages = {init.parent.name for init in (ROOT / "wire").glob("*/__init__.py")}
    assert {"client", "domain"} <= packages
    assert sorted(p for p in packages if f":mod:`.{p}`" not in doc) == []


def test_the_rows_are_read_as_written():
    table = "| path | what |\n|---|---|\n| `wire/` | x |\n| `wire/fsck/` | y |\n| `tests/unit` | z |\nprose `a/`\n"
    assert rows(table) == {"wire/", "wire/fsck/"}
