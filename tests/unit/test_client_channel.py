"""Every implementation of the ledger layer's connection interface (BookieChannel)
matches its signatures: the real connection and the unit tests' fake bookie (their
behaviour is checked alike by tests/integration/test_bookie_channel_conformance.py);
and the connection is what its protocol may call (ConnectionOwner)."""

import inspect

import pytest

from bkctl.wire.client.channel import BookieChannel
from bkctl.wire.client.client_protocol import ConnectionOwner
from bkctl.wire.client.connection import BookieConnection
from tests.support.fake_bookie import FakeConnection

METHODS = [name for name, value in vars(BookieChannel).items() if callable(value) and not name.startswith("_")]


def params(fn):
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()][1:]  # without self


def test_the_interface_is_what_the_handles_use():
    assert sorted(METHODS) == [
        "add_run",
        "batch_read",
        "close",
        "read",
        "read_lac",
        "read_long_poll",
        "read_run",
        "read_with_callback",
        "takes_reads",
        "write_lac",
    ]


@pytest.mark.parametrize("impl", [BookieConnection, FakeConnection])
@pytest.mark.parametrize("method", METHODS)
def test_implementations_match_the_interface(impl, method):
    assert params(getattr(impl, method)) == params(getattr(BookieChannel, method))


def test_instances_are_channels():
    assert isinstance(FakeConnection("10.0.0.1:3181"), BookieChannel)
    assert not isinstance(object(), BookieChannel)


OWNER_METHODS = [name for name, value in vars(ConnectionOwner).items() if callable(value) and not name.startswith("_")]


def test_the_connection_is_what_its_protocol_may_call():
    """The wire side reaches its connection only through ConnectionOwner; the connection
    has each of its methods, with the same parameters."""
    assert sorted(OWNER_METHODS) == [
        "answer_received",
        "connection_failed",
        "connection_lost",
        "connection_made",
        "fast_answer",
        "fast_answers",
        "handshake_done",
        "malformed",
        "v2_answer",
    ]
    for name in OWNER_METHODS:
        owner = params(getattr(ConnectionOwner, name))
        assert params(getattr(BookieConnection, name))[: len(owner)] == owner, name
