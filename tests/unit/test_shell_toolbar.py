"""The shell's toolbar says autorecovery as `autorecovery status` does, not just the switch."""

from __future__ import annotations

from bkctl.shell.cache import Status
from bkctl.shell.repl import autorecovery_phrase


def test_enabled_with_no_auditor_is_not_just_enabled():
    style, text = autorecovery_phrase(Status(state="ok", autorecovery=True, auditor=None))
    assert text == "enabled but no auditor running" and style.endswith(".bad")


def test_enabled_names_the_auditor():
    _, text = autorecovery_phrase(Status(state="ok", autorecovery=True, auditor="b1:3181"))
    assert text == "enabled, auditor b1:3181"


def test_disabled():
    style, text = autorecovery_phrase(Status(state="ok", autorecovery=False, auditor="b1:3181"))
    assert text == "disabled" and style.endswith(".warn")
