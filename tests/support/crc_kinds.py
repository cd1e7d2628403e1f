"""The ``crc_kind`` fixture of the tests of the C twins (``_fastcodec.c``, ``_records.c``, ``_archive.c``): each test
that takes it runs with both CRC32C implementations of the C modules, the CPU's instruction (skipped
where there is none) and the table one; the modules go back to their instruction afterwards."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath


@pytest.fixture(scope="module", params=[True, False], ids=["hardware-crc", "table-crc"])
def crc_kind(request):
    """Whether the C modules now use the CRC32C instruction."""
    twins = fastpath.build(True)
    modules = [c for c in (twins.codec.c, twins.records.c, twins.archive_reader.c) if c is not None]
    used = {c.hardware_crc32c(request.param) for c in modules}
    if request.param and used != {True}:
        pytest.skip("this CPU has no CRC32C instruction")
    yield request.param
    for c in modules:
        c.hardware_crc32c(True)
