"""Access to the golden vectors captured from a real Java BookKeeper cluster.

    from tests.support.golden import VECTORS, frames, examples

``VECTORS`` is ``tests/vectors/``, the repository's own copy of the vectors
(see its README for where they were captured); the ``BK_VECTORS`` environment
variable points the tests at another copy.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator

VECTORS = pathlib.Path(os.environ.get("BK_VECTORS") or pathlib.Path(__file__).resolve().parents[1] / "vectors")


def flows() -> list[str]:
    """Names of the captured flows, e.g. ``"v3-flow"``, ``"digest-MAC-v2"``."""
    return sorted(p.name[: -len(".frames.jsonl")] for p in (VECTORS / "frames").glob("*.frames.jsonl"))


def frames(flow: str | None = None) -> Iterator[dict]:
    """Every captured frame, in capture order within each flow (flows sorted
    by name), or only those of ``flow``.

    Each item is the jsonl object plus ``flow`` (the file's flow name),
    ``index`` (position in that file) and ``raw`` (``bytes.fromhex(hex)``,
    i.e. the frame *including* its 4-byte length prefix).
    """
    for name in [flow] if flow is not None else flows():
        path = VECTORS / "frames" / f"{name}.frames.jsonl"
        with path.open(encoding="utf-8") as fh:
            for index, line in enumerate(fh):
                if not line.strip():
                    continue
                item = json.loads(line)
                item["flow"] = name
                item["index"] = index
                item["raw"] = bytes.fromhex(item["hex"])
                yield item


def examples() -> Iterator[dict]:
    """Every ``examples/*.hex`` file, sorted by name: its metadata line (the
    same fields as in the jsonl) plus ``name`` (file stem) and ``raw`` (the
    frame from line 3, length prefix included)."""
    for path in sorted((VECTORS / "examples").glob("*.hex")):
        lines = path.read_text(encoding="utf-8").splitlines()
        item = json.loads(lines[1].lstrip("#").strip())
        item["name"] = path.stem
        item["raw"] = bytes.fromhex(lines[2].strip())
        yield item
