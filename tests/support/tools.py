"""The repository's tools (tools/, not a package: scripts run by path) as modules for the suite."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def c_builds() -> ModuleType:
    """tools/c_builds.py, loaded once per test process: whether the C builds are their sources',
    and the one reader of setup.py's extensions (:func:`extensions`)."""
    spec = importlib.util.spec_from_file_location("tools_c_builds", ROOT / "tools" / "c_builds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up there)
    spec.loader.exec_module(module)
    return module
