"""What every part of a sandbox shares: its directory and state file (``sandbox.json``, written
atomically, read back by every later command), the lock that serialises commands on one directory,
the address everything listens on, and :class:`SandboxError`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..exitcodes import FAILED, CommandError

DEFAULT_DIR = ".bkctl-sandbox"
STATE_FILE = "sandbox.json"
LOCK_FILE = ".lock"
LEDGERS_ROOT = "/ledgers"
HOST = "127.0.0.1"
STATE_VERSION = 1

Progress = Callable[[str], None]


class SandboxError(CommandError):
    """A sandbox operation that cannot go on; the message says what to do."""

    def __init__(self, message: str, code: int = FAILED):
        super().__init__(message, code)


def quiet(_: str) -> None:
    pass


# --------------------------------------------------------------------------
# state file


def sandbox_dir(directory: str | os.PathLike | None) -> Path:
    return Path(directory if directory is not None else DEFAULT_DIR).expanduser().resolve()


def state_path(directory: str | os.PathLike | None) -> Path:
    return sandbox_dir(directory) / STATE_FILE


def load_state(directory: str | os.PathLike | None) -> dict | None:
    """The recorded state, or None when the directory holds no sandbox."""
    path = state_path(directory)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise SandboxError(f"{path} is not valid JSON ({exc}); fix or delete it") from None
    if not isinstance(state, dict):
        raise SandboxError(f"{path} does not hold a sandbox state object; fix or delete it")
    state.setdefault("bookies", [])
    return state


def save_state(directory: str | os.PathLike | None, state: dict) -> None:
    """Write the state file (a new file renamed over the old one).  A filesystem that cannot take
    it (full: ENOSPC, read-only...) is a :class:`SandboxError` naming it; the old file is left."""
    path = state_path(directory)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise SandboxError(
            f"cannot write {path}: {exc.strerror or exc}; `bkctl sandbox down` still stops every process "
            "of this sandbox (it finds its bookies by their configuration)"
        ) from None


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Serialise sandbox commands working on the same directory."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxError(f"another bkctl sandbox command is working on {directory}") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def metadata_uri_for(zk_port: int) -> str:
    return f"zk+hierarchical://{HOST}:{zk_port}{LEDGERS_ROOT}"
