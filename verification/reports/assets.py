"""plotly.js, written once per report folder (REPORT_DIR/assets/), for every page in it to load.

Inline, plotly.js made every report.html 4.8 MB, 97 % of it the same script; 10,000 runs kept 48 GB
of it. Each page now loads the folder's copy by a relative path (../assets/ from a run folder,
assets/ from index.html), which works from file:// and from any server of the folder alike, offline.
The file is named by plotly.js's version, written only when missing or not byte for byte what this
restoreproof ships (checked by SHA-256), and replaced atomically, so a reader never loads half of it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import plotly.offline

from verification.errors import ReportError

# The folder beside the run folders (a run id is a timestamp, or a DAG's name and a digest: never this).
ASSETS = "assets"


@dataclass(frozen=True)
class Asset:
    name: str
    version: str
    data: bytes
    sha256: str

    def href(self, depth: int) -> str:
        """The asset's URL relative to a page `depth` folders below the report folder."""
        return "../" * depth + f"{ASSETS}/{self.name}"


@cache
def plotly_asset() -> Asset:
    """plotly.min.js from the installed plotly package."""
    version = plotly.offline.get_plotlyjs_version()
    data = plotly.offline.get_plotlyjs().encode()
    return Asset(f"plotly-{version}.min.js", version, data, hashlib.sha256(data).hexdigest())


def write_asset(report_dir: Path, asset: Asset) -> Path:
    """report_dir/assets/<name>, written unless it already holds exactly the asset's bytes."""
    target = report_dir / ASSETS / asset.name
    if _holds(target, asset):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot make the report assets folder {target.parent}: "
                          f"{exc.strerror or type(exc).__name__}") from exc
    write_atomically(target, asset.data)
    return target


def _holds(path: Path, asset: Asset) -> bool:
    try:
        if path.stat().st_size != len(asset.data):
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == asset.sha256
    except OSError:  # missing or unreadable: written again
        return False


def write_atomically(path: Path, data: bytes) -> None:
    """Write beside and rename: concurrent writers, or a reader mid-load, never see half a file."""
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ReportError(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; pages are as readable as the reports
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise ReportError(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from exc
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
