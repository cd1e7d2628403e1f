"""Types of the C extension ``_avrocols.c`` (a typed export's Avro values into Arrow buffers);
its Python twin is :meth:`bkctl.wire.pulsar.typed.TypedView.value_column` (both behind
:mod:`bkctl.wire.pulsar.value_columns`).  ``./dev lint``
checks this stub against the built module (mypy's stubtest)."""

from typing import Any, Final, final

API: Final[int]
#: 1 when this build decodes Avro decimals, else 0
DECIMALS: Final[int]

@final
class Decoder:
    def __init__(self, columns: tuple[Any, ...], plans: tuple[Any, ...]) -> None: ...
    def decode(self, slots: bytes, offsets: bytes, data: bytes, first: int, /) -> tuple[Any, ...] | int: ...
