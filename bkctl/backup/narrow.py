"""A backup narrowed to what ``bkctl restore --topic/--namespace/--ledgers`` asks for: the topics
chosen (a partitioned topic: its partitions), their cursor, data and compacted ledgers, their
schemas and partitioned-topic metadata; the ledgers a spec names.  A name the backup does not
hold is exit 3."""

from __future__ import annotations

import dataclasses

from bkctl.wire.backup.archive import Manifest, TopicRecord, unb64

from ..exitcodes import NOT_FOUND, USAGE, CommandError
from .take import Selection, locator_ledgers, schema_of, topic_ledgers

__all__ = ["narrow"]


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


def _spec_ledgers(manifest: Manifest, spec_text: str) -> set[int]:
    from bkctl.wire.domain.ledger_plan import SpecError, parse_ledger_spec

    try:
        spec = parse_ledger_spec(spec_text)
    except SpecError as exc:
        raise CommandError(str(exc), USAGE) from None
    held = {x.ledger_id for x in manifest.ledgers}
    if spec.all:
        return held
    absent = [i for i in spec.ids if i not in held]
    if absent:
        raise CommandError(f"backup {manifest.id} holds no ledger {absent[0]}", NOT_FOUND)
    picked = set(spec.ids)
    for lo, hi in spec.ranges:
        inside = {i for i in held if lo <= i <= hi}
        if not inside:
            raise CommandError(f"backup {manifest.id} holds no ledger in {lo}-{hi}", NOT_FOUND)
        picked |= inside
    return picked


def narrow(manifest: Manifest, selection: Selection) -> Manifest:
    """``manifest`` with only what ``selection`` names (all of it when it names nothing)."""
    if selection.whole_cluster:
        return manifest
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
    if selection.ledgers:
        wanted |= _spec_ledgers(manifest, selection.ledgers)
    return dataclasses.replace(
        manifest,
        ledgers=[x for x in manifest.ledgers if x.ledger_id in wanted],
        topics=topics,
        schemas=schemas,
        partitioned=[p for p in manifest.partitioned if p.key in partitioned],
        missing=[i for i in manifest.missing if i in wanted],
        unreadable=[u for u in manifest.unreadable if u.ledger_id in wanted],
    )
