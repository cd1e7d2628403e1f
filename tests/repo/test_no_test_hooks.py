"""No test hook in product code: no environment variable meant for tests is named in the product
(a bookie must not change behaviour because a variable leaked into its environment; tests inject
through their own launchers, e.g. tests/support/stopping_bookied.py)."""

from __future__ import annotations

import ast
import re

from tests.repo.sources import MODULES, tree

TEST_VARIABLE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_TEST(_[A-Z0-9]+)*$|^[A-Z][A-Z0-9]*_TEST_[A-Z0-9_]+$")


def test_no_product_module_names_a_test_environment_variable():
    found = [
        f"{name}:{node.lineno}: {node.value}"
        for name, path in sorted(MODULES.items())
        for node in ast.walk(tree(path))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TEST_VARIABLE.match(node.value)
    ]
    assert not found, "test hooks read from the environment in product code:\n" + "\n".join(found)
