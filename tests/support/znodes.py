"""Removing a test's tree of znodes at the end of the test (:func:`delete_tree`).

Every integration test has a cluster root of its own (``zk_namespace`` in tests/conftest.py),
removed after it.  kazoo's ``delete(path, recursive=True)`` lists and deletes one znode at a
time, two round trips each: some 50 for a small cluster's root, and a test that made 1,000
ledgers spent 19 s of its teardown there (load 15).  Here the requests of one level of the
tree go out together (kazoo's asynchronous calls, answered in order on the one session): a
round trip per level to list the tree and one per level to delete it, deepest first.
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NoNodeError

__all__ = ["delete_tree"]


def _below(parent: str, child: str) -> str:
    return f"{parent.rstrip('/')}/{child}"


def delete_tree(client: Any, top: str, timeout: float = 60.0) -> None:
    """Delete ``top`` and everything below it with the started kazoo ``client``; a znode gone
    meanwhile is fine.  A znode that gains a child meanwhile raises kazoo's NotEmptyError
    (something still writes there: the caller decides)."""
    levels: list[list[str]] = [[top]]
    while levels[-1]:
        asked = [(path, client.get_children_async(path)) for path in levels[-1]]
        below: list[str] = []
        for path, answer in asked:
            try:
                below.extend(_below(path, child) for child in answer.get(timeout=timeout))
            except NoNodeError:
                pass
        levels.append(below)
    for level in reversed(levels):
        for answer in [client.delete_async(path) for path in level]:
            try:
                answer.get(timeout=timeout)
            except NoNodeError:
                pass
