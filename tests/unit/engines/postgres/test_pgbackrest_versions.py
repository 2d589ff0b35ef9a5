"""What restoreproof reads of each pgBackRest version the images ship, besides verify: the repository's
own files (backup.info, archive.info, the WAL names) held to `pgbackrest info --output=json` of the same
repository, and the errors of `pgbackrest restore` on damaged copies of it. Captured by real runs of each
version (scripts/capture-pgbackrest-fixtures-in-image.sh; tests/fixtures/postgres/pgbackrest-<version>/);
pgBackRest 2.45's are test_repository.py's and test_pgbackrest_errors.py's."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import STANZA, write_manifest
from tests.unit.engines.postgres.test_verify_versions import CAPTURED, VERSIONS, folder
from verification.engines.postgres.pgbackrest_errors import ERROR_LINE, blames_repository, missing_files
from verification.engines.postgres.repository import discover
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024
# Where the capture made its repositories (the paths pgBackRest names in its errors).
CAPTURE_ROOT = re.compile(r"/tmp/rp-verify\.\w+")


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    if not (folder(request.param) / "pgbackrest-info.json").exists():
        pytest.fail(f"no fixtures captured for pgBackRest {request.param}: run "
                    f"scripts/capture-pgbackrest-fixtures-in-image.sh {CAPTURED[request.param][0]}")
    return request.param


def repository(tmp_path: Path, version: str) -> Path:
    """The repository as that version wrote it: its backup.info and archive.info, a manifest per backup,
    and one (empty) file per archived WAL file, named as in its archive."""
    info = json.loads((folder(version) / "pgbackrest-info.json").read_text())[0]
    repo = tmp_path / "repo"
    backup = repo / "backup" / STANZA
    backup.mkdir(parents=True)
    for name in ("backup.info", "backup.info.copy"):
        shutil.copy(folder(version) / "backup.info", backup / name)
    for entry in info["backup"]:
        (backup / entry["label"]).mkdir()
        write_manifest(backup / entry["label"], entry["label"])
    archive = repo / "archive" / STANZA
    archive.mkdir(parents=True)
    shutil.copy(folder(version) / "archive.info", archive / "archive.info")
    for name in (folder(version) / "archive-listing.txt").read_text().split():
        segments = archive / info["archive"][0]["id"] / name[:16]
        segments.mkdir(parents=True, exist_ok=True)
        (segments / name).write_bytes(b"")
    return repo


def test_the_repositorys_own_files_say_what_pgbackrest_info_says(tmp_path: Path, version: str) -> None:
    (stanza,) = discover(LocalSource(repository(tmp_path, version)), MB16)
    (info,) = json.loads((folder(version) / "pgbackrest-info.json").read_text())
    assert stanza.name == info["name"] == STANZA
    assert stanza.db_version == CAPTURED[version][0] == info["db"][0]["version"]
    assert stanza.system_id == info["db"][0]["system-id"]
    assert [b.label for b in stanza.backups] == [b["label"] for b in info["backup"]]
    assert len(stanza.backups) == 3
    for mine, theirs in zip(stanza.backups, info["backup"], strict=True):
        assert theirs["backrest"]["version"] == version
        assert mine.extra["backrest_version"] == version
        assert str(mine.type) == theirs["type"]
        assert mine.start == datetime.fromtimestamp(theirs["timestamp"]["start"], UTC)
        assert mine.finish == datetime.fromtimestamp(theirs["timestamp"]["stop"], UTC)
        assert mine.size_bytes == theirs["info"]["size"]
        assert mine.repo_size_bytes == theirs["info"]["repository"]["size"]
        assert list(mine.references) == (theirs["reference"] or [])
        assert (mine.start_wal, mine.stop_wal) == (theirs["archive"]["start"], theirs["archive"]["stop"])
        # pgBackRest 2.33's backup.info has no backup-lsn-start/stop (nor its info an "lsn"): none read.
        lsn = theirs.get("lsn", {"start": None, "stop": None}) if version == "2.33" else theirs["lsn"]
        assert (mine.start_lsn, mine.stop_lsn) == (lsn["start"], lsn["stop"])
    (archive,) = info["archive"]
    names = sorted(s.name(MB16) for s in stanza.archives[archive["id"]].segments)
    assert (names[0], names[-1]) == (archive["min"], archive["max"])


def restore_errors(version: str, fault: str) -> tuple[str, list[re.Match[str]]]:
    output = (folder(version) / f"pgbackrest-restore-{fault}.out").read_text()
    assert f"restore command begin {version}: " in output
    return output, list(ERROR_LINE.finditer(output))


def test_a_restore_of_a_flipped_backup_file_blames_the_backups(version: str) -> None:
    for fault in ("backup-byte-flipped", "backup-referenced-file-flipped"):
        output, errors = restore_errors(version, fault)
        repo = CAPTURE_ROOT.search(output)
        assert repo is not None
        assert [(m["code"], m["message"]) for m in errors] == [
            ("029", "raised from local-1 protocol: zlib threw error: [-3] data error")]
        assert blames_repository("029", errors[0]["message"], f"{repo.group(0)}/faults/{fault}", "/var/lib/x")


def test_a_restore_missing_a_backup_file_names_it_and_blames_the_backups(version: str) -> None:
    output, errors = restore_errors(version, "backup-file-missing")
    (error,) = errors  # once: on stderr (2.33), or in the console log on stdout (2.55.1 on: stderr is off)
    line = output[output.rfind("\n", 0, error.start()) + 1:error.start()]
    assert (line == "") is (version == "2.33"), line
    assert error["code"] == "055"
    (path,) = missing_files(output)
    assert "/faults/backup-file-missing/backup/demo1/" in path and path.endswith("F/pg_data/global/pg_control.gz")
    repository_root = path.split("/backup/demo1/")[0]
    assert blames_repository(error["code"], error["message"], repository_root, "/var/lib/x")
    assert not blames_repository(error["code"], error["message"], "/elsewhere", "/var/lib/x")
