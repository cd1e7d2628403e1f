"""Every bkctl command's --help (and man page) ends with examples that parse."""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bkctl.cli import cli, run
from bkctl.examples import EXAMPLES, walk

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [" ".join(path) for path, _cmd in walk(cli)]


@functools.cache
def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    gen_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_docs)
    return gen_docs


def _accepted(line: str) -> bool:
    return _gen_docs().example_accepted(cli, line)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_examples_that_parse(command, capsys):
    assert EXAMPLES.get(command), f"add examples for `bkctl {command}` to bkctl/examples.py"
    assert run([*command.split(), "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "Examples:" in help_text
    for line, _what in EXAMPLES[command]:
        assert line in help_text
        # every bkctl of a pipeline parses (`bkctl pulsar orphans --json | bkctl ledger delete -`)
        bkctl_lines = [
            shlex.join(shlex.split(part.split("<")[0])) for part in line.split("|") if part.strip().startswith("bkctl")
        ]
        assert bkctl_lines and all(map(_accepted, bkctl_lines)), line
        assert any(re.search(rf"\b{re.escape(command.split()[-1])}\b", bkctl_line) for bkctl_line in bkctl_lines)


def test_examples_show_in_a_real_help():
    out = subprocess.run(
        [sys.executable, "-m", "bkctl", "ledger", "add", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    ).stdout
    assert re.search(r"Examples:\n +bkctl ledger add 42 hello world +# two entries\n", out), out
