"""Helpers for long-running processes (bookied, ``bkctl autorecovery run``): systemd's
notification protocol (:mod:`.sdnotify`) and a bounded shutdown (:mod:`.shutdown`)."""
