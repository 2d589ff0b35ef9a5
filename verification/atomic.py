"""Files written whole or not at all: a reader in another process (a sweep reading state records)
sees either the old file or the new one, never one half written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file in `path`'s own folder (so the rename stays on one file
    system), flush it to disk, then rename it over `path` (os.replace: atomic on POSIX)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
