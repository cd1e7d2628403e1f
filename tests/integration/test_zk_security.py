"""A locked-down ZooKeeper, for real: digest and SASL authentication required by the server
(enforce.auth), creator-all ACLs with zkEnableSecurity, and TLS on the secure client port.
bkctl command groups and bookied work with the right credentials; wrong ones give one line, exit 5."""

from __future__ import annotations

import json
import uuid

import pytest

from bkctl.sandbox.zookeeper import ZooKeeperServer, find_zookeeper_classpath, free_port, pyspark_jars_dir
from bkctl.wire.metadata import zksecurity
from bkctl.wire.metadata.zksecurity import ZKSecurity
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import env_for, json_lines, ok, one_line_error, run_bkctl
from tests.support.interrupts import die_with_parent
from tests.support.tlscerts import write_certs

# Module-scoped servers, each used by the tests of one group only (so started once, on that
# group's worker): the tests of the server that requires authentication (digest, SASL) on one
# xdist worker, those of the TLS servers on another, so that neither waits for the other's
# ZooKeeper JVMs and bkctl runs.  One group for the module was one worker's chain of both halves.
AUTH = pytest.mark.xdist_group("zk_security-auth")
TLS = pytest.mark.xdist_group("zk_security-tls")

_JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_bob="bobsecret";
};
"""
_NETTY = (
    "netty-buffer",
    "netty-codec",
    "netty-codec-base",
    "netty-common",
    "netty-handler",
    "netty-resolver",
    "netty-transport",
    "netty-transport-native-unix-common",
    "netty-transport-classes-epoll",
)


def _classpath() -> list[str]:
    """The server's jars plus Netty's (SASL and TLS configuration load Netty classes)."""
    jars_dir = pyspark_jars_dir()
    netty = [str(p) for name in _NETTY for p in sorted(jars_dir.glob(f"{name}-4*.jar"))] if jars_dir else []
    return find_zookeeper_classpath() + netty


def _start(server: ZooKeeperServer):
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"cannot start the secured ZooKeeper: {exc}", pytrace=False)
    return server


@pytest.fixture(scope="module")
def auth_zk(tmp_path_factory):
    """ZooKeeper that closes every session not authenticated with digest or SASL (DIGEST-MD5 user bob)."""
    d = tmp_path_factory.mktemp("zk-auth")
    (d / "jaas.conf").write_text(_JAAS)
    server = ZooKeeperServer(
        d,
        classpath=_classpath(),
        preexec_fn=die_with_parent,
        extra_config={
            "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "enforce.auth.enabled": "true",
            "enforce.auth.schemes": "digest,sasl",
        },
        jvm_options=[f"-Djava.security.auth.login.config={d / 'jaas.conf'}"],
    )
    yield _start(server)
    server.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return write_certs(tmp_path_factory.mktemp("zk-certs"), {"server": "127.0.0.1", "client": "bkctl"}, pkcs8=True)


def _tls_server(d, certs, client_auth: str) -> ZooKeeperServer:
    """ZooKeeper with a TLS secureClientPort (Netty), certificate from a throw-away CA."""
    port = free_port()
    server = ZooKeeperServer(
        d,
        classpath=_classpath(),
        preexec_fn=die_with_parent,
        extra_config={
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "secureClientPort": str(port),
            "ssl.keyStore.location": str(certs / "server.pem"),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(certs / "ca.pem"),
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": client_auth,
        },
    )
    server.secure_port = port
    return _start(server)


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory, certs):
    server = _tls_server(tmp_path_factory.mktemp("zk-tls"), certs, "none")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mutual_tls_zk(tmp_path_factory, certs):
    server = _tls_server(tmp_path_factory.mktemp("zk-mtls"), certs, "need")
    yield server
    server.stop()


@pytest.fixture
def process_security():
    """The test process's own ZooKeeper sessions (fixtures' waits) use what the test sets."""
    yield zksecurity.set_default
    zksecurity.set_default(None)


def run(uri: str, env: dict, *args, timeout: float = 60):
    """``bkctl ARGS`` on ``uri`` with ``env`` besides this process's variables: a process of its
    own, forked from the worker's zygote (tests/support/zygote.py), which has imported bkctl
    already (none of these variables is read at import)."""
    return run_bkctl(env_for(uri, **env), *args, timeout=timeout)


def _drop_rack_map(hosts: str) -> None:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts)
    zk.start(timeout=20)
    try:
        zk.delete("/bookies") if zk.exists("/bookies") else None
    finally:
        zk.stop()
        zk.close()


def _uri(hosts: str) -> str:
    return f"zk+hierarchical://{hosts}/t{uuid.uuid4().hex[:10]}/ledgers"


def _every_group_works(uri: str, env: dict, procs, export_to=None) -> None:
    """One command of each group that talks to ZooKeeper (and the bookies)."""
    info = json.loads(ok(run(uri, env, "--json", "cluster", "info")))
    assert info
    listed = {json.loads(line)["bookie_id"] for line in ok(run(uri, env, "--json", "bookie", "list")).splitlines()}
    assert listed == {p.bookie_id for p in procs}
    ok(run(uri, env, "bookie", "rack", "set", procs[0].bookie_id, "--rack", "/r1"))
    assert procs[0].bookie_id in ok(run(uri, env, "bookie", "rack", "list"))
    lid = json.loads(ok(run(uri, env, "--json", "ledger", "create", "-e", "2", "-w", "2", "-a", "2")))["ledger_id"]
    ok(run(uri, env, "ledger", "add", lid, "hello"))
    ok(run(uri, env, "ledger", "close", lid))
    assert "hello" in ok(run(uri, env, "ledger", "read", lid))
    assert [r["ledger_id"] for r in json_lines(ok(run(uri, env, "--json", "ledger", "list")))] == [lid]
    ok(run(uri, env, "autorecovery", "status"))
    ok(run(uri, env, "recover", procs[0].bookie_id, "--dry-run"))
    if export_to is not None:  # Spark executors authenticate too
        doc = json.loads(ok(run(uri, env, "--json", "export", "--out", export_to, "--ledgers", lid, timeout=300)))
        assert doc["entries"] == 1, doc


@AUTH
def test_digest_auth_acls_and_every_group(auth_zk, tmp_path, process_security):
    from kazoo.client import KazooClient

    uri = _uri(auth_zk.connect_string)
    env = {"BKCTL_ZK_DIGEST": "alice:pw", "BKCTL_ZK_ENABLE_SECURITY": "true"}
    ok(run(uri, env, "metaformat", "--force"))
    process_security(ZKSecurity(digest="alice:pw"))
    secret = tmp_path / "zk-digest"
    secret.write_text("alice:pw\n")
    procs = [BookieProcess(tmp_path / f"b{i}", uri, zkDigestAuthPath=secret, zkEnableSecurity="true") for i in range(3)]
    try:
        start_bookies(procs, uri)
        _every_group_works(uri, env, procs, export_to=tmp_path / "export")
        # creator-all: the digest identity of alice, all permissions, on what bkctl and bookied created
        zk = KazooClient(hosts=auth_zk.connect_string, auth_data=[("digest", "alice:pw")])
        zk.start(timeout=20)
        try:
            root = uri.split(auth_zk.connect_string, 1)[1]
            for path in (
                root,
                f"{root}/available/{procs[0].bookie_id}",
                f"{root}/cookies/{procs[0].bookie_id}",
                "/bookies",
            ):
                acls, _ = zk.get_acls(path)
                assert [(a.perms, a.id.scheme, a.id.id.split(":")[0]) for a in acls] == [(31, "digest", "alice")], path
            zk.delete("/bookies")
        finally:
            zk.stop()
            zk.close()
        # wrong password: the ACLs refuse it; one line, exit 5
        err = one_line_error(run(uri, {"BKCTL_ZK_DIGEST": "alice:wrong"}, "cluster", "info"), 5)
        assert "NoAuth" in err and "alice" in err and "wrong" not in err.replace("wrong or missing", "")
        # no credentials at all: the server closes the session
        one_line_error(run(uri, {}, "--json", "bookie", "list", timeout=90), 5)
    finally:
        for p in procs:
            p.kill()


@AUTH
def test_sasl_digest_md5(auth_zk, tmp_path):
    from kazoo.client import KazooClient

    uri = _uri(auth_zk.connect_string)
    env = {
        "BKCTL_ZK_SASL_MECHANISM": "DIGEST-MD5",
        "BKCTL_ZK_SASL_USERNAME": "bob",
        "BKCTL_ZK_SASL_PASSWORD": "bobsecret",
        "BKCTL_ZK_ENABLE_SECURITY": "true",
    }
    ok(run(uri, env, "metaformat", "--force"))
    assert ok(run(uri, env, "--json", "bookie", "list")) == ""  # JSON lines: no bookie, no line
    zk = KazooClient(
        hosts=auth_zk.connect_string,
        sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobsecret"},
    )
    zk.start(timeout=20)
    try:
        acls, _ = zk.get_acls(uri.split(auth_zk.connect_string, 1)[1])
        assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "sasl", "bob")]
    finally:
        zk.stop()
        zk.close()
    err = one_line_error(run(uri, dict(env, BKCTL_ZK_SASL_PASSWORD="nope"), "bookie", "list", timeout=90), 5)
    assert "bob" in err and "nope" not in err


@TLS
def test_zookeeper_over_tls(tls_zk, certs, tmp_path, process_security):
    uri = _uri(f"127.0.0.1:{tls_zk.secure_port}")
    env = {"BKCTL_ZK_TLS_CA": str(certs / "ca.pem")}
    ok(run(uri, env, "metaformat", "--force"))
    process_security(ZKSecurity(tls_ca=str(certs / "ca.pem")))
    procs = [BookieProcess(tmp_path / f"b{i}", uri, zkTlsCaPath=certs / "ca.pem") for i in range(3)]
    try:
        start_bookies(procs, uri)
        _every_group_works(uri, env, procs)
    finally:
        for p in procs:
            p.kill()
        _drop_rack_map(tls_zk.connect_string)
    err = one_line_error(run(uri, {"BKCTL_ZK_TLS_CA": str(certs / "other-ca.pem")}, "bookie", "list", timeout=90), 5)
    assert "certificate verify failed" in err


@TLS
def test_zookeeper_tls_with_a_client_certificate(mutual_tls_zk, certs):
    uri = _uri(f"127.0.0.1:{mutual_tls_zk.secure_port}")
    ca, mine = str(certs / "ca.pem"), str(certs / "client.pem")  # key and chain in one file
    ok(run(uri, {}, "--zk-tls-ca", ca, "--zk-tls-cert", mine, "--zk-tls-key", mine, "metaformat", "--force"))
    assert (
        ok(run(uri, {}, "--zk-tls-ca", ca, "--zk-tls-cert", mine, "--zk-tls-key", mine, "--json", "bookie", "list"))
        == ""
    )  # JSON lines: no bookie, no line
    one_line_error(run(uri, {}, "--zk-tls-ca", ca, "bookie", "list", timeout=90), 5)


def _scanned(hosts: str, security: ZKSecurity, paths: list[str]) -> list[bytes | None]:
    from bkctl.wire.metadata.zk.scan import ZnodeScanner

    with ZnodeScanner(hosts, security, timeout=20, batch=3, window=2) as scanner:
        got = [v.data if v else None for v in scanner.get_many(paths)]
        assert scanner.requests >= 2  # multiRead batches, not one read
        return got


@AUTH
def test_the_walk_scanner_reads_with_digest_credentials_and_is_refused_without_them(auth_zk):
    """The multiRead scanner (what walks every ledger, beside kazoo) authenticates as the store
    does: it reads znodes only alice may read, and a wrong password is ZKAuthError."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    from bkctl.wire.metadata.errors import ZKAuthError

    root = f"/scan{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=auth_zk.connect_string, auth_data=[("digest", "alice:pw")])
    zk.start(timeout=20)
    try:
        acl = [make_digest_acl("alice", "pw", all=True)]
        zk.create(root, b"", acl=acl)
        for i in range(7):
            zk.create(f"{root}/n{i}", f"v{i}".encode(), acl=acl)
    finally:
        zk.stop()
        zk.close()
    paths = [f"{root}/n{i}" for i in range(8)]  # n7 is not there
    assert _scanned(auth_zk.connect_string, ZKSecurity(digest="alice:pw"), paths) == [
        f"v{i}".encode() for i in range(7)
    ] + [None]
    # ZooKeeper takes any digest (it only names an identity): the reads are what it refuses,
    # and a refused read is an error, not a znode gone (a walk would call the ledger deleted)
    with pytest.raises(ZKAuthError, match=f"NoAuth.*{root}/n0.*alice"):
        _scanned(auth_zk.connect_string, ZKSecurity(digest="alice:wrong"), paths)
    with pytest.raises(ZKAuthError, match="requires authentication"):  # this server enforces it
        _scanned(auth_zk.connect_string, ZKSecurity(), paths)


@TLS
def test_the_walk_scanner_reads_over_tls(tls_zk, certs):
    from kazoo.client import KazooClient

    root = f"/scan{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=tls_zk.connect_string)
    zk.start(timeout=20)
    try:
        for i in range(5):
            zk.create(f"{root}/n{i}", f"tls{i}".encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    secure = f"127.0.0.1:{tls_zk.secure_port}"
    assert _scanned(secure, ZKSecurity(tls_ca=str(certs / "ca.pem")), [f"{root}/n{i}" for i in range(5)]) == [
        f"tls{i}".encode() for i in range(5)
    ]
