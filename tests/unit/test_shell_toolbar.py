"""The shell's toolbar says autorecovery as `autorecovery status` does, not just the switch."""

from __future__ import annotations

from bkctl.shell.cache import Status
from bkctl.shell.repl import autorecovery_phrase, bookies_phrase


def test_enabled_with_no_auditor_is_not_just_enabled():
    style, text = autorecovery_phrase(Status(state="ok", autorecovery=True, auditor=None))
    assert text == "enabled but no auditor running" and style.endswith(".bad")


def test_enabled_names_the_auditor():
    _, text = autorecovery_phrase(Status(state="ok", autorecovery=True, auditor="b1:3181"))
    assert text == "enabled, auditor b1:3181"


def test_disabled():
    style, text = autorecovery_phrase(Status(state="ok", autorecovery=False, auditor="b1:3181"))
    assert text == "disabled" and style.endswith(".warn")


def test_a_down_bookie_is_in_the_toolbar():
    """Issue 69, point 13: a bookie with a cookie and no registration (stopped, dead) was left out."""
    bookies = {"a:1": "writable", "b:1": "writable", "c:1": "down"}
    parts = bookies_phrase(Status(state="ok", writable=2, readonly=0, bookies=bookies))
    assert "".join(text for _style, text in parts) == "2 writable, 0 read-only, 1 down  "
    assert ("class:bottom-toolbar.bad", "1 down") in parts
    healthy = bookies_phrase(Status(state="ok", writable=3, readonly=0, bookies=dict(bookies, **{"c:1": "writable"})))
    assert "".join(text for _style, text in healthy) == "3 writable, 0 read-only  "
