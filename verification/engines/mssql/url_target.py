"""A SQL Server target that reads the backups from S3 itself (s3.restore_mode: direct).

The container keeps `network_mode="none"` and gets no backup mount. Its one way out is the generic
egress link (verification/targets/egress.py), fixed to the S3 endpoint when the link is made:

- on this host, a Unix socket in the target's exchange folder, each connection joined to a new TCP
  connection to the endpoint's host:port;
- in the container, socat listening on 127.0.0.1:<endpoint port> (and [::1] where the loopback has
  IPv6), connecting to that socket; the image must have socat and bash (the stock mssql/server images
  have bash, not socat: see docs/sqlserver-s3-direct.md for the image to build);
- the endpoint's host name (and `bucket.host` for virtual-host style) resolves to that address through
  /etc/hosts, so SQL Server connects to the name in its s3:// URL and checks the certificate against it,
  end to end (the link moves bytes only). An endpoint named by its loopback address needs no name.

SQL Server on Linux trusts the CAs in /var/opt/mssql/security/ca-certificates, read once when it starts:
the endpoint's CA (s3.ca_bundle or AWS_CA_BUNDLE) is copied into the target's private folder on this host
and mounted there read-only before the container starts.

The keys go into a server credential made in master by the first statement of the restore, in the
container only (gone with it). They reach SQL Server as a file it reads itself (secret_files.py): that
statement carries the file's path, never the keys, as no statement on sqlcmd's command line may. Every
statement recorded and everything read back is masked besides by `redact()`: the access key and secret
key, as they are and as a T-SQL literal writes them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from verification.engines.mssql.s3_url import CA_DIR, S3Location
from verification.targets.base import ExecResult

CA_FOLDER = "s3-ca"
CA_NAME = "restoreproof-s3-ca.crt"


def trust_ca(location: S3Location, private: Path) -> dict[str, str]:
    """Copy the endpoint's CA into `private` (this host, the target's own folder) and give the read-only
    mount that puts it where SQL Server reads its trusted CAs at start; {} when the endpoint needs none
    (a public CA SQL Server already trusts). OSError when the CA file cannot be read."""
    if location.ca_file is None:
        return {}
    folder = private / CA_FOLDER
    folder.mkdir(mode=0o755)
    copy = folder / CA_NAME
    shutil.copyfile(location.ca_file, copy)
    # SQL Server runs as its own user (mssql) in the container: it must read both.
    os.chmod(folder, 0o755)
    os.chmod(copy, 0o644)
    return {str(folder): CA_DIR}


class S3UrlTarget:
    """A SQL Server target (`inner`) whose restores read `location`: the S3 keys are masked in every
    statement, output and log read back, beside what the inner target masks (its login's password)."""

    def __init__(self, inner: Any, location: S3Location) -> None:
        self.inner = inner
        self.location = location
        self.kind: str = getattr(inner, "kind", "mssql")
        self.name: str = getattr(inner, "name", "")
        self.repo_path = location.credential_name   # nothing is mounted: the backups are read where they are
        self.work_dir: str = getattr(inner, "work_dir", "")
        self.exchange: tuple[str, str] | None = getattr(inner, "exchange", None)
        self.provision_seconds = float(inner.provision_seconds)   # made whole: the way out included

    def __getattr__(self, name: str) -> Any:
        # Whatever else the inner target has (its kind, name, relay for the data checks) is its own;
        # what it lacks, this lacks too.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def redact(self, text: str) -> str:
        return self.location.mask(self.inner.redact(text))

    def _masked(self, result: ExecResult) -> ExecResult:
        result.stdout, result.stderr = self.redact(result.stdout), self.redact(result.stderr)
        result.argv = [self.redact(arg) for arg in result.argv]
        return result

    def sql(self, statement: str, timeout: float) -> ExecResult:
        return self._masked(self.inner.sql(statement, timeout))

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        return self._masked(self.inner.run(argv, timeout=timeout, env=env))

    def errorlog(self) -> str:
        return self.redact(self.inner.errorlog())

    def read_text(self, path: str) -> str:
        return self.redact(self.inner.read_text(path))

    def write_text(self, path: str, text: str) -> None:
        self.inner.write_text(path, text)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The inner target's (the login's password) and the S3 keys."""
        return (*getattr(self.inner, "secrets", ()), *self.location.secrets)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(self.inner.describe()) if hasattr(self.inner, "describe") else {}
        return {**described, "repository": self.location.credential_name}

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()
