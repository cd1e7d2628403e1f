"""Dynamic values for shell completion: ledger ids, bookie ids and cluster names.

Attach these to click parameters with ``shell_complete=``::

    from ..completion import complete_bookie_id, complete_cluster, complete_ledger_id

    @click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
    @click.option("--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id)

The same callbacks serve two callers:

* bash, zsh and fish, through click's completion protocol
  (``_BKCTL_COMPLETE=bash_complete bkctl ...``): each TAB is a new process,
  so the values are read from ZooKeeper right then (the cluster is the one
  the command line names with ``-m``/``--cluster``, or
  ``$BKCTL_METADATA_URI``, or the configured default), within a short time
  budget.  Nothing is ever printed: on any problem there are simply no
  candidates.
* ``bkctl shell``, which installs a :class:`MetadataSource` (its cache,
  refreshed in a background thread) with :func:`set_session_source`; then a
  completion never waits for the network.

:func:`completion_script` is the shell script that hooks bash, zsh or fish
up to this; it is what ``bkctl completion show`` prints and what
``tools/gen_docs.py`` writes to ``completions/``.
"""
from __future__ import annotations

import bisect
import time
from typing import Iterable, Protocol

from click.shell_completion import CompletionItem

__all__ = [
    "LedgerIdIndex",
    "MAX_CANDIDATES",
    "MetadataSource",
    "SHELLS",
    "complete_bookie_id",
    "complete_down_bookie_id",
    "complete_open_ledger_id",
    "complete_cluster",
    "complete_ledger_id",
    "completion_script",
    "script_header",
    "set_session_source",
]

#: Never offer more candidates than this (type more digits to narrow).
MAX_CANDIDATES = 1000
#: A completion process gives up on ZooKeeper after this many seconds.
LOOKUP_TIMEOUT = 3.0
#: ... and stops walking the ledger tree after this many ids.
LOOKUP_MAX_LEDGERS = 200_000

#: Shells whose completion scripts bkctl generates, with their file names.
SHELLS = {"bash": "bkctl.bash", "zsh": "_bkctl", "fish": "bkctl.fish"}

PROG_NAME = "bkctl"
COMPLETE_VAR = "_BKCTL_COMPLETE"


class LedgerIdIndex:
    """Ledger ids indexed for prefix lookups: ``matching("12", 100)``.

    Lookups cost a binary search plus the matches, so completing among
    hundreds of thousands of ids stays well under a millisecond or two.
    """

    def __init__(self, ledger_ids: Iterable[int] = ()):
        self.ids: list[int] = sorted(set(ledger_ids))
        self._texts: list[str] = sorted(str(i) for i in self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def matching(self, prefix: str, limit: int = MAX_CANDIDATES) -> list[str]:
        """Ids starting with ``prefix``, smallest first, at most ``limit``."""
        if not prefix:
            return [str(i) for i in self.ids[:limit]]
        if not prefix.isdigit():
            return []
        lo = bisect.bisect_left(self._texts, prefix)
        # every text with this prefix sorts before prefix + a character above '9'
        hi = bisect.bisect_left(self._texts, prefix + ":", lo)
        found = self._texts[lo:hi]
        found.sort(key=lambda t: (len(t), t))  # numeric order, without int()
        return found[:limit]


class MetadataSource(Protocol):
    """What completion needs to know about a cluster (see :func:`set_session_source`)."""

    def ledger_ids_matching(self, prefix: str, limit: int) -> list[str]:
        ...

    def bookie_states(self) -> dict[str, str]:
        """bookie id -> "writable", "read-only" or "down" (a cookie, no registration), as `bookie list` says."""
        ...

    def open_ledgers(self, ledger_ids: Iterable[int]) -> set[int]:
        """Those of ``ledger_ids`` that are not closed."""
        ...


_session_source: MetadataSource | None = None


def set_session_source(source: MetadataSource | None) -> None:
    """Make completions answer from ``source`` (``bkctl shell``'s cache); None to stop."""
    global _session_source
    _session_source = source


# -- the callbacks -------------------------------------------------------------

def complete_ledger_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for ledger id arguments and options."""
    try:
        if _session_source is not None:
            texts = _session_source.ledger_ids_matching(incomplete, MAX_CANDIDATES)
        else:
            texts = _one_shot(ctx).ledger_ids_matching(incomplete, MAX_CANDIDATES)
    except Exception:
        return []
    return [CompletionItem(t) for t in texts]


def complete_bookie_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for bookie ids: registered (writable, read-only) and with a cookie."""
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        states = source.bookie_states()
    except Exception:
        return []
    return [CompletionItem(b, help=state) for b, state in sorted(states.items())
            if b.startswith(incomplete)][:MAX_CANDIDATES]


def complete_open_ledger_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for commands that want a ledger that is not closed (ledger close)."""
    try:
        source = _session_source if _session_source is not None else _one_shot(ctx)
        texts = source.ledger_ids_matching(incomplete, MAX_CANDIDATES)
        opened = source.open_ledgers(int(t) for t in texts)
    except Exception:
        return []
    return [CompletionItem(t, help="open") for t in texts if int(t) in opened]


def open_ledgers(store, ledger_ids: Iterable[int], timeout: float = LOOKUP_TIMEOUT) -> set[int]:
    """Those of ``ledger_ids`` whose metadata is not CLOSED (read all at once)."""
    from bkctl.wire.metadata.ledger import parse_ledger_metadata

    zk = store.client
    pending = [(i, zk.get_async(store.ledgers.path(i))) for i in ledger_ids]
    deadline = time.monotonic() + timeout
    found = set()
    for ledger_id, result in pending:
        try:
            data, _stat = result.get(timeout=max(0.0, deadline - time.monotonic()))
            if not parse_ledger_metadata(data).is_closed:
                found.add(ledger_id)
        except Exception:  # deleted meanwhile, corrupt, too slow: not offered
            continue
    return found


def complete_down_bookie_id(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for commands that want a stopped bookie (decommission): the "down" ones."""
    return [item for item in complete_bookie_id(ctx, param, incomplete) if item.help == "down"]


def complete_cluster(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for cluster names from ``~/.config/bkctl/config.toml``."""
    try:
        from .config import load

        clusters = load().get("clusters", {})
    except Exception:
        return []
    items = []
    for name in sorted(clusters):
        if name.startswith(incomplete):
            entry = clusters[name]
            uri = entry.get("metadata_uri") if isinstance(entry, dict) else None
            items.append(CompletionItem(name, help=uri if isinstance(uri, str) else None))
    return items


# -- global options anywhere (see bkctl.cli.hoist_global_options) ----------------

def completion_args(root, args: list[str]) -> list[str]:
    """The words before the one being completed, as click must see them:
    root options typed after the command moved in front of it.  A root
    option still waiting for its value keeps only the root options (its
    value is completed as the root's)."""
    from .cli import _option_table, hoist_global_options

    takes_value = _option_table(root.params, lambda p: not p.is_eager)
    if args and takes_value.get(args[-1]):
        hoisted = hoist_global_options(root, args[:-1])
        command_at = next((i for i, w in enumerate(hoisted) if w in root.commands), len(hoisted))
        return hoisted[:command_at] + [args[-1]]
    return hoist_global_options(root, args)


def root_option_items(root, incomplete: str, have: set[str]) -> list[CompletionItem]:
    """The root's options that start with ``incomplete`` (offered after any command too)."""
    import click

    items = []
    for param in root.params:
        if isinstance(param, click.Option) and not param.is_eager and not param.hidden:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith(incomplete) and opt not in have:
                    items.append(CompletionItem(opt, help=param.help))
    return items


def register_global_option_completion(root) -> None:
    """Make bash, zsh and fish completion understand global options after the command."""
    from click.shell_completion import BashComplete, FishComplete, ZshComplete, add_completion_class

    for base in (BashComplete, ZshComplete, FishComplete):
        class Hoisting(base):
            def get_completions(self, args, incomplete):
                items = super().get_completions(completion_args(root, list(args)), incomplete)
                if incomplete.startswith("-") and any(a in root.commands for a in args):
                    items += root_option_items(root, incomplete, {str(i.value) for i in items})
                return items

        add_completion_class(Hoisting, base.name)


# -- one-shot lookups (a completion process of bash, zsh or fish) ----------------

def _metadata_uri(ctx) -> str | None:
    """The cluster the command line being completed talks to."""
    from .app import App
    from .config import resolve_metadata_uri

    root = ctx.find_root() if ctx is not None else None
    if root is None:
        return resolve_metadata_uri(None, None)
    if isinstance(root.obj, App) and root.obj.metadata_uri:
        return root.obj.metadata_uri
    params = root.params or {}
    return resolve_metadata_uri(params.get("metadata_uri"), params.get("cluster"))


class _OneShot:
    """Reads what a completion needs straight from ZooKeeper, then disconnects."""

    def __init__(self, uri: str | None):
        self.uri = uri

    def _store(self):
        if not self.uri:
            raise LookupError("no cluster")
        import logging

        # a completion must not print: keep kazoo's connection warnings quiet
        logging.getLogger("kazoo").setLevel(logging.CRITICAL + 1)
        from bkctl.wire.metadata.zk import ZKMetadataStore

        return ZKMetadataStore(self.uri, timeout=LOOKUP_TIMEOUT).start()

    def ledger_ids_matching(self, prefix: str, limit: int) -> list[str]:
        if prefix and not prefix.isdigit():
            return []
        store = self._store()
        try:
            deadline = time.monotonic() + LOOKUP_TIMEOUT
            ids = []
            for n, ledger_id in enumerate(store.ledgers.ids()):
                if str(ledger_id).startswith(prefix):
                    ids.append(ledger_id)
                if n >= LOOKUP_MAX_LEDGERS or (n % 256 == 0 and time.monotonic() > deadline):
                    break
        finally:
            store.close()
        return LedgerIdIndex(ids).matching(prefix, limit)

    def bookie_states(self) -> dict[str, str]:
        store = self._store()
        try:
            return bookie_states(store)
        finally:
            store.close()

    def open_ledgers(self, ledger_ids: Iterable[int]) -> set[int]:
        store = self._store()
        try:
            return open_ledgers(store, ledger_ids)
        finally:
            store.close()


def _one_shot(ctx) -> _OneShot:
    return _OneShot(_metadata_uri(ctx))


def bookie_states(store) -> dict[str, str]:
    """Every bookie the cluster knows, with its state (shared with the shell's cache)."""
    states = {b: "down" for b in store.registration.all_bookies()}
    states.update({b: "read-only" for b in store.registration.readonly_bookies()})
    states.update({b: "writable" for b in store.registration.writable_bookies()})
    return states


# -- the scripts ---------------------------------------------------------------

_INSTALL_HINT = {
    "bash": "~/.local/share/bash-completion/completions/bkctl",
    "zsh": "a directory in $fpath, e.g. ~/.zfunc/_bkctl",
    "fish": "~/.config/fish/completions/bkctl.fish",
}


def script_header(shell: str) -> str:
    """The comment lines bkctl puts in front of click's completion script."""
    from . import __version__

    return (f"# {shell} completion for bkctl {__version__}; generated by tools/gen_docs.py, do not edit.\n"
            f"# Install with `bkctl completion install {shell}`, or copy to {_INSTALL_HINT[shell]}.\n"
            f"# Candidates come from `{COMPLETE_VAR}={shell}_complete bkctl ...`: commands and options\n"
            f"# from the command tree, ledger and bookie ids from the cluster's metadata.\n")


#: click's zsh script, autoloaded from $fpath, completes the first TAB but
#: leaves ``bkctl`` bound to the file's function, whose body then only
#: registers the real one: the second TAB offers nothing.  Registering the
#: real function on that first call fixes it.
_ZSH_AUTOLOAD_CALL = '    # autoload from fpath, call function directly\n    {func} "$@"\n'
_ZSH_AUTOLOAD_FIX = ('    # autoload from fpath: complete now, and have later TABs call {func} directly\n'
                     '    compdef {func} {prog}\n    {func} "$@"\n')


#: click's bash script hands bash's own words to bkctl, but bash also breaks
#: words at ``:`` (COMP_WORDBREAKS), so a bookie id ``host:port`` arrives in
#: three pieces and never completes.  Split the line up to the cursor on
#: blanks instead, and give bash each candidate without the part of the word
#: before its last ``:`` -- bash replaces only what follows it.
_BASH_WORDS_CALL = ('    response=$(env COMP_WORDS="${{COMP_WORDS[*]}}" COMP_CWORD=$COMP_CWORD '
                    '{var}=bash_complete $1)\n')
_BASH_WORDS_FIX = (
    '    # words split on blanks only: bash would also split host:port at the colon\n'
    '    local line="${{COMP_LINE:0:COMP_POINT}}" words cword cur\n'
    '    IFS=$\' \\t\' read -r -a words <<< "$line"\n'
    '    [[ ${{#words[@]}} -eq 0 || $line == *[[:blank:]] ]] && words+=("")\n'
    '    cword=$(( ${{#words[@]}} - 1 ))\n'
    '    cur=${{words[cword]}}\n'
    '    response=$(env COMP_WORDS="${{words[*]}}" COMP_CWORD=$cword {var}=bash_complete $1)\n')
_BASH_REPLY = "            COMPREPLY+=($value)\n"
_BASH_REPLY_FIX = ('            # bash replaces only what follows the last colon of the word\n'
                   '            [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]] && value=${value#"${cur%"${cur##*:}"}"}\n'
                   '            COMPREPLY+=($value)\n')


#: click's fish script splits each candidate line at every comma, which cuts
#: a help text at its first comma ("Every bookie with a cookie" ...).
_FISH_SPLIT = '        set -l metadata (string split "," $completion);\n'
_FISH_SPLIT_FIX = '        set -l metadata (string split --max 1 "," $completion);\n'


def _patched(body: str, old: str, new: str) -> str:
    if old not in body:
        raise RuntimeError(f"click's completion script changed; cannot apply bkctl's fix for: {old.strip()}")
    return body.replace(old, new)


def with_header(shell: str, body: str) -> str:
    """``body`` (click's script) with :func:`script_header` and bkctl's fixes; zsh keeps ``#compdef`` first."""
    header = script_header(shell)
    if shell == "fish":
        body = _patched(body, _FISH_SPLIT, _FISH_SPLIT_FIX)
    if shell == "bash":
        body = _patched(body, _BASH_WORDS_CALL.format(var=COMPLETE_VAR), _BASH_WORDS_FIX.format(var=COMPLETE_VAR))
        body = _patched(body, _BASH_REPLY, _BASH_REPLY_FIX)
    if shell == "zsh":
        func = f"_{PROG_NAME}_completion"
        body = body.replace(_ZSH_AUTOLOAD_CALL.format(func=func),
                            _ZSH_AUTOLOAD_FIX.format(func=func, prog=PROG_NAME))
        if body.startswith("#compdef"):
            first, _, rest = body.partition("\n")
            return f"{first}\n{header}{rest}"
    return header + body


def completion_script(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish), from click's machinery."""
    if shell not in SHELLS:
        raise ValueError(f"unsupported shell {shell!r} (one of {', '.join(SHELLS)})")
    from click.shell_completion import get_completion_class

    from .cli import cli

    cls = get_completion_class(shell)
    body = cls(cli, {}, PROG_NAME, COMPLETE_VAR).source()
    return with_header(shell, body)
