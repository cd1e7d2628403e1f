"""The suite's folders decide what a test may start (a pytest plugin, loaded by ``tests/conftest.py``).

* Every test under ``tests/integration/`` is marked ``integration`` by its folder, not by its
  module, so ``-m "not integration"`` leaves out every one of them and a new module cannot
  forget the mark.
* A test outside that folder that asks for the session's ZooKeeper or starts a bookied fails
  before it starts (:func:`integration_only`), so ``-m "not integration"`` cannot start one unnoticed.
"""

from __future__ import annotations

import pytest

INTEGRATION_FOLDER = ("tests", "integration")

#: the test whose setup, call or teardown runs now in this process
_running: pytest.Item | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    folder = config.rootpath.joinpath(*INTEGRATION_FOLDER)
    for item in items:
        if item.path.is_relative_to(folder):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _running
    before, _running = _running, item
    try:
        return (yield)
    finally:
        _running = before


def integration_only(what: str) -> None:
    """Fail the running test unless it is an integration test: it was about to start ``what``.

    Called in a session fixture, the failure is the fixture's for the rest of the session:
    later tests that ask for it fail with the same message, naming the test that asked first."""
    test = _running
    if test is not None and test.get_closest_marker("integration") is None:
        pytest.fail(
            f"{test.nodeid} asks for {what}, which only tests under {'/'.join(INTEGRATION_FOLDER)}/ may start",
            pytrace=False,
        )
