"""wire.sdnotify: datagrams on a real AF_UNIX socket, abstract names, environment, watchdog cadence."""

from __future__ import annotations

import os
import socket
import uuid

import pytest
from twisted.internet import task

from bkctl.wire.process import sdnotify
from bkctl.wire.process.sdnotify import Notifier, start_watchdog


class Receiver:
    """A bound AF_UNIX datagram socket standing in for systemd's notify socket."""

    def __init__(self, sock: socket.socket, name: str):
        self.sock = sock
        self.name = name  # the NOTIFY_SOCKET value

    def recv(self) -> bytes:
        return self.sock.recv(65536)

    def pending(self) -> list[bytes]:
        out = []
        self.sock.setblocking(False)
        try:
            while True:
                out.append(self.sock.recv(65536))
        except BlockingIOError:
            pass
        finally:
            self.sock.settimeout(2.0)
        return out


@pytest.fixture
def receiver(tmp_path):
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2.0)
    try:
        yield Receiver(sock, str(path))
    finally:
        sock.close()


@pytest.fixture
def abstract_receiver():
    name = f"bookied-test-{os.getpid()}-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind("\0" + name)
    except OSError as exc:  # pragma: no cover - non-Linux
        sock.close()
        pytest.skip(f"no abstract AF_UNIX namespace here: {exc}")
    sock.settimeout(2.0)
    try:
        yield Receiver(sock, "@" + name)
    finally:
        sock.close()


# -- sending ------------------------------------------------------------------


def test_ready_with_status_is_one_datagram(receiver):
    n = Notifier(receiver.name)
    assert n.enabled
    assert n.ready("serving on 127.0.0.1:3181") is True
    assert receiver.recv() == b"READY=1\nSTATUS=serving on 127.0.0.1:3181"
    assert receiver.pending() == []
    n.close()


def test_helpers_send_exact_datagrams(receiver):
    n = Notifier(receiver.name)
    n.ready()
    n.status("replaying journal")
    n.watchdog()
    n.stopping()
    n.stopping("flushing")
    n.extend_timeout(2.5)
    assert [receiver.recv() for _ in range(6)] == [
        b"READY=1",
        b"STATUS=replaying journal",
        b"WATCHDOG=1",
        b"STOPPING=1",
        b"STOPPING=1\nSTATUS=flushing",
        b"EXTEND_TIMEOUT_USEC=2500000",
    ]
    n.close()


def test_notify_keeps_field_order_and_formats_values(receiver):
    n = Notifier(receiver.name)
    assert n.notify(STATUS="a\nb\r\nc", READY=True, ERRNO=5, MAINPID=False)
    assert receiver.recv() == b"STATUS=a b c\nREADY=1\nERRNO=5\nMAINPID=0"
    n.close()


def test_notify_utf8(receiver):
    n = Notifier(receiver.name)
    n.status("bookie \u00e9t\u00e9")
    assert receiver.recv() == "STATUS=bookie \u00e9t\u00e9".encode()
    n.close()


def test_bad_field_name_rejected(receiver):
    n = Notifier(receiver.name)
    with pytest.raises(ValueError):
        n.notify(**{"READY=1\nX": 1})
    with pytest.raises(ValueError):
        n.notify(ready=1)
    assert receiver.pending() == []


def test_empty_notify_sends_nothing(receiver):
    n = Notifier(receiver.name)
    assert n.notify() is False
    assert receiver.pending() == []


def test_abstract_socket(abstract_receiver):
    n = Notifier(abstract_receiver.name)
    assert n.enabled
    assert n.ready("up")
    assert abstract_receiver.recv() == b"READY=1\nSTATUS=up"
    n.close()


def test_abstract_socket_from_environment(abstract_receiver):
    env = {"NOTIFY_SOCKET": abstract_receiver.name}
    n = Notifier.from_environment(env)
    assert n.address == abstract_receiver.name
    n.watchdog()
    assert abstract_receiver.recv() == b"WATCHDOG=1"
    n.close()


def test_missing_receiver_is_logged_not_raised(tmp_path, caplog):
    n = Notifier(str(tmp_path / "nobody-listens"))
    with caplog.at_level("WARNING", logger="bkctl.wire.process.sdnotify"):
        assert n.ready() is False
    assert "cannot notify" in caplog.text


def test_socket_reopened_after_receiver_comes_back(tmp_path):
    path = tmp_path / "notify"
    n = Notifier(str(path))
    assert n.status("early") is False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2.0)
    try:
        assert n.status("later") is True
        assert sock.recv(1024) == b"STATUS=later"
    finally:
        sock.close()
        n.close()


# -- no-op without NOTIFY_SOCKET ----------------------------------------------------


def test_noop_without_notify_socket(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    n = Notifier.from_environment()
    assert not n.enabled
    assert not n.watchdog_enabled
    assert n.ready("x") is False
    assert n.stopping() is False
    assert n.status("x") is False
    assert n.watchdog() is False
    assert n.notify(READY=1) is False
    assert n.start_watchdog(task.Clock()) is None


def test_default_constructor_is_noop():
    n = Notifier()
    assert not n.enabled and n.ready() is False


def test_unsupported_address_is_noop(caplog):
    with caplog.at_level("WARNING", logger="bkctl.wire.process.sdnotify"):
        n = Notifier("relative/path")
    assert not n.enabled
    assert n.ready() is False
    assert "unsupported" in caplog.text
    assert not Notifier("@").enabled


# -- environment ------------------------------------------------------------------


def test_from_environment_unsets_by_default(monkeypatch, receiver):
    monkeypatch.setenv("NOTIFY_SOCKET", receiver.name)
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    n = Notifier.from_environment()
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        assert key not in os.environ
    assert n.address == receiver.name
    assert n.watchdog_usec == 30_000_000
    assert n.watchdog_interval == 15.0
    n.ready()
    assert receiver.recv() == b"READY=1"
    # A second reader (a child, say) sees nothing.
    assert not Notifier.from_environment().enabled
    n.close()


def test_from_environment_can_keep_variables(receiver):
    env = {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "2000000"}
    n = Notifier.from_environment(env, unset_environment=False)
    assert env == {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "2000000"}
    assert n.watchdog_interval == 1.0


def test_from_environment_read_only_mapping(receiver):
    from types import MappingProxyType

    env = MappingProxyType({"NOTIFY_SOCKET": receiver.name})
    n = Notifier.from_environment(env)  # cannot unset: must not fail
    assert n.enabled


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"WATCHDOG_USEC": "4000000"}, 4_000_000),
        ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "4242"}, 4_000_000),
        ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "4243"}, None),
        ({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "garbage"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "-5"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_pid_and_usec_rules(receiver, env, expected):
    env = dict(env, NOTIFY_SOCKET=receiver.name)
    n = Notifier.from_environment(env, pid=4242)
    assert n.watchdog_usec == expected
    assert n.watchdog_enabled is (expected is not None)
    assert env == {}


def test_watchdog_pid_defaults_to_our_pid(receiver):
    env = {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier.from_environment(env).watchdog_enabled
    env = {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert not Notifier.from_environment(env).watchdog_enabled


# -- watchdog cadence ----------------------------------------------------------------


def test_watchdog_pings_every_half_timeout(receiver):
    clock = task.Clock()
    n = Notifier.from_environment({"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "30000000"})
    loop = n.start_watchdog(clock)
    assert loop is not None and loop.running
    assert loop.interval == 15.0
    assert receiver.pending() == [b"WATCHDOG=1"]  # first ping at once
    clock.advance(14.9)
    assert receiver.pending() == []
    clock.advance(0.1)
    assert receiver.pending() == [b"WATCHDOG=1"]
    for _ in range(3):
        clock.advance(15)
    assert receiver.pending() == [b"WATCHDOG=1"] * 3
    loop.stop()
    clock.advance(60)
    assert receiver.pending() == []
    assert clock.getDelayedCalls() == []
    n.close()


def test_watchdog_interval_override(receiver):
    clock = task.Clock()
    n = Notifier(receiver.name, watchdog_usec=30_000_000)
    loop = n.start_watchdog(clock, interval=2)
    assert receiver.pending() == [b"WATCHDOG=1"]
    clock.advance(2)
    assert receiver.pending() == [b"WATCHDOG=1"]
    loop.stop()
    with pytest.raises(ValueError):
        n.start_watchdog(clock, interval=0)
    n.close()


def test_watchdog_not_started_when_not_ours(receiver):
    clock = task.Clock()
    env = {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}
    assert start_watchdog(clock, Notifier.from_environment(env, pid=2)) is None
    assert Notifier(receiver.name).start_watchdog(clock) is None  # no WATCHDOG_USEC
    assert clock.getDelayedCalls() == []
    assert receiver.pending() == []


def test_module_start_watchdog_reads_environment(monkeypatch, receiver):
    monkeypatch.setenv("NOTIFY_SOCKET", receiver.name)
    monkeypatch.setenv("WATCHDOG_USEC", "10000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    clock = task.Clock()
    loop = start_watchdog(clock)
    assert "NOTIFY_SOCKET" not in os.environ
    assert loop.interval == 5.0
    clock.advance(5)
    assert receiver.pending() == [b"WATCHDOG=1", b"WATCHDOG=1"]
    loop.stop()
    loop.f.__self__.close()  # the notifier it built from the environment


def test_watchdog_survives_missing_receiver(tmp_path):
    clock = task.Clock()
    path = tmp_path / "notify"
    n = Notifier(str(path), watchdog_usec=2_000_000)
    loop = n.start_watchdog(clock)  # nobody listening yet: logged, loop keeps going
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2.0)
    try:
        clock.advance(1)
        assert loop.running
        assert sock.recv(64) == b"WATCHDOG=1"
    finally:
        loop.stop()
        sock.close()
        n.close()


def test_all_exports():
    assert set(sdnotify.__all__) == {"Notifier", "start_watchdog"}
