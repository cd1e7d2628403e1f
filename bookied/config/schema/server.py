"""The keys of the bookie server itself and of its HTTP admin server: port, identity, addresses,
request limits, shutdown (sections ``server`` and ``http``).
"""

from __future__ import annotations

from bkctl.wire.metadata.bookieid import bookie_id_problem

from ..errors import InvalidValue
from .option import JAVA_INT_MAX, Option

__all__ = ["OPTIONS"]


def _check_bookie_id(value: str) -> None:
    problem = bookie_id_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_advertised_address(value: str) -> None:
    # the address becomes the host part of the bookie id host:port
    if bookie_id_problem(f"{value}:3181"):
        raise InvalidValue(
            "contains characters not allowed in a bookie id (letters, digits, ASCII ':' to '_', '.' and '-')"
        )


def _check_no_blanks(value: str) -> None:
    if any(ch.isspace() for ch in value):
        raise InvalidValue("must not contain blanks")


OPTIONS: tuple[Option, ...] = (
    # -- server -------------------------------------------------------------
    Option(
        "bookiePort",
        "int",
        3181,
        "TCP port the bookie listens on for client requests.",
        "server",
        min=0,
        max=65535,
        metavar_name="PORT",
    ),
    Option(
        "allowEphemeralPorts",
        "bool",
        False,
        "Whether bookiePort may be 0, letting the operating system pick a free port (meant for tests).",
        "server",
    ),
    Option(
        "bookieId",
        "str",
        None,
        "Identity the bookie registers under instead of its address-based id; letters, digits, "
        "ASCII ':' to '_', '.' and '-' only, and never 'readonly'.",
        "server",
        metavar_name="ID",
        check=_check_bookie_id,
    ),
    Option(
        "advertisedAddress",
        "str",
        None,
        "Host name or IP address advertised to clients, taking precedence over listeningInterface "
        "and useHostNameAsBookieID.",
        "server",
        metavar_name="HOST",
        check=_check_advertised_address,
    ),
    Option(
        "listeningInterface",
        "str",
        None,
        "Network interface (such as eth0) to listen on and take the bookie address from; "
        "when unset the bookie listens on all interfaces and uses the local host name's address.",
        "server",
        metavar_name="IFACE",
        check=_check_no_blanks,
    ),
    Option(
        "allowLoopback",
        "bool",
        False,
        "Whether the bookie may identify itself by a loopback address, which would make every "
        "bookie on a misconfigured host claim 127.0.0.1.",
        "server",
    ),
    Option(
        "useHostNameAsBookieID",
        "bool",
        False,
        "Whether the bookie id uses the host name rather than the IP address.",
        "server",
    ),
    Option(
        "useShortHostName",
        "bool",
        False,
        "With useHostNameAsBookieID, whether to use the host name up to its first dot instead "
        "of the fully qualified name.",
        "server",
    ),
    Option(
        "maxAddsInProgressLimit",
        "int",
        0,
        "Number of add requests in progress (read, not yet answered) at which the bookie stops "
        "reading a connection whose next request is an add until one is answered (back-pressure, "
        "as Java's bookie blocks; no error is answered); 0 means no limit.",
        "server",
        unit="requests",
        min=0,
        max=JAVA_INT_MAX,
    ),
    Option(
        "maxReadsInProgressLimit",
        "int",
        0,
        "Number of read requests in progress (entry and batch reads, fencing reads and long polls "
        "included) at which the bookie stops reading a connection whose next request is a read "
        "until one is answered; 0 means no limit.",
        "server",
        unit="requests",
        min=0,
        max=JAVA_INT_MAX,
    ),
    Option(
        "nettyMaxFrameSizeBytes",
        "int",
        5 * 1024 * 1024,
        "Largest request frame accepted from a client; larger frames are rejected.",
        "server",
        unit="bytes",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "shutdownTimeoutMs",
        "int",
        5000,
        "Longest a shutdown (SIGTERM) may take: unregistering from ZooKeeper is tried once within "
        "at most half of it, and an unreachable ZooKeeper never holds the process past it "
        "(the journals are closed first, so acknowledged entries are durable either way).",
        "server",
        unit="ms",
        min=100,
        max=JAVA_INT_MAX,
    ),
    # -- http ---------------------------------------------------------------
    Option("httpServerEnabled", "bool", False, "Whether to start the HTTP admin server.", "http"),
    Option(
        "httpServerPort",
        "int",
        8080,
        "TCP port of the HTTP admin server.",
        "http",
        min=0,
        max=65535,
        metavar_name="PORT",
    ),
    Option(
        "httpServerHost",
        "str",
        "0.0.0.0",
        "Address the HTTP admin server listens on.",
        "http",
        metavar_name="HOST",
        check=_check_no_blanks,
    ),
    # -- metrics ------------------------------------------------------------
    Option(
        "prometheusStatsHttpEnable",
        "bool",
        True,
        "Whether prometheusStatsHttpPort may serve /metrics (see there).",
        "http",
    ),
    Option(
        "prometheusStatsHttpPort",
        "int",
        8000,
        "TCP port of a listener serving /metrics alone when httpServerEnabled=false, as Java's "
        "Prometheus stats provider does (with the HTTP admin on, /metrics is on its port), opened only "
        "when this key is set and prometheusStatsHttpEnable is true.",
        "http",
        min=0,
        max=65535,
        metavar_name="PORT",
    ),
    Option(
        "prometheusStatsHttpAddress",
        "str",
        "0.0.0.0",
        "Address the prometheusStatsHttpPort listener listens on.",
        "http",
        metavar_name="HOST",
        check=_check_no_blanks,
    ),
    Option(
        "prometheusStatsLatencyRolloverSeconds",
        "int",
        60,
        "Window of the quantiles of the Java-named summaries (bookkeeper_server_ADD_ENTRY...; quantile "
        "1.0 is its maximum): a scrape reports the last full window, NaN before the first ends and "
        "after one without events, as Java's bookie does.",
        "http",
        unit="s",
        min=1,
        max=JAVA_INT_MAX,
    ),
)
