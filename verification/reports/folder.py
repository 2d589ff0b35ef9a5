"""Where a run's reports go: checked before the run starts, so a folder that cannot take them stops it
with the fix, not after every database was restored."""

from __future__ import annotations

import os
from pathlib import Path

from verification.errors import ConfigError

FIX = "name a folder restoreproof may write (--report-dir, or report_dir in the configuration)"


def check_report_folder(folder: Path) -> None:
    """That `folder` is a folder this process may write into, or can be made one: the nearest part of
    it that exists is a folder and writable. Raises ConfigError naming the path and what it is."""
    existing = folder
    try:
        while not existing.exists() and existing != existing.parent:
            if existing.is_symlink():
                raise ConfigError(f"report folder {folder}: {existing} is a link to nothing: {FIX}")
            existing = existing.parent
    except OSError as exc:  # a folder on the way this user may not search
        raise ConfigError(f"report folder {folder}: cannot be reached by this user (uid {os.geteuid()}): "
                          f"{exc.strerror} ({exc.filename}): {FIX}") from None
    if not existing.is_dir():
        what = "the report folder" if existing == folder else f"a part of its path, {existing},"
        raise ConfigError(f"report folder {folder}: {what} is a file, not a folder: {FIX}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"report folder {folder}: {existing} may not be written by this user "
                          f"(uid {os.geteuid()}): {FIX}")
