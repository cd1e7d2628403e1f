"""Dynamic values for shell completion: ledger ids, bookie ids, cluster names,
Pulsar topics and subscriptions.

Attach these to click parameters with ``shell_complete=``::

    from ..completers import complete_bookie_id, complete_cluster, complete_ledger_id

    @click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
    @click.option("--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id)

The same callbacks serve two callers:

* bash, zsh and fish, through click's completion protocol
  (``_BKCTL_COMPLETE=bash_complete bkctl ...``): each TAB is a new process,
  so the values are read from ZooKeeper right then (the cluster is the one
  the command line names with ``-m``/``--cluster``, or
  ``$BKCTL_METADATA_URI``, or the configured default), within a short time
  budget.  Nothing is ever printed: on any problem there are simply no
  candidates.
* ``bkctl shell``, which installs a :class:`MetadataSource` (its cache,
  refreshed in a background thread) with :func:`set_session_source`; then a
  completion never waits for the network.

The scripts that hook bash, zsh and fish up to this are in
:mod:`bkctl.completion_scripts`; ``bkctl completion`` prints and installs them.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from typing import Protocol

from click.shell_completion import CompletionItem

__all__ = [
    "LedgerIdIndex",
    "MAX_CANDIDATES",
    "MetadataSource",
    "complete_bookie_id",
    "complete_down_bookie_id",
    "complete_open_ledger_id",
    "complete_cluster",
    "complete_ledger_id",
    "complete_subscription",
    "complete_topic",
    "set_session_source",
    "subscription_names",
    "topic_names",
]

#: Never offer more candidates than this (type more digits to narrow).
MAX_CANDIDATES = 1000
#: A completion process gives up on ZooKeeper after this many seconds.
LOOKUP_TIMEOUT = 3.0
#: ... and stops walking the ledger tree after this many ids.
LOOKUP_MAX_LEDGERS = 200_000


class LedgerIdIndex:
    """Ledger ids indexed for prefix lookups: ``matching("12", 100)``.

    Lookups cost a binary search plus the matches, so completing among
    hundreds of thousands of ids stays well under a millisecond or two.
    """

    def __init__(self, ledger_ids: Iterable[int] = ()):
        self.ids: list[int] = sorted(set(ledger_ids))
        self._texts: list[str] = sorted(str(i) for i in self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def matching(self, prefix: str, limit: int = MAX_CANDIDATES) -> list[str]:
        """Ids starting with ``prefix``, smallest first, at most ``limit``."""
        if not prefix:
            return [str(i) for i in self.ids[:limit]]
        if not prefix.isdigit():
            return []
        lo = bisect.bisect_left(self._texts, prefix)
        # every text with this prefix sorts before prefix + a character above '9'
        hi = bisect.bisect_left(self._texts, prefix + ":", lo)
        found = self._texts[lo:hi]
        found.sort(key=lambda t: (len(t), t))  # numeric order, without int()
        return found[:limit]


class MetadataSource(Protocol):
    """What completion needs to know about a cluster (see :func:`set_session_source`)."""

    def ledger_ids_matching(self, prefix: str, limit: int) -> list[str]: ...

    def bookie_states(self) -> dict[str, str]:
        """bookie id -> "writable", "read-only" or "down" (a cookie, no registration), as `bookie list` says."""
        ...

    def open_ledgers(self, ledger_ids: Iterable[int]) -> set[int]:
        """Those of ``ledger_ids`` that are not closed."""
        ...

    def pulsar_topics(self, base: str | None) -> list[str]:
        """Every persistent topic with a managed ledger under ``base`` (:func:`topic_names`)."""
        ...

    def pulsar_subscriptions(self, topic: str, base: str | None) -> list[str]:
        """The subscriptions (cursors) of ``topic``, every partition's (:func:`subscription_names`)."""
        ...


_session_source: MetadataSource | None = None


def set_session_source(source: MetadataSource | None) -> None:
    """Make completions answer from ``source`` (``bkctl shell``'s cache); None to stop."""
    global _session_source
    _session_source = source


# -- the callbacks -------------------------------------------------------------


def complete_ledger_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for ledger id arguments and options."""
    try:
        if _session_source is not None:
            texts = _session_source.ledger_ids_matching(incomplete, MAX_CANDIDATES)
        else:
            texts = _one_shot(ctx).ledger_ids_matching(incomplete, MAX_CANDIDATES)
    except Exception:
        return []
    return [CompletionItem(t) for t in texts]


def complete_bookie_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for bookie ids: registered (writable, read-only) and with a cookie."""
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        states = source.bookie_states()
    except Exception:
        return []
    return [CompletionItem(b, help=state) for b, state in sorted(states.items()) if b.startswith(incomplete)][
        :MAX_CANDIDATES
    ]


def complete_open_ledger_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for commands that want a ledger that is not closed (ledger close)."""
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        texts = source.ledger_ids_matching(incomplete, MAX_CANDIDATES)
        opened = source.open_ledgers(int(t) for t in texts)
    except Exception:
        return []
    return [CompletionItem(t, help="open") for t in texts if int(t) in opened]


def open_ledgers(store, ledger_ids: Iterable[int], timeout: float = LOOKUP_TIMEOUT) -> set[int]:
    """Those of ``ledger_ids`` whose metadata is not CLOSED (read pipelined; none while
    the store is disconnected, and no more once ``timeout`` has passed)."""
    from bkctl.wire.metadata.ledger import LedgerMetadata

    deadline = time.monotonic() + timeout
    found: set[int] = set()
    if not store.connected:  # requests would wait for the reconnection
        return found
    try:
        for ledger_id, md, _version in store.ledgers.read_many(ledger_ids):
            if isinstance(md, LedgerMetadata) and not md.is_closed:  # deleted or corrupt: not offered
                found.add(ledger_id)
            if time.monotonic() > deadline:
                break
    except Exception:  # the store went away: what was found is all there is
        pass
    return found


def complete_down_bookie_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for commands that want a stopped bookie (decommission): the "down" ones."""
    return [item for item in complete_bookie_id(ctx, param, incomplete) if item.help == "down"]


def complete_topic(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for Pulsar topics, in the form being typed: full
    names (``persistent://...``), ``tenant/ns/topic``, or a bare name of
    ``public/default``; a partitioned topic both whole and by partition."""
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        names = source.pulsar_topics(_managed_ledgers(ctx))
    except Exception:
        return []
    return [CompletionItem(n) for n in topic_forms(names, incomplete)][:MAX_CANDIDATES]


def topic_forms(names: Iterable[str], incomplete: str) -> list[str]:
    """The topics ``names`` (full names) written as ``incomplete`` is being
    written, those that start with it, sorted."""
    full = set(names)
    for name in list(full):  # a partitioned topic is a topic too
        head, sep, tail = name.rpartition("-partition-")
        if sep and tail.isdigit():
            full.add(head)
    prefix = "persistent://"
    if incomplete.startswith(prefix) or (incomplete and prefix.startswith(incomplete)):
        forms = full
    else:
        forms = {n[len(prefix) :] for n in full if n.startswith(prefix)}
        if "/" not in incomplete:
            local = prefix + "public/default/"
            forms |= {n[len(local) :] for n in full if n.startswith(local)}
    return sorted(f for f in forms if f.startswith(incomplete))


def complete_subscription(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for ``--subscription``: the cursors of the topic the command line names
    (of every topic it names, when ``export --topic`` is given more than once: the subscription
    is each topic's)."""
    topics: tuple[str, ...] = ()
    c = ctx
    while c is not None and not topics:
        params = c.params or {}
        named = params.get("topics") or params.get("topic") or params.get("name")
        topics = tuple(named) if isinstance(named, (tuple, list)) else (named,) if named else ()
        c = c.parent
    if not topics:
        return []
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        base = _managed_ledgers(ctx)
        shared = set(source.pulsar_subscriptions(topics[0], base))
        for topic in topics[1:]:
            shared &= set(source.pulsar_subscriptions(topic, base))
    except Exception:
        return []
    return [CompletionItem(n) for n in sorted(shared) if n.startswith(incomplete)][:MAX_CANDIDATES]


def _managed_ledgers(ctx) -> str | None:
    """The managed-ledger root the command line names (``pulsar --managed-ledgers``,
    ``export --managed-ledgers``), None for the default."""
    c = ctx
    while c is not None:
        params = c.params or {}
        for key in ("managed_ledgers", "base"):
            if params.get(key):
                return params[key]
        c = c.parent
    return None


def topic_names(store, base: str | None = None) -> list[str]:
    """Every persistent topic with a managed ledger (the store's Pulsar manager)."""
    from bkctl.wire.pulsar.topics import TopicMetadataReader

    return [str(t) for t in TopicMetadataReader.of(store, base).topics()]


def subscription_names(store, topic: str, base: str | None = None) -> list[str]:
    """The cursors of ``topic`` (short names too), of every partition of a partitioned one."""
    from bkctl.wire.pulsar.errors import NoSuchTopic
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from bkctl.wire.pulsar.topics import TopicMetadataReader

    reader = TopicMetadataReader.of(store, base)
    name = TopicName.parse(topic)
    try:
        managed = [reader.read(name)]
    except NoSuchTopic:
        managed = [reader.read(p) for p in reader.partitions(name)]
    return sorted({c for ml in managed for c in ml.cursors})


def complete_cluster(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for cluster names from ``~/.config/bkctl/config.toml``."""
    try:
        from .clusters import load

        clusters = load().get("clusters", {})
    except Exception:
        return []
    items = []
    for name in sorted(clusters):
        if name.startswith(incomplete):
            entry = clusters[name]
            uri = entry.get("metadata_uri") if isinstance(entry, dict) else None
            items.append(CompletionItem(name, help=uri if isinstance(uri, str) else None))
    return items


# -- one-shot lookups (a completion process of bash, zsh or fish) ----------------


def _metadata_uri(ctx) -> str | None:
    """The cluster the command line being completed talks to."""
    from .app import App
    from .clusters import resolve_metadata_uri

    root = ctx.find_root() if ctx is not None else None
    if root is None:
        return resolve_metadata_uri(None, None)
    if isinstance(root.obj, App) and root.obj.metadata_uri:
        return root.obj.metadata_uri
    params = root.params or {}
    return resolve_metadata_uri(params.get("metadata_uri"), params.get("cluster"))


class _OneShot:
    """Reads what a completion needs straight from ZooKeeper, then disconnects."""

    def __init__(self, uri: str | None):
        self.uri = uri

    def _store(self):
        if not self.uri:
            raise LookupError("no cluster")
        import logging

        # a completion must not print: keep kazoo's connection warnings quiet
        logging.getLogger("kazoo").setLevel(logging.CRITICAL + 1)
        from bkctl.wire import fastpath
        from bkctl.wire.metadata.zk import ZKMetadataStore

        # a completion reads a few znodes: the general paths (no scanner connection of its own)
        return ZKMetadataStore(self.uri, timeout=LOOKUP_TIMEOUT, twins=fastpath.GENERAL).start()

    def ledger_ids_matching(self, prefix: str, limit: int) -> list[str]:
        if prefix and not prefix.isdigit():
            return []
        store = self._store()
        try:
            deadline = time.monotonic() + LOOKUP_TIMEOUT
            ids = []
            for n, ledger_id in enumerate(store.ledgers.ids()):
                if str(ledger_id).startswith(prefix):
                    ids.append(ledger_id)
                if n >= LOOKUP_MAX_LEDGERS or (n % 256 == 0 and time.monotonic() > deadline):
                    break
        finally:
            store.close()
        return LedgerIdIndex(ids).matching(prefix, limit)

    def bookie_states(self) -> dict[str, str]:
        store = self._store()
        try:
            return bookie_states(store)
        finally:
            store.close()

    def open_ledgers(self, ledger_ids: Iterable[int]) -> set[int]:
        store = self._store()
        try:
            return open_ledgers(store, ledger_ids)
        finally:
            store.close()

    def pulsar_topics(self, base: str | None) -> list[str]:
        store = self._store()
        try:
            return topic_names(store, base)
        finally:
            store.close()

    def pulsar_subscriptions(self, topic: str, base: str | None) -> list[str]:
        store = self._store()
        try:
            return subscription_names(store, topic, base)
        finally:
            store.close()


def _one_shot(ctx) -> _OneShot:
    return _OneShot(_metadata_uri(ctx))


def bookie_states(store) -> dict[str, str]:
    """Every bookie the cluster knows, with its state (shared with the shell's cache)."""
    from bkctl.wire.metadata.registration_state import Registrations

    from .ops.bookies import Registration

    regs = Registrations.read(store.registration)
    return {b: Registration.of(regs.state_of(b)).value for b in set(store.registration.all_bookies()) | regs.registered}
