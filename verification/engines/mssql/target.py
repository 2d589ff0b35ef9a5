"""Disposable SQL Server targets: one container per database, driven with sqlcmd inside it.

The SA password is random per container and travels only in environment variables (the
container's MSSQL_SA_PASSWORD, sqlcmd's SQLCMDPASSWORD); it never appears on a command line, in a
log, in a report or in an exception. The backups are mounted read-only at /backups; the server has
no network.

restoreproof's own process reaches the server (data checks on the restored database) through
`data_url()`: a loopback relay (verification.targets.relay) whose connections enter the container
through `docker exec` and reach 127.0.0.1:1433 inside it, so the container keeps no network at all.
SQL Server speaks TCP only (no Unix socket to mount out, as PostgreSQL's targets can), and a Docker
`--internal` network is no substitute: it was measured to block the internet while leaving every host
service bound to 0.0.0.0 reachable from the container through the bridge's gateway address, a way out.
The URL carries the password: str() and repr() of a SQLAlchemy URL mask it, and redact() masks it in
its plain and URL-escaped forms.

With s3.restore_mode direct, SQL Server reads the backups from S3 itself: no backup mount, one way out
to the S3 endpoint, the endpoint's CA trusted (engines/mssql/url_target.py).
"""

from __future__ import annotations

import contextlib
import io
import secrets
import string
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import docker.errors
from docker.models.containers import Container
from docker.models.volumes import Volume
from sqlalchemy.engine import URL

import docker
from verification.config import MssqlSettings
from verification.engines.mssql.outputs import SEPARATOR
from verification.engines.mssql.s3_url import S3Location
from verification.engines.mssql.secret_files import KEYS_DIR
from verification.engines.mssql.tsql import BACKUP_MOUNT
from verification.engines.mssql.url_target import S3UrlTarget, trust_ca
from verification.errors import ImageMissingError, TargetError
from verification.targets.base import ExecResult
from verification.targets.docker import DockerTarget, docker_client, open_egress, start_disposable
from verification.targets.exchange import ExchangeFolder, make_exchange
from verification.targets.labels import labels, slug
from verification.targets.polling import poll_until
from verification.targets.relay import Relay

DATA_ROOT = "/var/opt/mssql"
SERVER_PORT = 1433
MSSQL_UID = 10001  # the mssql user of the 2019+ images (group 0)
DRIVER = "mssql+pymssql"
# tools18 needs -C to trust the container's self-signed certificate; older images have no tools18.
# -x: no $(variable) substitution, so a name or path can never pull in the environment (the password).
SQLCMD = r"""
if [ -x /opt/mssql-tools18/bin/sqlcmd ]; then s=/opt/mssql-tools18/bin/sqlcmd; extra=-C
else s=/opt/mssql-tools/bin/sqlcmd; extra=; fi
exec "$s" $extra -S localhost -U sa -b -x -W -I -s "$RESTOREPROOF_SEP" -Q "$RESTOREPROOF_SQL"
"""


def _owned(info: tarfile.TarInfo, kind: bytes, mode: int) -> tarfile.TarInfo:
    info.type, info.mode, info.uid, info.gid, info.mtime = kind, mode, MSSQL_UID, 0, int(time.time())
    return info


def random_password() -> str:
    """Meets SQL Server's complexity rules: upper, lower, digit and symbol, 24 characters."""
    alphabet = string.ascii_letters + string.digits + "#%+-.=_"
    while True:
        candidate = "".join(secrets.choice(alphabet) for _ in range(24))
        if (any(c.isupper() for c in candidate) and any(c.islower() for c in candidate)
                and any(c.isdigit() for c in candidate) and any(c in "#%+-.=_" for c in candidate)):
            return candidate


def image_for(settings: MssqlSettings, database_version: int) -> str:
    """The first configured image whose server is at least as new as the backup (by DatabaseVersion)."""
    for version, image in sorted(settings.images.items()):
        if version >= database_version:
            return image
    newest = max(settings.images)
    raise TargetError(f"the backup's database version {database_version} is newer than the newest configured "
                      f"SQL Server image ({settings.images[newest]}, version {newest}); SQL Server cannot restore "
                      "a backup from a newer version")


class MssqlTarget(DockerTarget):
    """A DockerTarget (labels, volume, removal) running SQL Server, driven through sqlcmd."""

    kind = "docker-mssql"
    repo_path = BACKUP_MOUNT
    work_dir = DATA_ROOT

    def __init__(self, client: docker.DockerClient, container: Container, volume: Volume, image: str,
                 password: str, exchange: ExchangeFolder | None = None) -> None:
        super().__init__(client, container, volume, image, 0.0, exchange)
        self._password = password
        self._relay: Relay | None = None
        self._relay_lock = threading.Lock()

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        return self.run_as("", argv, timeout=timeout, env=env)

    def sql(self, statement: str, timeout: float) -> ExecResult:
        result = self.run(["bash", "-c", SQLCMD], timeout=timeout,
                          env={"SQLCMDPASSWORD": self._password, "RESTOREPROOF_SQL": statement,
                               "RESTOREPROOF_SEP": SEPARATOR})
        result.argv = ["sqlcmd", "-Q", statement]  # what ran, without the script around it
        # Redacted at the source: nothing downstream (reasons, evidence, exceptions) can see it.
        result.stdout, result.stderr = self.redact(result.stdout), self.redact(result.stderr)
        return result

    def errorlog(self) -> str:
        # The error log also goes to the container's stdout.
        return self.redact(self.container.logs().decode("utf-8", "replace"))

    def redact(self, text: str) -> str:
        # Also as a URL renders it (data_url(), rendered with hide_password=False), '%23' for '#'.
        return text.replace(self._password, "********").replace(quote(self._password, safe=" +"), "********")

    @property
    def secrets(self) -> tuple[str, ...]:
        """What the data checks must never show: the login's password, plain and URL-escaped."""
        return (self._password, quote(self._password, safe=" +"))

    def data_url(self, database: str) -> URL:
        """A SQLAlchemy URL (pymssql) for `database` on this target's server, from restoreproof's process.

        The first call starts the relay (127.0.0.1, an ephemeral port) into the container's
        127.0.0.1:1433; later calls reuse it; close() closes it. Pass the URL object itself to
        create_engine(): its str() and repr() show '***' for the password, and an error from
        connecting does not carry it.
        """
        with self._relay_lock:
            if self._relay is None:
                self._relay = Relay(self._client, self.container, SERVER_PORT).start()
            relay = self._relay
        return URL.create(DRIVER, username="sa", password=self._password, host=relay.host, port=relay.port,
                          database=database)

    def close(self) -> None:
        """The relay first (its threads and its commands in the container), then the container and
        volume, which are removed even when the relay did not close cleanly."""
        with self._relay_lock:
            relay, self._relay = self._relay, None
        problems = []
        if relay is not None:
            try:
                relay.close()
            except TargetError as exc:
                problems.append(str(exc))
        try:
            super().close()
        except TargetError as exc:
            problems.append(str(exc))
        if problems:
            raise TargetError("; ".join(problems))

    def write_text(self, path: str, text: str) -> None:
        raise TargetError("SQL Server targets take no files")

    def install_keys(self, files: Mapping[str, bytes]) -> str:
        """Put files SQL Server reads secrets from (engines/mssql/secret_files.py: certificates, their private
        keys and passwords, the S3 credential's keys) into KEYS_DIR, inside the data volume, through Docker's
        archive upload: their bytes never pass a command line or a log. Readable by SQL Server's own user only
        (uid 10001 and group 0 in the 2019+ images; 2017 runs as root)."""
        archive = io.BytesIO()
        folder = PurePosixPath(KEYS_DIR)
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.addfile(_owned(tarfile.TarInfo(folder.name), tarfile.DIRTYPE, 0o750))
            for name, data in files.items():
                info = _owned(tarfile.TarInfo(f"{folder.name}/{name}"), tarfile.REGTYPE, 0o440)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        try:
            placed = self.container.put_archive(str(folder.parent), archive.getvalue())
        except docker.errors.APIError as exc:
            raise TargetError(f"could not put the key files ({', '.join(files)}) into {self.name}: "
                              f"{exc.explanation or exc}") from exc
        if not placed:
            raise TargetError(f"could not put the key files ({', '.join(files)}) into {self.name}")
        return KEYS_DIR

    def remove_keys(self) -> None:
        """The files go once SQL Server holds what it read from them; the volume goes with the target anyway."""
        result = self.run(["rm", "-rf", KEYS_DIR], timeout=60)
        if not result.ok:
            raise TargetError(f"could not remove {KEYS_DIR} from {self.name} (exit {result.exit_code})")

    def read_text(self, path: str) -> str:
        result = self.run(["cat", path], timeout=60)
        return self.redact(result.stdout)



class MssqlTargetProvider:
    """SQL Server containers; with `s3`, each reads the backups from S3 itself (needs `state_dir`, where
    its exchange folder is recorded for the reaper)."""

    kind = "docker-mssql"

    def __init__(self, settings: MssqlSettings, database_version: int, *, state_dir: Path | None = None,
                 s3: S3Location | None = None) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.s3 = s3
        if s3 is not None and state_dir is None:
            raise TargetError("a SQL Server target reading S3 needs a state folder for its exchange folder")
        self.image = image_for(settings, database_version)
        self._client = docker_client()
        try:
            self._client.images.get(self.image)
        except docker.errors.ImageNotFound:
            try:
                self._client.images.pull(self.image)
            except docker.errors.APIError as exc:
                raise ImageMissingError(f"SQL Server image {self.image} is not present and cannot be pulled "
                                        f"({exc.explanation or exc})") from exc

    def provision(self, run_id: str, database: str, repo_host_path: str) -> MssqlTarget | S3UrlTarget:
        if self.s3 is not None:
            return self._provision_reading_s3(run_id, database, self.s3)
        password = random_password()
        return start_disposable(
            self._client, self.image, f"restoreproof-{run_id}-{slug(database)}".lower(),
            labels(run_id, "target", database), limits=self.settings, repo=(repo_host_path, BACKUP_MOUNT),
            data_path=DATA_ROOT, wait_ready=self._wait_for_logins,
            environment={"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": password, "MSSQL_PID": self.settings.edition},
            make_target=lambda container, volume: MssqlTarget(self._client, container, volume, self.image, password))

    def _provision_reading_s3(self, run_id: str, database: str, location: S3Location) -> S3UrlTarget:
        """No backup mount; the endpoint's CA where SQL Server trusts it from its start; then the one way
        out, to the endpoint (its forwarder needs socat in the image)."""
        if self.state_dir is None:
            raise TargetError("a SQL Server target reading S3 needs a state folder for its exchange folder")
        exchange = make_exchange(self.state_dir, run_id, database)
        try:
            mounts = trust_ca(location, exchange.root)
        except OSError as exc:
            with contextlib.suppress(TargetError):
                exchange.remove()
            raise TargetError(f"cannot read the S3 endpoint's CA file {location.ca_file}: {exc}") from exc
        password = random_password()
        target = start_disposable(
            self._client, self.image, f"restoreproof-{run_id}-{slug(database)}".lower(),
            labels(run_id, "target", database), limits=self.settings, repo=None, data_path=DATA_ROOT,
            wait_ready=self._wait_for_logins, exchange=exchange, read_only=mounts,
            environment={"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": password, "MSSQL_PID": self.settings.edition},
            make_target=lambda container, volume: MssqlTarget(self._client, container, volume, self.image, password,
                                                              exchange))
        open_egress(self._client, target, location.endpoint, exchange)
        return S3UrlTarget(target, location)

    def _wait_for_logins(self, target: MssqlTarget) -> None:
        def accepts_logins() -> bool:
            target.container.reload()
            if target.container.status in ("exited", "dead"):
                raise TargetError(f"SQL Server container {target.name} exited while starting:\n"
                                  + target.errorlog()[-3000:])
            return target.sql("SELECT 1", timeout=30).ok

        if poll_until(accepts_logins, self.settings.start_timeout, 1.0):
            return
        raise TargetError(f"SQL Server in {target.name} did not accept logins within "
                          f"{self.settings.start_timeout:.0f} s; its log ends:\n" + target.errorlog()[-3000:])
