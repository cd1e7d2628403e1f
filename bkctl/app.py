"""The state one bkctl invocation (or one shell session) shares between commands."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from .exitcodes import USAGE, CommandError


@dataclass
class App:
    metadata_uri: str | None = None
    json: bool = False
    color: bool = True
    verbose: int = 0
    quiet: bool = False
    #: True inside ``bkctl shell``: connections stay open between commands.
    interactive: bool = False
    _store: Any = field(default=None, repr=False)
    _console: Any = field(default=None, repr=False)
    _err_console: Any = field(default=None, repr=False)

    # -- connections ---------------------------------------------------------
    def require_uri(self) -> str:
        if not self.metadata_uri:
            raise CommandError("no cluster given: use --metadata-uri/-m, $BKCTL_METADATA_URI or --cluster", USAGE)
        return self.metadata_uri

    @property
    def store(self):
        """The ZooKeeper metadata store, connected on first use."""
        if self._store is None:
            from wire.zkstore import ZKMetadataStore

            store = ZKMetadataStore(self.require_uri())
            store.start()
            self._store = store
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- output --------------------------------------------------------------
    @property
    def console(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(no_color=not self.color, highlight=False, soft_wrap=True)
        return self._console

    @property
    def err_console(self):
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(stderr=True, no_color=not self.color, highlight=False)
        return self._err_console

    def emit_json(self, doc: Any) -> None:
        sys.stdout.write(json.dumps(doc, sort_keys=True, default=_json_default) + "\n")
        sys.stdout.flush()

    def info(self, message: str) -> None:
        """A progress or status line for people, on stderr (silent with -q or --json)."""
        if not self.quiet and not self.json:
            self.err_console.print(message)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def color_wanted(no_color_flag: bool) -> bool:
    return not no_color_flag and "NO_COLOR" not in os.environ


def confirm_destructive(app: App, question: str, force: bool, action: str) -> None:
    """Ask ``question`` on a terminal; without one (cron, pipes) refuse unless --force.

    ``action`` completes "refusing to ..." in the refusal, e.g. "delete ledger 7".
    """
    if force:
        return
    if not sys.stdin.isatty():
        raise CommandError(f"refusing to {action} without --force (stdin is not a terminal)", USAGE)
    import click

    if not click.confirm(question, default=False, err=True):
        from .exitcodes import FAILED

        raise CommandError(f"declined: did not {action}", FAILED)
