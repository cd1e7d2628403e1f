"""How bookied's processes (the bookie, its autorecovery child) load their modules:
without the garbage collector, and Twisted without TLS where none is configured."""
from __future__ import annotations

import gc
import sys
from contextlib import contextmanager


@contextmanager
def frozen_when_loaded():
    """The bookie's modules loaded without the garbage collector, then frozen.

    What they allocate (some 300,000 objects: Twisted, kazoo, protobuf) lives as
    long as the process; collected on the way, it is walked again and again for
    nothing, and at the end by the full collection before the freeze (the
    service's :func:`~bkctl.wire.process.runtime.settle_garbage_collector`),
    some 60 ms of CPU per start in all.  Frozen here, that collection walks only
    what the start allocated after.  The few hundred objects of garbage the
    imports leave stay with them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def twisted_without_tls(unless: bool):
    """Twisted loaded as where pyOpenSSL is not installed, for a bookie without TLS.

    Twisted's TCP transports take their START_TLS support (pyOpenSSL, and with it
    cryptography's X.509 and service_identity: ~50 ms of CPU per start) when the
    reactor is imported, if ``OpenSSL`` imports; otherwise they are built without
    it, as Twisted supports.  A bookie without tlsProviderFactoryClass uses TLS
    nowhere (its server answers START_TLS with EBADREQ before touching the
    transport, its autorecovery client connects in plain text), so ``OpenSSL``
    is made unimportable while the reactor loads, and importable again after."""
    if unless or "twisted.internet.tcp" in sys.modules or "OpenSSL" in sys.modules:
        yield
        return
    sys.modules["OpenSSL"] = None  # import OpenSSL -> ImportError
    try:
        yield
    finally:
        if "OpenSSL" in sys.modules and sys.modules["OpenSSL"] is None:
            del sys.modules["OpenSSL"]
