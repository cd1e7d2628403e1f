"""A typed export's values of a batch as an Arrow column: the interface, its Python twin and its C twin.

:class:`AvroColumnTwins` is what ``Twins.avro_columns`` of :mod:`bkctl.wire.fastpath`
holds, whole: ``values(view, batch)``, a batch's values (:class:`~.typed.ValueBatch`)
as an Arrow array of the view's type with ``{row: why}`` for those that do not
decode (:class:`~.typed.ValueColumn`).  Its Python twin (:data:`PYTHON`) is the
general path: each message read with fastavro (or its schema type's decoder)
into Python values that pyarrow converts (:meth:`~.typed.TypedView.value_column`).
Its C twin (:func:`twins_of`) decodes a batch's AVRO payloads into Arrow buffers
in one pass with ``_avrocols.Decoder`` (:func:`native_column`, planned by
:mod:`.avro_columns`) and hands the batches it declines -- another schema type,
a version it has no plan for, a payload it does not read -- to the general
path, given it once at selection; so a caller calls ``values``, always.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from .avro_columns import AvrocolsModule, wrap
from .typed import TypedView, ValueBatch, ValueColumn

__all__ = ["PYTHON", "AvroColumnTwins", "native_column", "twins_of"]


class AvroColumnTwins(NamedTuple):
    """A typed export's values of a batch as a column (see the module documentation), C or
    Python: :attr:`bkctl.wire.fastpath.Twins.avro_columns`.  ``c``: the ``_avrocols`` module
    the C twin is made of, or None for :data:`PYTHON`."""

    values: Callable[[TypedView, ValueBatch], ValueColumn]
    c: AvrocolsModule | None = None


#: The Python twin (the reference): the general path alone.
PYTHON = AvroColumnTwins(TypedView.value_column)


def twins_of(c: AvrocolsModule | None) -> AvroColumnTwins:
    """The C twin of the module ``c`` (``_avrocols``, which the twin selector loads): it
    decodes the batches it reads and hands the others to the general path itself;
    :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    return AvroColumnTwins(functools.partial(_values, c, PYTHON.values), c)


def _values(
    c: AvrocolsModule, general: Callable[[TypedView, ValueBatch], ValueColumn], view: TypedView, batch: ValueBatch
) -> ValueColumn:
    """The C twin's ``values``: the column ``c``'s decoder makes, else ``general``'s."""
    column = native_column(c, view, batch)
    return general(view, batch) if column is None else ValueColumn(column, {})


def native_column(c: AvrocolsModule, view: TypedView, batch: ValueBatch) -> Any:
    """The batch's values as an Arrow array decoded by the C module ``c``'s decoder, or
    None where it declines the batch: the schema not AVRO or a reading it does not make
    (:func:`plan`), a version it has no plan for, or a payload it does not decode (the
    general path then says why)."""
    native = view.native_decoder(c)
    if native is None:
        return None
    versions, payloads, skip = batch.versions, batch.payloads, batch.skip
    n = len(payloads)
    nulls = payloads.null_count
    if skip is None and not nulls and n and versions[0] == versions[-1] and len(set(versions)) == 1:
        slot = native.slots_by.get(versions[0])
        if slot is None:
            return None
        slots = bytes((slot,)) * n
    else:
        absent = payloads.is_null().to_pylist() if nulls else [False] * n
        skip = skip if skip is not None else [None] * n
        row_slots = bytearray(n)
        for i, (raw, no, gone) in enumerate(zip(versions, skip, absent)):
            if no or gone:
                row_slots[i] = 255
                continue
            slot = native.slots_by.get(raw)
            if slot is None:
                return None
            row_slots[i] = slot
        slots = bytes(row_slots)
    _validity, offsets, data = payloads.buffers()
    out = native.decoder.decode(slots, offsets, b"" if data is None else data, payloads.offset)
    if isinstance(out, int):
        return None
    return wrap(native.root, out)
