"""Secrets read by SQL Server from files: the batch sent holds the file's path only, and what SQL Server runs
from it (emulated here as the T-SQL documentation describes OPENROWSET(BULK ..., SINGLE_BLOB), CONVERT to
nvarchar, REPLACE and EXEC) is the statement with the secret quoted as a literal."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from verification.engines.mssql import secret_files
from verification.errors import TargetError

# A quote (doubled in a literal) and a character beyond Latin-1 (nvarchar keeps it): both must arrive intact.
SECRET = "Pvk'Pa55-word-Ø"
_LITERAL = r"N'((?:[^']|'')*)'"
_READING = re.compile(
    r"(?P<head>.*?)DECLARE @secret nvarchar\(max\) = \(SELECT CONVERT\(nvarchar\(max\), BulkColumn\) FROM "
    rf"OPENROWSET\(BULK {_LITERAL}, SINGLE_BLOB\) AS secret\); DECLARE @statement nvarchar\(max\) = {_LITERAL} \+ "
    rf"REPLACE\(@secret, N'''', N''''''\) \+ {_LITERAL}; SET @secret = NULL; EXEC \(@statement\);", re.S)


def as_sql_server_runs_it(batch: str, files: Mapping[str, bytes]) -> str:
    """The text SQL Server runs for a batch `secret_files.reading` made: what precedes it, then the dynamic
    statement with the file (by its path in `files`) read as UTF-16LE and its ' doubled. Any other batch is
    run as it is. A file not in `files` is an AssertionError: the batch would fail in a real server."""
    found = _READING.fullmatch(batch)
    if found is None:
        return batch
    head, path, before, after = (found.group(1), *(g.replace("''", "'") for g in found.groups()[1:]))
    assert path in files, f"SQL Server would find no file {path} (files there: {sorted(files)})"
    return head + before + files[path].decode("utf-16-le").replace("'", "''") + after


def test_the_batch_holds_the_files_path_and_sql_server_runs_the_statement_with_the_secret() -> None:
    path = "/var/opt/mssql/restoreproof-keys/it's.secret"
    batch = "USE master; " + secret_files.reading(path, "CREATE CREDENTIAL [x] WITH IDENTITY = N'S3 Access Key', "
                                                        "SECRET = N'", "';")
    assert batch == (
        "USE master; DECLARE @secret nvarchar(max) = (SELECT CONVERT(nvarchar(max), BulkColumn) FROM OPENROWSET(BULK "
        "N'/var/opt/mssql/restoreproof-keys/it''s.secret', SINGLE_BLOB) AS secret); DECLARE @statement nvarchar(max) = "
        "N'CREATE CREDENTIAL [x] WITH IDENTITY = N''S3 Access Key'', SECRET = N''' + REPLACE(@secret, N'''', N'''''') "
        "+ N''';'; SET @secret = NULL; EXEC (@statement);")
    assert SECRET not in batch and "Pvk" not in batch
    assert as_sql_server_runs_it(batch, {path: secret_files.encoded(SECRET)}) == (
        "USE master; CREATE CREDENTIAL [x] WITH IDENTITY = N'S3 Access Key', SECRET = N'Pvk''Pa55-word-Ø';")
    assert secret_files.encoded(SECRET) == SECRET.encode("utf-16-le")   # nvarchar's encoding


class Target:
    def __init__(self) -> None:
        self.events: list[object] = []

    def install_keys(self, files: Mapping[str, bytes]) -> str:
        self.events.append(("install", dict(files)))
        return secret_files.KEYS_DIR

    def remove_keys(self) -> None:
        self.events.append("remove")


def test_the_files_are_there_for_the_block_and_removed_after_it_even_when_it_fails() -> None:
    target = Target()
    with secret_files.placed(target, {"a.secret": b"s"}) as folder:
        assert folder == "/var/opt/mssql/restoreproof-keys" and target.events == [("install", {"a.secret": b"s"})]
    assert target.events[-1] == "remove"
    failing = Target()
    with pytest.raises(TargetError, match="the statement failed"), secret_files.placed(failing, {"a.secret": b"s"}):
        raise TargetError("the statement failed")
    assert failing.events[-1] == "remove"


def test_only_a_target_that_can_take_and_remove_files_is_given_secrets() -> None:
    class InstallsOnly:
        def install_keys(self, files: Mapping[str, bytes]) -> str:
            return ""

    assert secret_files.takes_files(Target())
    assert not secret_files.takes_files(InstallsOnly()) and not secret_files.takes_files(object())
