"""``bkctl pulsar offload verify``'s run: every offloaded ledger of a topic (or of every topic)
checked against its znode, read in batches.

The rules are wire's: which ledgers are offloaded and the objects nobody names
(:mod:`bkctl.wire.domain.offloads`: ``offload list`` and ``orphans`` call it directly), one
ledger's check (:func:`bkctl.wire.pulsar.offload_verify.verify_ledger`).  A store that refuses
the credentials or does not answer stops the command (exit 6 / 5); a ledger whose objects are
missing or wrong is a finding, named.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from bkctl.wire.domain.offloads import offloads
from bkctl.wire.domain.topic_state import metadata_in_batches
from bkctl.wire.pulsar.offload_verify import verify_ledger

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.pulsar.offload_store import OffloadRecord, OffloadSettings

__all__ = ["VERIFY_BATCH", "OffloadCheck", "verify"]

#: offloaded ledgers verified a batch at a time (their znodes read in one round of reads)
VERIFY_BATCH = 1000


def verify(
    store: MetadataStore,
    settings: OffloadSettings,
    base: str | None = None,
    topic: str | None = None,
    entries: bool = False,
) -> Iterator[OffloadCheck]:
    """One :class:`OffloadCheck` per offloaded ledger; the
    managed ledgers are read as the rows are taken, ``VERIFY_BATCH`` records at a time (their
    znodes read in one batch), so that a cluster's every offloaded ledger is never held."""
    records = offloads(store, base, topic)
    while batch := list(islice(records, VERIFY_BATCH)):
        for record, zk_md in zip(batch, metadata_in_batches(store, [r.location.ledger_id for r in batch])):
            yield _row(record, zk_md, verify_ledger(record, settings, zk_md, entries))


@dataclass(frozen=True, slots=True)
class OffloadCheck:
    """One offloaded ledger checked: where its objects are, whether BookKeeper still has it, and
    what is wrong with it (``problems``, empty when it checks out)."""

    topic: str
    ledger_id: int
    where: str
    complete: bool
    in_bookkeeper: bool
    ok: bool
    problems: list[str]


def _row(record: OffloadRecord, zk_md: LedgerMetadata | None, problems: list[str]) -> OffloadCheck:
    return OffloadCheck(
        topic=record.topic,
        ledger_id=record.location.ledger_id,
        where=record.location.where(),
        complete=record.location.complete,
        in_bookkeeper=zk_md is not None,
        ok=not problems,
        problems=problems,
    )
