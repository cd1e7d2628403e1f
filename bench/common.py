"""What every benchmark prints beside its figures: the machine's load, CPU
seconds of a process, percentiles and section titles.

The benchmarks run as scripts (``python bench/bench_x.py``), so ``bench/`` is
on ``sys.path`` and they import this module as ``common``.
"""
from __future__ import annotations

import os

__all__ = ["cpu_seconds", "load_note", "pct", "pct_ms", "section"]

_TICK = os.sysconf("SC_CLK_TCK")


def load_note() -> str:
    """The machine's load while we measure (others may share it): the 1, 5
    and 15 minute load averages and, where the kernel has it, CPU pressure."""
    one, five, fifteen = os.getloadavg()
    note = f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
    try:
        with open("/proc/pressure/cpu") as f:
            note += f", CPU pressure {f.read().split()[1].split('=')[1]}% (avg10)"
    except (OSError, IndexError):
        pass
    return note


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def pct_ms(seconds: list[float], q: float) -> float:
    """:func:`pct` of durations in seconds, in milliseconds."""
    return pct(seconds, q) * 1000


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)
