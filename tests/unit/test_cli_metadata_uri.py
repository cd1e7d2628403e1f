"""bkctl checks --metadata-uri with the store's parser before connecting: a bad URI is a usage error."""

from __future__ import annotations

import pytest

from bkctl.cli import run
from bkctl.exitcodes import USAGE


@pytest.mark.parametrize(
    "uri, problem",
    [
        ("zk://127.0.0.1:1/ledgers?x=1", "has a query or fragment"),
        ("zk+hierarchical://127.0.0.1:1", "has no ledgers root path"),
        ("zk+ms://127.0.0.1:1/ledgers", "names ledger manager 'ms'"),
    ],
)
def test_a_bad_metadata_uri_is_a_usage_error(uri, problem, capsys):
    assert run(["-m", uri, "bookie", "list"]) == USAGE
    err = capsys.readouterr().err
    assert f"metadata service URI {uri!r} {problem}" in err
