"""The rules that follow from who owns a ledger (bkctl.wire.domain.ownership): why ``ledger
delete`` refuses it, and what fencing, closing or recovering it breaks while it is open."""

from __future__ import annotations

from bkctl.wire.domain.ownership import LedgerOwnership


def owned(owner: str, **fields) -> LedgerOwnership:
    return LedgerOwnership(7, owner=owner, **fields)


def test_a_topic_or_cursor_ledger_is_refused_and_named():
    assert owned("topic", topic="persistent://t/n/x").refusal() == "a data ledger of topic persistent://t/n/x"
    assert owned("cursor", cursor="sub", managed_ledger="t/n/persistent/x").refusal() == (
        "the ledger of cursor sub of topic t/n/persistent/x"
    )
    assert owned("not-pulsar").refusal() is None
    assert owned("orphan").refusal() is None  # old enough: nothing lists it
    assert owned("orphan", caution="created 5 s ago: ...").refusal() == "an orphan, but created 5 s ago: ..."


def test_a_schema_ledger_is_refused_by_what_its_locator_says():
    listed = owned("schema", topic="persistent://t/n/x", listed=True, schema_version=3, locator_unreadable=False)
    assert listed.refusal() == "version 3 of the schema of topic persistent://t/n/x: the topic cannot load without it"
    assert owned("schema", listed=False, locator_unreadable=False).refusal() is None
    # a locator that does not decode: whether it names the ledger cannot be told, so it is kept
    assert "Pulsar schema ledger" in owned("schema", locator_unreadable=True).refusal()
    assert to_json_keys(owned("schema", locator_unreadable=False)) >= {"locator_unreadable"}
    assert "locator_unreadable" not in to_json_keys(owned("topic"))


def to_json_keys(o: LedgerOwnership) -> set[str]:
    return set(o.to_json())


def test_what_fencing_an_open_ledger_breaks():
    assert owned("topic", topic="x").open_writer() == "the open ledger of topic x: its broker's next add fails"
    assert "mark-delete" in owned("cursor", cursor="s", topic="x").open_writer()
    assert owned("not-pulsar").open_writer() is None
    assert owned("not-pulsar").open_writer(any_writer=True).startswith("an open ledger: whatever writes it")
    assert owned("orphan").open_writer() is None  # an old orphan: no broker writes it
    young = owned("orphan", caution="...", age_seconds=12.0).open_writer()
    assert young.startswith("a Pulsar ledger that no topic lists yet, created 12 s ago")
    assert owned("compacted-ledger", topic="x").open_writer() == (
        "an open Pulsar compacted-ledger ledger of topic x: its writer's next add fails"
    )
