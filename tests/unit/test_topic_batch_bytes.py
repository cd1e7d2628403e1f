"""A topic export's record batches stay small however large its messages are."""

from __future__ import annotations

import pytest

from bkctl.export import topic_source
from bkctl.export.topic_source import BYTES_PER_BATCH, read_topic_range
from bkctl.wire import fastpath
from bkctl.wire.domain.topic_plan import TopicRange
from tests.support import pulsar_entries as pe

TOPIC = "persistent://public/default/big-messages"


class Ledgers:
    """Entries by ledger, read as LedgerReader.entries reads them (a batch of up to 1,000)."""

    def __init__(self, ledgers):
        self.ledgers = ledgers
        self.twins = fastpath.selected()

    def entries(self, source, first, last):
        assert source.offload is None  # these ledgers have only their bookies' copy
        got = list(enumerate(self.ledgers[source.ledger_id]))[first : last + 1]
        for i in range(0, len(got), 1000):
            yield got[i : i + 1000]


@pytest.mark.parametrize("size", [1 << 20, 100])
def test_a_batch_holds_about_bytes_per_batch_of_payloads_not_32768_rows(size):
    """Rows of 1 MiB messages are handed on every BYTES_PER_BATCH (8 MiB) of payloads, not every
    32,768 rows (32 GiB); small messages still by rows."""
    count = 3 * BYTES_PER_BATCH // size + 5 if size > 1000 else topic_source.ROWS_PER_BATCH + 10
    entries = [
        pe.encode_entry(pe.metadata("p", n, 1_795_000_000_000 + n), bytes([n % 251]) * size) for n in range(count)
    ]
    batches = list(read_topic_range(Ledgers({7: entries}), TopicRange(TOPIC, -1, 7, 0, count - 1, count - 1), {}))
    payloads = [p for b in batches for p in b.column("payload").to_pylist()]
    assert payloads == [bytes([n % 251]) * size for n in range(count)]
    if size > 1000:
        assert len(batches) >= 3
        assert all(sum(map(len, b.column("payload").to_pylist())) <= BYTES_PER_BATCH for b in batches)
    else:
        assert [b.num_rows for b in batches] == [topic_source.ROWS_PER_BATCH, 10]
