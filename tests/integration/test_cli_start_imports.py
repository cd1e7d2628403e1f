"""A bkctl command that needs only ZooKeeper imports neither the reactor nor what only
bookie I/O needs: twisted and crochet (~100-160 ms of CPU a process), pyOpenSSL, the crc32c
package (its ``__init__`` reads importlib.metadata), another command's modules -- nor
tomllib without a config file.  Each is run as operators run it, a fresh ``python -m
bkctl`` against a real ZooKeeper, with ``PYTHONPROFILEIMPORTTIME`` naming every module
it imported."""

from __future__ import annotations

import re

import pytest

from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import env_for, run_bkctl
from tests.support.tlscerts import bookie_tls_settings as tls_settings

pytestmark = pytest.mark.timeout(300)

#: a module, or a package and everything under it, that no ZooKeeper-only command imports
NOT_AT_START = (
    "twisted",
    "crochet",
    "OpenSSL",
    "crc32c",
    "importlib.metadata",
    "tomllib",
    "bkctl.wire.client",
    "bkctl.wire.autorecovery.service",
    "bkctl.ops.bookie_reads",
)

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.M)


def imported_by(uri: str, tmp_path, *args) -> set[str]:
    """The modules ``bkctl ARGS`` imported (it must succeed), with no config file."""
    env = env_for(uri, PYTHONPROFILEIMPORTTIME="1", XDG_CONFIG_HOME=str(tmp_path / "no-config"))
    done = run_bkctl(env, *args, text=True, timeout=60)
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 0, "\n".join(errors)
    return set(_IMPORTED.findall(done.stderr))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_AT_START))


@pytest.fixture
def closed_ledger(zkstore) -> int:
    md = LedgerMetadata.new(["10.0.0.1:3181", "10.0.0.2:3181"], 2, 2).closed(9, 100)
    return zkstore.ledgers.create(md)[0]


@pytest.mark.parametrize(
    "args",
    [
        ("ledger", "list"),
        ("--json", "ledger", "list"),
        ("ledger", "list", "--state", "closed"),
        ("ledger", "show", "{closed}"),
        ("ledger", "show", "{closed}", "--json"),
        ("bookie", "list"),
        ("cluster", "info"),
        ("autorecovery", "status"),
        ("autorecovery", "underreplicated"),
    ],
    ids=" ".join,
)
def test_a_zookeeper_only_command_imports_nothing_heavy(metadata_uri, closed_ledger, tmp_path, args):
    modules = imported_by(metadata_uri, tmp_path, *(a.format(closed=closed_ledger) for a in args))
    assert "kazoo.client" in modules  # it did reach ZooKeeper's client
    assert heavy(modules) == []
    command = next(a for a in args if not a.startswith("-"))
    assert {m for m in modules if m.startswith("bkctl.commands.")} == GROUP_MODULES[command]


#: the command modules a command of each group imports: its group's, and its group's subcommands'
GROUP_MODULES = {
    "ledger": {
        "bkctl.commands.ledger",
        "bkctl.commands.ledger_client",
        "bkctl.commands.ledger_fsck",
        "bkctl.commands.ledger_metadata",
    },
    "bookie": {"bkctl.commands.bookie", "bkctl.commands.bookie_admin", "bkctl.commands.rack"},
    "cluster": {"bkctl.commands.cluster", "bkctl.commands.cluster_admin"},
    "autorecovery": {"bkctl.commands.cluster"},
}


def test_heavy_names_packages_with_their_modules_only():
    assert heavy({"twisted.internet.reactor", "crc32c", "kazoo.client", "crochetx", "bkctl.wire.clients"}) == [
        "crc32c",
        "twisted.internet.reactor",
    ]


#: what only TLS to the bookies needs: pyOpenSSL and what it loads (a failed ``import
#: OpenSSL`` is in the profile too, so the modules named are ones it imports after it)
TLS_ONLY = ("OpenSSL.crypto", "cryptography.x509", "service_identity")


def test_a_command_that_talks_to_bookies_loads_tls_only_when_given_tls(
    bookie_cluster, metadata_uri, tls_certs, tmp_path
):
    """Twisted loads pyOpenSSL with its reactor unless the process is told it uses no TLS
    (:func:`bkctl.wire.process.runtime.twisted_without_tls`); a one-shot command given no
    bookie TLS does, and still reads, backs up and restores; one given TLS has it."""
    bookie_cluster(2)
    env = env_for(metadata_uri)
    lid = run_bkctl(env, "ledger", "create", "-e", "2", "-w", "2", "-a", "2", text=True).stdout.strip()
    assert run_bkctl(env, "ledger", "add", lid, "one", "two").returncode == 0
    archive = tmp_path / "archive"
    for args in (
        ("ledger", "read", lid),
        ("backup", "--to", archive, "--ledgers", lid),
        ("restore", "--from", archive, "--remap", "--force"),
    ):
        modules = imported_by(metadata_uri, tmp_path, *args)
        assert "twisted.internet.reactor" in modules  # it did talk to the bookies
        assert [m for m in TLS_ONLY if m in modules] == [], args

    tls_bookie = bookie_cluster(1, **tls_settings(tls_certs))[0]
    tls = ("--tls-ca", tls_certs / "ca.pem")
    # GET_BOOKIE_INFO over TLS: exit 5 if it could not start TLS (imported_by wants exit 0)
    modules = imported_by(metadata_uri, tmp_path, *tls, "bookie", "info", tls_bookie.bookie_id)
    assert set(TLS_ONLY) <= modules
