"""The report folder, checked before a run: a folder, or one that can be made, and writable."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from verification.errors import ConfigError
from verification.reports.folder import check_report_folder


def test_a_missing_folder_under_a_writable_one_is_accepted(tmp_path: Path) -> None:
    check_report_folder(tmp_path / "reports" / "run-1")
    assert not (tmp_path / "reports").exists()  # checked, never made here


def test_the_folder_itself_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("x")
    with pytest.raises(ConfigError, match=rf"^report folder {tmp_path / 'reports'}: the report folder is a file, "
                                          r"not a folder: name a folder restoreproof may write"):
        check_report_folder(tmp_path / "reports")


def test_a_link_to_nothing_is_named(tmp_path: Path) -> None:
    (tmp_path / "reports").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match=r"is a link to nothing"):
        check_report_folder(tmp_path / "reports" / "run-1")


def as_nobody(folder: Path) -> subprocess.CompletedProcess[str]:
    """check_report_folder(folder) run as another user (nobody) where this one is root: root may write
    any folder. Exits 1 with the ConfigError on stderr where refused."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[3])!r}); from pathlib import Path; "
            f"from verification.reports.folder import check_report_folder; check_report_folder(Path({str(folder)!r}))")
    prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)


def test_a_folder_not_writable_by_the_user_is_named() -> None:
    shared = Path(tempfile.mkdtemp(prefix="rp-folder-test-"))  # /tmp: every user may reach it
    try:
        shared.chmod(0o555 if os.geteuid() != 0 else 0o755)
        result = as_nobody(shared / "run-1")
        assert result.returncode == 1
        assert f"ConfigError: report folder {shared / 'run-1'}: {shared} may not be written by this user (uid " in (
            result.stderr)
    finally:
        shared.chmod(0o700)
        shutil.rmtree(shared)


def test_a_folder_the_user_cannot_reach_is_named(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    result = as_nobody(hidden / "reports" / "run-1")
    if os.geteuid() != 0:  # pragma: no cover - CI runs as root; as a user, the folder is the user's own
        return
    assert result.returncode == 1
    assert f"ConfigError: report folder {hidden / 'reports' / 'run-1'}: cannot be reached by this user (uid 65534): " \
           "Permission denied (" in result.stderr
