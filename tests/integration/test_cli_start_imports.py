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
