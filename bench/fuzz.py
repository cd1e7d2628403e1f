"""Coverage-guided fuzzing of every decoder (atheris, libFuzzer's engine for Python).

Each target of tests/support/fuzz_targets.py (frames on both sides, the fast
parsers against the general ones, ledger metadata, cookies, bookied's and
Java's journals, entry logs and indexes, Pulsar entries and the C batch
splitter against its Python twin, managed-ledger znodes) runs in a process
of its own for ``--seconds`` seconds, instrumented, starting from its seeds
(made from the captured vectors) and its kept corpus
(``tests/fuzz_corpus/<target>/``).  Anything a target raises beyond its
declared errors, a hang past ``--timeout`` seconds or a process past
``--rss-mb`` of memory is a finding: its input is written to the work folder
and named in the report.  One target at a time (one core; run it under
``nice`` on a shared machine).

    pip install -e '.[fuzz]'
    nice python bench/fuzz.py --seconds 600 [--targets framing,cookie] [--keep N] [--json]

``--keep N`` adds to ``tests/fuzz_corpus/<target>/`` the N smallest of the new
inputs that widened coverage: crash-free seeds for the unit test that replays
the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import load_note  # noqa: E402

_STAT = re.compile(r"stat::(\w+):\s*(\d+)")
_COV = re.compile(r"cov: (\d+) ft: (\d+)")


def child(name: str, args: list[str]) -> None:
    """Run inside the fuzzing process: instrument bkctl, then hand over to libFuzzer."""
    import logging

    import atheris

    logging.disable(logging.CRITICAL)  # the bookie's warnings about bad requests: one per execution
    with atheris.instrument_imports(include=["bkctl"]):
        from tests.support import fuzz_targets as ft

        target = ft.TARGETS[name]
        for data in target.seeds():  # imports what the target uses, inside the instrumentation
            ft.run(name, data)

    def one(data: bytes) -> None:
        ft.run(name, data)

    atheris.Setup([sys.argv[0], *args], one)
    atheris.Fuzz()


def fuzz(name: str, seconds: int, work: Path, timeout: int, rss_mb: int, max_len: int) -> dict:
    from tests.support import fuzz_targets as ft

    corpus = work / name / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for data in ft.seeds(name) + ft.corpus(name):
        (corpus / f"seed-{abs(hash(data)):x}").write_bytes(data)
    artifacts = work / name / "findings"
    artifacts.mkdir(exist_ok=True)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--",
        f"-max_total_time={seconds}",
        "-print_final_stats=1",
        f"-timeout={timeout}",
        f"-rss_limit_mb={rss_mb}",
        f"-max_len={max_len}",
        f"-artifact_prefix={artifacts}/",
        "-print_pcs=0",
        str(corpus),
    ]
    started = time.monotonic()
    scratch = work / name / "scratch"  # the targets' files (libFuzzer's exit skips their clean-up)
    scratch.mkdir(exist_ok=True)
    proc = subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        cwd=REPO,
        env=dict(os.environ, BKCTL_FUZZ_SCRATCH=str(scratch)),
    )
    shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    out = proc.stdout
    (work / name / "log.txt").write_text(out)
    stats = {k: int(v) for k, v in _STAT.findall(out)}
    cov = _COV.findall(out)
    findings = sorted(str(p) for p in artifacts.iterdir())
    error = None
    if findings or proc.returncode not in (0,):
        tail = [ln for ln in out.splitlines() if ln.strip()][-25:]
        error = "\n".join(tail)
    return {
        "target": name,
        "executions": stats.get("number_of_executed_units", 0),
        "seconds": round(elapsed, 1),
        "coverage": int(cov[-1][0]) if cov else None,
        "features": int(cov[-1][1]) if cov else None,
        "corpus": len(list(corpus.iterdir())),
        "findings": findings,
        "exit": proc.returncode,
        "error": error,
    }


def keep_new(name: str, work: Path, limit: int) -> int:
    """Add to tests/fuzz_corpus/<name>/ the ``limit`` smallest inputs the run added to its
    corpus (libFuzzer keeps an input only when it widens coverage)."""
    from tests.support import fuzz_targets as ft

    new = sorted(
        (p for p in (work / name / "corpus").iterdir() if not p.name.startswith("seed-")),
        key=lambda p: p.stat().st_size,
    )
    for p in new[:limit]:
        ft.keep(name, p.read_bytes())
    return min(limit, len(new))


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4:] if sys.argv[3:4] == ["--"] else sys.argv[3:])
        return 0
    from tests.support import fuzz_targets as ft

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="fuzzing time per target (default 60)")
    ap.add_argument("--targets", default=",".join(ft.TARGETS), help="comma-separated targets (default: all)")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take (a hang past it is a finding)")
    ap.add_argument("--rss-mb", type=int, default=2048, help="memory a target's process may use")
    ap.add_argument("--max-len", type=int, default=4096, help="largest input libFuzzer makes")
    ap.add_argument("--keep", type=int, default=0, help="add up to N new inputs per target to tests/fuzz_corpus/")
    ap.add_argument("--work", help="work folder (default: a temporary one, kept when there are findings)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("bench/fuzz.py needs atheris: pip install -e '.[fuzz]'", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in ft.TARGETS]
    if unknown:
        print(f"unknown targets: {', '.join(unknown)} (known: {', '.join(ft.TARGETS)})", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="bkctl-fuzz-"))
    results = []
    for name in names:
        r = fuzz(name, args.seconds, work, args.timeout, args.rss_mb, args.max_len)
        if args.keep and not r["findings"]:
            r["kept"] = keep_new(name, work, args.keep)
        results.append(r)
        if not args.json:
            print(
                f"{name:22} {r['executions']:>11,} executions in {r['seconds']:>6.0f} s "
                f"({r['executions'] / max(r['seconds'], 1e-9):>7,.0f}/s)  coverage {r['coverage']}  "
                f"corpus {r['corpus']}  findings {len(r['findings'])}"
                + (f"  kept {r['kept']}" if r.get("kept") else ""),
                flush=True,
            )
            if r["error"]:
                print("    " + r["error"].replace("\n", "\n    "), flush=True)
    total = sum(r["executions"] for r in results)
    findings = [f for r in results for f in r["findings"]]
    summary = {
        "targets": len(results),
        "executions": total,
        "findings": findings,
        "work": str(work),
        "load": load_note(),
        "results": results,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"total: {total:,} executions over {len(results)} targets, {len(findings)} finding(s); {load_note()}")
        if findings:
            print(f"inputs in {work}")
    if not findings and not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
