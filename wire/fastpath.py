"""The one twin selector: which implementation of each fast path the process uses.

A fast path is a second, quicker implementation of something a general path
already does (the C twins of the bookie's parsers of plain v2/v3 ADDs and v3 READs
and of their answers, one request or a run of them at a time -- with fast paths off their Python twins serve the same runs
of pipelined requests --, the client's add-answer shortcut, its v2 batch reads, a window's
reads sent as one run per bookie, fsck's check of a healthy small ledger, the C
twins of its per-entry codecs and of its answer loop in ``_fastcodec.c``, of a
connection's copies of a writer's ADDs in ``wire/client/_addpath.c``, of a
writer's entries and acknowledgement counter in ``_addentries.c``, the bookie's
journal and entry log records in ``_records.c``, a backup's data object entries, written and
decoded, in ``wire/backup/_archive.c``, a burst's frames sent at once by
:mod:`bkctl.wire.send_now`, ...).

As aiokafka picks its C or Python record classes in one place, this module
builds, once, the record of what is in use (:class:`Twins`: one field per
interface, the C or the Python implementation), and is the only module that
reads ``BKCTL_FASTPATHS`` (tests/repo/test_private_reaches.py holds that) and the only one that
imports the C extensions (:func:`c_module`; tests/repo/test_twin_selection.py holds that).
The C twins give the same bytes and values as the Python functions they stand for
(``_fastcodec``: tests/unit/test_fastcodec.py, test_client_take_answers.py; ``_records``:
test_entry_log_records.py, test_journal_entries_c.py; ``_archive``: test_archive_parts.py, test_archive_runs.py; ``_plain``: test_plain_c.py, test_plain_add_runs_c.py,
test_plain_read_runs_c.py; ``_addpath``:
test_client_add_copies.py, test_client_acks.py; ``_ledgerpb``: test_ledger_metadata_twins.py;
``_avrocols``: test_avro_columns.py; ``_packed``: test_pulsar_packed.py), each C module's stub
(its ``.pyi``) says its types, and tests/unit/test_c_twins.py fails where one this platform
builds is not in use.
Components receive the record through their constructors (``twins=``: the program's start
or a composition point asks :func:`selected` and hands it on; :data:`GENERAL` where a program
only looks up a few znodes) and call the interfaces its fields hold, never asking which twin
one is: a C twin hands what it declines to its Python twin itself.  So the same behavioural
tests run with either record (:func:`build`), and ``./dev test`` runs the unit modules that
reach a fast path and the add/read/recovery integration suites with all of them switched off
too (``BKCTL_FASTPATHS=0``; tests/support/fastpaths_off.txt): the two implementations cannot
drift apart unnoticed.
"""

from __future__ import annotations

import enum
import functools
import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from bkctl.wire.text import parse_bool

if TYPE_CHECKING:
    import bkctl.wire.backup._archive as archive_c
    import bkctl.wire.client._addentries as addentries_c
    import bkctl.wire.client._addpath as addpath_c
    import bkctl.wire.codecs._fastcodec as fastcodec_c
    import bkctl.wire.codecs._plain as plain_c
    import bkctl.wire.codecs._records as records_c
    import bkctl.wire.metadata._ledgerpb as ledgerpb_c
    import bkctl.wire.pulsar._avrocols as avrocols_c
    import bkctl.wire.pulsar._packed as packed_c
    from bkctl.wire.backup.archive import ArchiveParts
    from bkctl.wire.backup.data_read import ArchiveModule, ArchiveReader
    from bkctl.wire.bookie_disk.records import RecordsModule, RecordTwins
    from bkctl.wire.client.add_twins import AddEntriesModule, AddPathModule, ConnectionAdds, WriterAdds
    from bkctl.wire.codecs.codec_twins import CodecTwins, FastcodecModule
    from bkctl.wire.codecs.plain import PlainModule, PlainTwins
    from bkctl.wire.metadata.ledger import LedgerMetadataTwins, LedgerpbModule
    from bkctl.wire.pulsar.avro_columns import AvrocolsModule
    from bkctl.wire.pulsar.rows import BatchRowsProtocol, PackedModule
    from bkctl.wire.pulsar.value_columns import AvroColumnTwins

__all__ = [
    "C_EXTENSIONS",
    "GENERAL",
    "CTwin",
    "CTwinState",
    "Twins",
    "build",
    "c_module",
    "c_twins_report",
    "check",
    "from_environment",
    "report_line",
    "selected",
]

#: the environment variable that switches every fast path off
SWITCH = "BKCTL_FASTPATHS"
#: what each C extension's ``API`` must be (a build older than the sources is not used); this
#: module is the only one that imports them (tests/repo/test_twin_selection.py)
FASTCODEC_API = 5
#: what ``_records``'s ``API`` must be
RECORDS_API = 5
#: what ``_archive``'s ``API`` must be
ARCHIVE_API = 2
#: what ``_plain``'s ``API`` must be
PLAIN_API = 8
#: what ``_ledgerpb``'s ``API`` must be
LEDGERPB_API = 3
#: what ``_avrocols``'s ``API`` must be
AVROCOLS_API = 1
#: what ``_addpath``'s ``API`` must be
ADDPATH_API = 7
#: what ``_addentries``'s ``API`` must be
ADDENTRIES_API = 4
#: every C extension setup.py builds and the ``API`` its build must have (None: any); the
#: report of :func:`c_twins_report` (tests/repo/test_c_slots.py holds it to setup.py)
C_EXTENSIONS: Mapping[str, int | None] = {
    "bkctl.wire.codecs._fastcodec": FASTCODEC_API,
    "bkctl.wire.codecs._records": RECORDS_API,
    "bkctl.wire.backup._archive": ARCHIVE_API,
    "bkctl.wire.codecs._plain": PLAIN_API,
    "bkctl.wire.metadata._ledgerpb": LEDGERPB_API,
    "bkctl.wire.pulsar._avrocols": AVROCOLS_API,
    "bkctl.wire.pulsar._packed": None,
    "bkctl.wire.client._addpath": ADDPATH_API,
    "bkctl.wire.client._addentries": ADDENTRIES_API,
}


def from_environment(environ: Mapping[str, str]) -> bool:
    """``BKCTL_FASTPATHS`` read as a boolean (:func:`bkctl.wire.text.parse_bool`;
    unset or empty: on); ValueError naming the variable for any other word."""
    value = environ.get(SWITCH, "")
    return parse_bool(value, SWITCH) if value.strip() else True


class _LookUp:
    """The type of :data:`LOOK_UP`."""


#: a twin found on first use (:attr:`Twins.codec_given`, :attr:`Twins.adds_given`)
LOOK_UP = _LookUp()


@dataclass(frozen=True)
class Twins:
    """The implementations in use: each field one interface's C or Python twin.

    ``enabled`` switches the fast paths written in Python (batched answers, reused
    encoders, ``send_now``...); each other field is one whole interface, its C twin when
    built, current and ``enabled`` (which hands what it declines to the Python twin it was
    given here), else its Python twin.  The interfaces are built
    on first use (their modules are not every command's)."""

    enabled: bool
    #: what :attr:`codec` is made of: :data:`LOOK_UP` (``_fastcodec`` if built, current and
    #: ``enabled``, found on first use), or the module (tests: None for the Python twins)
    codec_given: ModuleType | None | _LookUp = LOOK_UP
    #: what :attr:`adds` and :attr:`entries` are made of: :data:`LOOK_UP` (``_addpath`` and
    #: ``_addentries`` if built, current and ``enabled``, found on first use), or the module
    #: ``_addpath`` (tests: None for the Python twins of both)
    adds_given: ModuleType | None | _LookUp = LOOK_UP

    @functools.cached_property
    def codec(self) -> CodecTwins:
        """The client's per-entry codecs and answer loop
        (:class:`~bkctl.wire.codecs.codec_twins.CodecTwins`: ``_fastcodec``'s or the Python
        ones), built on first use."""
        from bkctl.wire.codecs import codec_twins

        given = self.codec_given
        if isinstance(given, _LookUp):
            given = c_module("bkctl.wire.codecs._fastcodec", FASTCODEC_API) if self.enabled else None
        return codec_twins.twins_of(given)

    @functools.cached_property
    def adds(self) -> ConnectionAdds:
        """A connection's fast-path ADD copies, built, registered and answered
        (:class:`~bkctl.wire.client.add_twins.ConnectionAdds`: ``_addpath``'s, or the Python
        twins: :class:`~bkctl.wire.client.requests.Request` and ``RequestTable``'s loops).
        Built on first use: the modules import Twisted, which a command that only reads
        ZooKeeper never needs (tests/integration/test_cli_start_imports.py)."""
        from bkctl.wire.client import add_twins

        given = self.adds_given
        if isinstance(given, _LookUp):
            given = c_module("bkctl.wire.client._addpath", ADDPATH_API) if self.enabled else None
        return add_twins.connection_adds_of(_as_addpath(given))

    @functools.cached_property
    def entries(self) -> WriterAdds:
        """A writer's entries, their addressing and its acknowledgement counter
        (:class:`~bkctl.wire.client.add_twins.WriterAdds`: ``_addentries``'s, or the Python
        twins in :mod:`bkctl.wire.client.pending_add` and :mod:`bkctl.wire.client.acks`).  It
        goes with :attr:`adds` (the connection's copies of those entries): the given
        ``adds_given`` says for both, else both are looked up on first use."""
        from bkctl.wire.client import add_twins

        given = self.adds_given
        if isinstance(given, _LookUp):
            c = c_module("bkctl.wire.client._addentries", ADDENTRIES_API) if self.enabled else None
        else:
            c = None if given is None else c_module("bkctl.wire.client._addentries", ADDENTRIES_API)
        return add_twins.writer_adds_of(_as_addentries(c))

    @functools.cached_property
    def records(self) -> RecordTwins:
        """The codecs of the bookie's journal and entry log records
        (:class:`~bkctl.wire.bookie_disk.records.RecordTwins`: the C ones of ``_records``
        or the Python ones).  Looked up on first use: only the bookie writes them, and the
        Python twins import crc32c, which a command's start does without."""
        from bkctl.wire.bookie_disk import records

        return records.twins_of(c_module("bkctl.wire.codecs._records", RECORDS_API) if self.enabled else None)

    @functools.cached_property
    def archive_parts(self) -> ArchiveParts:
        """A backup's data object entries, a batch's heads and payloads at once
        (:data:`~bkctl.wire.backup.archive.ArchiveParts`): ``_archive``'s, which checksums them
        without the interpreter's lock, or the Python twin.  Looked up on first use: only a
        backup writes them."""
        from bkctl.wire.backup import archive

        return archive.parts_twin(c_module("bkctl.wire.backup._archive", ARCHIVE_API) if self.enabled else None)

    @functools.cached_property
    def archive_reader(self) -> ArchiveReader:
        """A backup's data object entries decoded a buffer's run at a time
        (:class:`~bkctl.wire.backup.data_read.ArchiveReader`): ``_archive``'s, which walks them
        without the interpreter's lock, or the Python twin.  Looked up on first use: only a
        restore and a verify read them."""
        from bkctl.wire.backup import data_read

        return data_read.reader_of(c_module("bkctl.wire.backup._archive", ARCHIVE_API) if self.enabled else None)

    @functools.cached_property
    def plain(self) -> PlainTwins:
        """The bookie's parsers of plain requests and builders of their answers
        (:class:`~bkctl.wire.codecs.plain.PlainTwins`: C ones or Python ones)."""
        from bkctl.wire.codecs import plain

        return plain.twins_of(c_module("bkctl.wire.codecs._plain", PLAIN_API) if self.enabled else None)

    @functools.cached_property
    def ledger_metadata(self) -> LedgerMetadataTwins:
        """The decoder of ledger metadata a metadata store uses
        (:class:`~bkctl.wire.metadata.ledger.LedgerMetadataTwins`): ``_ledgerpb``'s, which
        decodes and checks format 3 in C and hands the rest to the general path, or the
        general path alone (:func:`~bkctl.wire.metadata.ledger.parse_ledger_metadata`)."""
        from bkctl.wire.metadata import ledger

        return ledger.twins_of(c_module("bkctl.wire.metadata._ledgerpb", LEDGERPB_API) if self.enabled else None)

    @functools.cached_property
    def avro_columns(self) -> AvroColumnTwins:
        """A typed export's values of a batch as an Arrow column
        (:class:`~bkctl.wire.pulsar.value_columns.AvroColumnTwins`): ``_avrocols``'s, which
        decodes AVRO values straight into Arrow buffers and hands the batches it declines to
        the general path, or the general path alone
        (:meth:`~bkctl.wire.pulsar.typed.TypedView.value_column`: fastavro, then pyarrow).
        Looked up on first use: only a typed export decodes values."""
        from bkctl.wire.pulsar import value_columns

        return value_columns.twins_of(c_module("bkctl.wire.pulsar._avrocols", AVROCOLS_API) if self.enabled else None)

    @functools.cached_property
    def batch_rows(self) -> type[BatchRowsProtocol]:
        """The Pulsar batch splitter class: ``_packed.PackedRows`` when it is built, has the
        columns of the Python table (:func:`~bkctl.wire.pulsar.rows.c_columns`; a build whose
        table differs is not used), this is a little-endian machine (it writes Arrow's
        little-endian buffers as they lie in memory) and fast paths are on; else
        :class:`~bkctl.wire.pulsar.rows.PyMessageRows`."""
        from bkctl.wire.pulsar import rows

        c: PackedModule | None = (
            c_module("bkctl.wire.pulsar._packed") if self.enabled and sys.byteorder == "little" else None
        )  # held to its slot below (_PACKED_FITS)
        if c is not None and list(c.COLUMNS) == rows.c_columns():
            return c.PackedRows
        return rows.PyMessageRows


def c_module(name: str, api: int | None = None) -> ModuleType | None:
    """The C extension ``name`` when it is built and its ``API`` is ``api`` (None: any); else
    None (installed where no C compiler was found, or a build older than its sources)."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if api is None or getattr(module, "API", None) == api else None


def _as_addpath(module: ModuleType | None) -> AddPathModule | None:
    """``_addpath`` as the slot it fills (:class:`~bkctl.wire.client.add_twins.AddPathModule`):
    its stub is held to the slot below (:data:`_ADDPATH_FITS`), so a module of that name fits it."""
    return module  # a module object (its attributes Any to a type checker): its stub's fit is checked below


def _as_addentries(module: ModuleType | None) -> AddEntriesModule | None:
    """``_addentries`` as the slot it fills (:class:`~bkctl.wire.client.add_twins.AddEntriesModule`;
    :data:`_ADDENTRIES_FITS`)."""
    return module  # a module object (its attributes Any to a type checker): its stub's fit is checked below


if TYPE_CHECKING:
    # Each C module's stub (its .pyi) held to the interface slot it fills: mypy fails here when a
    # C function does not fit its slot (``./dev lint``; stubtest holds each stub to its module).
    # Every C extension of setup.py has its line (tests/repo/test_c_slots.py).
    _ADDPATH_FITS: AddPathModule = addpath_c
    _ADDENTRIES_FITS: AddEntriesModule = addentries_c
    _FASTCODEC_FITS: FastcodecModule = fastcodec_c
    _RECORDS_FITS: RecordsModule = records_c
    _ARCHIVE_FITS: ArchiveModule = archive_c
    _PLAIN_FITS: PlainModule = plain_c
    _LEDGERPB_FITS: LedgerpbModule = ledgerpb_c
    _AVROCOLS_FITS: AvrocolsModule = avrocols_c
    _PACKED_FITS: PackedModule = packed_c


def build(enabled: bool) -> Twins:
    """The record for fast paths on (the C twins where built) or off (Python only)."""
    if not enabled:
        return Twins(enabled=False, codec_given=None)
    return Twins(enabled=True, codec_given=c_module("bkctl.wire.codecs._fastcodec", FASTCODEC_API))


#: every fast path off, the general paths alone (what ``BKCTL_FASTPATHS=0`` gives): the record a
#: program gives what only looks up a few znodes (a completion's lookups, the sandbox's checks)
GENERAL = build(False)


@functools.cache
def selected() -> Twins:
    """The process's record, built once from ``BKCTL_FASTPATHS`` (ValueError for a
    word that is not a boolean: bkctl and bookied call this at start to refuse it)."""
    return build(from_environment(os.environ))


class CTwinState(enum.Enum):
    """What a C extension is in this process."""

    IN_USE = "in use"
    SWITCHED_OFF = "switched off"
    NOT_BUILT = "not built"
    #: built, but its ``API`` is not the sources': its Python twin is used instead, silently
    STALE = "older than its sources"


@dataclass(frozen=True)
class CTwin:
    """One C extension and what it is in this process (:func:`c_twins_report`)."""

    module: str
    state: CTwinState


def c_twins_report(enabled: bool | None = None) -> list[CTwin]:
    """Each C extension's state with the fast paths ``enabled`` or not (None: as this process's
    record, :func:`selected`, has them).

    A build older than its sources is not used (:func:`c_module`) and nothing says so: a
    developer's tree after a pull, or a bench run from it, measures the Python twins without
    knowing.  ``bkctl --version``, ``bookied --version`` and the benches' load line print this
    report (:func:`report_line`), so a figure says which twins made it."""
    if enabled is None:
        enabled = selected().enabled
    found = []
    for name, api in C_EXTENSIONS.items():
        if not enabled:
            state = CTwinState.SWITCHED_OFF
        elif name.endswith("._packed") and sys.byteorder != "little":
            state = CTwinState.NOT_BUILT  # not built for a big-endian machine (Twins.batch_rows)
        else:
            try:
                module = importlib.import_module(name)
            except ImportError:
                state = CTwinState.NOT_BUILT
            else:
                current = api is None or getattr(module, "API", None) == api
                state = CTwinState.IN_USE if current else CTwinState.STALE
        found.append(CTwin(name, state))
    return found


def report_line(report: list[CTwin]) -> str:
    """``report`` in one line: how many C twins are in use, and each that is not and why."""
    used = sum(t.state is CTwinState.IN_USE for t in report)
    if report and all(t.state is CTwinState.SWITCHED_OFF for t in report):
        return f"C twins: none in use (switched off: {SWITCH}=0)"
    line = f"C twins: {used} of {len(report)} in use"
    others = [t for t in report if t.state is not CTwinState.IN_USE]
    if others:
        line += "; " + ", ".join(f"{t.module.rsplit('.', 1)[1]} {t.state.value}" for t in others)
    if any(t.state is CTwinState.STALE for t in others):
        line += " (rebuild: ./dev setup, or reinstall)"
    return line


def check() -> None:
    """Read ``BKCTL_FASTPATHS`` now (:func:`selected`): bkctl and bookied call this at
    start, so that a word that is not a boolean is refused before anything runs."""
    selected()
