"""A backup narrowed to what ``bkctl restore --topic/--namespace/--ledgers`` asks for: the topics
chosen (a partitioned topic: its partitions), their cursor, data and compacted ledgers, their
schemas and partitioned-topic metadata; the ledgers a spec names.  A name the backup does not
hold is exit 3."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from bkctl.wire.backup.archive import Manifest, ManifestLedger, TopicRecord, unb64

from ..exitcodes import NOT_FOUND, USAGE, CommandError
from .take import Selection, locator_ledgers, schema_of, topic_ledgers

__all__ = ["Wanted", "narrow"]


@dataclass
class Wanted:
    """The ledgers of a backup a restore writes: ``every`` one, or those in ``ids`` or in one
    of ``ranges`` (inclusive) -- a set the size of what was named, not of the backup."""

    every: bool = False
    ids: set[int] = field(default_factory=set)
    ranges: list[tuple[int, int]] = field(default_factory=list)

    def __contains__(self, ledger_id: object) -> bool:
        if self.every:
            return True
        return ledger_id in self.ids or any(lo <= ledger_id <= hi for lo, hi in self.ranges)  # type: ignore[operator]


def _chosen(manifest: Manifest, selection: Selection) -> list[TopicRecord]:
    from bkctl.wire.pulsar.managed_ledger import TopicName

    def whole_of(ml_name: str) -> str | None:
        try:
            return TopicName.from_managed_ledger(ml_name).partitioned_topic.managed_ledger
        except ValueError:
            return None

    chosen: dict[str, TopicRecord] = {}
    for name in selection.topics:
        try:
            wanted = TopicName.parse(name).managed_ledger
        except ValueError as exc:
            raise CommandError(str(exc), USAGE) from None
        found = [t for t in manifest.topics if wanted in (t.managed_ledger, whole_of(t.managed_ledger))]
        if not found:
            raise CommandError(f"backup {manifest.id} holds no topic {name}", NOT_FOUND)
        chosen.update((t.managed_ledger, t) for t in found)
    for ns in selection.namespaces:
        tenant, _, namespace = ns.partition("/")
        if not tenant or not namespace:
            raise CommandError(f"{ns!r} is not a namespace (want tenant/namespace)", USAGE)
        found = [t for t in manifest.topics if t.managed_ledger.startswith(f"{tenant}/{namespace}/persistent/")]
        if not found:
            raise CommandError(f"backup {manifest.id} holds no topic of namespace {ns}", NOT_FOUND)
        chosen.update((t.managed_ledger, t) for t in found)
    return list(chosen.values())


def _spec_ledgers(manifest: Manifest, lines: Iterable[ManifestLedger], spec_text: str) -> Wanted:
    """The ledgers spec ``spec_text`` names, each id and each range checked against the backup's
    ``lines`` (read as they come: exit 3 for an id it does not hold, a range it holds none of)."""
    from bkctl.wire.domain.ledger_plan import SpecError, parse_ledger_spec

    try:
        spec = parse_ledger_spec(spec_text)
    except SpecError as exc:
        raise CommandError(str(exc), USAGE) from None
    if spec.all:
        return Wanted(every=True)
    absent = set(spec.ids)
    empty = list(spec.ranges)
    for x in lines:
        absent.discard(x.ledger_id)
        empty = [(lo, hi) for lo, hi in empty if not lo <= x.ledger_id <= hi]
    if absent:
        first = next(i for i in spec.ids if i in absent)
        raise CommandError(f"backup {manifest.id} holds no ledger {first}", NOT_FOUND)
    if empty:
        lo, hi = empty[0]
        raise CommandError(f"backup {manifest.id} holds no ledger in {lo}-{hi}", NOT_FOUND)
    return Wanted(ids=set(spec.ids), ranges=list(spec.ranges))


def narrow(manifest: Manifest, selection: Selection, lines: Iterable[ManifestLedger] = ()) -> tuple[Manifest, Wanted]:
    """``manifest`` with only the topics, schemas and notes ``selection`` names (all of it when
    it names nothing), and the ledgers it names; ``lines`` the backup's ledgers (read for a
    ledger spec only)."""
    if selection.whole_cluster:
        return manifest, Wanted(every=True)
    topics = _chosen(manifest, selection)
    wanted: set[int] = set()
    schema_ids: set[str] = set()
    partitioned: set[str] = set()
    for t in topics:
        cursor_ledgers, data = topic_ledgers(unb64(t.value_b64), {k: unb64(v) for k, v in t.cursors_b64.items()})
        wanted.update(cursor_ledgers, data)
        named = schema_of(t.managed_ledger)
        if named is not None:
            schema_ids.add(named.schema_id)
            if named.partitioned is not None:
                partitioned.add(named.partitioned)
    schemas = [s for s in manifest.schemas if s.key in schema_ids]
    for s in schemas:
        wanted.update(locator_ledgers(unb64(s.value_b64)))
    chosen = Wanted(ids=wanted)
    if selection.ledgers:
        spec = _spec_ledgers(manifest, lines, selection.ledgers)
        chosen = Wanted(every=spec.every, ids=wanted | spec.ids, ranges=spec.ranges)
    return dataclasses.replace(
        manifest,
        ledgers=[],
        topics=topics,
        schemas=schemas,
        partitioned=[p for p in manifest.partitioned if p.key in partitioned],
        missing=[i for i in manifest.missing if i in chosen],
        unreadable=[u for u in manifest.unreadable if u.ledger_id in chosen],
    ), chosen
