"""Whether a bkctl App may yet talk TLS to bookies: only a one-shot command (``bkctl``'s main)
given no bookie TLS may not, and loads Twisted without pyOpenSSL; the shell, a caller's
process (tests, programs calling :func:`bkctl.cli.run`) and a command given TLS keep it."""

from __future__ import annotations

import pytest

from bkctl.app import App
from bkctl.wire.tls import TLSFiles


@pytest.mark.parametrize(
    "app, may",
    [
        (App(one_shot=True, bookie_tls=False), False),
        (App(one_shot=True), False),  # no TLS settled yet is none
        (App(one_shot=True, bookie_tls=TLSFiles(ca="/ca.pem")), True),
        (App(one_shot=True, interactive=True, bookie_tls=False), True),  # the shell: a later line may give TLS
        (App(bookie_tls=False), True),  # a caller's process: a later call may
    ],
    ids=["one-shot", "one-shot-unsettled", "one-shot-tls", "shell", "caller"],
)
def test_only_a_one_shot_command_without_tls_gives_it_up(app, may):
    assert app.may_use_tls is may
