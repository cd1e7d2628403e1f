"""Global options anywhere on the line (bkctl.global_options), the one rule that
bkctl's run(), bash/zsh/fish completion and `bkctl shell` all read lines by."""

from __future__ import annotations

import pytest

from bkctl.cli import cli
from bkctl.global_options import completion_args, hoist_global_options, leading_global_options, option_strings


@pytest.mark.parametrize(
    "line, hoisted",
    [
        ("ledger show 7 --json", "--json ledger show 7"),
        ("--json ledger show 7", "--json ledger show 7"),
        ("ledger list -m zk://h:1/l -q", "-m zk://h:1/l -q ledger list"),
        ("ledger list -mzk://h:1/l", "-mzk://h:1/l ledger list"),
        ("ledger list --cluster=b -vq", "--cluster=b -vq ledger list"),
        # a command's own option of the same name wins; nothing after -- moves
        ("sandbox status --json", "sandbox status --json"),
        # decommission's wait is --wait: --timeout is the global one there too
        ("decommission bk:3181 --timeout 5", "--timeout 5 decommission bk:3181"),
        ("ledger add 1 -- --json", "ledger add 1 -- --json"),
    ],
)
def test_hoist_global_options(line, hoisted):
    assert hoist_global_options(cli, line.split()) == hoisted.split()


@pytest.mark.parametrize(
    "line, options, command",
    [
        ("--json -m zk://h:1/l ledger list", ["--json", "-m"], "ledger"),
        ("-mzk://h:1/l --cluster=b shell", ["-m", "--cluster"], "shell"),
        ("-vq --unknown ledger", ["-vq", "--unknown"], "ledger"),
        ("--timeout 3 -- ledger", ["--timeout"], "ledger"),
        ("--json", ["--json"], None),
    ],
)
def test_leading_global_options(line, options, command):
    assert leading_global_options(cli, line.split()) == (options, command)


def test_option_strings_and_completion_args():
    assert option_strings(cli, ("metadata_uri", "cluster")) == {"-m", "--metadata-uri", "--cluster"}
    # the root option still waiting for its value is completed as the root's
    assert completion_args(cli, ["ledger", "list", "--json", "--cluster"]) == ["--json", "--cluster"]
    assert completion_args(cli, ["ledger", "list", "--json"]) == ["--json", "ledger", "list"]
