"""bookied's log of refused TLS handshakes: one WARN per peer host per interval, the rest counted."""

from __future__ import annotations

import logging

from OpenSSL import SSL
from twisted.internet.address import IPv4Address

from bkctl.bookied.peer_log import HandshakeFailureLog


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def peer(host: str, port: int) -> IPv4Address:
    return IPv4Address("TCP", host, port)


def test_refusals_are_logged_with_peer_and_reason_and_rate_limited(caplog):
    clock = Clock()
    failures = HandshakeFailureLog(interval=10, clock=clock)
    no_cert = SSL.Error([("SSL routines", "", "peer did not return a certificate")])
    with caplog.at_level(logging.WARNING, logger="bookied.server"):
        failures.refused(peer("10.0.0.5", 40001), no_cert)
        for port in range(40002, 40007):  # a client retrying in a loop
            failures.refused(peer("10.0.0.5", port), no_cert)
        failures.refused(peer("10.0.0.6", 50000), SSL.Error([("SSL routines", "", "tlsv1 alert unknown ca")]))
        clock.now += 10
        failures.refused(peer("10.0.0.5", 40010), no_cert)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        "TLS handshake with 10.0.0.5:40001 refused: peer did not return a certificate",
        "TLS handshake with 10.0.0.6:50000 refused: tlsv1 alert unknown ca",
        "TLS handshake with 10.0.0.5:40010 refused: peer did not return a certificate "
        "(5 more from 10.0.0.5 since the last report)",
    ]
