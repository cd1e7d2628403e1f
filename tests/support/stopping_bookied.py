"""Run bookied so that it stops for good at a compaction phase, for a test to kill -9 it there.

    python -m tests.support.stopping_bookied PHASE bookied-arguments...

PHASE is a :class:`~bkctl.bookied.storage.compactor.CompactionPhase` value. The hook lives
here, not in bookied: this module adds a phase observer, then runs bookied's own main. When
compaction reaches PHASE the compacting thread logs ``compaction: stopping at PHASE (log N)``
and sleeps; the rest of the bookie goes on (adds, reads, HTTP), as a bookie stuck in a slow
disk would.
"""

from __future__ import annotations

import logging
import sys
import threading

from bkctl.bookied.main import run
from bkctl.bookied.storage.compactor import CompactionPhase, add_phase_observer

STOPPED_LINE = "compaction: stopping at {phase} (log {log_id})"


def stopper(at: CompactionPhase):
    forever = threading.Event()

    def observe(phase: CompactionPhase, log_id: int) -> None:
        if phase is at:
            logging.getLogger("tests.stopping_bookied").warning(STOPPED_LINE.format(phase=phase.value, log_id=log_id))
            forever.wait()

    return observe


def main() -> None:
    phase = CompactionPhase(sys.argv[1])
    del sys.argv[1]
    add_phase_observer(stopper(phase))
    run()


if __name__ == "__main__":
    main()
