"""The C twins this platform builds are the ones in use (with the fast paths on), and what a C
module copies from its Python owner is what the owner says.

A C twin that did not load (not built, or older than its sources) leaves the Python twin in
its place and every behavioural test still passes: the suite would then test the Python path
twice and say nothing.  This module fails instead.  With ``BKCTL_FASTPATHS=0`` (the second pass
of ``./dev test``) it checks that none is in use."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client import requests
from bkctl.wire.proto import bookkeeper_pb2 as pb
from tests.support import c_twins


def c_in_use(twins: fastpath.Twins) -> set[str]:
    """The fields of ``twins`` that hold a C twin."""
    found = set()
    # interfaces: C twins or Python ones, whole
    for name in ("codec", "records", "archive_reader", "adds", "entries", "avro_columns"):
        if getattr(twins, name).c is not None:
            found.add(name)
    if twins.plain.c is not None:
        found.add("plain")
    if twins.ledger_metadata.c is not None:
        found.add("ledger_metadata")
    if twins.batch_rows.__module__.endswith("._packed"):
        found.add("batch_rows")
    return found


def test_every_c_twin_this_platform_builds_is_in_use_with_fast_paths_on():
    want = set(c_twins.expected())
    got = c_in_use(fastpath.build(True))
    if got != want and c_twins.fast_paths_off():
        pytest.skip(f"not loaded, with the fast paths off (BKCTL_FASTPATHS=0): {sorted(want - got)}")
    assert got == want, (
        f"C twins expected here but not loaded (not built, or older than their sources: ./dev setup): {sorted(want - got)}"
    )


def test_the_process_record_uses_them_unless_fast_paths_are_off():
    got = c_in_use(fastpath.selected())
    assert got == (set() if c_twins.fast_paths_off() else set(c_twins.expected()))


def test_no_c_twin_is_in_use_with_fast_paths_off():
    assert c_in_use(fastpath.build(False)) == set()


def test_the_add_path_counts_request_states_and_the_add_operation_as_their_owners_do():
    """``_addpath.c`` writes a copy's state and operation as numbers of its own: they must be
    those of :mod:`bkctl.wire.client.requests` and of the protocol's OperationType."""
    adds = fastpath.build(True).adds.c
    assert adds is not None, "bkctl.wire.client._addpath is not built"
    assert adds.REQUEST_STATES == (requests.QUEUED, requests.SENT, requests.DONE)
    assert adds.OP_ADD == pb.OperationType.ADD_ENTRY
