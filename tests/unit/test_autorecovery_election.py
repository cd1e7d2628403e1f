"""The auditor election on the in-memory store: the first voter is the auditor, the
next takes over when the auditor's vote goes, a lost session steps the auditor
down and it votes again (the same checks run on ZooKeeper in
tests/integration/test_autorecovery_zk.py; the store's watches are held alike by
tests/integration/test_metadata_store_conformance.py)."""

from __future__ import annotations

from twisted.internet import defer

from bkctl.wire.autorecovery.election import AuditorElection
from bkctl.wire.metadata.errors import ZKUnavailable
from tests.support.deferreds import successResultOf
from tests.support.fake_store import FakeMetadataStore
from tests.support.reactor_clock import ReactorClock as Reactor

A, B = "10.0.0.1:3181", "10.0.0.2:3181"


class Voter:
    def __init__(self, store, bookie_id: str, reactor: Reactor):
        self.events: list[str] = []
        self.election = AuditorElection(
            store,
            bookie_id,
            reactor,
            lambda fn, *a: defer.maybeDeferred(fn, *a),
            lambda: self.events.append("elected"),
            lambda: self.events.append("demoted"),
            retry_delay=1.0,
        )

    def start(self):
        return self.election.start()

    @property
    def is_auditor(self) -> bool:
        return self.election.is_auditor


def setup():
    return FakeMetadataStore().start(), Reactor()


def test_the_first_voter_is_the_auditor_and_says_so():
    store, reactor = setup()
    a, b = Voter(store, A, reactor), Voter(store, B, reactor)
    successResultOf(a.start())
    successResultOf(b.start())
    reactor.run()
    assert (a.is_auditor, b.is_auditor) == (True, False) and a.events == ["elected"] and b.events == []
    assert store.auditor.current() == A and store.auditor.published == A
    assert store.auditor.votes() == [a.election.vote, b.election.vote]


def test_the_next_voter_takes_over_when_the_auditors_vote_goes():
    store, reactor = setup()
    a, b = Voter(store, A, reactor), Voter(store, B, reactor)
    a.start(), b.start()
    reactor.run()
    store.auditor.withdraw_vote(a.election.vote)  # the auditor's vote is gone (its session, an operator)
    assert not b.is_auditor  # told from the store's thread: the reactor takes it from there
    reactor.run()
    assert b.is_auditor and b.events == ["elected"] and store.auditor.published == B


def test_leaving_withdraws_the_vote_so_the_next_voter_takes_over_now():
    store, reactor = setup()
    a, b = Voter(store, A, reactor), Voter(store, B, reactor)
    a.start(), b.start()
    reactor.run()
    successResultOf(a.election.stop())
    reactor.run()
    assert a.events == ["elected", "demoted"] and b.is_auditor
    assert store.auditor.votes() == [b.election.vote]


def test_a_lost_session_steps_the_auditor_down_and_it_votes_again():
    store, reactor = setup()
    a = Voter(store, A, reactor)
    a.start()
    reactor.run()
    first_vote = a.election.vote
    store.expire_session()
    reactor.run()
    assert a.events == ["elected", "demoted"] and not a.is_auditor and a.election.vote is None
    reactor.advance(1.0)  # retry_delay: it votes again with the new session
    reactor.run()
    assert a.events == ["elected", "demoted", "elected"] and a.election.vote not in (None, first_vote)
    assert store.auditor.votes() == [a.election.vote]


def test_a_voter_that_left_hears_nothing_of_the_session():
    store, reactor = setup()
    a = Voter(store, A, reactor)
    a.start()
    reactor.run()
    a.election.stop()
    store.expire_session()
    reactor.run()
    reactor.advance(5)
    assert a.events == ["elected", "demoted"] and store.auditor.votes() == []


def test_a_store_that_fails_is_tried_again():
    store, reactor = setup()
    a = Voter(store, A, reactor)

    def connection_lost(*_args):
        raise ZKUnavailable("connection lost")

    store.before("auditor.cast_vote", connection_lost)
    a.start()
    reactor.run()
    assert not a.is_auditor and a.election.vote is None
    reactor.advance(1.0)
    reactor.run()
    assert a.is_auditor
