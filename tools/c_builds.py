#!/usr/bin/env python3
"""Whether this tree's C extensions are built from its sources as they are now.

    python tools/c_builds.py           # one line naming each stale build, exit 1; silent, exit 0 when none
    python tools/c_builds.py --quiet   # the exit status alone, whatever BKCTL_FASTPATHS says
    python tools/c_builds.py --files   # every file setup.py builds an extension from (./dev setup's stamp)

(Exit 2: it could not tell, e.g. bkctl is not installed yet.)

A build is stale when its module's ``API`` is not the one the twin selector wants (it is then
not used: :func:`bkctl.wire.fastpath.c_twins_report`, which ``bkctl --version`` prints), when
its file is older than one of the files setup.py builds it from (a change that kept the API
number), or when it is missing where a C compiler and Python's headers are found (an optional
build that failed).  The Python twins then run in its place, as correct and slower, and nothing
else says so: ``./dev setup`` rebuilds when this fails, ``./dev test`` and ``./dev lint`` stop
on it.  With the fast paths switched off (``BKCTL_FASTPATHS=0``) the builds are not used, and
without ``--quiet`` this says nothing.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Extension:
    """One extension of setup.py: its module, its sources (the first one holds the module's
    init function; its stub lies beside it) and every file it is built from (sources, depends)."""

    module: str
    sources: tuple[str, ...]
    files: tuple[str, ...]


def _strings(node: ast.AST) -> tuple[str, ...]:
    return tuple(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def extensions(setup_py: Path = ROOT / "setup.py") -> list[Extension]:
    """setup.py's extensions, read with ast (nothing run): this tool's reader and the suite's
    (tests/repo/test_c_stubs.py)."""
    found = []
    for call in ast.walk(ast.parse(setup_py.read_text(), str(setup_py))):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Extension":
            name, sources = call.args[0], call.args[1]
            assert isinstance(name, ast.Constant) and isinstance(name.value, str), "Extension(name, ...)"
            assert isinstance(sources, ast.List) and sources.elts, "Extension(name, [sources...])"
            files = tuple(f for f in _strings(call) if f.endswith((".c", ".h")))
            found.append(Extension(name.value, _strings(sources), files))
    return found


def can_build() -> bool:
    """Whether a C compiler and Python's headers are here (what ``./dev setup`` asks too)."""
    return shutil.which("cc") is not None and (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file()


def stale(root: Path | None = None) -> list[str]:
    """``_name why`` for each extension whose build is not its sources' (see the module's
    docstring); ``root``: the tree whose setup.py and sources to read (None: this one)."""
    from bkctl.wire import fastpath

    root = ROOT if root is None else root

    states = {t.module: t.state for t in fastpath.c_twins_report(True)}
    compiler = can_build()
    found = []
    for ext in extensions(root / "setup.py"):
        short = ext.module.rsplit(".", 1)[1]
        state = states.get(ext.module)
        if state is fastpath.CTwinState.STALE:
            found.append(f"{short} (its API is not the sources': its Python twin runs)")
            continue
        if state is fastpath.CTwinState.NOT_BUILT:
            if compiler:
                found.append(f"{short} (not built, though a C compiler is here: its Python twin runs)")
            continue
        spec = importlib.util.find_spec(ext.module)
        if spec is None or spec.origin is None:
            continue
        built = Path(spec.origin).stat().st_mtime
        newer = [f for f in ext.files if (root / f).is_file() and (root / f).stat().st_mtime > built]
        if newer:
            found.append(f"{short} (older than {', '.join(newer)})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="the exit status alone, whatever BKCTL_FASTPATHS says")
    parser.add_argument(
        "--files", action="store_true", help="list the files the extensions are built from, a line each"
    )
    args = parser.parse_args(argv)
    if args.files:  # (setup.py read with ast: nothing installed needed)
        print("\n".join(sorted({f for ext in extensions() for f in ext.files})))
        return 0
    if not args.quiet:
        from bkctl.wire import fastpath

        if not fastpath.selected().enabled:
            return 0  # switched off on purpose: the builds are not used
    try:
        found = stale()
    except Exception as exc:  # noqa: BLE001 - not installed yet, a tree that does not import
        if not args.quiet:
            print(f"C builds: could not tell ({exc})")
        return 2
    if found and not args.quiet:
        print(f"C builds not those of their sources: {'; '.join(found)} -- ./dev setup rebuilds them")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
