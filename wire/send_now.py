"""Writing to a TCP transport without waiting for the next reactor turn.

A Twisted TCP transport never sends from ``write()``: it queues the bytes,
asks epoll to report the socket writable (an ``epoll_ctl``), sends on the
next turn of the reactor, and then asks epoll to stop reporting it (another
``epoll_ctl``).  For a connection whose queue is empty, which is nearly
always, that is two system calls, one more pass through the reactor's poll
and dispatch, and a turn's delay per burst of frames; during a repair the
epoll registrations alone were some 6% of a bookie's busy reactor time, and
its epoll_ctl calls twice its sends.  :func:`send_now` sends such
bytes at once with one ``send``, and gives the transport only what the
kernel did not take.

It is a fast path (:mod:`bkctl.wire.fastpath`): the caller passes its record's
``enabled``; off (``BKCTL_FASTPATHS=0``), every write goes through ``transport.write``.  Anything but a plain,
connected, non-TLS TCP transport with nothing queued (a TLS connection, a
test's StringTransport, a connection closing or half-closed) is also left to
``transport.write``, and so is every error: the transport meets the same
error on its own send and closes the connection as it always does.
"""

from __future__ import annotations

from typing import Protocol

from twisted.internet import tcp

__all__ = ["Transport", "send_now"]


class Transport(Protocol):
    """What :func:`send_now` writes to: any Twisted transport (a TCP one is sent to at once)."""

    def write(self, data: bytes) -> None:
        """Queue ``data``, to be sent when the reactor next polls the socket writable."""


def send_now(transport: Transport, data: bytes, enabled: bool = True) -> bool:
    """Write ``data`` to ``transport``, sending it at once when ``enabled`` (the fast
    paths are on) and the transport has nothing queued; True when the kernel took
    all of it (nothing was queued in the transport)."""
    if (
        enabled
        and isinstance(transport, tcp.Connection)
        and not transport.TLS
        and transport.connected
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not transport._tempDataBuffer
        and transport.offset == len(transport.dataBuffer)
    ):
        try:
            sent = transport.socket.send(data)
        except OSError:  # EAGAIN, EINTR, a reset peer...: the transport's own send decides
            sent = 0
        if sent == len(data):
            return True
        if sent:
            data = data[sent:]
    transport.write(data)
    return False
