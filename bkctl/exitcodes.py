"""Exit codes of every bkctl command (documented in ``bkctl --help`` and bkctl(1))."""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
NOT_FOUND = 3
CONFLICT = 4
UNREACHABLE = 5
DENIED = 6
#: ``ledger fsck``'s findings, by the worst one (:class:`bkctl.wire.fsck.findings.Severity`)
FSCK_STALE_MARKS = 7
FSCK_REPAIRABLE = 8
FSCK_DATA_LOST = 9
#: done in part: a backup that could not read some ledgers, a restore that left damaged ones out
PARTIAL = 10
INTERRUPTED = 130
#: ``bkctl top``'s live view ended by SIGTERM (128 + 15, as a shell reports it), the terminal put back
TERMINATED = 143

DESCRIPTIONS = {
    OK: "success",
    FAILED: "the command failed",
    USAGE: "usage error (bad option or argument); a destructive command refused without --force",
    NOT_FOUND: "not found (ledger, entry, bookie, cluster)",
    CONFLICT: "conflict: ledger fenced or closed, concurrent metadata change, already exists, "
    "a ledger Pulsar uses refused",
    UNREACHABLE: "ZooKeeper, the needed bookies or an object store are unreachable (or too slow)",
    DENIED: "access refused: an object store (S3) refused the credentials or their permissions",
    FSCK_STALE_MARKS: "ledger fsck: only under-replication marks out of date (a healthy or deleted ledger marked)",
    FSCK_REPAIRABLE: "ledger fsck: copies missing, misplaced or corrupt while a good copy lives",
    FSCK_DATA_LOST: "data lost: ledger fsck found entries with no live copy; recover or decommission "
    "went past entries with no good copy (recorded lost); a decommission or drain --dry-run names "
    "ledgers that would lose data",
    PARTIAL: "done in part: backup copied every ledger it could read and names the unreadable ones "
    "(recorded in its manifest); restore --skip-damaged restored what was intact and names the rest",
    INTERRUPTED: "interrupted (Ctrl-C); a closed pipe (| head) is 0",
    TERMINATED: "stopped by SIGTERM (bkctl top's live view, the terminal put back)",
}


class CommandError(Exception):
    """An expected failure: printed as one line on stderr, exits with ``code``."""

    def __init__(self, message: str, code: int = FAILED):
        super().__init__(message)
        self.code = code


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an exception raised by a library operation: the one mapping of the
    errors of ``bkctl.ops`` (:mod:`bkctl.ops.errors`) and ``wire`` to exit codes."""
    if isinstance(exc, CommandError):
        return exc.code
    from bkctl.ops.errors import BadInput, SimpleTestFailed
    from bkctl.wire.errors import AccessDenied, Conflict, NotFound, Unreachable

    if isinstance(exc, SimpleTestFailed) and exc.__cause__ is not None:
        return exit_code_for(exc.__cause__)
    if isinstance(exc, BadInput):
        return USAGE
    if isinstance(exc, NotFound):
        return NOT_FOUND
    if isinstance(exc, Conflict):
        return CONFLICT
    if isinstance(exc, Unreachable):
        return UNREACHABLE
    if isinstance(exc, AccessDenied):
        return DENIED
    return FAILED


def describe(exc: BaseException) -> str:
    """The one-line message for ``exc``: an I/O error names its file first."""
    if isinstance(exc, OSError) and exc.strerror:
        import errno

        if exc.filename is not None:
            return f"{exc.filename}: {exc.strerror}"
        if exc.errno in (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT):
            return f"writing the output: {exc.strerror}"  # stdout is the file a command writes unnamed
    return str(exc)
