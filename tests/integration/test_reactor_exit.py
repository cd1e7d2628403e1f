"""A bkctl command that talked to bookies exits as soon as its work is done: the reactor runs in
a daemon thread (wire/client/blocking.py, ReactorThread) that an atexit hook stops, where
crochet.setup()'s non-daemon reactor thread waited for its watchdog, which looked every 0.1 s
whether the main thread had ended.  Each case runs in a fresh process, as operators run bkctl."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli import REPO, env_for

pytestmark = pytest.mark.timeout(300)

#: runs ``bkctl simpletest`` in its own process, then says which threads are left and what the
#: reactor and Twisted's log did; the atexit hook registered first runs last, after the reactor's
COMMAND_THEN_LOOK = r"""
import atexit, json, logging, sys, threading

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="LOG %(name)s %(message)s")


def at_the_end():
    from bkctl.wire.client.blocking import ReactorThread

    running = ReactorThread.current
    print(json.dumps({"reactor_thread_alive": running.thread.is_alive(),
                      "reactor_running": running.reactor.running,
                      "log_writer_alive": running.log_writer.thread.is_alive()}), flush=True)


atexit.register(at_the_end)

from bkctl.cli import main

sys.argv = ["bkctl", "--json", "simpletest", "-n", "3"]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code

from twisted.logger import Logger

from bkctl.wire.client.blocking import ReactorThread, run_in_reactor

run_in_reactor(lambda: Logger(namespace="exitwait").info("a Twisted log event, number {n}", n=7))
print(json.dumps({
    "threads": sorted(t.name for t in threading.enumerate()),
    "non_daemon": sorted(t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()),
    "reactor_daemon": ReactorThread.current.thread.daemon,
}), flush=True)
"""


def run_script(script: str, uri: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env_for(uri, PYTHONFAULTHANDLER="1"),
        cwd=REPO,
        timeout=120,
    )


def test_a_command_leaves_no_thread_that_holds_the_exit_and_the_exit_stops_the_reactor(bookie_cluster, metadata_uri):
    bookie_cluster(3)
    done = run_script(COMMAND_THEN_LOOK, metadata_uri)
    assert done.returncode == 0, done.stderr
    result, threads, at_exit = (json.loads(line) for line in done.stdout.splitlines())
    assert result["ok"] is True
    # nothing left that the interpreter's exit would wait for: no watchdog polling the main
    # thread, the reactor's thread and its pool's (the metadata store's calls) daemon threads
    assert "CrochetShutdownWatchdog" not in threads["threads"], threads
    assert "CrochetReactor" in threads["threads"]
    assert threads["reactor_daemon"] is True
    assert threads["non_daemon"] == []
    # the atexit hook stopped the reactor and waited for its thread, then for the log writer
    assert at_exit == {"reactor_thread_alive": False, "reactor_running": False, "log_writer_alive": False}
    # Twisted's log reaches stdlib logging (written before the exit ended)
    assert "LOG twisted a Twisted log event, number 7" in done.stderr


CROCHET_SET_UP_FIRST = r"""
import crochet

crochet.setup()

from bkctl.wire.client.blocking import ReactorThread, run_in_reactor

print(run_in_reactor(lambda: 6 * 7), ReactorThread.current)
"""


def test_crochet_set_up_by_someone_else_first_runs_the_calls_in_its_reactor():
    done = run_script(CROCHET_SET_UP_FIRST, None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "None"]
