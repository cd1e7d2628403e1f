"""One ZooKeeper for every worker of ``./dev test``, both runs (the whole suite and the fast-paths-off one).

``./dev test`` starts it before the runs (``python -m tests.support.shared_zookeeper start DIR``
prints its pid and connect string), names it to them in :data:`ENV`, and stops it by pid at the
end (``... stop PID DIR``).  The session fixture ``zookeeper`` (tests/conftest.py) then hands
out :class:`SharedZooKeeper` instead of starting a JVM in each worker; without :data:`ENV` it
starts its own as before.  Every test has its own cluster root, so the workers do not meet in
it; the one ZooKeeper-wide znode tests write, Pulsar's rack map ``/bookies``, is held by one
test at a time (:func:`rack_map_turn`, a lock file in the server's data directory, which
``./dev test`` names in :data:`DIR_ENV` and removes with the server).  Tests that stop or
restart ZooKeeper start their own.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
import tempfile
from pathlib import Path

from bkctl.sandbox.zookeeper import ZooKeeperServer, server_answers, stop_recorded_zookeeper

#: the shared server's connect string (``127.0.0.1:PORT``), set by ``./dev test``
ENV = "BKCTL_TEST_ZOOKEEPER"
#: the shared server's data directory, where the workers' lock files live (and go with it)
DIR_ENV = "BKCTL_TEST_ZOOKEEPER_DIR"
#: nine workers' clusters at once, where each worker's own server had 256 MB
HEAP_MB = 512


class SharedZooKeeper:
    """The server :data:`ENV` names, as tests use a ZooKeeperServer: its host, port, connect
    string and data directory (:data:`DIR_ENV`; None when not named).  It has no ``stop``: it
    is not the test session's to stop."""

    HOST = ZooKeeperServer.HOST

    def __init__(self, connect_string: str, data_dir: str | None = None):
        host, _, port = connect_string.rpartition(":")
        if host != self.HOST or not port.isdigit():
            raise ValueError(f"{ENV}={connect_string!r}: want {self.HOST}:PORT")
        self.port = int(port)
        self.connect_string = connect_string
        self.data_dir = Path(data_dir) if data_dir else None

    @property
    def running(self) -> bool:
        return server_answers(self.HOST, self.port)

    def __repr__(self) -> str:
        return f"SharedZooKeeper({self.connect_string!r})"


@contextlib.contextmanager
def rack_map_turn(server):
    """This process's turn at the ZooKeeper-wide rack map of ``server`` (a ZooKeeperServer or
    :class:`SharedZooKeeper`): other tests on it, in any worker of either run, wait meanwhile.
    The lock file lives in the server's data directory, which goes with the server; only a
    shared server named without one (by hand) puts it in the temporary folder."""
    if server.data_dir is not None:
        lock = Path(server.data_dir) / "rack-map.lock"
    else:
        lock = Path(tempfile.gettempdir()) / f"bkctl-tests-rack-map-{server.connect_string.replace(':', '-')}.lock"
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def start(data_dir: Path) -> ZooKeeperServer:
    """The shared server, started in ``data_dir`` on a port of its own block (tests/support/ports.py);
    it outlives this process."""
    from tests.support.ports import free_port

    return ZooKeeperServer(data_dir, free_port(), heap_mb=HEAP_MB).start()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "start":
        server = start(Path(argv[1]))
        print(server.pid, server.connect_string)
        return 0
    if len(argv) == 3 and argv[0] == "stop" and argv[1].isdigit():
        stop_recorded_zookeeper(int(argv[1]), argv[2])
        return 0
    print("usage: python -m tests.support.shared_zookeeper start DIR | stop PID DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
