"""The one twin selector: which implementation of each fast path the process uses.

A fast path is a second, quicker implementation of something a general path
already does (the server's v2/v3 ADD and v3 READ decoders, its batched
answers to runs of pipelined v3 reads, the journal's inline commits in the
reactor thread, the client's add-answer shortcut, its v2 batch reads, a window's
reads sent as one run per bookie, the C twins of its per-entry codecs and of its
answer loop in ``_fastcodec.c``, of a writer's ADD copies in ``wire/client/_addpath.c`` and its
entries and acknowledgement counter in ``_addpath_entries.c`` (one module), the bookie's journal and entry log records in ``_records.c``,
a burst's frames sent at once by :mod:`bkctl.wire.send_now`, ...).

As aiokafka picks its C or Python record classes in one place, this module
builds, once, the record of what is in use (:class:`Twins`: one field per
interface, the C or the Python implementation), and is the only module that
reads ``BKCTL_FASTPATHS`` (tests/repo/test_private_reaches.py holds that).
Components receive the record through their constructors (``twins=``;
:func:`selected` is the default), so that the same behavioural tests run with
either record (:func:`build`), and ``./dev test`` runs the unit modules that reach
a fast path and the add/read/recovery integration suites with all of them switched
off too (``BKCTL_FASTPATHS=0``; tests/support/fastpaths_off.txt): the two
implementations cannot drift apart unnoticed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bkctl.wire.text import parse_bool

if TYPE_CHECKING:
    from bkctl.wire.codecs.plain import PlainTwins

__all__ = ["Twins", "build", "check", "from_environment", "selected"]

#: the environment variable that switches every fast path off
SWITCH = "BKCTL_FASTPATHS"
#: what ``_ledgerpb``'s ``API`` must be (a build older than the sources is not used)
LEDGERPB_API = 2
#: what ``_avrocols``'s ``API`` must be
AVROCOLS_API = 1
#: what ``_addpath``'s ``API`` must be
ADDPATH_API = 5


def from_environment(environ: Mapping[str, str]) -> bool:
    """``BKCTL_FASTPATHS`` read as a boolean (:func:`bkctl.wire.text.parse_bool`;
    unset or empty: on); ValueError naming the variable for any other word."""
    value = environ.get(SWITCH, "")
    return parse_bool(value, SWITCH) if value.strip() else True


class _LookUp:
    """The type of :data:`LOOK_UP`."""


#: a twin found on first use (:attr:`Twins.adds_given`)
LOOK_UP = _LookUp()


@dataclass(frozen=True)
class Twins:
    """The implementations in use: each field one interface's C or Python twin.

    ``enabled`` switches the fast paths written in Python (inline journal commits,
    batched answers, reused encoders, ``send_now``...); the others are the C twins
    when they are built, current and ``enabled``, else the Python ones (or None where
    the caller's own Python path is the twin).  The Pulsar batch splitter and the
    bookie's plain-request twins are looked up on first use (their modules are not
    every command's)."""

    enabled: bool
    #: ``_fastcodec`` (the client's per-entry codecs and answer loop), or None: each
    #: caller then takes its Python path
    codec: ModuleType | None
    #: ``_records`` (the bookie's journal and entry log records), or None: its Python path
    records: ModuleType | None = None
    #: what :attr:`adds` is: :data:`LOOK_UP` (``_addpath`` if built, current and
    #: ``enabled``, found on first use), or the module (tests: None for the Python path)
    adds_given: ModuleType | None | _LookUp = LOOK_UP

    @functools.cached_property
    def adds(self) -> ModuleType | None:
        """``_addpath`` (a writer's fast-path ADD copies: built, registered and answered in C,
        :mod:`bkctl.wire.client.requests`; its ``Acks``, :mod:`bkctl.wire.client.acks`), or None:
        the Python :class:`Request` path and :class:`~bkctl.wire.client.acks.Acks`.  Looked
        up on first use: the module imports Twisted's Failure, which a command that only
        reads ZooKeeper never needs (tests/integration/test_cli_start_imports.py)."""
        given = self.adds_given
        return _addpath(self.enabled) if isinstance(given, _LookUp) else given

    @functools.cached_property
    def plain(self) -> PlainTwins:
        """The bookie's parsers of plain requests and builders of their answers
        (:class:`~bkctl.wire.codecs.plain.PlainTwins`: C ones or Python ones)."""
        from bkctl.wire.codecs import plain

        return plain.twins(self.enabled)

    @functools.cached_property
    def ledger_metadata(self) -> Any:
        """The C twin of decoding and checking format-3 ledger metadata
        (``_ledgerpb.metadata``: :class:`~bkctl.wire.metadata.ledger.CheckedMetadata`), or
        None: :func:`~bkctl.wire.metadata.ledger.parse_ledger_metadata` then decodes with
        protobuf's message and checks with LedgerMetadata's own checks alone."""
        if not self.enabled:
            return None
        try:
            from bkctl.wire.metadata import _ledgerpb
        except ImportError:
            return None
        return _ledgerpb.metadata if getattr(_ledgerpb, "API", None) == LEDGERPB_API else None

    @functools.cached_property
    def avro_columns(self) -> Any:
        """The C twin of a typed export's AVRO values (``_avrocols``: Avro binary
        straight into Arrow buffers, :mod:`~bkctl.wire.pulsar.avro_columns`), or None:
        :meth:`~bkctl.wire.pulsar.typed.TypedView.decode_many` (fastavro, then pyarrow)."""
        if not self.enabled:
            return None
        try:
            from bkctl.wire.pulsar import _avrocols
        except ImportError:
            return None
        return _avrocols if getattr(_avrocols, "API", None) == AVROCOLS_API else None

    @functools.cached_property
    def batch_rows(self) -> Any:
        """The Pulsar batch splitter class: ``_packed.PackedRows`` or
        :class:`~bkctl.wire.pulsar.rows.PyMessageRows`."""
        from bkctl.wire.pulsar import rows

        return rows.splitter(self.enabled)


def build(enabled: bool) -> Twins:
    """The record for fast paths on (the C twins where built) or off (Python only)."""
    from bkctl.wire.codecs import fast

    return Twins(enabled=enabled, codec=fast.load(enabled), records=fast.load_records(enabled))


def _addpath(enabled: bool) -> ModuleType | None:
    """``bkctl.wire.client._addpath`` when ``enabled``, built and current; else None."""
    if not enabled:
        return None
    try:
        from bkctl.wire.client import _addpath as module
    except ImportError:
        return None
    return module if getattr(module, "API", None) == ADDPATH_API else None


@functools.cache
def selected() -> Twins:
    """The process's record, built once from ``BKCTL_FASTPATHS`` (ValueError for a
    word that is not a boolean: bkctl and bookied call this at start to refuse it)."""
    return build(from_environment(os.environ))


def check() -> None:
    """Read ``BKCTL_FASTPATHS`` now (:func:`selected`): bkctl and bookied call this at
    start, so that a word that is not a boolean is refused before anything runs."""
    selected()
