"""What both of bookied's processes (the bookie, its autorecovery daemon's) do as they start."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, cast

from bkctl.wire.clock import Reactor

__all__ = ["MainReactor", "configure_logging", "main_reactor", "twisted_without_tls"]


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
    """Twisted's global reactor (imported, so installed, now: see :func:`twisted_without_tls`)."""
    from twisted.internet import reactor

    return cast(MainReactor, reactor)


def configure_logging(level: str) -> None:
    """One line per event on stderr; journald adds its own timestamps."""
    under_journald = "JOURNAL_STREAM" in os.environ
    fmt = "%(levelname)s %(name)s: %(message)s" if under_journald else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=getattr(logging, level), format=fmt, stream=sys.stderr)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


@contextmanager
def twisted_without_tls(unless: bool) -> Iterator[None]:
    """Twisted loaded as where pyOpenSSL is not installed, for a bookie without TLS.

    Twisted's TCP transports take their START_TLS support (pyOpenSSL, and with it
    cryptography's X.509 and service_identity: ~50 ms of CPU per start) when the
    reactor is imported, if ``OpenSSL`` imports; otherwise they are built without
    it, as Twisted supports.  A bookie without tlsProviderFactoryClass uses TLS
    nowhere (its server answers START_TLS with EBADREQ before touching the
    transport, its autorecovery process's client connects in plain text), so ``OpenSSL``
    is made unimportable while the reactor loads, and importable again after."""
    if unless or "twisted.internet.tcp" in sys.modules or "OpenSSL" in sys.modules:
        yield
        return
    # import OpenSSL -> ImportError (the import system's documented use of None; typeshed types modules only)
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "OpenSSL" in sys.modules and sys.modules["OpenSSL"] is None:
            del sys.modules["OpenSSL"]
