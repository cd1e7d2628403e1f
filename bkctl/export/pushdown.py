"""Spark SQL filters the ``bookkeeper`` data source narrows its reading by (filter pushdown).

Spark hands a Python data source's reader the filters of a query
(``DataSourceReader.pushFilters``, PySpark 4.1+, with
``spark.sql.python.filterPushdown.enabled``).  The reader takes what narrows
what it reads, as the CLI's options do, and still gives every filter back, so
Spark checks each row as before: the rows are the same, fewer entries are read.

* ``publish_time`` (a topic): the window of ``from``/``to`` -- ledgers wholly
  outside it are not read and inside one the edges are found by bisection
  (:mod:`bkctl.wire.domain.topic_plan`), the window intersected with the options';
* ``ledger_id`` (both sources): ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=`` --
  the tasks of other ledgers are not run;
* ``ledger_ctime`` (ledgers): ``since``/``until``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Narrowing"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _us(value: Any) -> int | None:
    """A timestamp filter's value in microseconds since the epoch (Spark gives an aware datetime)."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def _floor_ms(us: int) -> int:
    return us // 1000


def _ceil_ms(us: int) -> int:
    return -(-us // 1000)


@dataclass
class Narrowing:
    """What the pushed filters narrow: a window of times per column (``[from, to)``
    in ms) and the ledger ids (a set and inclusive bounds); None: not narrowed."""

    publish_from: int | None = None
    publish_to: int | None = None
    ctime_from: int | None = None
    ctime_to: int | None = None
    ledger_ids: frozenset[int] | None = None
    ledger_lo: int | None = None
    ledger_hi: int | None = None

    def take(self, f: Any) -> bool:
        """Narrow by one of Spark's filters; False: it narrows nothing here."""
        from pyspark.sql.datasource import (
            EqualTo,
            GreaterThan,
            GreaterThanOrEqual,
            In,
            LessThan,
            LessThanOrEqual,
        )

        column = ".".join(getattr(f, "attribute", ()) or ())
        value: Any = getattr(f, "value", None)
        if column == "ledger_id":
            if isinstance(f, In) and all(isinstance(v, int) for v in value or ()):
                self._ids(frozenset(value))
            elif not isinstance(value, int):
                return False
            elif isinstance(f, EqualTo):
                self._ids(frozenset([value]))
            elif isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                low = value + 1 if isinstance(f, GreaterThan) else value
                self.ledger_lo = low if self.ledger_lo is None else max(self.ledger_lo, low)
            elif isinstance(f, (LessThan, LessThanOrEqual)):
                high = value - 1 if isinstance(f, LessThan) else value
                self.ledger_hi = high if self.ledger_hi is None else min(self.ledger_hi, high)
            else:
                return False
            return True
        if column not in ("publish_time", "ledger_ctime"):
            return False
        us = _us(value)
        if us is None:
            return False
        lo: int | None = None  # the window [lo, hi) in ms holding every row the filter keeps
        hi: int | None = None
        if isinstance(f, EqualTo):
            lo, hi = _floor_ms(us), _floor_ms(us) + 1
        elif isinstance(f, (GreaterThan, GreaterThanOrEqual)):
            lo = _floor_ms(us)
        elif isinstance(f, LessThan):
            hi = _ceil_ms(us)
        elif isinstance(f, LessThanOrEqual):
            hi = _floor_ms(us) + 1
        else:
            return False
        name = "publish" if column == "publish_time" else "ctime"
        if lo is not None:
            old = getattr(self, f"{name}_from")
            setattr(self, f"{name}_from", lo if old is None else max(old, lo))
        if hi is not None:
            old = getattr(self, f"{name}_to")
            setattr(self, f"{name}_to", hi if old is None else min(old, hi))
        return True

    def _ids(self, ids: frozenset[int]) -> None:
        self.ledger_ids = ids if self.ledger_ids is None else self.ledger_ids & ids

    def keeps(self, ledger_id: int) -> bool:
        """Whether a task of ``ledger_id`` may hold rows the filters keep."""
        return (
            (self.ledger_ids is None or ledger_id in self.ledger_ids)
            and (self.ledger_lo is None or ledger_id >= self.ledger_lo)
            and (self.ledger_hi is None or ledger_id <= self.ledger_hi)
        )

    def narrowed_spec(self, spec: Any) -> Any:
        """A topic's :class:`~bkctl.wire.domain.topic_plan.TopicSpec` with its window
        intersected with the ``publish_time`` filters'."""
        lo = _tighter(spec.from_ms, self.publish_from, max)
        hi = _tighter(spec.to_ms, self.publish_to, min)
        return spec if (lo, hi) == (spec.from_ms, spec.to_ms) else replace(spec, from_ms=lo, to_ms=hi)

    def narrowed_selection(self, selection: Any) -> Any:
        """A :class:`~bkctl.export.ledger_source.LedgerSelection` with its ``since``/``until``
        intersected with the ``ledger_ctime`` filters'."""
        lo = _tighter(selection.since_ms, self.ctime_from, max)
        hi = _tighter(selection.until_ms, self.ctime_to, min)
        if (lo, hi) == (selection.since_ms, selection.until_ms):
            return selection
        return replace(selection, since_ms=lo, until_ms=hi)


def _tighter(option: int | None, pushed: int | None, pick) -> int | None:
    if pushed is None:
        return option
    return pushed if option is None else pick(option, pushed)
