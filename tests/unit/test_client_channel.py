"""Every implementation of the ledger layer's connection interface (BookieChannel)
matches it: the real connection and the unit tests' fake bookie, so the handle
tests run the path production runs."""
import inspect

import pytest

from bkctl.wire.client.channel import BookieChannel
from bkctl.wire.client.connection import BookieConnection
from tests.support.fake_bookie import FakeConnection

METHODS = [name for name, value in vars(BookieChannel).items()
           if callable(value) and not name.startswith("_")]


def params(fn):
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()][1:]  # without self


def test_the_interface_is_what_the_handles_use():
    assert sorted(METHODS) == ["add_encoded", "add_with_callback", "batch_read", "close", "read", "read_lac",
                               "read_long_poll", "read_with_callback", "write_lac"]


@pytest.mark.parametrize("impl", [BookieConnection, FakeConnection])
@pytest.mark.parametrize("method", METHODS)
def test_implementations_match_the_interface(impl, method):
    assert params(getattr(impl, method)) == params(getattr(BookieChannel, method))


def test_instances_are_channels():
    assert isinstance(FakeConnection("10.0.0.1:3181"), BookieChannel)
    assert not isinstance(object(), BookieChannel)
