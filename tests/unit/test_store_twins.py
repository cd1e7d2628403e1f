"""A metadata store walks and decodes with the twins record it is given (issue 67: no component
takes the process's record as its default), and bkctl's start gives every App it runs a command
on the process's record, which its store then takes."""

from __future__ import annotations

import pytest

from bkctl.app import App
from bkctl.cli import cli
from bkctl.runner import run_line
from bkctl.wire import fastpath
from bkctl.wire.metadata.ledger import parse_ledger_metadata
from bkctl.wire.metadata.zk import ZKMetadataStore

URI = "zk+hierarchical://127.0.0.1:1/ledgers"  # never connected: the store is only built


@pytest.mark.parametrize("on", [True, False], ids=["fast-paths-on", "fast-paths-off"])
def test_the_store_decodes_with_the_record_it_is_given(on):
    record = fastpath.build(on)
    store = ZKMetadataStore(URI, twins=record)
    assert store.twins is record
    assert store.ledgers.parse is record.ledger_metadata.parse
    if not on:
        assert store.ledgers.parse is parse_ledger_metadata
        assert store.walk_scanner() is None  # the general path: kazoo walks


def test_the_general_record_has_every_fast_path_off():
    assert not fastpath.GENERAL.enabled
    assert fastpath.GENERAL.ledger_metadata.parse is parse_ledger_metadata
    assert ZKMetadataStore(URI, twins=fastpath.GENERAL).walk_scanner() is None


def test_an_app_without_a_record_says_so_and_the_command_line_gives_it_the_process_one(tmp_path, capsys):
    app = App()
    with pytest.raises(RuntimeError, match="no twins record"):
        app.require_twins()
    # any command runs bkctl's start first (this one finds no sandbox: exit 3)
    assert run_line(cli, ["sandbox", "status", "--dir", str(tmp_path / "none"), "--json"], app) == 3
    assert "no sandbox" in capsys.readouterr().err
    assert app.require_twins() is fastpath.selected()
