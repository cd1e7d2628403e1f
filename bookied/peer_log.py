"""Rate-limited lines about what a bookie's peers did (connections closed for what they
sent, refused TLS handshakes), so that a client misbehaving in a loop cannot flood the log."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("bookied.server")  # the server's lines, as operators filter them


class PeerLog:
    """WARN lines about what peers did, at most one per ``interval`` seconds per
    peer host and kind; the next line counts the ones left out, so a client
    that misbehaves in a loop (or thousands of them from one host) cannot flood
    the log."""

    def __init__(self, interval: float = 10.0, clock=time.monotonic):
        self.interval = interval
        self._clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # (kind, host) -> (logged at, left out since)

    def warn(self, kind: str, peer, message: str, level: int = logging.WARNING) -> None:
        """Log ``message`` (which names the peer) unless ``peer``'s host had a line of this kind lately."""
        host = getattr(peer, "host", str(peer))
        key = (kind, host)
        now = self._clock()
        logged_at, left_out = self._last.get(key, (None, 0))
        if logged_at is not None and now - logged_at < self.interval:
            self._last[key] = (logged_at, left_out + 1)
            return
        if len(self._last) > 4096:  # many peers: forget the old ones
            self._last.clear()
        self._last[key] = (now, 0)
        more = f" ({left_out} more from {host} since the last report)" if left_out else ""
        log.log(level, "%s%s", message, more)


def peer_name(peer) -> str:
    return f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"


class HandshakeFailureLog(PeerLog):
    """WARN for each TLS handshake a bookie refuses (peer, reason), rate-limited per peer host."""

    def refused(self, peer, reason) -> None:
        from bkctl.wire.tls import tls_error_reason

        self.warn("tls", peer, f"TLS handshake with {peer_name(peer)} refused: {tls_error_reason(reason)}")
