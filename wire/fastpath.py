"""One switch for every fast path in the project.

A fast path is a second, quicker implementation of something a general path
already does (the server's v2/v3 ADD and v3 READ decoders, its batched
answers to runs of pipelined v3 reads, the client's add-answer shortcut, its
v2 batch reads, ...).  Each one consults :data:`ENABLED`, so that the same
behavioural tests can run with all of them switched off
(``BKCTL_FASTPATHS=0``; ``./dev test`` runs the unit suites both ways) and
the two implementations cannot drift apart unnoticed.
"""
from __future__ import annotations

import os

#: False when the environment says ``BKCTL_FASTPATHS=0`` (or ``off``/``false``/``no``).
ENABLED: bool = os.environ.get("BKCTL_FASTPATHS", "1").strip().lower() not in ("0", "off", "false", "no")
