"""Stopping the suite stops what it started (a pytest plugin, loaded by ``tests/conftest.py``).

* SIGTERM (a CI job cancelled, ``kill``, ``timeout``) becomes a KeyboardInterrupt, so pytest
  tears the fixtures down as on Ctrl-C and every bookied and ZooKeeper they started is stopped
  by pid; Python's default SIGTERM would end the process with no teardown at all.
* A shell without job control starts a background command (``./dev test`` runs the
  fast-paths-off suite with ``&``) with SIGINT ignored, and an ignored signal stays ignored
  across fork and exec: every bkctl a test started would then ignore the Ctrl-C the test
  sends it. pytest, its workers and so what they start get the default Ctrl-C back.
* What a worker starts should not outlive it when it is killed outright (xdist's controller
  SIGKILLs workers it cannot stop): :func:`die_with_parent` is a ``preexec_fn`` that has the
  kernel send the child SIGTERM when the thread that started it ends.
"""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child between fork and exec loads nothing


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def install() -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the starting thread exits (Linux prctl)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def pytest_configure(config) -> None:
    install()
