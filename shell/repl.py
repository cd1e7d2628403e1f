"""The shell session: one App, a loop over lines, and the shell's own commands.

:class:`Shell` runs each line of bkctl's command tree (given to it: the shell
does not import :mod:`bkctl.cli`, which registers the shell's command) through
:func:`bkctl.runner.run_line` with the session App as ``obj`` (so there is one
implementation of every command),
keeps per-command options such as ``--json`` from leaking into the
session, pages long output, and turns every failure, Ctrl-C included, into
a status instead of an exit.

On a terminal it reads lines with prompt-toolkit (imported only then);
otherwise it reads one command per line from stdin, skipping blank lines
and ``#`` comments, and :meth:`Shell.run` returns the status of the last
failing line (0 if none).

Nothing here imports kazoo or twisted: the commands and the background
cache import them when they first need them.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

import click

from bkctl import __version__, exitcodes
from bkctl.app import App
from bkctl.global_options import hoist_global_options, leading_global_options, option_strings

from . import BUILTIN_NAMES, BUILTINS, builtins_help

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from .cache import MetadataCache

#: App attributes a single command line may change (``--json``, ``-v``...)
#: that must not outlive it.
SESSION_FIELDS = ("metadata_uri", "cluster_name", "json", "color", "verbose", "quiet")

#: Root options that point one command at another cluster.
_CLUSTER_OPTION_NAMES = ("metadata_uri", "cluster")

STYLE = {
    "builtin": "ansimagenta bold",
    "command": "ansicyan bold",
    "option": "ansiyellow",
    "value": "ansigreen",
    "string": "ansigreen",
    "number": "ansiblue",
    "comment": "ansibrightblack italic",
    "error": "ansired underline",
    "bottom-toolbar": "noreverse bg:ansiblack ansiwhite",
    "bottom-toolbar.label": "bold",
    "bottom-toolbar.good": "ansigreen bold",
    "bottom-toolbar.bad": "ansired bold",
    "bottom-toolbar.warn": "ansiyellow bold",
}


def history_path() -> pathlib.Path:
    """``$XDG_DATA_HOME/bkctl/history`` (``~/.local/share/bkctl/history``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return pathlib.Path(base) / "bkctl" / "history"


class _Leave(Exception):
    """``exit``/``quit``: end the session."""


class Shell:
    """A shell session over ``root`` (bkctl's click group) with ``app`` as its state."""

    def __init__(self, app: App, root: click.Group, cluster_name: str | None = None, stdin: TextIO | None = None):
        self.app = app
        app.interactive = True
        self.root = root
        if cluster_name is not None:
            app.cluster_name = cluster_name
        self.stdin = stdin if stdin is not None else sys.stdin
        self.pager = True
        self.paging_active = False  # set while a terminal session runs
        self.cache: MetadataCache | None = None
        self.last_failure = exitcodes.OK
        self.last_line: str | None = None
        self._session: PromptSession[str] | None = None
        self._modes = None  # the terminal's modes when the interactive session started

    @property
    def cluster_name(self) -> str | None:
        """The config's name of the session's cluster (what the prompt shows)."""
        return self.app.cluster_name

    # -- entry point -----------------------------------------------------------
    def run(self) -> int:
        """Interactive on a terminal, else a script from stdin; returns the exit status."""
        if self.stdin.isatty():
            return self.run_interactive()
        return self.run_script(self.stdin)

    def run_script(self, lines: Iterable[str]) -> int:
        """One command per line; the status of the last failing line (0 if none).

        Ctrl-C stops the script (status 130), as it would stop a shell script.
        """
        with _CountingInterrupts() as interrupts:
            for number, line in _joined_lines(lines):
                real_stderr = sys.stderr
                sys.stderr = _LinePrefixed(real_stderr, f"line {number}: ")  # errors say where
                try:
                    code = self.execute(line)
                except _Leave:
                    break
                except KeyboardInterrupt:
                    return 130
                finally:
                    sys.stderr = real_stderr
                if code:
                    self.last_failure = code
                if interrupts.count:  # run() reported it as a failed command; the script ends here
                    return 130
        return self.last_failure

    # -- one line ----------------------------------------------------------------
    def execute(self, line: str) -> int:
        """Run one line (a bkctl command or a shell command); its status."""
        text = line.strip()
        if not text or text.startswith("#"):
            return exitcodes.OK
        word, _, rest = text.partition(" ")
        if word != "\\e":
            self.last_line = text
        if word.startswith("\\") and word in BUILTIN_NAMES:  # \j, \q: shlex would eat the backslash
            return self._builtin(word, rest.split())
        try:
            args = shlex.split(text, comments=True)
        except ValueError as e:
            return self._fail(f"cannot parse the line: {e}")
        if not args:
            return exitcodes.OK
        if args[0] in BUILTIN_NAMES:
            return self._builtin(args[0], args[1:])
        if args[0] == "bkctl":
            args = args[1:]
            if not args:
                return exitcodes.OK
        return self.run_command(args)

    def run_command(self, args: list[str]) -> int:
        """``bkctl ARGS`` on the session App; options given here last for this line only."""
        from bkctl.runner import run_line

        def run(line: list[str], obj: App) -> int:
            return run_line(self.root, line, obj)

        args = hoist_global_options(self.root, list(args))
        if self._command_word(args) == "shell":
            return self._fail("already in the shell")
        target = self.app
        if self._names_other_cluster(args):  # -m/--cluster: a one-off App for that cluster
            target = App(
                interactive=True,
                json=self.app.json,
                color=self.app.color,
                verbose=self.app.verbose,
                quiet=self.app.quiet,
                zk_timeout=self.app.zk_timeout,
                twins=self.app.twins,
            )
        saved = {name: getattr(self.app, name) for name in SESSION_FIELDS}
        out = None
        real_stdout = sys.stdout
        # `top` draws on the whole screen and reads its own keys: never through the pager
        full_screen = self._command_word(args) == "top"
        if self.paging_active and self.pager and real_stdout.isatty() and not full_screen:
            from .pager import PagedOutput

            out = PagedOutput(real_stdout)
            sys.stdout = out
        code = exitcodes.FAILED
        # the command runs in the modes the shell started with (ISIG: Ctrl-C is a
        # signal), and they are put back after it, whatever it did to them
        modes = self._modes or _terminal_modes(self.stdin)
        _restore_terminal_modes(self.stdin, modes)
        try:
            code = run(list(args), obj=target)
        except KeyboardInterrupt:  # between run()'s own handlers
            click.echo("bkctl: aborted", err=True)
        except SystemExit as e:  # a command that called sys.exit(): the shell goes on
            code = e.code if isinstance(e.code, int) else exitcodes.FAILED
        except BaseException as e:
            from .pager import PagerQuit

            if not isinstance(e, PagerQuit):
                raise
            code = exitcodes.OK  # the pager was quit: the reader has seen enough
        finally:
            if out is not None:  # first: the pager owns the terminal's modes until it is quit
                sys.stdout = real_stdout
                out.finish()
            _restore_terminal_modes(self.stdin, modes)  # a command stopped half way must not leave it raw
            for name, value in saved.items():
                setattr(self.app, name, value)
            _fresh_consoles(target)
            if target is not self.app:
                target.close()
        if self.cache is not None:
            self.cache.poke()
        return code

    def _command_word(self, args: list[str]) -> str | None:
        return leading_global_options(self.root, args)[1]

    def _names_other_cluster(self, args: list[str]) -> bool:
        names_cluster = option_strings(self.root, _CLUSTER_OPTION_NAMES)
        options, _ = leading_global_options(self.root, args)
        return any(opt in names_cluster for opt in options)

    # -- the shell's own commands ------------------------------------------------
    def _builtin(self, name: str, args: list[str]) -> int:
        if name in ("exit", "quit", "\\q"):
            raise _Leave()
        if name in ("help", "?"):
            return self._help(args)
        if name == "use":
            return self._use(args)
        if name == "format":
            return self._format(args)
        if name == "\\j":
            self.app.json = not self.app.json
            return self._say(f"output: {'json' if self.app.json else 'table'}")
        if name == "pager":
            return self._pager(args)
        if name == "clear":
            click.clear()
            return exitcodes.OK
        if name == "\\e":
            return self._edit()
        return self._fail(f"{name}: not implemented")  # pragma: no cover - BUILTINS and this agree

    def _help(self, args: list[str]) -> int:
        if args and args[0] in BUILTIN_NAMES:
            for names, arguments, text in BUILTINS:
                if args[0] in names:
                    click.echo(" ".join(filter(None, [names[0], arguments])) + f"\n  {text}")
                    if len(names) > 1:
                        click.echo(f"  (also: {', '.join(names[1:])})")
            return exitcodes.OK
        if args:
            return self.run_command([*args, "--help"])
        code = self.run_command(["--help"])
        click.echo("\nShell commands:\n" + builtins_help())
        click.echo("\nTab completes; Ctrl-R searches the history; Ctrl-C cancels a command; Ctrl-D leaves.")
        return code

    def _use(self, args: list[str]) -> int:
        if not args:
            return self._say(self._describe_cluster())
        if len(args) > 1:
            return self._fail("usage: use CLUSTER|URI", exitcodes.USAGE)
        target = args[0]
        from bkctl.clusters import resolve_cluster
        from bkctl.exitcodes import CommandError

        try:
            uri, name = resolve_cluster(target, None) if "://" in target else resolve_cluster(None, target)
            App(metadata_uri=uri).require_uri()  # a URI the store cannot parse: exit 2 now
        except CommandError as e:
            return self._fail(str(e), e.code)
        from bkctl.clusters import cluster_profile

        self.app.close()  # the old cluster's ZooKeeper session and connections
        self.app.metadata_uri = uri
        self.app.cluster_name = name
        self.app.profile = cluster_profile(name)
        # TLS and ZooKeeper credentials follow the new cluster's profile: the next
        # command works them out again
        self.app.bookie_tls = None
        self.app.zk_security = None
        if self.cache is not None:
            self.cache.set_uri(uri)
        return self._say(self._describe_cluster())

    def _describe_cluster(self) -> str:
        if not self.app.metadata_uri:
            return "no cluster: use CLUSTER or use URI"
        if self.cluster_name:
            return f"cluster {self.cluster_name}: {self.app.metadata_uri}"
        return f"cluster {self.app.metadata_uri}"

    def _format(self, args: list[str]) -> int:
        if not args:
            return self._say(f"output: {'json' if self.app.json else 'table'}")
        if len(args) != 1 or args[0] not in ("json", "table"):
            return self._fail("usage: format json|table", exitcodes.USAGE)
        self.app.json = args[0] == "json"
        return self._say(f"output: {args[0]}")

    def _pager(self, args: list[str]) -> int:
        from .pager import pager_command

        if args and (len(args) != 1 or args[0] not in ("on", "off")):
            return self._fail("usage: pager on|off", exitcodes.USAGE)
        if args:
            self.pager = args[0] == "on"
        return self._say(f"pager: {pager_command() if self.pager else 'off'}")

    def _edit(self) -> int:
        """``\\e``: the last command in $EDITOR; what is saved runs, line by line."""
        edited = click.edit((self.last_line or "") + "\n", extension=".bkctl")
        if edited is None or not edited.strip():
            return self._say("nothing to run")
        code = exitcodes.OK
        for _number, line in _joined_lines(edited.splitlines()):
            code = self.execute(line) or code
        return code

    def _say(self, text: str) -> int:
        if not self.app.quiet:
            click.echo(text, err=True)
        return exitcodes.OK

    @staticmethod
    def _fail(message: str, code: int = exitcodes.USAGE) -> int:
        click.echo(f"bkctl: error: {message}", err=True)
        return code

    # -- the terminal session ----------------------------------------------------
    def prompt_text(self) -> str:
        return f"bkctl:{self.cluster_name}> " if self.cluster_name else "bkctl> "

    def toolbar(self):
        """The bottom toolbar: cluster, bookies, autorecovery, output format, pager."""
        st = self.cache.status if self.cache is not None else None
        uri = self.app.metadata_uri
        parts = [("class:bottom-toolbar.label", " cluster "), ("", (uri or "none (use CLUSTER|URI)") + "  ")]
        if st is None or st.state == "none":
            pass
        elif st.state == "connecting":
            parts.append(("class:bottom-toolbar.warn", "connecting...  "))
        elif st.state == "error":
            parts += [("class:bottom-toolbar.bad", "unreachable"), ("", f" ({st.error})  ")]
        else:
            parts += [
                ("class:bottom-toolbar.label", "bookies "),
                *bookies_phrase(st),
                ("class:bottom-toolbar.label", "autorecovery "),
                autorecovery_phrase(st),
                ("", "  "),
            ]
        parts.append(("", f"[{'json' if self.app.json else 'table'}, pager {'on' if self.pager else 'off'}]"))
        return parts

    def _invalidate(self) -> None:
        session = self._session
        if session is not None:
            session.app.invalidate()

    def run_interactive(self) -> int:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.styles import Style

        from bkctl.clusters import cluster_names
        from bkctl.completers import set_session_source

        from .cache import MetadataCache
        from .completer import ShellCompleter
        from .lexer import CommandLexer

        self._modes = modes = _terminal_modes(self.stdin)
        path = _ensure_history_file(history_path())
        self.cache = cache = MetadataCache(self.app.metadata_uri, self.app.require_twins(), on_change=self._invalidate)
        self._session = session = PromptSession[str](
            history=FileHistory(str(path)) if path else None,
            auto_suggest=AutoSuggestFromHistory(),
            completer=ShellCompleter(self.root, self.app, cluster_names=_safe(cluster_names)),
            complete_in_thread=True,
            complete_while_typing=True,
            lexer=CommandLexer(self.root),
            style=Style.from_dict(STYLE),
            bottom_toolbar=self.toolbar,
            search_ignore_case=True,
            include_default_pygments_style=False,
            enable_open_in_editor=True,  # Ctrl-X Ctrl-E
            prompt_continuation="... ",
        )
        set_session_source(cache)
        # kazoo is imported by the refresher: let the first prompt win the race
        cache.start(delay=0.2)
        self.paging_active = True
        click.echo(f"bkctl {__version__} shell; {self._describe_cluster()}.  Type help, or Ctrl-D to leave.", err=True)
        try:
            while True:
                try:
                    line = session.prompt(self.prompt_text)
                    while _continues(line):  # a trailing backslash: the command goes on
                        line = line[:-1] + " " + session.prompt("... ")
                except KeyboardInterrupt:  # Ctrl-C at the prompt clears the line
                    continue
                except EOFError:  # Ctrl-D
                    break
                try:
                    self.execute(line)
                except _Leave:
                    break
                except KeyboardInterrupt:
                    click.echo("bkctl: aborted", err=True)
        finally:
            self.paging_active = False
            set_session_source(None)
            cache.close()
            self._session = None
            self._modes = None
            _restore_terminal_modes(self.stdin, modes)
        return exitcodes.OK


def bookies_phrase(st) -> list[tuple[str, str]]:
    """The bookies in the toolbar: writable, read-only, and down (a cookie, no registration:
    stopped or dead) when any is, as `bookie list` says them."""
    down = sum(1 for state in (st.bookies or {}).values() if state == "down")
    parts = [
        ("class:bottom-toolbar.good" if st.writable else "class:bottom-toolbar.bad", f"{st.writable} writable"),
        ("", f", {st.readonly} read-only"),
    ]
    if down:
        parts += [("", ", "), ("class:bottom-toolbar.bad", f"{down} down")]
    return parts + [("", "  ")]


def autorecovery_phrase(st) -> tuple[str, str]:
    """(style, text) of autorecovery in the toolbar: the switch alone says nothing of
    whether any daemon acts on it, the elected auditor does."""
    if not st.autorecovery:
        return "class:bottom-toolbar.warn", "disabled"
    if st.auditor:
        return "class:bottom-toolbar.good", f"enabled, auditor {st.auditor}"
    return "class:bottom-toolbar.bad", "enabled but no auditor running"


def _continues(line: str) -> bool:
    """Whether ``line`` ends with a backslash that continues it on the next line."""
    stripped = line.rstrip()
    return stripped.endswith("\\") and not stripped.endswith("\\\\")


def _joined_lines(lines: Iterable[str]):
    """``(first line number, command)``: lines ending with a backslash joined with the next."""
    pending, start = "", 0
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not pending:
            start = number
        if _continues(line):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


class _LinePrefixed:
    """stderr for one script line: every "bkctl: " message says the line it comes from."""

    def __init__(self, real: TextIO, where: str):
        self.real = real
        self.where = where

    def write(self, text: str) -> int:
        self.real.write(text.replace("bkctl: ", "bkctl: " + self.where) if "bkctl: " in text else text)
        return len(text)

    def __getattr__(self, name):
        return getattr(self.real, name)


class _CountingInterrupts:
    """SIGINT raises KeyboardInterrupt as usual, and is counted (main thread only)."""

    def __init__(self):
        self.count = 0
        self._previous = None

    def _handler(self, signum, frame):
        self.count += 1
        raise KeyboardInterrupt

    def __enter__(self) -> _CountingInterrupts:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            import signal

            signal.signal(signal.SIGINT, self._previous)


def _terminal_modes(stream: TextIO):
    """The termios modes of ``stream``'s terminal; None when it is not one."""
    try:
        import termios

        return termios.tcgetattr(stream.fileno())
    except Exception:  # no termios, no file descriptor, not a terminal
        return None


def _restore_terminal_modes(stream: TextIO, modes) -> None:
    """Put ``modes`` (from :func:`_terminal_modes`) back if they changed."""
    if modes is None or _terminal_modes(stream) == modes:
        return
    import termios

    try:
        termios.tcsetattr(stream.fileno(), termios.TCSADRAIN, modes)
    except (OSError, termios.error):
        pass


def _fresh_consoles(app: App) -> None:
    """Drop the App's rich consoles: one interrupted mid-print keeps half a line buffered."""
    for name in ("_console", "_err_console"):
        if hasattr(app, name):
            setattr(app, name, None)


def _ensure_history_file(path: pathlib.Path) -> pathlib.Path | None:
    """Create the history file (private: it holds cluster URIs); None when that is impossible."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        return path
    except OSError as e:
        click.echo(f"bkctl: warning: no history ({path}: {e.strerror})", err=True)
        return None


def _safe(fn):
    def call():
        try:
            return fn()
        except Exception:
            return []

    return call
