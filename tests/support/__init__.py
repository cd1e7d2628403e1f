"""What the tests share (as kazoo keeps its in ``kazoo.testing``); test modules import from here,
never from each other.

* :mod:`.bookieproc` -- real bookied processes (start, kill -9, restart), started together and
  waited for until registered; a blocking wire client to poke one.
* :mod:`.cli` -- the one runner of ``bkctl`` processes, and the checks of their output.
* :mod:`.terminal` -- a real pseudo-terminal with a small VT100 screen (``bkctl shell``, completions).
* :mod:`.ledgers` -- ledgers written through the client or as metadata only; the check that a
  repaired ledger is whole on every bookie of its write sets.
* :mod:`.waiting` -- ``wait_for``: poll for what a real process does, with a generous deadline;
  ``stop_process``: SIGSTOP that returns once the process is stopped.
* :mod:`.clocks` -- a manual clock for code that takes a monotonic source and a sleeper.
* :mod:`.http` -- bookied's HTTP endpoints without a network.
* :mod:`.golden` -- the vectors captured from a real Java BookKeeper (``tests/vectors/``).
* :mod:`.tcp_proxy` -- a TCP proxy whose link can be cut (blackholed or reset) and restored: a
  network partition between two live processes.
* :mod:`.crash` -- run a child that prints what it made durable, SIGKILL it.
* :mod:`.deferreds` -- Twisted's checks of a Deferred's result (trial's successResultOf, failureResultOf,
  assertNoResult) for pytest-style tests.
* :mod:`.smallfs` -- a real, small filesystem to fill up (needs root).
* :mod:`.tlscerts` -- throw-away CAs and certificates.
* :mod:`.fake_store` -- the one in-memory metadata store, checked against ZooKeeper.
* :mod:`.fake_bookie` -- the one fake bookie (a BookieChannel in memory), checked against a real bookied by
  tests/integration/test_bookie_channel_conformance.py.
* :mod:`.connection` -- a real bookie connection on Twisted's fakes (MemoryReactorClock, StringTransport).
* :mod:`.threads` -- a reactor clock whose thread pool the test drives.
* :mod:`.pulsar_entries` -- Pulsar entries made as a producer and broker make them, and the Pulsar
  vectors (``tests/vectors/pulsar/``) in the order a reader meets them.
"""
