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
from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.offloads import offloads
from bkctl.wire.domain.topic_state import metadata_in_batches
from bkctl.wire.pulsar.offload_verify import verify_ledger

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.pulsar.offload_store import OffloadSettings

__all__ = ["verify"]


def verify(
    store: MetadataStore,
    settings: OffloadSettings,
    base: str | None = None,
    topic: str | None = None,
    entries: bool = False,
) -> Iterator[dict[str, Any]]:
    """One row per offloaded ledger: the record's fields, ``ok`` and ``problems``."""
    records = list(offloads(store, base, topic))
    zk = metadata_in_batches(store, [r.location.ledger_id for r in records])
    for record in records:
        zk_md = next(zk)
        problems = verify_ledger(record, settings, zk_md, entries)
        yield {
            "topic": record.topic,
            "ledger_id": record.location.ledger_id,
            "where": record.location.where(),
            "complete": record.location.complete,
            "in_bookkeeper": zk_md is not None,
            "ok": not problems,
            "problems": problems,
        }
