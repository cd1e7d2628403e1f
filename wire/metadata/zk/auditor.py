"""The auditor election below ``<root>/underreplication/auditorelection``, as Java's
ZkLedgerAuditorManager runs it: EPHEMERAL_SEQUENTIAL votes, the lowest wins."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata import underreplication as UR
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call

if TYPE_CHECKING:
    from bkctl.wire.metadata.zk.underreplication import ZKUnderreplicationManager

__all__ = ["ZKAuditorElection"]


def _vote_sequence(name: str) -> int | None:
    digits = name[len(P.UR_VOTE_PREFIX) :]
    return int(digits) if name.startswith(P.UR_VOTE_PREFIX) and digits.isdigit() else None


class ZKAuditorElection(Manager):
    """Votes, the current auditor, and the watch a candidate sets on its predecessor."""

    def __init__(self, session: ZKSession, underreplication: ZKUnderreplicationManager):
        super().__init__(session)
        self._underreplication = underreplication

    @property
    def _election(self) -> str:
        return P.underreplication_node(P.UR_AUDITOR_ELECTION, self._root)

    @zk_call
    def cast_vote(self, bookie_id: str) -> str:
        """Create this daemon's EPHEMERAL_SEQUENTIAL vote ``B/auditorelection/V_%010d``
        (AuditorVoteFormat); returns its node name."""
        self._underreplication.ensure_checked()
        election = self._election
        self._session.create_if_missing(election)
        path = self._zk.create(
            f"{election}/{P.UR_VOTE_PREFIX}", UR.serialize_auditor_vote(bookie_id), ephemeral=True, sequence=True
        )
        return str(path.rsplit("/", 1)[1])

    @zk_call
    def votes(self) -> list[str]:
        """Vote node names, lowest sequence number (the auditor) first."""
        votes = []
        for name in self._session.children_or_empty(self._election):
            seq = _vote_sequence(name)
            if seq is not None:
                votes.append((seq, name))
        return [name for _, name in sorted(votes)]

    @zk_call
    def watch_vote_gone(self, name: str, callback: Callable[[], None]) -> bool:
        """Call ``callback`` (from kazoo's thread) once vote ``name`` is deleted or the
        connection drops (kazoo fires every watch then); False (no watch set) if it is
        already gone."""
        return self._zk.exists(f"{self._election}/{name}", watch=lambda _event: callback()) is not None

    @zk_call
    def withdraw_vote(self, name: str) -> None:
        """Delete vote ``name`` (missing: fine)."""
        self._session.delete_quiet(f"{self._election}/{name}")

    @zk_call
    def publish(self, bookie_id: str) -> None:
        """Write the elected auditor into ``B/auditorelection`` (informational, as Java does)."""
        self._zk.set(self._election, UR.serialize_auditor_vote(bookie_id), version=-1)

    @zk_call
    def current(self) -> str | None:
        """Bookie id of the lowest ``B/auditorelection/V_`` vote (None: no auditor)."""
        for name in self.votes():
            try:
                data, _ = self._session.get(f"{self._election}/{name}")
            except NoNodeError:
                continue  # that auditor just left; the next vote wins
            try:
                return UR.parse_auditor_vote(data)
            except CodecError as exc:
                raise MetadataStoreError(f"corrupt auditor vote {name}: {exc}") from None
        return None
