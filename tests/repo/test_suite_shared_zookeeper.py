"""``./dev test`` starts one ZooKeeper for all its workers and names it in ``BKCTL_TEST_ZOOKEEPER``
(tests/support/shared_zookeeper.py): the session fixture ``zookeeper`` then hands that server out
and starts none of its own, leaves it running, and fails at once where nothing answers there."""

from __future__ import annotations

import socket
import tempfile
import threading
from pathlib import Path

import pytest

from tests.support.inner_suite import run_inner_suite
from tests.support.shared_zookeeper import DIR_ENV, ENV, SharedZooKeeper, rack_map_turn


@pytest.fixture
def answers_srvr():
    """A port on 127.0.0.1 where every connection gets a ``srvr`` answer's first line: all the
    fixture asks of the named server before it hands it out (no test here talks ZooKeeper to it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.recv(4)
                conn.sendall(b"Zookeeper version: 3.9.5, built for this check\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_the_named_server_is_handed_out_and_none_is_started(tmp_path, answers_srvr):
    connect = f"127.0.0.1:{answers_srvr}"
    done = run_inner_suite(
        tmp_path,
        {
            "tests/integration/test_shared.py": f"""
        def test_first(zookeeper):
            assert type(zookeeper).__name__ == "SharedZooKeeper"
            assert zookeeper.connect_string == {connect!r} and zookeeper.port == {answers_srvr}
            assert zookeeper.running and not hasattr(zookeeper, "stop")
            assert str(zookeeper.data_dir) == {str(tmp_path / "zk")!r}

        def test_second(zookeeper, tmp_path_factory):
            assert zookeeper.connect_string == {connect!r}
    """
        },
        env={ENV: connect, DIR_ENV: str(tmp_path / "zk")},
    )
    assert "2 passed" in done.stdout, done.stdout + done.stderr
    assert not list((tmp_path / "basetemp").rglob("zookeeper*")), "a ZooKeeper of its own was set up"


def test_nothing_answering_there_fails_and_starts_none(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        connect = f"127.0.0.1:{s.getsockname()[1]}"
    done = run_inner_suite(
        tmp_path, {"tests/integration/test_shared.py": "def test_asks(zookeeper):\n    pass\n"}, env={ENV: connect}
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert f"{ENV}={connect}: no ZooKeeper answers there" in done.stdout, done.stdout
    assert not list((tmp_path / "basetemp").rglob("zookeeper*")), "a ZooKeeper of its own was set up"


@pytest.mark.parametrize("value", ["localhost:2181", "127.0.0.1", "127.0.0.1:zk"])
def test_the_variable_names_a_port_on_127_0_0_1(value):
    with pytest.raises(ValueError, match=f"{ENV}="):
        SharedZooKeeper(value)


def test_the_rack_map_lock_lives_in_the_servers_data_directory(tmp_path):
    """``./dev test`` removes the shared server's directory at the end: a lock file there goes
    with it, where one in the temporary folder stayed behind after every run."""
    before = set(Path(tempfile.gettempdir()).glob("bkctl-tests-rack-map-*"))
    with rack_map_turn(SharedZooKeeper("127.0.0.1:2181", str(tmp_path))):
        assert (tmp_path / "rack-map.lock").exists()
    assert set(Path(tempfile.gettempdir()).glob("bkctl-tests-rack-map-*")) == before
