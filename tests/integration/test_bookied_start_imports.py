"""What a bookied start loads: not the code of the features its configuration leaves off.

The suite starts some 480 bookieds and most of a start's CPU is Python's imports;
a module imported at start for a feature that is off costs every one of them.
Python's own import profile (``PYTHONPROFILEIMPORTTIME``, on the bookie's stderr,
so in its log) tells what a start loaded.
"""

from __future__ import annotations

from tests.support.bookieproc import BookieProcess, wait_registered

#: module -> the feature it belongs to, off in the tests' default configuration
LOADED_ONLY_WHEN_ON = {
    "OpenSSL.crypto": "TLS (tlsProviderFactoryClass): Twisted's START_TLS, through pyOpenSSL",
    "cryptography.x509": "TLS (tlsProviderFactoryClass): pyOpenSSL's certificates",
    "service_identity": "TLS (tlsProviderFactoryClass): Twisted's host name checks",
    "bkctl.wire.tls": "TLS (tlsProviderFactoryClass)",
    "bkctl.bookied.http": "the HTTP admin (httpServerEnabled)",
    "twisted.web.server": "the HTTP admin (httpServerEnabled)",
    "bkctl.wire.autorecovery.service": "autorecovery inside the bookie (autoRecoveryDaemonEnabled)",
}


def _imported(bookie: BookieProcess) -> set[str]:
    """The modules Python's import profile names in the bookie's log (a failed import too)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in bookie.log_path.read_text().splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_a_start_with_tls_http_and_autorecovery_off_loads_none_of_them(bookies, metadata_uri):
    bookie = bookies()
    bookie.env_extra["PYTHONPROFILEIMPORTTIME"] = "1"
    bookie.start()
    wait_registered(metadata_uri, [bookie.bookie_id], procs=[bookie])
    assert bookie.stop() == 0
    imported = _imported(bookie)
    assert {"twisted.internet.reactor", "kazoo.client", "bkctl.bookied.service"} <= imported  # the profile is there
    loaded = {module: why for module, why in LOADED_ONLY_WHEN_ON.items() if module in imported}
    assert not loaded, loaded
