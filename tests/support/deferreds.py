"""Reading fired Deferreds in synchronous tests (Twisted's fakes fire them in the test's own thread)."""
from __future__ import annotations

from twisted.internet import defer
from twisted.python.failure import Failure


def result_of(d: defer.Deferred):
    """The result of a fired Deferred (raising its failure)."""
    out = []
    d.addBoth(out.append)
    assert out, "Deferred has not fired"
    if isinstance(out[0], Failure):
        out[0].raiseException()
    return out[0]
