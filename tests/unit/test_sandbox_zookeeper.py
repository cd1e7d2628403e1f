"""The ZooKeeper launcher's parts that start no ZooKeeper: where its jars are found (and the
install hint when they are not), free ports, and whether a recorded pid is still alive."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bkctl.sandbox import zookeeper as zkmod
from bkctl.sandbox.zookeeper import ZooKeeperNotFound, child_pids, find_zookeeper_classpath, free_port, pid_alive


def test_free_port_is_bindable_and_below_the_ephemeral_range():
    """Outside the range outgoing connections draw from: a killed bookie's port is still
    free for its restart (a client's connection took one from that range once)."""
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert port in zkmod.STABLE_PORTS and port < zkmod.ephemeral_port_low()


def test_free_port_skips_a_held_port_and_falls_back_to_the_kernel(monkeypatch):
    monkeypatch.setattr(zkmod, "STABLE_PORTS", range(10000, 10001))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 10000))
        assert free_port() != 10000
    monkeypatch.setattr(zkmod, "ephemeral_port_low", lambda: 5000)  # a kernel handing out low ports
    port = free_port()
    assert port not in zkmod.STABLE_PORTS


def test_discovery_order_and_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(zkmod, "DEBIAN_JAR_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(zkmod, "pyspark_jars_dir", lambda: None)
    with pytest.raises(ZooKeeperNotFound) as info:
        find_zookeeper_classpath(env={})
    message = str(info.value)
    assert "apt-get install zookeeper" in message
    assert "pip install 'bkctl[spark]'" in message
    assert "ZOOKEEPER_HOME" in message

    # ZOOKEEPER_HOME wins, and must really hold a server jar
    home = tmp_path / "zkhome"
    (home / "lib").mkdir(parents=True)
    with pytest.raises(ZooKeeperNotFound, match="ZOOKEEPER_HOME"):
        find_zookeeper_classpath(env={"ZOOKEEPER_HOME": str(home)})
    (home / "lib" / "zookeeper-3.9.5.jar").write_bytes(b"")
    (home / "lib" / "slf4j-api-2.0.17.jar").write_bytes(b"")
    cp = find_zookeeper_classpath(env={"ZOOKEEPER_HOME": str(home)})
    assert sorted(Path(p).name for p in cp) == ["slf4j-api-2.0.17.jar", "zookeeper-3.9.5.jar"]

    # Debian's package comes before pyspark
    debian = tmp_path / "debian"
    debian.mkdir()
    (debian / "zookeeper.jar").write_bytes(b"")
    (debian / "slf4j-nop.jar").write_bytes(b"")
    monkeypatch.setattr(zkmod, "DEBIAN_JAR_DIR", debian)
    cp = find_zookeeper_classpath(env={})
    assert [Path(p).name for p in cp] == ["zookeeper.jar", "slf4j-nop.jar"]


def test_pyspark_classpath_is_minimal(tmp_path, monkeypatch):
    assert zkmod.pyspark_jars_dir() is not None  # pyspark comes with the test extra
    monkeypatch.setattr(zkmod, "DEBIAN_JAR_DIR", tmp_path)  # no Debian package: pyspark's jars are taken
    names = [Path(p).name for p in find_zookeeper_classpath(env={})]
    assert all(str(zkmod.pyspark_jars_dir()) in p for p in find_zookeeper_classpath(env={}))
    for prefix in (
        "zookeeper-3",
        "zookeeper-jute-",
        "slf4j-api-",
        "metrics-core-",
        "commons-io-",
        "commons-cli-",
        "snappy-java-",
    ):
        assert any(n.startswith(prefix) for n in names), prefix
    assert not any(n.startswith("spark-") for n in names)


def test_pyspark_jars_are_located_without_importing_pyspark():
    """Finding the jars must not pay pyspark's import (the sandbox starts ZooKeeper on every `up`)."""
    probe = (
        "import sys; from pathlib import Path; from bkctl.sandbox import zookeeper as z; "
        "z.DEBIAN_JAR_DIR = Path('/nonexistent'); "  # no Debian package: pyspark's jars are taken
        "assert z.find_zookeeper_classpath({}), 'no jars'; "
        "print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _state(pid: int) -> str:
    """The state letter of /proc/PID/stat (R, S, Z...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


def test_child_pids_lists_running_children_and_not_those_that_exited():
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _state(exited.pid) != "Z":
            time.sleep(0.02)
        assert _state(exited.pid) == "Z"  # exited, not yet waited for
        mine = child_pids(os.getpid())
        assert running.pid in mine and exited.pid not in mine
        assert child_pids(running.pid) == []
    finally:
        running.kill()
        running.wait()
        exited.wait()


def test_pid_alive_treats_zombies_as_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _state(proc.pid) != "Z":
        time.sleep(0.02)
    assert _state(proc.pid) == "Z"  # exited, not yet waited for
    assert not pid_alive(proc.pid)
    proc.wait()


def test_pid_alive_while_a_zombie_leaders_other_threads_still_run(tmp_path):
    """A SIGKILLed bookie's leader is a zombie at once while a thread in fsync still holds its
    files (its listening port): such a process is not gone yet."""
    flag = tmp_path / "leader-exited"
    release = tmp_path / "release"
    code = (
        "import ctypes, os, sys, threading, time\n"
        "def linger():\n"
        f"    while not os.path.exists({str(release)!r}): time.sleep(0.02)\n"
        "    os._exit(0)\n"
        "threading.Thread(target=linger).start()\n"
        f"open({str(flag)!r}, 'w').close()\n"
        "import platform\n"
        "sys_exit = {'x86_64': 60, 'aarch64': 93}[platform.machine()]  # SYS_exit: only the calling thread ends\n"
        "ctypes.CDLL(None, use_errno=True).syscall(sys_exit, 0)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (flag.exists() and _state(proc.pid) == "Z"):
            time.sleep(0.02)
        assert _state(proc.pid) == "Z"  # the leader is a zombie, its other thread runs on
        assert pid_alive(proc.pid)
        release.touch()
        proc.wait(timeout=20)
        assert not pid_alive(proc.pid)
    finally:
        release.touch()
        proc.wait(timeout=20)
