"""Crash harness for storage tests: run a child that prints what it has made durable, SIGKILL it."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time


def run_and_kill(
    script: str, args: list[str], rng: random.Random, min_run: float, max_run: float, wait: float = 10.0
) -> list[str]:
    """Start ``python -c script *args``; once it prints ``ready`` let it run a random while,
    SIGKILL it and return its complete stdout lines (the last, partial one dropped)."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    assert first == b"ready\n", first + proc.stderr.read()
    chunks: list[bytes] = []

    def drain():  # keep the pipe empty so that the child never blocks on its output
        while True:
            data = proc.stdout.read1(65536)
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    time.sleep(rng.uniform(min_run, max_run))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=wait)
    reader.join(wait)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, err
    return [line.decode() for line in b"".join(chunks).split(b"\n")[:-1]]
