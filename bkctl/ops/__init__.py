"""bkctl's operations: plain functions over the wire library.

The click commands, the shell, cron jobs and tests all call these; they
return results as named types (frozen dataclasses, Enums; their ``--json`` document is
:func:`bkctl.ops.results.to_json`'s, the one conversion) and raise library
exceptions (:mod:`bkctl.ops.errors`), never print; the commands map those to exit
codes in one place (:func:`bkctl.exitcodes.exit_code_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def parse_input_file(path: str, parse: Callable[[bytes], T], what: str) -> tuple[bytes, T]:
    """``(bytes, parse(bytes))`` of a file an operator gave; unreadable, or not ``what``
    (``parse`` raised CodecError): a usage error, exit 2."""
    from bkctl.wire.errors import CodecError

    from .errors import BadInput

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadInput(f"cannot read {path}: {e.strerror}") from None
    try:
        return data, parse(data)
    except CodecError as e:
        raise BadInput(f"{path} is not {what}: {e}") from None
