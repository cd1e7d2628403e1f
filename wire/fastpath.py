"""One switch for every fast path in the project.

A fast path is a second, quicker implementation of something a general path
already does (the server's v2/v3 ADD and v3 READ decoders, its batched
answers to runs of pipelined v3 reads, the journal's inline commits in the
reactor thread, the client's add-answer shortcut, its v2 batch reads, a window's
reads sent as one run per bookie, the C twins of its per-entry codecs and of its
answer loop in :mod:`bkctl.wire.codecs.fast`, the bookie's entry log records built
there too, a burst's frames sent at once by :mod:`bkctl.wire.send_now`, ...).
Each one consults :data:`ENABLED`, so that the same behavioural tests can run
with all of them switched off (``BKCTL_FASTPATHS=0``; ``./dev test`` runs the
unit modules that reach a fast path and the add/read/recovery integration
suites both ways: tests/support/fastpaths_off.txt) and the two implementations
cannot drift apart unnoticed.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from bkctl.wire.text import parse_bool


def from_environment(environ: Mapping[str, str]) -> bool:
    """``BKCTL_FASTPATHS`` read as a boolean (:func:`bkctl.wire.text.parse_bool`;
    unset or empty: on); ValueError naming the variable for any other word."""
    value = environ.get("BKCTL_FASTPATHS", "")
    return parse_bool(value, "BKCTL_FASTPATHS") if value.strip() else True


#: False when the environment says ``BKCTL_FASTPATHS=0`` (or ``off``/``false``/``no``).
ENABLED: bool = from_environment(os.environ)
