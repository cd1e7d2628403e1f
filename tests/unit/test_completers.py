"""Completion candidates from bkctl.completers without a shell or a cluster: the ledger-id prefix
index, and every id parameter of the command tree wired to a completer (the real shells run
against a real cluster in tests/integration/test_completions.py)."""

from __future__ import annotations

import click

from bkctl import completers
from bkctl.cli import cli
from bkctl.completers import LedgerIdIndex


def test_ledger_id_index_prefixes():
    index = LedgerIdIndex([1, 10, 2, 100, 12, 20, 1000, 5])
    assert index.matching("") == ["1", "2", "5", "10", "12", "20", "100", "1000"]
    assert index.matching("1") == ["1", "10", "12", "100", "1000"]
    assert index.matching("1", limit=2) == ["1", "10"]
    assert index.matching("10") == ["10", "100", "1000"]
    assert index.matching("3") == [] and index.matching("x") == []


def test_id_parameters_complete_from_the_cluster(monkeypatch):
    """Every ledger id, bookie id or cluster parameter has a ``shell_complete=`` callback."""

    class Source:
        def ledger_ids_matching(self, prefix, limit):
            return ["424242"]

        def bookie_states(self):
            return {"bookie-sentinel:3181": "down"}  # stopped: decommission offers only those

        def open_ledgers(self, ledger_ids):
            return set(ledger_ids)  # all open: ledger close offers only those

    monkeypatch.setattr(completers, "_session_source", Source())
    missing = []

    def wanted(param: click.Parameter) -> str | None:
        if isinstance(param, click.Option) and (param.is_flag or param.count):
            return None
        if param.name in ("ledger_id", "ledger_ids", "ledger"):
            return "424242"
        if isinstance(param.type, click.types.IntParamType):  # counts (sandbox up --bookies 3)
            return None
        if param.name in ("bookie_id", "bookie_ids", "bookie", "bookies") or (param.metavar or "").startswith("BOOKIE"):
            return "bookie-sentinel:3181"
        return None

    def visit(cmd: click.Command, ctx: click.Context, path: str) -> None:
        for param in cmd.params:
            want = wanted(param)
            if want is None:
                continue
            values = [item.value for item in param.shell_complete(ctx, "")]
            if want not in values:
                missing.append(f"{path} {param.human_readable_name}")
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                visit(sub, click.Context(sub, info_name=name, parent=ctx), f"{path} {name}")

    visit(cli, click.Context(cli, info_name="bkctl"), "bkctl")
    assert not missing, (
        "add shell_complete=complete_ledger_id / complete_bookie_id (bkctl.completers) to: " + ", ".join(missing)
    )


def test_topics_complete_in_the_form_being_typed():
    from bkctl.completers import topic_forms

    names = [
        "persistent://public/default/orders",
        "persistent://public/default/parts-partition-0",
        "persistent://public/default/parts-partition-1",
        "persistent://acme/prod/pay",
    ]
    assert topic_forms(names, "") == [
        "acme/prod/pay",
        "orders",
        "parts",
        "parts-partition-0",
        "parts-partition-1",
        "public/default/orders",
        "public/default/parts",
        "public/default/parts-partition-0",
        "public/default/parts-partition-1",
    ]
    assert topic_forms(names, "or") == ["orders"]
    assert topic_forms(names, "acme/") == ["acme/prod/pay"]
    assert topic_forms(names, "pers") == [
        "persistent://acme/prod/pay",
        "persistent://public/default/orders",
        "persistent://public/default/parts",
        "persistent://public/default/parts-partition-0",
        "persistent://public/default/parts-partition-1",
    ]
    assert topic_forms(names, "persistent://a") == ["persistent://acme/prod/pay"]


def test_topic_and_subscription_parameters_complete_from_the_stores_pulsar_manager(monkeypatch):
    """pulsar topic show TOPIC, export --topic/--subscription: names read through store.pulsar."""
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=0).SerializeToString()
    store.pulsar.put_managed_ledger(
        "public/default/persistent/orders",
        ml.ManagedLedgerInfo().SerializeToString(),
        {"billing": cursor, "audit%2Fx": cursor},
    )
    store.pulsar.put_managed_ledger(
        "public/default/persistent/parts-partition-0", ml.ManagedLedgerInfo().SerializeToString(), {"p0": cursor}
    )
    store.pulsar.put_managed_ledger(
        "public/default/persistent/parts-partition-1", ml.ManagedLedgerInfo().SerializeToString(), {"p1": cursor}
    )

    class Source:
        def pulsar_topics(self, base):
            return completers.topic_names(store, base)

        def pulsar_subscriptions(self, topic, base):
            return completers.subscription_names(store, topic, base)

    monkeypatch.setattr(completers, "_session_source", Source())
    show = cli.commands["pulsar"].commands["topic"].commands["show"]
    ctx = click.Context(show, info_name="show")
    [name] = [p for p in show.params if p.name == "name"]
    assert [i.value for i in name.shell_complete(ctx, "o")] == ["orders"]
    export = cli.commands["export"]
    params = {p.name: p for p in export.params}
    ctx = click.Context(export, info_name="export")
    assert [i.value for i in params["topics"].shell_complete(ctx, "public/default/pa")] == [
        "public/default/parts",
        "public/default/parts-partition-0",
        "public/default/parts-partition-1",
    ]
    assert [i.value for i in params["subscription"].shell_complete(ctx, "")] == []  # no topic typed yet
    ctx.params["topics"] = ("orders",)
    assert [i.value for i in params["subscription"].shell_complete(ctx, "")] == ["audit/x", "billing"]
    ctx.params["topics"] = ("parts",)  # a partitioned topic: every partition's cursors
    assert [i.value for i in params["subscription"].shell_complete(ctx, "p")] == ["p0", "p1"]
    ctx.params["topics"] = ("orders", "parts-partition-0")  # several: the cursors each of them has
    assert [i.value for i in params["subscription"].shell_complete(ctx, "")] == []
    ctx.params["topics"] = ("parts", "parts-partition-1")
    assert [i.value for i in params["subscription"].shell_complete(ctx, "")] == ["p1"]
    ctx.params["topics"] = ("nothing",)
    assert [i.value for i in params["subscription"].shell_complete(ctx, "")] == []


def test_open_ledgers_are_read_from_the_store():
    """``ledger close`` offers the ledgers whose metadata is not closed; a missing or
    corrupt one is not offered, and none while the store is disconnected."""
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    md = LedgerMetadata.new(("127.0.0.1:3181",), password=b"")
    for ledger_id in (1, 2, 3):
        store.ledgers.create(md, ledger_id)
    store.ledgers.update(2, md.closed(0, 0), 0)
    assert completers.open_ledgers(store, [1, 2, 3, 4]) == {1, 3}
    store.lose_connection()
    assert completers.open_ledgers(store, [1, 2, 3]) == set()
