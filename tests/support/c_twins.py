"""The C twins this platform builds, and the mark of a test that compares one with its Python twin.

A comparison of a C twin with its Python twin that cannot run because the C twin was not built
FAILS (the build is part of the product: setup.py builds every extension where a C compiler is
found, and CI has one); it is skipped only with the fast paths deliberately off
(``BKCTL_FASTPATHS=0``), where nothing expects them.  A skip would let a suite go green while
testing the Python path twice (issue 67).  ``tests/conftest.py`` applies :func:`needs_c`'s mark.
"""

from __future__ import annotations

import os
import platform
import sys

import pytest

from bkctl.wire import fastpath

__all__ = ["MARK", "expected", "fast_paths_off", "needs_c"]

#: the mark's name (registered in pyproject.toml)
MARK = "c_twin"


def fast_paths_off() -> bool:
    """Whether this run switched the fast paths off (``BKCTL_FASTPATHS=0``)."""
    return not fastpath.from_environment(os.environ)


def expected() -> frozenset[str]:
    """The C extensions (their fields of :class:`~bkctl.wire.fastpath.Twins`) this platform builds
    and uses: all of them on CPython, the batch splitter only on a little-endian machine
    (``Twins.batch_rows``: it writes Arrow's little-endian buffers as they lie in memory)."""
    if platform.python_implementation() != "CPython":
        return frozenset()
    names = {"codec", "records", "archive_reader", "adds", "entries", "plain", "ledger_metadata", "avro_columns"}
    if sys.byteorder == "little":
        names.add("batch_rows")
    return frozenset(names)


def needs_c(twin: object, name: str) -> pytest.MarkDecorator:
    """The mark of a test (or ``pytestmark``) that compares the C twin ``twin`` (None: not built)
    named ``name`` with its Python twin: nothing when it is built; when it is not, the test fails
    saying so, or is skipped with the fast paths off."""
    return pytest.mark.c_twin(name=name, built=twin is not None)


def check(item: pytest.Item) -> None:
    """What ``tests/conftest.py`` calls before each test: fail (or, fast paths off, skip) a test
    marked by :func:`needs_c` whose C twin is not built."""
    for mark in item.iter_markers(MARK):
        if mark.kwargs["built"]:
            continue
        name = mark.kwargs["name"]
        if fast_paths_off():
            pytest.skip(f"{name} is not built and the fast paths are off (BKCTL_FASTPATHS=0)")
        pytest.fail(f"{name} is not built (or older than its sources): this comparison with its Python twin cannot run")
