"""The order the work is handed out in (a pytest plugin, loaded by ``tests/conftest.py``).

``./dev test`` runs ``--dist loadgroup``: xdist hands each worker the next work unit in
collection order, a unit being one test or a whole ``xdist_group`` (a module's tests sharing
a cluster or a Spark session: a minute or more of one worker).  In the folders' alphabetical
order the groups were spread through the run, and one handed out near the end kept one
worker busy while the others had nothing left: the suite waited for its tail.  So the groups
go first, the longest of them first, then the other integration tests, then the unit and
repository checks, many short units that even out the end.  Only the order changes: a
module's tests keep theirs, and every test still runs.

pytest-xdist (3.6 on) sorts the work units again before it hands them out, by their number of
tests (``--loadscope-reorder``, on unless ``--no-loadscope-reorder``): the repository checks'
group of 47 quick tests went first and a Spark group of 4 after every bigger one.  A test's count
says nothing of its time, so this plugin turns that sort off and its order is the one handed out.
"""

from __future__ import annotations

import pytest

#: the groups that take longest (each starts a Spark session, a fresh venv or several
#: clusters), first; the other groups follow in collection order.  pulsar-schema holds
#: test_export_topics too and backup test_pulsar_offload (one Spark session each pair)
LONGEST_FIRST = (
    "pulsar-schema",
    "packaging",
    "pulsar",
    "export",
    "backup",
    "zk_security-auth",
    "bookie_tls",
    "zk_security-tls",
)


def _rank(item: pytest.Item) -> tuple[int, int]:
    group = item.get_closest_marker("xdist_group")
    if group is not None:
        name = group.args[0] if group.args else group.kwargs.get("name", "")
        return 0, LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    if item.get_closest_marker("integration") is not None:
        return 1, 0
    return 2, 0


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's --no-loadscope-reorder
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    items[:] = sorted(items, key=_rank)  # stable: within a rank, collection order
