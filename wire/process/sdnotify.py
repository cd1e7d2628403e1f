"""A small, dependency-free client for systemd's notification protocol.

systemd starts a ``Type=notify`` service with ``$NOTIFY_SOCKET`` naming an
``AF_UNIX`` datagram socket.  The service reports its state by sending one
datagram per update, made of newline-separated ``KEY=VALUE`` assignments
(``READY=1``, ``STATUS=...``, ``STOPPING=1``, ``WATCHDOG=1``...); see
sd_notify(3).  A socket name starting with ``@`` lives in the Linux abstract
namespace: the ``@`` stands for a leading NUL byte.

With ``WatchdogSec=`` in the unit, systemd also sets ``$WATCHDOG_USEC`` (and
usually ``$WATCHDOG_PID``) and kills the service if ``WATCHDOG=1`` does not
arrive within that time.  sd_watchdog_enabled(3) recommends pinging every
half of it; :meth:`Notifier.start_watchdog` does that from the reactor, so a
wedged reactor stops the pings and systemd restarts the daemon (bookied, or
``bkctl autorecovery run``).

Without ``$NOTIFY_SOCKET`` (started by hand, under a test runner, in a
container) every call is a cheap no-op, and sending never raises: a lost
notification is logged, not fatal.

Typical use in the daemon::

    notifier = Notifier.from_environment()
    watchdog = notifier.start_watchdog(reactor)
    ...
    notifier.ready("serving on 0.0.0.0:3181")
    ...
    notifier.stopping()
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Twisted loads only when the watchdog starts
    from twisted.internet import task
    from twisted.internet.interfaces import IReactorTime

__all__ = [
    "Notifier",
    "start_watchdog",
]

log = logging.getLogger(__name__)

NOTIFY_SOCKET = "NOTIFY_SOCKET"
WATCHDOG_USEC = "WATCHDOG_USEC"
WATCHDOG_PID = "WATCHDOG_PID"

_FIELD_NAME = re.compile(r"[A-Z0-9_]+\Z")


def _socket_address(name: str) -> str | None:
    """The address to ``sendto`` for a ``$NOTIFY_SOCKET`` value, or None if unusable."""
    if name.startswith("@") and len(name) > 1:
        return "\0" + name[1:]
    if name.startswith("/"):
        return name
    # systemd also knows "vsock:..." addresses (VMs); bookied does not need them.
    return None


def _format_value(value: Any) -> str:
    if value is True:
        return "1"
    if value is False:
        return "0"
    # The protocol is line based: a newline inside a value would start a
    # bogus assignment, so fold any line breaks into spaces.
    return " ".join(str(value).splitlines())


def _parse_positive_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip(), 10)
    except ValueError:
        return None
    return value if value > 0 else None


class Notifier:
    """Sends state updates to the service manager.

    *address* is the ``$NOTIFY_SOCKET`` value (a filesystem path, or
    ``@name`` for an abstract socket); None makes every call a no-op.
    *watchdog_usec* is the watchdog timeout in microseconds, or None when
    systemd does not expect keep-alive pings from this process.
    """

    def __init__(self, address: str | None = None, watchdog_usec: int | None = None, *, send_timeout: float = 1.0):
        self.address = address or None
        self._sockaddr = _socket_address(address) if address else None
        if address and self._sockaddr is None:
            log.warning("ignoring unsupported %s=%r", NOTIFY_SOCKET, address)
        self.watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self.send_timeout = send_timeout
        self._sock: socket.socket | None = None

    @classmethod
    def from_environment(
        cls,
        environ: MutableMapping[str, str] | Mapping[str, str] | None = None,
        *,
        unset_environment: bool = True,
        pid: int | None = None,
        send_timeout: float = 1.0,
    ) -> Notifier:
        """Build a notifier from ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID``.

        *environ* defaults to :data:`os.environ`.  With *unset_environment*
        (the default) the three variables are removed from it afterwards,
        as sd_notify(3) and sd_watchdog_enabled(3) do when asked, so child
        processes (a ZooKeeper shell, a compaction helper...) neither
        inherit the socket nor believe they are the watched process.

        The watchdog is armed only if ``$WATCHDOG_USEC`` is a positive
        integer and ``$WATCHDOG_PID`` is unset or equal to *pid* (default:
        our own pid).
        """
        env = os.environ if environ is None else environ
        address = env.get(NOTIFY_SOCKET) or None
        usec = _parse_positive_int(env.get(WATCHDOG_USEC))
        watchdog_pid = env.get(WATCHDOG_PID)
        if usec is not None and watchdog_pid is not None:
            me = os.getpid() if pid is None else pid
            if _parse_positive_int(watchdog_pid) != me:
                usec = None
        if unset_environment and isinstance(env, MutableMapping):
            for key in (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID):
                env.pop(key, None)
        return cls(address, usec, send_timeout=send_timeout)

    # -- state --------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """True if notifications go anywhere."""
        return self._sockaddr is not None

    @property
    def watchdog_enabled(self) -> bool:
        """True if systemd expects ``WATCHDOG=1`` pings from us."""
        return self.enabled and self.watchdog_usec is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings: half the watchdog timeout, or None when disarmed."""
        usec = self.watchdog_usec
        if not self.enabled or usec is None:
            return None
        return usec / 2_000_000

    # -- sending ------------------------------------------------------------

    def notify(self, **fields: Any) -> bool:
        """Send the assignments in *fields* as one datagram, in the given order.

        ``notify(READY=1, STATUS="serving")`` sends ``READY=1\\nSTATUS=serving``.
        ``True``/``False`` are sent as ``1``/``0``; line breaks inside a
        value become spaces.  Returns True if the datagram was sent, False
        if notifications are disabled or sending failed (logged).
        """
        for key in fields:
            if not _FIELD_NAME.match(key):
                raise ValueError(f"bad sd_notify field name {key!r}")
        if not self.enabled or not fields:
            return False
        message = "\n".join(f"{key}={_format_value(value)}" for key, value in fields.items())
        return self._send(message.encode("utf-8"))

    def _send(self, data: bytes) -> bool:
        if self._sockaddr is None:  # not enabled: notify() sends nothing then
            return False
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.settimeout(self.send_timeout)
                self._sock = sock
            self._sock.sendto(data, self._sockaddr)
        except OSError as exc:
            log.warning("cannot notify the service manager via %s: %s", self.address, exc)
            self.close()
            return False
        return True

    def close(self) -> None:
        """Close the socket; a later notification opens a new one."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    # -- helpers --------------------------------------------------------------

    def ready(self, status: str | None = None) -> bool:
        """Startup is complete (``READY=1``), with an optional status line."""
        if status is None:
            return self.notify(READY=1)
        return self.notify(READY=1, STATUS=status)

    def stopping(self, status: str | None = None) -> bool:
        """Shutdown has begun (``STOPPING=1``)."""
        if status is None:
            return self.notify(STOPPING=1)
        return self.notify(STOPPING=1, STATUS=status)

    def status(self, text: str) -> bool:
        """A free-form status line, shown by ``systemctl status``."""
        return self.notify(STATUS=text)

    def watchdog(self) -> bool:
        """One keep-alive ping (``WATCHDOG=1``)."""
        return self.notify(WATCHDOG=1)

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for *seconds* more before a start/stop timeout fires (``EXTEND_TIMEOUT_USEC``).

        Useful while replaying a long journal at startup or flushing at
        shutdown; needs systemd 236 or later (older ones ignore it).
        """
        return self.notify(EXTEND_TIMEOUT_USEC=max(0, int(seconds * 1_000_000)))

    def start_watchdog(self, clock: IReactorTime, interval: float | None = None) -> task.LoopingCall | None:
        """Ping the watchdog every *interval* seconds (default: :attr:`watchdog_interval`).

        *clock* is the reactor, or any ``IReactorTime`` (``task.Clock`` in
        tests).  The first ping is sent at once.  Returns the running
        :class:`twisted.internet.task.LoopingCall` (stop it on shutdown), or
        None when the watchdog is not armed for this process.
        """
        from twisted.internet import task

        if interval is None:
            interval = self.watchdog_interval
        if interval is None or not self.enabled:
            return None
        if interval <= 0:
            raise ValueError(f"watchdog interval must be positive, not {interval!r}")
        loop = task.LoopingCall(self.watchdog)
        loop.clock = clock
        done = loop.start(interval, now=True)
        done.addErrback(lambda failure: log.error("watchdog loop failed: %s", failure.value))
        return loop

    def __repr__(self) -> str:
        return f"Notifier(address={self.address!r}, watchdog_usec={self.watchdog_usec!r})"


def start_watchdog(
    reactor_or_clock: IReactorTime, notifier: Notifier | None = None, interval: float | None = None
) -> task.LoopingCall | None:
    """Module-level form of :meth:`Notifier.start_watchdog`.

    Without *notifier* one is built with :meth:`Notifier.from_environment`
    (which unsets the variables, so do this once and keep the notifier).
    Returns the LoopingCall, or None if no watchdog is armed.
    """
    if notifier is None:
        notifier = Notifier.from_environment()
    return notifier.start_watchdog(reactor_or_clock, interval)
