"""The sample source: real PostgreSQL clusters with a workload and a pgBackRest repository.

For each cluster (one pgBackRest stanza, `demo1`, `demo2`, ...), in its own container:
initdb with data checksums, continuous WAL archiving into `<workdir>/backups`, a pgbench-style
workload plus an `events` table with a timestamp column, then

    full backup -> writes -> diff backup -> writes, PITR markers -> incr backup -> writes -> WAL switch

so every backup differs and WAL is archived between and after them. Two marker rows, written a
second apart between the diff and the incr backups (`pitr-before`, `pitr-after`), give tests a
point in time to restore to; their times are in `<workdir>/demo.json`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker.errors

import docker
from verification.errors import RestoreproofError
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import labels, new_run_id
from verification.targets.reaper import reap_docker

DATA = "/var/lib/restoreproof/data"
MANIFEST = "demo.json"
MARKER = ".restoreproof-demo"
# pgbench scale per demo scale unit: pgbench scale 1 is ~15 MB, so --scale 10 gives ~1 GB.
PGBENCH_SCALE_PER_UNIT = 7
DEMO_FORMAT = 1


@dataclass
class DemoResult:
    workdir: Path
    repository: Path
    stanzas: list[str]
    manifest: dict[str, Any]
    reused: bool
    run_id: str | None = None  # label on the source containers (None when reused)


class DemoError(RestoreproofError):
    pass


class _SourceCluster:
    def __init__(self, client: docker.DockerClient, image: str, stanza: str, repo: Path, run_id: str) -> None:
        self.stanza = stanza
        self.container = client.containers.create(
            image, name=f"restoreproof-demo-{run_id}-{stanza}".lower(),
            labels=labels(run_id, "demo-source", stanza), network_mode="none",
            volumes={str(repo): {"bind": "/repo", "mode": "rw"}},
        )
        try:
            self.container.start()
        except BaseException:
            self.remove()
            raise

    def sh(self, script: str, user: str = "postgres", env: dict[str, str] | None = None) -> str:
        code, output = self.container.exec_run(["bash", "-euo", "pipefail", "-c", script], user=user,
                                               environment=env or {})
        text: str = output.decode("utf-8", "replace")
        if code != 0:
            raise DemoError(f"demo source {self.stanza}: command failed (exit {code}): {script[:200]}\n{text[-2000:]}")
        return text

    def psql(self, sql: str) -> str:
        # The statement travels in the environment: no shell quoting to get wrong.
        return self.sh('psql -X -A -t -q -v ON_ERROR_STOP=1 -h /tmp -d postgres -c "$SQL"', env={"SQL": sql}).strip()

    def setup(self) -> None:
        conf = (f"[global]\nrepo1-path=/repo\nrepo1-retention-full=2\nstart-fast=y\nlog-level-console=warn\n"
                f"log-level-file=off\n\n[{self.stanza}]\npg1-path={DATA}\npg1-socket-path=/tmp\n")
        self.sh('printf %s "$CONF" > /etc/pgbackrest.conf && chown postgres /repo', user="root", env={"CONF": conf})
        settings = "\n".join([
            "archive_mode = on",
            f"archive_command = 'pgbackrest --stanza={self.stanza} archive-push %p'",
            "listen_addresses = ''", "unix_socket_directories = '/tmp'",
            "max_wal_size = '256MB'", "checkpoint_timeout = '5min'",
        ])
        self.sh(f"initdb -k -A trust -U postgres -D {DATA} >/dev/null && "
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
        # The files belong to the container's postgres user; let any restore target (and any host
        # user) read them, as a shared backup repository would allow. Done here, as root in the
        # container, because a non-root host user could not change them.
        self.sh(f"chmod a+rX /repo /repo/backup /repo/archive && "
                f"chmod -R a+rX /repo/backup/{self.stanza} /repo/archive/{self.stanza}", user="root")

    def remove(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.container.remove(force=True)


def _make_cluster(client: docker.DockerClient, image: str, stanza: str, repo: Path, run_id: str,
                  scale: int) -> dict[str, Any]:
    cluster = _SourceCluster(client, image, stanza, repo, run_id)
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


def make_demo(workdir: Path, scale: int = 1, clusters: int = 2, fresh: bool = False,
              progress: Any = None, build_context: Path | None = None) -> DemoResult:
    """Make (or reuse) the sample repository under `workdir/backups`.

    `build_context`: where to build the image from if it is missing (docker.build_context).
    """
    if scale < 1 or clusters < 1:
        raise DemoError("--scale and --clusters must be at least 1")
    workdir = workdir.resolve()
    repo = workdir / "backups"
    manifest_path = workdir / MANIFEST
    stanzas = [f"demo{i}" for i in range(1, clusters + 1)]
    if manifest_path.exists() and not fresh:
        manifest = json.loads(manifest_path.read_text())
        if (manifest.get("format") == DEMO_FORMAT and manifest.get("scale") == scale
                and sorted(manifest.get("stanzas", {})) == stanzas and repo.is_dir()):
            return DemoResult(workdir, repo, stanzas, manifest, reused=True)
    marker = workdir / MARKER
    if repo.exists():
        # Only ever delete a folder this command made (it carries our marker, written first).
        if not marker.exists():
            raise DemoError(f"{repo} exists and was not made by restoreproof demo; choose another --workdir")
        shutil.rmtree(repo)
    manifest_path.unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    marker.write_text("made by restoreproof demo; its backups/ folder may be deleted and remade\n")
    repo.mkdir()
    image = ensure_image("restoreproof/postgres:15", build_context)
    run_id = "demo-" + new_run_id()
    client = docker_client()
    pool = ThreadPoolExecutor(max_workers=clusters)
    try:
        if progress:
            progress(f"making {clusters} sample cluster(s) at scale {scale} in {repo}")
        futures = {s: pool.submit(_make_cluster, client, image, s, repo, run_id, scale) for s in stanzas}
        results = {s: f.result() for s, f in futures.items()}
    except BaseException:
        # Don't wait for the other clusters (minutes at a large scale): remove every source
        # container of this demo now; their threads then fail fast and end.
        reap_docker(run_id)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        client.close()
    manifest = {"format": DEMO_FORMAT, "scale": scale, "created_at": datetime.now(UTC).isoformat(),
                "repository": str(repo), "stanzas": results}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return DemoResult(workdir, repo, stanzas, manifest, reused=False, run_id=run_id)


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
