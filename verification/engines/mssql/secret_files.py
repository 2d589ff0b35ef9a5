"""Secrets a T-SQL statement needs, kept off sqlcmd's command line: SQL Server reads them from files.

Every statement restoreproof sends reaches sqlcmd as `-Q <statement>` in the target: on its command
line, which any process in the container (/proc/<pid>/cmdline) and `docker top` can read. Some
statements need a secret as a literal, with no variable allowed in its place (CREATE CERTIFICATE's
DECRYPTION BY PASSWORD, CREATE CREDENTIAL's SECRET). So the secret goes into the target as a file,
through Docker's archive upload (the target's `install_keys`: never a command line, mode 0440, owned by
SQL Server's user), and the statement sent carries only the file's path: SQL Server reads the file
itself (OPENROWSET(BULK ..., SINGLE_BLOB)) into the statement it runs (dynamic SQL). The files are
removed when the statements that need them have run (the target's `remove_keys`), whatever they did.

Used by the certificates' private-key passwords (certificates.py) and by the S3 credential's keys
(s3_url.py): one way for both.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol, TypeGuard

from verification.engines.mssql.tsql import literal

# Where the files are put in the target: inside its data volume, gone with it.
KEYS_DIR = "/var/opt/mssql/restoreproof-keys"
# What CONVERT(nvarchar(max), <varbinary>) reads back as text: SQL Server's nvarchar is UTF-16LE.
ENCODING = "utf-16-le"


def encoded(secret: str) -> bytes:
    """The file's bytes for `secret`, as the statement of `reading` turns them back into text."""
    return secret.encode(ENCODING)


def reading(path: str, before: str, after: str) -> str:
    """A batch that runs `before` + the secret in `path` + `after`, the secret read by SQL Server from the
    file: `before` ends inside a literal (N'...) and `after` closes it, so the secret is quoted there as any
    literal (each ' doubled). This batch holds the file's path, never the secret."""
    return ("DECLARE @secret nvarchar(max) = (SELECT CONVERT(nvarchar(max), BulkColumn) FROM "
            f"OPENROWSET(BULK {literal(path)}, SINGLE_BLOB) AS secret); "
            f"DECLARE @statement nvarchar(max) = {literal(before)} + REPLACE(@secret, N'''', N'''''') + "
            f"{literal(after)}; SET @secret = NULL; EXEC (@statement);")


class TakesFiles(Protocol):
    def install_keys(self, files: Mapping[str, bytes]) -> str: ...

    def remove_keys(self) -> None: ...


def takes_files(target: object) -> TypeGuard[TakesFiles]:
    """Whether `target` can be given files (a SQL Server container can; a stand-in may not)."""
    return hasattr(target, "install_keys") and hasattr(target, "remove_keys")


@contextmanager
def placed(target: TakesFiles, files: Mapping[str, bytes]) -> Iterator[str]:
    """`files` in the target for the length of the block (the folder they are in is given), removed after."""
    folder = target.install_keys(files)
    try:
        yield folder
    finally:
        target.remove_keys()
