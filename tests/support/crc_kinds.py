"""The ``crc_kind`` fixture of the tests of the C twins (``_fastcodec.c``): each test that takes it
runs with both CRC32C implementations of the C module, the CPU's instruction (skipped where there is
none) and the table one; the module goes back to its instruction afterwards."""
from __future__ import annotations

import pytest

from bkctl.wire.codecs import fast


@pytest.fixture(scope="module", params=[True, False], ids=["hardware-crc", "table-crc"])
def crc_kind(request):
    """Whether the C module now uses the CRC32C instruction."""
    c = fast.load(True)
    used = c.hardware_crc32c(request.param)
    if request.param and not used:
        pytest.skip("this CPU has no CRC32C instruction")
    yield used
    c.hardware_crc32c(True)
