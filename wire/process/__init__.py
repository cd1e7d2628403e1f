"""Helpers for long-running processes (bookied, ``bkctl autorecovery run``): systemd's
notification protocol (:mod:`.sdnotify`), a bounded shutdown (:mod:`.shutdown`), the
garbage collector's settings for processes that move many entries and Twisted loaded
without TLS for those that use none (:mod:`.runtime`)."""
