"""The errors of bookied's configuration and where a setting came from."""

from __future__ import annotations

from dataclasses import dataclass

from bkctl.wire.errors import BKError

__all__ = ["ConfigError", "InvalidValue", "Origin", "bad_value"]


class ConfigError(BKError, ValueError):
    """A configuration the bookie cannot start with.

    ``str(err)`` is a complete message such as
    ``bk_server.conf:12: bookiePort: 'abc' is not an integer``; ``key``,
    ``value``, ``path`` and ``line`` are kept for callers that want them
    (each may be None).
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        value: str | None = None,
        path: str | None = None,
        line: int | None = None,
    ):
        super().__init__(message)
        self.key = key
        self.value = value
        self.path = path
        self.line = line


class InvalidValue(Exception):
    """Raised by value checks with the problem phrase; the loader adds context."""


@dataclass(frozen=True)
class Origin:
    """Where a setting came from: a file line or the command line."""

    path: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.path is None:
            return "command line"
        return f"{self.path}:{self.line}"


def bad_value(key: str, value: str, problem: str, origin: Origin | None = None) -> ConfigError:
    prefix = f"{origin.path}:{origin.line}: " if origin is not None and origin.path else ""
    return ConfigError(
        f"{prefix}{key}: {value!r} {problem}",
        key=key,
        value=value,
        path=origin.path if origin else None,
        line=origin.line if origin else None,
    )
