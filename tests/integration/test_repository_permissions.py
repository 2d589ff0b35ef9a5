"""A repository as pgBackRest leaves it on a database host: owned by that host's backup user (a uid the
target image does not have), files 0640 and folders 0750 by default, or owner-only under a strict
umask. The target reads it through the real CLI and the real Docker engine; nothing is made writable.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verification.cli import app

pytestmark = pytest.mark.integration

HOST_UID, HOST_GID = 4101, 4104  # the database host's postgres: neither the image's nor this host's


def owned_copy(demo, tmp_path: Path, folders: int, files: int) -> Path:  # type: ignore[no-untyped-def]
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository another owner")
    copy = tmp_path / "backups"
    shutil.copytree(demo.repository, copy, symlinks=True)
    for top, _dirs, names in os.walk(copy):
        os.chown(top, HOST_UID, HOST_GID)
        os.chmod(top, folders)
        for name in names:
            os.chown(os.path.join(top, name), HOST_UID, HOST_GID, follow_symlinks=False)
            if not os.path.islink(os.path.join(top, name)):
                os.chmod(os.path.join(top, name), files)
    return copy


def verify(copy: Path, tmp_path: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, ["verify", str(copy), "-d", "demo1", "--json",
                                      "--report-dir", str(tmp_path / "reports")], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def modes(copy: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_gid) for p in copy.rglob("*")}


@pytest.mark.parametrize(("folders", "files"), [(0o750, 0o640), (0o700, 0o600)], ids=["group", "owner-only"])
def test_a_repository_with_the_hosts_owner_and_modes_passes_untouched(demo, tmp_path, folders, files):
    copy = owned_copy(demo, tmp_path, folders, files)
    before = modes(copy)
    code, report = verify(copy, tmp_path)
    db = report["databases"][0]
    assert (code, db["verdict"]) == (0, "passed"), db["reasons"]
    assert {c["name"]: c["status"] for c in db["checks"]}["pgbackrest_verify"] == "passed"
    assert modes(copy) == before  # read, never changed


def test_a_file_its_reader_cannot_read_is_an_error_naming_file_mode_owner_and_uid(demo, tmp_path):
    copy = owned_copy(demo, tmp_path, 0o750, 0o640)
    manifest = next((copy / "backup" / "demo1").glob("*F")) / "backup.manifest"
    os.chown(manifest, 0, 0)
    os.chmod(manifest, 0o600)
    code, report = verify(copy, tmp_path)
    db = report["databases"][0]
    assert (code, db["verdict"]) == (2, "error"), db["reasons"]
    reason = " ".join(db["reasons"])
    assert f"file {manifest} (mode 0600, owner uid 0 gid 0) cannot be read" in reason
    assert "as uid " in reason and f"{HOST_GID}" in reason
    assert not any(p["name"] == "transfer" and p["status"] == "measured" for p in db["phases"])


def plan(copy: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, ["plan", str(copy), "--json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(("folders", "files"), [(0o750, 0o640), (0o700, 0o600)], ids=["group", "owner-only"])
def test_a_plan_of_a_repository_with_the_hosts_owner_and_modes_names_nothing(demo, tmp_path, folders, files):
    code, planned = plan(owned_copy(demo, tmp_path, folders, files))
    assert (code, planned["unreadable"]) == (0, [])


def test_a_plan_names_the_file_a_target_will_not_read_as_an_error(demo, tmp_path):
    copy = owned_copy(demo, tmp_path, 0o750, 0o640)
    manifest = next((copy / "backup" / "demo1").glob("*F")) / "backup.manifest"
    os.chown(manifest, 0, 0)
    os.chmod(manifest, 0o600)
    code, planned = plan(copy)
    [found] = [u for u in planned["unreadable"] if u["database"] == "demo1"]
    assert (code, found["kind"], found["path"]) == (2, "permission", str(manifest.relative_to(copy)))
    assert f"file {manifest} (mode 0600, owner uid 0 gid 0) cannot be read" in found["reason"]
    assert f"groups {HOST_GID}" in found["reason"]
