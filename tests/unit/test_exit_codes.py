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


def test_the_errors_of_the_operations_map_to_their_exit_codes():
    """The operations raise library errors (``bkctl.ops.errors``); ``exit_code_for`` is the one place
    that gives each its exit code, and a simpletest step takes the code of the error behind it."""
    from bkctl.ops import errors

    assert exitcodes.exit_code_for(errors.BadInput("--entry needs --ledger")) == exitcodes.USAGE
    assert exitcodes.exit_code_for(errors.OpFailed("no")) == exitcodes.FAILED
    assert exitcodes.exit_code_for(errors.NotRegistered("bookie b:1 is not registered")) == exitcodes.NOT_FOUND
    assert exitcodes.exit_code_for(errors.Conflict("bookie b:1 is running")) == exitcodes.CONFLICT
    assert exitcodes.exit_code_for(errors.NoHttpAnswer("GET http://b:8000/: refused")) == exitcodes.UNREACHABLE
    step = errors.SimpleTestFailed("write", "read 3 entries, expected 4 in order")
    assert exitcodes.exit_code_for(step) == exitcodes.FAILED
    try:
        raise errors.SimpleTestFailed("create", "timed out") from errors.Unreachable("timed out")
    except errors.SimpleTestFailed as e:
        assert exitcodes.exit_code_for(e) == exitcodes.UNREACHABLE
        assert str(e) == "simpletest failed at create: timed out"
