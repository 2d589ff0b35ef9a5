"""The interface every backup source implements."""

from __future__ import annotations

from typing import Protocol


class Source(Protocol):
    """A read-only tree of backup files, addressed by '/'-separated relative paths."""

    def describe(self) -> str:
        """How to name this source in messages and reports (a path or a URL)."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]:
        """Names (not paths) of the entries directly under `path`, sorted; [] when it is missing."""
        ...

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    def size(self, path: str) -> int: ...
