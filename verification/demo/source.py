"""The sample source: real PostgreSQL clusters with a workload and a pgBackRest repository.

For each cluster (one pgBackRest stanza, `demo1`, `demo2`, ...), in its own container of the image
of its PostgreSQL major (15 unless `pg_version` says another: the image's pgBackRest writes the backups):
initdb with data checksums, continuous WAL archiving into `<workdir>/backups`, a pgbench-style
workload plus an `events` table with a timestamp column, then

    full backup -> writes -> diff backup -> writes, PITR markers -> incr backup -> writes -> WAL switch

so every backup differs and WAL is archived between and after them. Two marker rows, written a
second apart between the diff and the incr backups (`pitr-before`, `pitr-after`), give tests a
point in time to restore to; their times are in `<workdir>/demo.json`.

With `s3=DemoS3(...)` the repository goes into an S3 bucket instead (`repo1-type=s3`), written by
pgBackRest itself from containers that still have no network: each reaches the S3 endpoint, and
nothing else, through an egress link (verification/targets/egress.py). The keys reach pgBackRest
only through its configuration file in the container (0600, the postgres user).

With `cipher_pass` the repository is encrypted (`repo1-cipher-type=aes-256-cbc`), the passphrase given
to pgBackRest the same way; `demo_cipher_pass` keeps a made one in `<workdir>/repo-cipher-pass` (0600),
so a later demo reuses the repository only with the passphrase that encrypted it.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors
from pydantic import SecretStr

import docker
from verification.atomic import write_text_atomically
from verification.config import default_state_dir
from verification.errors import RestoreproofError
from verification.images import ensure_image, image_name, images_folder, suites, wheels
from verification.targets.docker import docker_client
from verification.targets.egress import EgressLink, Endpoint
from verification.targets.exchange import EXCHANGE_PATH, ExchangeFolder, make_exchange
from verification.targets.labels import labels, new_run_id
from verification.targets.reaper import reap_docker

if TYPE_CHECKING:
    from verification.demo.s3_endpoint import LocalS3Endpoint

DATA = "/var/lib/restoreproof/data"
MANIFEST = "demo.json"
MARKER = ".restoreproof-demo"
# pgbench scale per demo scale unit: pgbench scale 1 is ~15 MB, so --scale 10 gives ~1 GB.
PGBENCH_SCALE_PER_UNIT = 7
DEMO_FORMAT = 1
# The sample clusters' PostgreSQL major unless asked otherwise; demos made before --pg-version ran it
# only, so a manifest that names none was made by it.
DEFAULT_PG_VERSION = "15"
# The image folder whose SUITES lists the majors an image is made for (one per major).
POSTGRES_IMAGE = "postgres"
DEMO_BUCKET = "restoreproof-demo"
# In the source containers: the S3 endpoint's CA (readable), and pgBackRest's configuration, which
# holds the keys (0600, the postgres user).
CA_INSIDE = "/etc/pgbackrest/s3-ca.pem"
CONF_INSIDE = "/etc/pgbackrest.conf"
S3_PROCESS_MAX = 4
# pgBackRest's one cipher; the demo's passphrase file in its workdir (0600), beside demo.json.
DEMO_CIPHER = "aes-256-cbc"
CIPHER_PASS_FILE = "repo-cipher-pass"


@dataclass(frozen=True)
class DemoS3:
    """Where the demo's repository goes when it goes to S3, and how pgBackRest reaches it."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: SecretStr
    region: str = "us-east-1"
    bucket: str = DEMO_BUCKET
    prefix: str = ""          # under the bucket's root: "" or "some/folder"
    ca_file: Path | None = None
    uri_style: str = "path"   # pgBackRest's repo1-s3-uri-style: path or host

    @classmethod
    def local(cls, endpoint: LocalS3Endpoint, bucket: str = DEMO_BUCKET) -> DemoS3:
        """The local endpoint, by the name its certificate holds: pgBackRest 2.45 checks a certificate's
        DNS names only (never an IP address), so https://127.0.0.1:PORT would fail its check.

        Keys of its own, made here: moto takes any, and a key that is also a word of the demo's output
        (the bucket's name, say) would be masked wherever it appears, as every configured key is."""
        from verification.demo.s3_endpoint import DEMO_REGION

        return cls(f"https://localhost:{endpoint.port}", f"RPDEMO{secrets.token_hex(7).upper()}",
                   SecretStr(secrets.token_urlsafe(30)), DEMO_REGION, bucket, ca_file=endpoint.ca_file)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix.strip('/') + '/' if self.prefix.strip('/') else ''}"

    def endpoint(self) -> Endpoint:
        """The one place the source containers reach (for virtual-host style, under the bucket's name too)."""
        plain = Endpoint.from_url(self.endpoint_url)
        if self.uri_style == "host":
            if not plain.host_names:
                raise DemoError(f"the S3 endpoint {self.endpoint_url} is an address: virtual-host style needs a "
                                "name (use uri_style path)")
            return Endpoint.from_url(self.endpoint_url, f"{self.bucket}.{plain.host}")
        return plain

    def pgbackrest_conf(self) -> str:
        """The [global] repository lines of pgbackrest.conf (the keys among them)."""
        endpoint = self.endpoint()
        lines = ["repo1-type=s3", f"repo1-path=/{self.prefix.strip('/')}", f"repo1-s3-bucket={self.bucket}",
                 f"repo1-s3-endpoint={endpoint.host}", f"repo1-storage-port={endpoint.port}",
                 f"repo1-s3-region={self.region}", f"repo1-s3-uri-style={self.uri_style}",
                 f"repo1-s3-key={self.access_key_id}",
                 f"repo1-s3-key-secret={self.secret_access_key.get_secret_value()}"]
        if self.ca_file is not None:
            lines.append(f"repo1-storage-ca-file={CA_INSIDE}")
        # One request per file, each on its own connection at a local endpoint: several at once.
        lines.append(f"process-max={S3_PROCESS_MAX}")
        return "\n".join(lines) + "\n"

    def client(self) -> Any:
        """A boto3 client for the bucket (this process's own, for making and emptying it)."""
        import boto3
        from botocore.config import Config

        # botocore logs every request's headers at DEBUG, the signing key id among them: kept out of
        # a log whose root is at DEBUG, unless botocore's own level was set on purpose.
        for name in ("botocore", "boto3", "s3transfer", "urllib3"):
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.INFO)

        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name=self.region,
                            aws_access_key_id=self.access_key_id,
                            aws_secret_access_key=self.secret_access_key.get_secret_value(),
                            verify=str(self.ca_file) if self.ca_file else True,
                            config=Config(s3={"addressing_style": "virtual" if self.uri_style == "host" else "path"},
                                          retries={"max_attempts": 3, "mode": "standard"}))


@dataclass
class DemoResult:
    workdir: Path
    repository: Path           # the local repository (unused when it is in S3: see `url`)
    stanzas: list[str]
    manifest: dict[str, Any]
    reused: bool
    run_id: str | None = None  # label on the source containers (None when reused)
    url: str | None = None     # s3://bucket/prefix/ when the repository is in S3

    @property
    def source(self) -> str:
        """The repository as `restoreproof verify` names it: a folder or an s3:// URL."""
        return self.url or str(self.repository)


class DemoError(RestoreproofError):
    pass


class _SourceCluster:
    def __init__(self, client: docker.DockerClient, image: str, stanza: str, repo: Path, run_id: str,
                 s3: DemoS3 | None = None, state_dir: Path | None = None, cipher_pass: SecretStr | None = None) -> None:
        self.stanza = stanza
        self.s3 = s3
        self.cipher_pass = cipher_pass
        self.exchange: ExchangeFolder | None = None
        self.egress: EgressLink | None = None
        self.container: Any = None
        try:
            if s3 is None:
                volumes = {str(repo): {"bind": "/repo", "mode": "rw"}}
            else:
                # The folder the S3 endpoint's socket goes in, recorded for `restoreproof reap`.
                self.exchange = make_exchange(state_dir or default_state_dir(), run_id, stanza)
                volumes = {str(self.exchange.shared): {"bind": EXCHANGE_PATH, "mode": "rw"}}
            self.container = client.containers.create(
                image, name=f"restoreproof-demo-{run_id}-{stanza}".lower(),
                labels=labels(run_id, "demo-source", stanza), network_mode="none", volumes=volumes,
            )
            self.container.start()
            if s3 is not None and self.exchange is not None:
                self.egress = EgressLink(client, self.container, s3.endpoint(),
                                         (EXCHANGE_PATH, str(self.exchange.shared))).start()
        except BaseException:
            self.remove()
            raise

    def sh(self, script: str, user: str = "postgres", env: dict[str, str] | None = None) -> str:
        code, output = self.container.exec_run(["bash", "-euo", "pipefail", "-c", script], user=user,
                                               environment=env or {})
        text: str = output.decode("utf-8", "replace")
        # Whatever a tool said, the keys and the passphrase are never in a message.
        secrets_ = [self.cipher_pass.get_secret_value()] if self.cipher_pass is not None else []
        if self.s3 is not None:
            secrets_ += [self.s3.secret_access_key.get_secret_value(), self.s3.access_key_id]
        for secret in secrets_:
            text = text.replace(secret, "********")
        if code != 0:
            raise DemoError(f"demo source {self.stanza}: command failed (exit {code}): {script[:200]}\n{text[-2000:]}")
        return text

    def psql(self, sql: str) -> str:
        # The statement travels in the environment: no shell quoting to get wrong.
        return self.sh('psql -X -A -t -q -v ON_ERROR_STOP=1 -h /tmp -d postgres -c "$SQL"', env={"SQL": sql}).strip()

    def configure(self) -> None:
        """pgBackRest's configuration (and the S3 endpoint's CA) in the container."""
        repository = "repo1-path=/repo\n" if self.s3 is None else self.s3.pgbackrest_conf()
        if self.cipher_pass is not None:
            repository += f"repo1-cipher-type={DEMO_CIPHER}\nrepo1-cipher-pass={self.cipher_pass.get_secret_value()}\n"
        conf = (f"[global]\n{repository}repo1-retention-full=2\nstart-fast=y\nlog-level-console=warn\n"
                f"log-level-file=off\n\n[{self.stanza}]\npg1-path={DATA}\npg1-socket-path=/tmp\n")
        if self.s3 is not None and self.s3.ca_file is not None:
            self.sh(f'mkdir -p /etc/pgbackrest && printf %s "$CA" > {CA_INSIDE} && chmod 644 {CA_INSIDE}', user="root",
                    env={"CA": self.s3.ca_file.read_text()})
        # Made 0600 and the postgres user's before anything is written to it: it may hold the S3 keys
        # and the repository's passphrase.
        # The text travels in the environment, never on a command line.
        self.sh(f'install -m 600 -o postgres -g postgres /dev/null {CONF_INSIDE} && printf %s "$CONF" > {CONF_INSIDE}'
                + (" && chown postgres /repo" if self.s3 is None else ""), user="root", env={"CONF": conf})

    def setup(self, initdb_options: str = "") -> None:
        """`initdb_options`: more initdb options, e.g. "--wal-segsize=64" (a cluster laid out otherwise)."""
        self.configure()
        settings = "\n".join([
            "archive_mode = on",
            f"archive_command = 'pgbackrest --stanza={self.stanza} archive-push %p'",
            "listen_addresses = ''", "unix_socket_directories = '/tmp'",
            "max_wal_size = '256MB'", "checkpoint_timeout = '5min'",
        ])
        self.sh(f"initdb -k -A trust -U postgres {initdb_options} -D {DATA} >/dev/null && "
                f'printf "%s\\n" "$SETTINGS" >> {DATA}/postgresql.conf && '
                f"pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/source.log >/dev/null && "
                f"pgbackrest --stanza={self.stanza} stanza-create", env={"SETTINGS": settings})

    def load(self, pgbench_scale: int) -> None:
        self.sh(f"pgbench -h /tmp -i -q -s {pgbench_scale} postgres >/dev/null 2>&1")
        self.psql("create table events (id bigserial primary key, at timestamptz not null default clock_timestamp(),"
                  " note text not null)")
        self.psql("insert into events (note) values ('seed')")

    def write(self, note: str, transactions: int, rows: int) -> None:
        self.sh(f"pgbench -h /tmp -n -c 2 -t {transactions} postgres >/dev/null 2>&1")
        self.psql(f"insert into events (note) select '{note}' from generate_series(1, {rows})")

    def backup(self, kind: str) -> None:
        self.sh(f"pgbackrest --stanza={self.stanza} --type={kind} backup")

    def marker(self, note: str) -> str:
        return self.psql(f"insert into events (note) values ('{note}') returning at")

    def finish(self) -> None:
        # `pgbackrest check` switches WAL and waits until the segment is archived: the archive is
        # then complete up to the last write.
        self.sh(f"pgbackrest --stanza={self.stanza} check && pg_ctl stop -w -m fast -D {DATA} >/dev/null")
        if self.s3 is not None:
            return
        # The files belong to the container's postgres user; let any restore target (and any host
        # user) read them, as a shared backup repository would allow. Done here, as root in the
        # container, because a non-root host user could not change them.
        self.sh(f"chmod a+rX /repo /repo/backup /repo/archive && "
                f"chmod -R a+rX /repo/backup/{self.stanza} /repo/archive/{self.stanza}", user="root")

    def remove(self) -> None:
        # The link first (its socket is in the exchange folder), then the container, then the folder.
        if self.egress is not None:
            with contextlib.suppress(RestoreproofError):
                self.egress.close()
        try:
            if self.container is not None:
                # NotFound: already gone; a conflict: being removed already (an interrupted demo reaps
                # every container of its run while its threads still end).
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    self.container.remove(force=True)
        finally:
            if self.exchange is not None:
                self.exchange.remove()


def _make_cluster(client: docker.DockerClient, image: str, stanza: str, repo: Path, run_id: str,
                  scale: int, s3: DemoS3 | None = None, state_dir: Path | None = None,
                  cipher_pass: SecretStr | None = None) -> dict[str, Any]:
    cluster = _SourceCluster(client, image, stanza, repo, run_id, s3, state_dir, cipher_pass)
    try:
        transactions = 500 * scale
        rows = 1000 * scale
        cluster.setup()
        cluster.load(PGBENCH_SCALE_PER_UNIT * scale)
        cluster.backup("full")
        cluster.write("after-full", transactions, rows)
        cluster.backup("diff")
        cluster.write("after-diff", transactions, rows)
        before = cluster.marker("pitr-before")
        time.sleep(1.5)
        after = cluster.marker("pitr-after")
        cluster.write("before-incr", transactions // 2, rows)
        cluster.backup("incr")
        cluster.write("after-incr", transactions, rows)
        last = cluster.marker("last")
        cluster.finish()
        return {"markers": {"pitr-before": before, "pitr-after": after, "last": last},
                "pgbench_scale": PGBENCH_SCALE_PER_UNIT * scale}
    finally:
        cluster.remove()


def demo_image(pg_version: str, build_context: Path | None = None) -> str:
    """The image the sample clusters of PostgreSQL `pg_version` run in; a DemoError naming the majors
    there are images for when it is none of them (a build folder without SUITES: its one image)."""
    community = wheels(POSTGRES_IMAGE, build_context)
    supported = [major for major in suites(POSTGRES_IMAGE, build_context) if major not in community]
    if pg_version in community:
        raise DemoError(f"--pg-version {pg_version}: PostgreSQL {pg_version}'s image is a community build from PyPI "
                        f"({community[pg_version]}), used only when named in docker.postgres_images "
                        f"(docs/postgres-versions.md); the demo runs on Debian's: {', '.join(supported)}")
    if supported and pg_version not in supported:
        raise DemoError(f"--pg-version {pg_version}: no image for PostgreSQL {pg_version} here; images are made "
                        f"for PostgreSQL {', '.join(supported)} "
                        f"({images_folder(build_context) / POSTGRES_IMAGE / 'SUITES'}): choose one of these")
    return image_name(POSTGRES_IMAGE, pg_version)


def make_demo(workdir: Path, scale: int = 1, clusters: int = 2, fresh: bool = False,
              progress: Any = None, build_context: Path | None = None, s3: DemoS3 | None = None,
              state_dir: Path | None = None, cipher_pass: SecretStr | None = None,
              pg_version: str = DEFAULT_PG_VERSION) -> DemoResult:
    """Make (or reuse) the sample repository under `workdir/backups`, or in the bucket `s3` names.

    `build_context`: where to build the image from if it is missing (docker.build_context).
    `pg_version`: the clusters' PostgreSQL major (its image's pgBackRest writes the repository).
    `state_dir`: where the S3 links' exchange folders are recorded for `restoreproof reap`.
    `cipher_pass`: encrypt the repository with it; one made before is reused only if it was made
    with the same encryption (none, or this passphrase).
    """
    if scale < 1 or clusters < 1:
        raise DemoError("--scale and --clusters must be at least 1")
    # Before anything in the workdir is touched: a major with no image leaves an earlier demo as it was.
    wanted_image = demo_image(pg_version, build_context)
    workdir = workdir.resolve()
    repo = workdir / "backups"
    manifest_path = workdir / MANIFEST
    stanzas = [f"demo{i}" for i in range(1, clusters + 1)]
    where = s3.url if s3 is not None else str(repo)
    if manifest_path.exists() and not fresh:
        manifest = json.loads(manifest_path.read_text())
        if (manifest.get("format") == DEMO_FORMAT and manifest.get("scale") == scale
                and _same_major(manifest, pg_version)
                and sorted(manifest.get("stanzas", {})) == stanzas and manifest.get("repository") == where
                and _same_encryption(workdir, manifest, cipher_pass)
                and (repo.is_dir() if s3 is None else _bucket_holds(s3, stanzas, manifest))):
            return DemoResult(workdir, repo, stanzas, manifest, reused=True, url=s3.url if s3 else None)
    marker = workdir / MARKER
    if s3 is None and repo.exists():
        # Only ever delete a folder this command made (it carries our marker, written first).
        if not marker.exists():
            raise DemoError(f"{repo} exists and was not made by restoreproof demo; choose another --workdir")
        shutil.rmtree(repo)
    manifest_path.unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    marker.write_text("made by restoreproof demo; its backups/ folder may be deleted and remade\n")
    if s3 is None:
        repo.mkdir()
    else:
        _prepare_bucket(s3)
    image = ensure_image(wanted_image, build_context)
    run_id = "demo-" + new_run_id()
    client = docker_client()
    pool = ThreadPoolExecutor(max_workers=clusters)
    try:
        if progress:
            progress(f"making {clusters} sample PostgreSQL {pg_version} cluster(s) at scale {scale} in {where}")
        futures = {s: pool.submit(_make_cluster, client, image, s, repo, run_id, scale, s3, state_dir, cipher_pass)
                   for s in stanzas}
        results = {s: f.result() for s, f in futures.items()}
    except BaseException:
        # Don't wait for the other clusters (minutes at a large scale): remove every source
        # container of this demo now; their threads then fail fast and end (and remove their links).
        reap_docker(run_id)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        client.close()
    manifest = {"format": DEMO_FORMAT, "scale": scale, "pg_version": pg_version,
                "created_at": datetime.now(UTC).isoformat(),
                "repository": where, "cipher": DEMO_CIPHER if cipher_pass is not None else None, "stanzas": results}
    if s3 is not None:
        manifest["endpoint"] = s3.endpoint_url
    _keep_cipher_pass(workdir, cipher_pass)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return DemoResult(workdir, repo, stanzas, manifest, reused=False, run_id=run_id, url=s3.url if s3 else None)


def demo_cipher_pass(workdir: Path, given: SecretStr | None) -> SecretStr:
    """The passphrase `demo --encrypt` encrypts with: the one given (postgres.repo_cipher_pass), else
    the one an earlier demo in `workdir` made and kept, else a new one."""
    if given is not None:
        return given
    kept = workdir.resolve() / CIPHER_PASS_FILE
    if kept.is_file():
        return SecretStr(kept.read_text(encoding="utf-8").strip())
    return SecretStr(secrets.token_urlsafe(24))


def _same_major(manifest: dict[str, Any], pg_version: str) -> bool:
    """Whether the demo the manifest describes has clusters of PostgreSQL `pg_version`."""
    return bool(manifest.get("pg_version", DEFAULT_PG_VERSION) == pg_version)


def _same_encryption(workdir: Path, manifest: dict[str, Any], cipher_pass: SecretStr | None) -> bool:
    """Whether the demo the manifest describes was made as asked now: plain, or encrypted with this passphrase."""
    if manifest.get("cipher") != (DEMO_CIPHER if cipher_pass is not None else None):
        return False
    if cipher_pass is None:
        return True
    kept = workdir / CIPHER_PASS_FILE
    return kept.is_file() and hmac.compare_digest(kept.read_text(encoding="utf-8").strip().encode(),
                                                  cipher_pass.get_secret_value().encode())


def _keep_cipher_pass(workdir: Path, cipher_pass: SecretStr | None) -> None:
    """The passphrase of the repository just made, kept beside it (0600: written to a new private file,
    then renamed), so the next demo can tell the repository it would reuse was made with it."""
    kept = workdir / CIPHER_PASS_FILE
    if cipher_pass is None:
        kept.unlink(missing_ok=True)
    else:
        write_text_atomically(kept, cipher_pass.get_secret_value() + "\n")


def _s3_prefix(s3: DemoS3) -> str:
    prefix = s3.prefix.strip("/")
    return f"{prefix}/" if prefix else ""


def _bucket_holds(s3: DemoS3, stanzas: list[str], manifest: dict[str, Any]) -> bool:
    """Whether the bucket still holds the demo the manifest describes (an endpoint that keeps its
    objects in memory loses them when it stops)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if manifest.get("endpoint") != s3.endpoint_url:
        return False
    client = s3.client()
    try:
        for stanza in stanzas:
            client.head_object(Bucket=s3.bucket, Key=f"{_s3_prefix(s3)}backup/{stanza}/backup.info")
        return True
    except (BotoCoreError, ClientError):
        return False
    finally:
        client.close()


def _prepare_bucket(s3: DemoS3) -> None:
    """Make the bucket, or empty the demo's prefix in it when an earlier demo made it (its marker
    object is there); anything else under the prefix is never deleted."""
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = _s3_prefix(s3)
    marker = prefix + MARKER
    client = s3.client()
    try:
        try:
            client.head_bucket(Bucket=s3.bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
                raise
            where = {} if s3.region == "us-east-1" else {
                "CreateBucketConfiguration": {"LocationConstraint": s3.region}}
            client.create_bucket(Bucket=s3.bucket, **where)
        keys = [item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket,
                                                                                          Prefix=prefix)
                for item in page.get("Contents", [])]
        if keys and marker not in keys:
            raise DemoError(f"{s3.url} holds objects not made by restoreproof demo; choose another bucket or prefix")
        for start in range(0, len(keys), 1000):
            client.delete_objects(Bucket=s3.bucket, Delete={"Objects": [{"Key": k} for k in keys[start:start + 1000]],
                                                            "Quiet": True})
        client.put_object(Bucket=s3.bucket, Key=marker,
                          Body=b"made by restoreproof demo; everything under this prefix may be deleted and remade\n")
    except (BotoCoreError, ClientError) as exc:
        raise DemoError(f"cannot prepare the demo's bucket {s3.url} at {s3.endpoint_url}: {exc}") from exc
    finally:
        client.close()


# pgbench's own row counts per unit of its scale (pgbench -i).
PGBENCH_ROWS = {"pgbench_accounts": 100_000, "pgbench_branches": 1, "pgbench_tellers": 10}
PGBENCH_KEYS = {"pgbench_accounts": "aid", "pgbench_branches": "bid", "pgbench_tellers": "tid"}


def demo_checks(result: DemoResult) -> dict[str, Any]:
    """The sample clusters' data checks, as a configuration's `checks:` section: pgbench's row counts
    from each cluster's scale and its keys unique (Great Expectations' own expectation names), and
    the events table's timestamp held to the RPO (freshness). Baselines need no configuration."""
    expectations: dict[str, Any] = {}
    columns: dict[str, Any] = {}
    for stanza in result.stanzas:
        scale = int(result.manifest["stanzas"][stanza]["pgbench_scale"])
        expectations[stanza] = [
            {"table": f"public.{table}", "expect": [
                {"type": "expect_table_row_count_to_equal", "kwargs": {"value": rows * scale}},
                {"type": "expect_column_values_to_be_unique", "kwargs": {"column": PGBENCH_KEYS[table]}}]}
            for table, rows in PGBENCH_ROWS.items()]
        columns[stanza] = [{"table": "public.events", "column": "at"}]
    return {"expectations": expectations, "freshness": {"columns": columns}}
