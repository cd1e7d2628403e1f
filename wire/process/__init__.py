"""Helpers for long-running processes (bookied, ``bkctl autorecovery run``): systemd's
notification protocol (:mod:`.sdnotify`), a bounded shutdown (:mod:`.shutdown`) and the
garbage collector's settings for processes that move many entries (:mod:`.runtime`)."""
