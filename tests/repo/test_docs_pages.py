"""The README is short and every page of ``docs/`` is reached from it; what the pages name exists (issue 53).

* README.md stays under 12 KB, and links every ``docs/*.md`` page; every relative link of the README and
  the pages leads to a file that exists;
* every ``bkctl`` command named in the README or a page, in a code span or an ``sh`` block, is one of the
  command tree's, and every ``--option`` named with it is one of that command's (or a global option);
* every line of their ``sh`` code blocks that runs ``bkctl`` (also after a pipe) parses against the tree,
  as each command's examples do (``tools/gen_docs.py``'s ``example_accepted``).
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
from pathlib import Path

import click
import pytest

from bkctl.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = [README, *PAGES]
#: a fenced code block: its language and body
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`(bkctl [^`]+)`")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@functools.cache
def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _options(cmd: click.Command) -> set[str]:
    return {name for p in cmd.params for name in (*p.opts, *p.secondary_opts) if name.startswith("--")}


GLOBAL = _options(cli) | {"--help"}


def resolve(words: list[str]) -> tuple[click.Command, list[str]] | None:
    """The command ``words`` (after ``bkctl``) name, and the words after its name; None when the first
    word is not a command."""
    cmd: click.Command = cli
    i = 0
    while isinstance(cmd, click.Group) and i < len(words):
        sub = cmd.commands.get(words[i]) if not words[i].startswith("-") else None
        if sub is None:
            break
        cmd, i = sub, i + 1
    return None if cmd is cli else (cmd, words[i:])


def commands_of(line: str) -> list[str]:
    """The ``bkctl ...`` commands of a shell line: its comment off, split at pipes, a synopsis's optional
    parts (``[--raw]``, ``[--major|--minor]``: the first alternative) written out."""
    line = re.split(r"\s#", line, maxsplit=1)[0]
    while True:
        shorter = re.sub(r"\[([^\[\]|]*)\|[^\[\]]*\]", r"[\1]", line)
        if shorter == line:
            break
        line = shorter
    parts = (part.replace("[", "").replace("]", "").strip() for part in line.split("|"))
    return [part for part in parts if part.startswith("bkctl ")]


def named(text: str) -> list[str]:
    """Every ``bkctl ...`` a page names: its code spans, and its code blocks' lines (pipes split)."""
    found = [m.group(1) for m in _SPAN.finditer(_FENCE.sub("", text))]
    for lang, body in _FENCE.findall(text):
        if lang != "sh":
            continue
        for line in body.splitlines():
            found += commands_of(line)
    return found


def unknown(phrase: str) -> list[str]:
    """What of ``phrase`` (``bkctl ...``) the command tree does not have."""
    words = re.findall(r"[^\s\[\]{}()|,=`\"']+", phrase)[1:]
    while words and words[0].startswith("-"):  # global options first
        if words[0] not in GLOBAL:
            return [words[0]]
        words = words[1:] if words[0] not in ("-m", "--cluster", "--timeout", "--protocol") else words[2:]
    if not words or words[0].isupper():  # `bkctl COMMAND` in prose
        return []
    found = resolve(words)
    if found is None:
        return [words[0]]
    cmd, rest = found
    if isinstance(cmd, click.Group) and rest and not rest[0].startswith("-") and not rest[0].isupper():
        # not one of the group's commands (``state/gc/readonly``: each of them)
        return [name for name in rest[0].split("/") if name not in cmd.commands] or unknown(
            " ".join(["bkctl", *words[: len(words) - len(rest)], rest[0].split("/")[0], *rest[1:]])
        )
    known = _options(cmd) | GLOBAL
    return [w for w in rest if w.startswith("--") and w not in known]


def sh_lines(text: str) -> list[str]:
    lines = []
    for lang, body in _FENCE.findall(text):
        if lang != "sh":
            continue
        for line in body.splitlines():
            lines += [
                part
                for part in commands_of(line)
                if "..." not in part and not re.search(r"[A-Z]{2,}(?![\w:/.-])", part)
            ]
    return lines


def test_the_readme_is_short_and_reaches_every_page():
    assert PAGES, "no docs/*.md"
    text = README.read_text()
    assert len(text.encode()) < 12_000, f"README.md is {len(text.encode())} bytes: move detail to docs/"
    linked = {(README.parent / target).resolve() for target in _LINK.findall(text)}
    assert [p.name for p in PAGES if p.resolve() not in linked] == []


@pytest.mark.parametrize("page", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_links_lead_somewhere(page):
    missing = [t for t in _LINK.findall(page.read_text()) if "://" not in t and not (page.parent / t).exists()]
    assert missing == []


@pytest.mark.parametrize("page", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_the_commands_and_options_named_exist(page):
    bad = {phrase: miss for phrase in named(page.read_text()) if (miss := unknown(phrase))}
    assert bad == {}


@pytest.mark.parametrize("page", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_the_bkctl_lines_of_sh_blocks_parse(page):
    accepted = _gen_docs().example_accepted
    refused = [line for line in sh_lines(page.read_text()) if not accepted(cli, line)]
    assert refused == []


def test_the_checks_see_what_they_look_for():
    assert unknown("bkctl ledger show 7 --json") == []
    assert unknown("bkctl ledger shwo 7") == ["shwo"]
    assert unknown("bkctl ledger COMMAND") == []  # a placeholder in prose
    assert unknown("bkctl legder show 7") == ["legder"]
    assert unknown("bkctl ledger read 7 --fromat hex") == ["--fromat"]
    assert not _gen_docs().example_accepted(cli, "bkctl ledger shwo 7")
    page = "run `bkctl ledger list --jsn`\n```sh\nbkctl cluster info | bkctl nothing  # x\n```\n"
    assert named(page) == ["bkctl ledger list --jsn", "bkctl cluster info", "bkctl nothing"]
    assert sh_lines(page) == ["bkctl cluster info", "bkctl nothing"]
    assert commands_of("bkctl bookie gc B [--major|--minor] [--wait [--wait-timeout 600]]  # x | y") == [
        "bkctl bookie gc B --major --wait --wait-timeout 600"
    ]
    assert shlex.split("bkctl a")  # shlex stays importable for example_accepted


def test_the_pages_are_read():
    """The checks above look at something: the docs name many commands, and run many."""
    assert sum(len(named(p.read_text())) for p in DOCS) > 100
    assert sum(len(sh_lines(p.read_text())) for p in DOCS) > 50
