"""``pulsar offload verify`` at a cluster's scale (issue 74): the offloaded ledgers are verified
a batch at a time as the managed ledgers are read, never all of them held at once."""

from __future__ import annotations

from collections.abc import Iterator

from bkctl.ops import pulsar_offload
from bkctl.wire.pulsar.offload_store import OffloadLocation, OffloadRecord, OffloadSettings


def _records(n: int, produced: list[int]) -> Iterator[OffloadRecord]:
    for ledger_id in range(1, n + 1):
        produced.append(ledger_id)
        where = (("storageBasePath", "/nowhere"),)
        location = OffloadLocation(ledger_id, "t/ns/persistent/a", "u", "filesystem", where, complete=True)
        yield OffloadRecord("persistent://t/ns/a", "t/ns/persistent/a", location, 10, 100)


def test_rows_come_before_every_offloaded_ledger_is_read(monkeypatch):
    produced: list[int] = []
    asked: list[list[int]] = []
    batch = getattr(pulsar_offload, "VERIFY_BATCH", 1000)
    total = 5 * batch + 7
    monkeypatch.setattr(pulsar_offload, "offloads", lambda store, base, topic: _records(total, produced))

    def metadata(store, ledger_ids):
        asked.append(list(ledger_ids))
        return iter([None] * len(ledger_ids))

    monkeypatch.setattr(pulsar_offload, "metadata_in_batches", metadata)
    monkeypatch.setattr(pulsar_offload, "verify_ledger", lambda record, settings, md, entries: ["missing"])
    rows = pulsar_offload.verify(object(), OffloadSettings())  # type: ignore[arg-type]
    first = next(rows)
    assert first.ledger_id == 1 and first.problems == ["missing"] and not first.ok
    assert len(produced) <= batch + 1  # one batch read, not the cluster's every ledger
    rest = list(rows)
    assert [r.ledger_id for r in [first, *rest]] == list(range(1, total + 1))
    assert max(len(a) for a in asked) <= batch
    assert sum(len(a) for a in asked) == total
