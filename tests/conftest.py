"""Shared fixtures.

Integration tests run against a REAL ZooKeeper server: under ``./dev test`` the one it
started for all its workers (named in ``BKCTL_TEST_ZOOKEEPER``: tests/support/shared_zookeeper.py),
else one per test session, started on a free 127.0.0.1 port in a temporary directory and
stopped (by pid) at the end.  Each test gets its own ledgers root below it, so tests never see
each other's znodes; the rack map, ZooKeeper-wide, is one test's at a time (:func:`rack_map`).
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import settings

# SIGTERM stops the suite as Ctrl-C does, and Ctrl-C works in background runs too; the
# integration marker comes from the folder, and only integration tests start ZooKeeper; the
# longest work units are handed out first
pytest_plugins = [
    "tests.support.interrupts",
    "tests.support.folders",
    "tests.support.scheduling",
    "tests.support.leaks",
]

# Hypothesis's per-example deadline (200 ms) is a wall-clock assertion: on a loaded
# 2-core machine (parallel workers, bookieds, ZooKeeper) slow examples fail for no
# fault of the code under test.  The examples themselves still run and assert.
settings.register_profile("bkctl", deadline=None)
settings.load_profile("bkctl")


def pytest_runtest_setup(item):
    """A comparison of a C twin with its Python twin fails when that twin was not built
    (tests/support/c_twins.py)."""
    from tests.support.c_twins import check

    check(item)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A running ZooKeeper for the whole session (integration tests only: tests/support/folders.py):
    the one ``BKCTL_TEST_ZOOKEEPER`` names, shared with other sessions and left running, else a
    :class:`~bkctl.sandbox.zookeeper.ZooKeeperServer` of this session's own."""
    # imported here: a plugin module the conftest imports first escapes pytest's assertion rewriting
    from tests.support.folders import integration_only
    from tests.support.interrupts import die_with_parent
    from tests.support.shared_zookeeper import DIR_ENV, ENV, SharedZooKeeper

    integration_only("a real ZooKeeper")
    if os.environ.get(ENV):
        shared = SharedZooKeeper(os.environ[ENV], os.environ.get(DIR_ENV))
        if not shared.running:
            pytest.fail(f"{ENV}={shared.connect_string}: no ZooKeeper answers there", pytrace=False)
        yield shared
        return
    from bkctl.sandbox.zookeeper import ZooKeeperNotFound, ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), preexec_fn=die_with_parent)
    try:
        server.start()
    except ZooKeeperNotFound as exc:
        pytest.fail(f"integration tests need a real ZooKeeper: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def zk_client(zookeeper):
    """A raw kazoo client on the session server, for looking at znodes directly."""
    from tests.support.kazoo_client import kazoo_client

    with kazoo_client(zookeeper.connect_string) as client:
        yield client


@pytest.fixture
def rack_map(zookeeper, zk_client):
    """The rack map (``/bookies`` at the ZooKeeper root: Pulsar's, read by every cluster on the
    server), this test's alone: absent when it starts and removed after it; tests of other
    workers that ask for it meanwhile wait."""
    from bkctl.wire.metadata.racks import RACK_MAP_PATH
    from tests.support.shared_zookeeper import rack_map_turn

    def drop():
        if zk_client.exists(RACK_MAP_PATH):
            zk_client.delete(RACK_MAP_PATH, recursive=True)

    with rack_map_turn(zookeeper):
        drop()
        try:
            yield RACK_MAP_PATH
        finally:
            drop()


def _fresh_root() -> str:
    return f"/t{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def zk_session(zookeeper):
    """A :class:`~bkctl.wire.metadata.zk.session.ZKSession` on the session server (its root
    ``/``), for what the store's own helpers do to any tree (``delete_tree``)."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk.session import ZKSession

    with ZKSession(zookeeper.connect_string, "/", timeout=20, twins=fastpath.selected()) as session:
        yield session


@pytest.fixture
def zk_namespace(zk_client, zk_session):
    """A unique, not yet existing top-level znode path; deleted after the test (a level of the
    tree at a time: ``ZKSession.delete_tree``; one znode at a time again if that fails)."""
    top = _fresh_root()
    yield top
    try:
        zk_session.delete_tree(top)
    except Exception:
        try:
            zk_client.delete(top, recursive=True)
        except Exception:
            pass


@pytest.fixture
def uninitialised_uri(zookeeper, zk_namespace):
    """Metadata service URI of a cluster root that does not exist yet."""
    return f"zk+hierarchical://{zookeeper.connect_string}{zk_namespace}/ledgers"


@pytest.fixture
def metadata_uri(uninitialised_uri):
    """Metadata service URI of a freshly initialised cluster (its own root per test)."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uninitialised_uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    return uninitialised_uri


@pytest.fixture
def zkstore(metadata_uri):
    """A started :class:`~bkctl.wire.metadata.zk.ZKMetadataStore` on :func:`metadata_uri`."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk import ZKMetadataStore

    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected())
    store.start()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server (SeaweedFS, tests/support/s3_server.py) for the whole session, so once per
    xdist worker, stopped by pid at the end (integration tests only): an
    :class:`~tests.support.s3_server.S3Endpoint`."""
    from bkctl.sandbox.s3 import S3Server, S3ServerError
    from tests.support.folders import integration_only
    from tests.support.interrupts import die_with_parent
    from tests.support.ports import free_port
    from tests.support.s3_server import S3Endpoint

    integration_only("a real S3 server")
    server = S3Server(tmp_path_factory.mktemp("s3"), port_chooser=free_port, preexec_fn=die_with_parent)
    try:
        server.start()
    except S3ServerError as exc:
        pytest.fail(f"integration tests need a real S3 server: {exc}", pytrace=False)
    try:
        yield S3Endpoint.of(server)
    finally:
        # no grace: weed takes some 15 s to leave on SIGTERM, so a stop always waited out the 3 s
        # grace before its SIGKILL, at the end of every worker that had used it: the suite's last
        # seconds.  Its data goes with the session's temporary folders.
        server.stop(grace=0)


@pytest.fixture
def s3_bucket(s3_server):
    """A bucket of this test's own on :func:`s3_server` (:class:`~tests.support.s3_server.S3Bucket`),
    emptied and deleted afterwards."""
    bucket = s3_server.new_bucket()
    try:
        yield bucket
    finally:
        bucket.drop()
