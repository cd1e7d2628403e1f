"""bkctl.ops.results.to_json: an operation's result as its --json document, the one conversion."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bkctl.app import encode_json
from bkctl.ops.results import inlined, json_key, not_in_json, omitted_when_none, to_json


class Colour(Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    first: int
    bookies: tuple[str, ...]


@dataclass(frozen=True)
class Outer:
    name: str
    colour: Colour
    parts: list[Inner]
    note: str | None = None
    error: str | None = omitted_when_none()
    label: str = not_in_json("for people")


def test_a_result_is_its_fields_keyed_by_name():
    result = Outer("a", Colour.RED, [Inner(0, ("b1", "b2"))])
    assert to_json(result) == {
        "name": "a",
        "colour": "red",
        "parts": [{"first": 0, "bookies": ["b1", "b2"]}],
        "note": None,
    }
    assert to_json(Outer("a", Colour.RED, [], error="gone"))["error"] == "gone"


def test_the_cli_writes_a_result_as_its_document_with_sorted_keys():
    result = Outer("a", Colour.RED, [Inner(3, ("b",))], error="x")
    assert encode_json(result) == (
        '{"colour":"red","error":"x","name":"a","note":null,"parts":[{"bookies":["b"],"first":3}]}'
    )
    assert encode_json([result]) == "[" + encode_json(result) + "]"


def test_a_type_with_its_own_document_writes_it():
    @dataclass(frozen=True)
    class Owned:
        ledger_id: int

        def to_json(self) -> dict:
            return {"ledger_id": self.ledger_id, "owner": None}

    assert to_json([Owned(7)]) == [{"ledger_id": 7, "owner": None}]


def test_a_field_with_a_json_key_is_written_under_it():
    @dataclass(frozen=True, slots=True)
    class Renamed:
        source: str = json_key("from")
        to: str = json_key("to")
        error: str | None = omitted_when_none()

    assert to_json(Renamed("a", "b")) == {"from": "a", "to": "b"}
    assert encode_json(Renamed("a", "b", "x")) == '{"error":"x","from":"a","to":"b"}'


@dataclass(frozen=True)
class Disk:
    used_bytes: int | None
    error: str | None = omitted_when_none()


@dataclass(frozen=True)
class Row:
    bookie_id: str
    disk: Disk = inlined()


def test_an_inlined_part_gives_its_keys_in_its_place():
    assert to_json(Row("b", Disk(5))) == {"bookie_id": "b", "used_bytes": 5}
    assert encode_json(Row("b", Disk(None, error="down"))) == '{"bookie_id":"b","error":"down","used_bytes":null}'
    assert encode_json([Row("b", Disk(1))]) == '[{"bookie_id":"b","used_bytes":1}]'
