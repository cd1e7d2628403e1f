"""bkctl's exit codes: one meaning each, each described (two commands' codes once took the same number,
and the description of one replaced the other's in the DESCRIPTIONS table)."""

from __future__ import annotations

from bkctl import exitcodes


def test_every_exit_code_has_one_name_and_a_description():
    codes = {name: value for name, value in vars(exitcodes).items() if name.isupper() and isinstance(value, int)}
    by_value: dict[int, list[str]] = {}
    for name, value in codes.items():
        by_value.setdefault(value, []).append(name)
    assert {v: names for v, names in by_value.items() if len(names) > 1} == {}
    assert set(exitcodes.DESCRIPTIONS) == set(codes.values())
