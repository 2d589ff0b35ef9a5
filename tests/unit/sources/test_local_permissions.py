"""A repository restoreproof's user may not read: a named error with the fix, exit 2, never a traceback,
never "not a repository" (which would send the folder to another engine), never a verdict on the backups.

Run as another user (nobody) where the tests run as root, who may read anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from verification.errors import SourcePermissionError
from verification.sources.local import denied

ROOT = Path(__file__).resolve().parents[3]
MSSQL = ROOT.parent / "shared" / "testdata" / "mssql-backups" / "DoubleDiffing"
FIX = "give that user read access to the repository (its owner's group, or an ACL: setfacl -R -m u:USER:rX)"


def plan_as_another_user(source: Path, home: Path, config_home: Path | None = None) -> subprocess.CompletedProcess[str]:
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv = ['restoreproof', 'plan', {str(source)!r}]; "
            "from verification.cli import main; main()")
    prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home),
                                            "XDG_CONFIG_HOME": str(config_home or home),
                                            "RESTOREPROOF_SYSTEM_CONFIG": str(home / "no-system-config.yaml")})


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A folder under /tmp, which every user may reach (pytest's tmp_path is private to its user)."""
    folder = Path(tempfile.mkdtemp(prefix="rp-permission-test-"))
    folder.chmod(0o755)
    (folder / "home").mkdir(mode=0o777)
    (folder / "home").chmod(0o777)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            if not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(folder)


def test_a_stanza_the_user_may_not_enter_is_named_with_the_fix(shared: Path) -> None:
    for folder in ("repo", "repo/backup", "repo/archive", "repo/backup/main", "repo/archive/main"):
        (shared / folder).mkdir(mode=0o755)
        (shared / folder).chmod(0o755)
    (shared / "repo" / "backup" / "main" / "backup.info").write_text("[backrest]\n")
    (shared / "repo" / "backup" / "main").chmod(0o000)
    result = plan_as_another_user(shared / "repo", shared / "home")
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert f"restoreproof: cannot reach {shared / 'repo/backup/main/backup.info'}: permission denied to uid " in said
    assert FIX in said
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "holds no backups restoreproof recognises" not in said


@pytest.mark.skipif(not MSSQL.is_dir(), reason=f"{MSSQL} is not here")
def test_a_backup_file_or_folder_the_user_may_not_read_is_named_and_the_rest_planned(shared: Path) -> None:
    shutil.copytree(MSSQL, shared / "folder" / "DoubleDiffing")
    (shared / "folder" / "lost+found").mkdir()
    for path in [shared / "folder", *(shared / "folder").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    locked = shared / "folder" / "DoubleDiffing" / "difftest-diff1.bak"
    locked.chmod(0o000)
    (shared / "folder" / "lost+found").chmod(0o700)  # a mount's own, root's alone
    result = plan_as_another_user(shared / "folder", shared / "home")
    assert result.returncode == 2, result.stderr  # unread: the run cannot pass, nothing is proven damaged
    said = " ".join(result.stdout.split())
    assert "doublediff: complete" in said  # the database beside them is still planned
    assert (f"permission: DoubleDiffing/difftest-diff1.bak: cannot read {locked}: permission denied to uid "
            in said)
    assert (f"permission: lost+found: cannot list {shared / 'folder' / 'lost+found'}: permission denied to uid "
            in said)
    assert "or, if it holds no backups, exclude it (exclude: ['lost+found'])" in said
    assert FIX in said
    assert "Traceback" not in result.stderr and "corrupt" not in said


def test_the_error_names_the_path_and_the_user() -> None:
    found = denied(Path("/srv/backup/main"), "list")
    assert isinstance(found, SourcePermissionError)
    assert found.path == "/srv/backup/main"
    assert str(found).startswith(f"cannot list /srv/backup/main: permission denied to uid {os.geteuid()} (")
    assert str(found).endswith("or run restoreproof as the repository's owner")


def test_a_user_configuration_the_user_may_not_look_at_is_named_not_passed_over(shared: Path) -> None:
    (shared / "config-home").mkdir(mode=0o700)
    (shared / "config-home").chmod(0o000)
    result = plan_as_another_user(shared, shared / "home", shared / "config-home")
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert (f"restoreproof: configuration file {shared / 'config-home/restoreproof/config.yaml'} cannot be read: "
            "Permission denied (uid ") in said
    assert "give this user read access to it, or name another with --config" in said
    assert "Traceback" not in result.stderr
