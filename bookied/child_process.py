"""What the bookie's child processes share: a CPU priority below the bookie's,
the environment they take from it, and the settings line they read first.

Two kinds of the bookie's work run in processes of their own so that they hold
neither the bookie's GIL nor, where the kernel allows, the CPU its adds and reads
want: the autorecovery daemon (:mod:`.autorecovery`) and the garbage collector's
listing of the ledger metadata (:mod:`.gc_listing`).
"""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("bookied.child")

__all__ = [
    "AUTOGROUP",
    "AUTOGROUP_SWITCH",
    "CPU_PRIORITIES",
    "autogroup_enabled",
    "child_environment",
    "leave_session_group",
    "lower_cpu_priority",
    "read_settings",
]

#: the words of a child's CPU priority: Linux's SCHED_IDLE, nice 19, or the bookie's own
CPU_PRIORITIES = ("idle", "low", "normal")

#: what a child must not take from the bookie's environment: systemd's
#: notifications belong to the main process (NotifyAccess=main)
_PARENT_ONLY = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")


def child_environment() -> dict[str, str]:
    """The bookie's environment less what belongs to the main process alone."""
    return {k: v for k, v in os.environ.items() if k not in _PARENT_ONLY}


def lower_cpu_priority(priority: str, what: str) -> str:
    """Lower the calling thread's (and so the threads it starts) CPU priority:
    ``idle`` (SCHED_IDLE: the kernel runs it only when nothing else of normal
    priority wants that CPU, and a waking bookie preempts it at once), ``low``
    (nice 19) or ``normal`` (unchanged).  Returns what was set; where SCHED_IDLE
    is refused or missing, nice 19.  Below ``normal``, a child also takes a CPU
    group of its own first (:func:`leave_session_group`).  ``what`` names the
    child in the warnings."""
    if priority == "normal":
        return "normal"
    if priority == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "idle"
        except OSError as e:
            log.warning("%s: SCHED_IDLE refused (%s): nice 19 instead", what, e.strerror)
    try:
        os.nice(19 - os.nice(0))
    except OSError as e:
        log.warning("%s: cannot lower the CPU priority (%s): left as the bookie's", what, e.strerror)
        return "normal"
    return "low"


#: where Linux says whether it groups the CPU's time by session (autogroup), and this process's group
AUTOGROUP_SWITCH = "/proc/sys/kernel/sched_autogroup_enabled"
AUTOGROUP = "/proc/self/autogroup"


def autogroup_enabled() -> bool:
    """Whether this kernel shares CPU time between sessions first (autogroup on)."""
    try:
        with open(AUTOGROUP_SWITCH) as f:
            return f.read().strip() == "1"
    except OSError:
        return False  # no autogroup in this kernel


def leave_session_group(what: str) -> bool:
    """Give this process a session of its own, and its session's CPU group the weight of nice 19.

    With the kernel's autogroup on (most distributions' default, for every
    process outside a CPU cgroup: a bookie started by hand or by a script),
    the scheduler shares a CPU first between sessions, then between the
    threads of one session.  SCHED_IDLE and nice rank the child below the
    threads of its own session only: against another session's -- another
    bookie's reactor, a broker, a writer -- the bookie's session competed as
    an equal whenever the child ran, and they waited for it.  A new session
    (``setsid``) is a new group, and ``/proc/self/autogroup`` sets that
    group's nice.  Under systemd with a CPU cgroup the cgroup decides and
    this changes nothing.  Returns whether the group was set; Ctrl-C in a
    terminal no longer reaches the process, which stops when its input ends
    (the bookie closes it, or dies)."""
    if not autogroup_enabled():
        return False  # the priority alone ranks the process
    try:
        os.setsid()
        with open(AUTOGROUP, "w") as f:
            f.write("19")
        return True
    except OSError as e:
        log.warning(
            "%s: cannot take a CPU group of its own (%s): it competes with other sessions as its bookie does",
            what,
            e.strerror,
        )
        return False


def read_settings() -> dict | None:
    """The parent's first line (JSON), read byte by byte from fd 0 (nothing of what
    follows is buffered away from the child's later reading of it); None at an early end."""
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            return None
        line += chunk
    return json.loads(line)
