"""How fast ``bkctl shell`` and the CLI start, and how fast the shell completes.

    python bench/bench_shell.py [-m METADATA_URI] [--ledgers 10000] [--runs 7]

Prints figures and asserts nothing.  Without ``-m`` it starts a throw-away
ZooKeeper (as the sandbox does) and a cluster in it.  Targets: the first
prompt within 300 ms, a completion from the cache within 50 ms, ``bkctl
--help`` within 150 ms.

* time to the first prompt: ``bkctl shell`` in a pseudo-terminal, from
  spawning the process to the prompt being drawn;
* completion latency: the shell's completer (click's completion over the
  command tree, then the ledger id cache) on a cluster with --ledgers
  ledgers, for several prefixes, measured in the process;
* ``bkctl --version`` and ``bkctl --help``: wall time of the process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import raw_zookeeper  # noqa: E402

from bkctl.wire import fastpath  # noqa: E402

_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

# bkctl shell, also before the lead has registered it in bkctl/cli.py
_SHELL_LAUNCH = (
    "import sys\n"
    "from bkctl.cli import cli, run\n"
    "if 'shell' not in cli.commands:\n"
    "    from bkctl.commands.shell import shell\n"
    "    cli.add_command(shell)\n"
    "sys.exit(run(['shell', *sys.argv[1:]]))\n"
)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def summary(samples: list[float]) -> str:
    return f"min {ms(min(samples))}  median {ms(statistics.median(samples))}  max {ms(max(samples))}"


def bench_process(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return times


def bench_first_prompt(uri: str, runs: int, home: Path) -> list[float]:
    import pexpect

    env = dict(
        _ENV, HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"), TERM="xterm"
    )
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        child = pexpect.spawn(
            sys.executable,
            ["-c", _SHELL_LAUNCH, "-m", uri],
            env=env,
            encoding="utf-8",
            dimensions=(40, 120),
            timeout=30,
        )
        buffer = ""
        while "bkctl>" not in buffer:
            data = child.read_nonblocking(65536, timeout=30)
            buffer += data
            if "\x1b[6n" in data:  # answer the cursor position request, as a terminal does
                child.send("\x1b[1;1R")
            buffer = buffer.replace("\x1b[0m", "")
        times.append(time.perf_counter() - started)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
    return times


def make_ledgers(uri: str, count: int) -> float:
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata
    from bkctl.wire.metadata.zk import ZKMetadataStore

    md = LedgerMetadata.new(["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"])
    data = serialize_ledger_metadata(md)
    started = time.perf_counter()
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        if not store.cluster.exists():
            store.cluster.init()
        have = sum(1 for _ in store.ledgers.ids())
        if have >= count:
            return 0.0
        pending = []
        with raw_zookeeper(uri) as (zk, _root):  # many creates in flight, as no store call makes them
            for ledger_id in range(have, count):
                if ledger_id % 10000 == 0:  # the first of each leaf directory creates its parents
                    for result in pending:
                        result.get(timeout=60)
                    pending = []
                    store.ledgers.create(md, ledger_id=ledger_id)
                else:
                    pending.append(zk.create_async(store.ledgers.path(ledger_id), data))
            for result in pending:
                result.get(timeout=60)
    return time.perf_counter() - started


def bench_completion(uri: str, ledgers: int, rounds: int) -> None:
    from bkctl.app import App
    from bkctl.cli import cli
    from bkctl.completers import set_session_source
    from bkctl.shell.cache import MetadataCache
    from bkctl.shell.completer import ShellCompleter

    cache = MetadataCache(uri, twins=fastpath.selected())
    started = time.perf_counter()
    cache.start()
    if not cache.refreshed.wait(60):
        print("  the cache did not load within 60 s")
        return
    loaded = time.perf_counter() - started
    print(
        f"  cache loaded {cache.ledger_count} ledger ids in {ms(loaded)} "
        f"(listing {ms(cache.last_ledger_refresh or 0)}), in the background"
    )
    set_session_source(cache)
    completer = ShellCompleter(cli, App(metadata_uri=uri, interactive=True, twins=fastpath.selected()))
    lines = [
        "ledger show ",
        "ledger show 1",
        "ledger show 12",
        "ledger show 123",
        "ledger show 9999",
        "ledger l",
        "autorecovery ",
        "ledger list --state ",
    ]
    try:
        for line in lines:
            samples, count = [], 0
            for _ in range(rounds):
                t = time.perf_counter()
                count = len(completer.completions(line))
                samples.append(time.perf_counter() - t)
            p99 = sorted(samples)[max(int(len(samples) * 0.99) - 1, 0)]
            print(f"  {line!r:24} {count:5d} candidates  median {ms(statistics.median(samples))}  p99 {ms(p99)}")
    finally:
        set_session_source(None)
        cache.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--metadata-uri", help="an existing cluster (default: start a ZooKeeper)")
    parser.add_argument("--ledgers", type=int, default=10_000, help="ledgers for the completion benchmark")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-shell-") as tmp:
        tmp = Path(tmp)
        server = None
        uri = args.metadata_uri
        if uri is None:
            from bkctl.sandbox.zookeeper import ZooKeeperServer

            server = ZooKeeperServer(tmp / "zookeeper").start()
            uri = f"zk+hierarchical://{server.connect_string}/bench/ledgers"
        try:
            print(f"cluster: {uri}")
            print(
                "bkctl --version:      "
                + summary(bench_process([sys.executable, "-m", "bkctl", "--version"], args.runs))
            )
            print(
                "bkctl --help:         " + summary(bench_process([sys.executable, "-m", "bkctl", "--help"], args.runs))
            )
            print(
                "python -c pass:       "
                + summary(bench_process([sys.executable, "-c", "pass"], args.runs))
                + "  (the interpreter alone)"
            )
            created = make_ledgers(uri, args.ledgers)
            if created:
                print(f"created {args.ledgers} ledgers in {created:.1f} s")
            print("shell, first prompt:  " + summary(bench_first_prompt(uri, args.runs, tmp)))
            print(f"completion from the cache ({args.ledgers} ledgers):")
            bench_completion(uri, args.ledgers, rounds=200)
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
