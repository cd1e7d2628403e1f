"""Twisted's own checks of a Deferred in a synchronous test (Twisted's fakes fire
Deferreds in the test's own thread): ``successResultOf``, ``failureResultOf`` and
``assertNoResult`` of trial's :class:`~twisted.trial.unittest.SynchronousTestCase`,
for pytest-style tests.  They keep no state of a test case, so one instance serves
every test; a failed check raises trial's ``FailTest``, an ``AssertionError``."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

__all__ = ["successResultOf", "failureResultOf", "assertNoResult"]

_CHECKS = SynchronousTestCase()

#: The result of a fired Deferred (a failure fails the check, with its traceback).
successResultOf = _CHECKS.successResultOf
#: The :class:`~twisted.python.failure.Failure` of a failed Deferred, of one of the given types.
failureResultOf = _CHECKS.failureResultOf
#: Check that a Deferred has not fired (its result, if it has one later, is left as it is).
assertNoResult = _CHECKS.assertNoResult
