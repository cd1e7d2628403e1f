"""The journal's counters, apart from the writer thread that keeps them (:mod:`.journal`
holds the writer, its files and checkpoints, and stays within the module size limit)."""

from __future__ import annotations

__all__ = ["JournalStats"]


class JournalStats:
    """Counters kept by the writer thread (read them from anywhere; they are only indicative)."""

    __slots__ = ("records", "bytes", "groups", "writes", "fsyncs", "max_group_records", "files_created")

    def __init__(self):
        self.records = self.bytes = self.groups = self.writes = self.fsyncs = 0
        self.max_group_records = self.files_created = 0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}
