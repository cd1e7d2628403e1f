"""What both of bookied's processes (the bookie, its autorecovery daemon's) do as they start."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Protocol, cast

from bkctl.wire.clock import Reactor

__all__ = ["MainReactor", "configure_logging", "main_reactor"]


class MainReactor(Reactor, Protocol):
    """The global reactor as a process's main runs it (Twisted's ``IReactorCore``, a zope
    interface a type checker without its plugin cannot read)."""

    def run(self) -> None: ...

    def stop(self) -> None: ...

    def callWhenRunning(self, callable: Callable[..., object], *args: object) -> object: ...  # noqa: N802

    def addSystemEventTrigger(  # noqa: N802 - Twisted's names
        self, phase: str, event_type: str, callable: Callable[..., object], *args: object
    ) -> object: ...


def main_reactor() -> MainReactor:
    """Twisted's global reactor (imported, so installed, now: see
    :func:`bkctl.wire.process.runtime.twisted_without_tls`)."""
    from twisted.internet import reactor

    return cast(MainReactor, reactor)


def configure_logging(level: str) -> None:
    """One line per event on stderr; journald adds its own timestamps."""
    under_journald = "JOURNAL_STREAM" in os.environ
    fmt = "%(levelname)s %(name)s: %(message)s" if under_journald else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=getattr(logging, level), format=fmt, stream=sys.stderr)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
