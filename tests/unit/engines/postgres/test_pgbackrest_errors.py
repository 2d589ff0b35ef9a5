"""Which pgBackRest 2.45 errors blame the backups, on its messages as its source writes them."""

from __future__ import annotations

import pytest

from verification.engines.postgres.pgbackrest_errors import blames_repository, is_under, named_paths

WORK = "/var/lib/restoreproof"
# storage/posix/write.c STORAGE_ERROR_WRITE_OPEN with strerror, as a local process raises it.
WRITE_DENIED = ("raised from local-1 protocol: unable to open file "
                "'/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp' for write: [30] Read-only file system")
READ_DENIED = ("raised from local-1 protocol: unable to open file "
               "'/repo/backup/demo1/20261124-045834F/pg_data/base/1/1247.gz' for read: [13] Permission denied")


def test_the_paths_a_message_names_each_once() -> None:
    assert named_paths("unable to load info file '/repo/backup/demo1/backup.info' or "
                       "'/repo/backup/demo1/backup.info.copy': '/repo/backup/demo1/backup.info'") == [
        "/repo/backup/demo1/backup.info", "/repo/backup/demo1/backup.info.copy"]
    assert named_paths("client state is 'idle' but expected 'cmdDataGet'") == []  # quoted, not paths


def test_inside_a_folder_is_by_whole_names() -> None:
    assert is_under("/repo/backup", "/repo") and is_under("/repo", "/repo/") and is_under("/x/y", "/")
    assert not is_under("/repository/backup", "/repo")


@pytest.mark.parametrize(("code", "message", "repository", "blamed"), [
    ("041", WRITE_DENIED, "/repo", False),                # the destination, on any file system error
    ("041", READ_DENIED, "/repo", True),                  # a file of the repository
    ("41", READ_DENIED, "/repo", True),                   # verify's unpadded code
    ("041", "unable to create socket: [24] Too many open files", "/repo", False),  # no path: no file judged
    ("040", "unable to restore to path '/var/lib/restoreproof/data' because it contains files", "/repo", False),
    ("055", "unable to open file '/var/lib/restoreproof/data/base/1/1249' for write in missing path", "/repo",
     False),
    ("055", "unable to open missing file '/repo/archive/demo1/archive.info' for read", "/repo", True),
    # An object store's repository at the bucket's root holds every path but the target's own.
    ("055", "unable to open missing file '/backup/demo1/backup.info' for read", "/", True),
    ("041", WRITE_DENIED, "/", False),
    ("046", "invalid PostgreSQL version 170000", "/repo", False),   # the target's pgBackRest is too old
    ("029", "raised from local-1 protocol: zlib threw error: [-3] data error", "/repo", True),
    ("039", "client state is 'idle' but expected 'cmdDataGet'", "/repo", False),
])
def test_an_error_blames_the_repository_only_for_its_own_files(code: str, message: str, repository: str,
                                                                blamed: bool) -> None:
    assert blames_repository(code, message, repository, WORK) is blamed
