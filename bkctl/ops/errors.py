"""The errors bkctl's operations raise: library errors, no exit codes (issue 76).

An operation raises the wire library's categories -- :class:`NotFound`, :class:`Conflict`,
:class:`Unreachable`, :class:`AccessDenied`, re-exported here -- or one of the errors below;
:func:`bkctl.exitcodes.exit_code_for` maps each to its exit code, the one place that does
(``bkctl.runner`` calls it for every command, the shell for each of its lines).
"""

from __future__ import annotations

from bkctl.wire.errors import AccessDenied, BKError, Conflict, NotFound, Unreachable

__all__ = [
    "AccessDenied",
    "BadInput",
    "Conflict",
    "NotFound",
    "OpFailed",
    "NoHttpAnswer",
    "NotRegistered",
    "SimpleTestFailed",
    "Unreachable",
]


class OpFailed(BKError):
    """An operation that could not do what it was asked (exit 1)."""


class BadInput(BKError):
    """What the operator gave does not do: a malformed argument, a file that is not what it
    should be, a request that contradicts itself (exit 2, a usage error)."""


class NotRegistered(NotFound):
    """A bookie that is not registered, asked for what only its registration says (exit 3)."""


class NoHttpAnswer(Unreachable):
    """A bookie's HTTP admin that did not answer (exit 5)."""


class SimpleTestFailed(OpFailed):
    """The step of ``simpletest`` that failed: exit 1, or the exit code of the error behind it
    (its ``__cause__``: 5 when bookies are unreachable, a TLS handshake failed...)."""

    def __init__(self, step: str, message: str):
        super().__init__(f"simpletest failed at {step}: {message}")
        self.step = step
