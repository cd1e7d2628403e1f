"""A raw kazoo client on a test's ZooKeeper, for looking at znodes directly (or planting
them) beside the store under test: started, and stopped and closed however the block ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kazoo.client import KazooClient


@contextlib.contextmanager
def kazoo_client(connect_string: str, timeout: float = 10) -> Iterator[KazooClient]:
    """A started client of *connect_string* (session timeout *timeout*; 20 s to connect)."""
    client = KazooClient(hosts=connect_string, timeout=timeout)
    client.start(timeout=20)
    try:
        yield client
    finally:
        client.stop()
        client.close()
