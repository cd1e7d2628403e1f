"""The product's sources as the repository checks read them: module names and their syntax trees
(ast, nothing imported), each file parsed once per test process."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the package it installs as (pyproject.toml's package-dir)
FOLDERS = {"bkctl": "bkctl", "wire": "bkctl.wire", "bookied": "bkctl.bookied", "shell": "bkctl.shell"}


def modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if folder == "wire" and "proto" in parts:
                continue  # generated protobuf modules
            out[".".join([package, *parts])] = path
    return out


#: every product module: dotted name as installed -> source file
MODULES = modules()


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))
