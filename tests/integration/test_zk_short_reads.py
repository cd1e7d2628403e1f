"""A few znodes read by ``ZKSession.get_many`` go through the session's own connection, whether
they come as a list or as a stream: the multiRead scanner is a second ZooKeeper session (a
write through the quorum to open), worth it for a walk, not for a handful of ledgers a command
names. A long stream still goes to the scanner where there is one."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata.zk.session import ZKSession


@pytest.fixture
def planted(zk_client, zk_namespace):
    paths = [f"{zk_namespace}/n{i:03d}" for i in range(80)]
    for i, path in enumerate(paths):
        zk_client.create(path, f"v{i}".encode(), makepath=True)
    return paths


def _session_counting_scanners(zookeeper, monkeypatch):
    session = ZKSession(zookeeper.connect_string, "/", timeout=20, twins=fastpath.build(True))
    opened = []
    walk_scanner = ZKSession.walk_scanner

    def counted(self):
        scanner = walk_scanner(self)
        opened.append(scanner)
        return scanner

    monkeypatch.setattr(ZKSession, "walk_scanner", counted)
    return session, opened


def test_a_short_stream_is_read_without_a_second_session(zookeeper, planted, monkeypatch):
    session, opened = _session_counting_scanners(zookeeper, monkeypatch)
    with session:
        stream = (path for path in [*planted[:5], planted[0] + "x"])
        got = list(session.get_many(stream))
        assert [g[0] if g else None for g in got] == [b"v0", b"v1", b"v2", b"v3", b"v4", None]
        assert opened == []  # read through kazoo, as a short list is
        keyed = list(session.get_each((i, path) for i, path in enumerate(planted[:3])))
        assert [(k, v[0]) for k, v in keyed if v] == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
        assert opened == []


def test_a_long_stream_still_goes_to_the_scanner(zookeeper, planted, monkeypatch):
    session, opened = _session_counting_scanners(zookeeper, monkeypatch)
    with session:
        got = list(session.get_many(path for path in planted))
        assert [g[0] for g in got] == [f"v{i}".encode() for i in range(80)]  # all of it, in order
        assert len(opened) == 1 and opened[0] is not None  # the walk's connection, as before
