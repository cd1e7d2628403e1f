"""The JVM's stderr as ``bkctl export`` passes it on: the incubator-module warning that every
start of Spark's JVM printed (issue 69, point 13) is dropped, every other line kept as written."""

from __future__ import annotations

import os
import select
import subprocess
import sys

from bkctl.export import spark_session as S


def through_the_copier(*writes: bytes) -> bytes:
    """What reaches our stderr when a child process (standing in for the JVM: an inherited
    descriptor, written in these pieces) writes to the copier's pipe."""
    out_r, out_w = os.pipe()
    copier = S.JvmStderr(out_w)
    script = "import os,sys\nfor piece in sys.argv[1:]:\n    os.write(2, bytes.fromhex(piece))\n"
    subprocess.run(
        [sys.executable, "-c", script, *(w.hex() for w in writes)],
        stderr=copier.write_end,
        check=True,
    )
    os.close(copier.write_end)
    copier.wait(10)
    assert not copier.thread.is_alive()
    with os.fdopen(out_r, "rb") as f:
        return f.read()


def test_the_incubator_warning_is_dropped_and_nothing_else():
    warning = S.INCUBATOR_WARNING + b"\n"
    real = b"12:00:01 WARN NativeCodeLoader: something a user should see\n"
    assert through_the_copier(warning, real) == real
    assert through_the_copier(real, warning, b"last words without a newline") == real + b"last words without a newline"
    # written in pieces, the warning is still recognised; a line that only starts like it is kept
    half = len(S.INCUBATOR_WARNING) // 2
    assert through_the_copier(warning[:half], warning[half:], real) == real
    longer = S.INCUBATOR_WARNING + b", jdk.incubator.foreign\n"
    assert through_the_copier(longer) == longer
    assert through_the_copier(b"WARNING: Using something else\r\n") == b"WARNING: Using something else\r\n"


def test_a_partial_line_that_cannot_be_the_warning_is_not_held_back():
    out_r, out_w = os.pipe()
    copier = S.JvmStderr(out_w)
    os.write(copier.write_end, b"Enter a value: ")
    ready, _, _ = select.select([out_r], [], [], 30)  # not held until a newline or the end
    assert ready and os.read(out_r, 100) == b"Enter a value: "
    os.close(copier.write_end)
    copier.wait(10)
    os.close(out_r)
