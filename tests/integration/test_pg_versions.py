"""A repository written by another PostgreSQL major than 15: the plan names what wrote it, and a target
that cannot restore it is refused as an error before any target container starts."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import leftovers
from verification.cli import app
from verification.demo.source import _SourceCluster
from verification.engines.postgres.manifest import ManifestRead, layout_of, load_info
from verification.engines.postgres.repository_format import reader_needs
from verification.errors import TargetError
from verification.images import ensure_image
from verification.model import Chain, ChainStatus, RestorePlan
from verification.targets.docker import docker_client
from verification.targets.labels import RUN_LABEL, new_run_id

pytestmark = pytest.mark.integration

STANZA = "pg17"


@pytest.fixture(scope="module")
def pg17_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full backup and its WAL, written by PostgreSQL 17 and pgBackRest 2.55 (Debian trixie's)."""
    repo = tmp_path_factory.mktemp("pg17") / "backups"
    repo.mkdir()
    run_id = new_run_id()
    cluster = _SourceCluster(docker_client(), ensure_image("restoreproof/postgres:17"), STANZA, repo, run_id)
    try:
        cluster.setup()
        cluster.psql("create table t (id bigserial primary key, note text not null)")
        cluster.psql("insert into t (note) select 'row ' || g from generate_series(1, 1000) g")
        cluster.backup("full")
        cluster.psql("insert into t (note) select 'row ' || g from generate_series(1, 100) g")
        cluster.finish()
    finally:
        cluster.remove()
    assert leftovers(run_id) == []
    return repo


def test_the_plan_names_the_postgres_and_pgbackrest_that_wrote_the_backup(pg17_repo: Path) -> None:
    result = CliRunner().invoke(app, ["plan", str(pg17_repo), "--json"], catch_exceptions=False)
    (database,) = json.loads(result.stdout)["databases"]
    assert database["written_by"] == {"PostgreSQL": "17", "pgBackRest": "2.55.1"}
    assert database["needs"] == []  # a plain stanza: no layout any pgBackRest cannot read
    said = CliRunner().invoke(app, ["plan", str(pg17_repo)], catch_exceptions=False)
    assert "  written by PostgreSQL 17, pgBackRest 2.55.1\n" in said.stdout


def created_in_run(run_id: str, since: float) -> list[str]:
    client = docker_client()
    try:
        events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                               filters={"type": "container", "event": "create", "label": f"{RUN_LABEL}={run_id}"})
        return [event.get("Actor", {}).get("Attributes", {}).get("name", "?") for event in events]
    finally:
        client.close()


def test_a_target_image_of_another_major_is_an_error_before_any_target_starts(
        pg17_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESTOREPROOF_DOCKER__POSTGRES_IMAGE", "restoreproof/postgres:15")
    since = time.time()
    result = CliRunner().invoke(app, ["verify", str(pg17_repo), "--json", "--report-dir", str(tmp_path)],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    (database,) = report["databases"]
    assert database["verdict"] == "error", database
    assert (f"{STANZA}: the backup needs PostgreSQL 17 (written by pgBackRest 2.55.1); the target image "
            "restoreproof/postgres:15 (docker.postgres_image) has PostgreSQL 15; set docker.postgres_images: "
            "{17: <an image with PostgreSQL 17>}, or unset docker.postgres_image to use restoreproof/postgres:17"
            ) in " ".join(database["reasons"]), database["reasons"]
    assert created_in_run(report["run_id"], since) == []
    assert leftovers(report["run_id"]) == []


def test_build_sh_refuses_a_major_no_debian_suite_or_wheel_gives_naming_the_ones_it_builds() -> None:
    from verification.images import BUILD_SCRIPT, NO_SUITE_EXIT, build_environment

    said = subprocess.run(["bash", str(BUILD_SCRIPT), "postgres:12"], capture_output=True, text=True, check=False,
                          env=build_environment(None) | {"RESTOREPROOF_DOCKER__BUILD_CONTEXT": ""})
    assert said.returncode == NO_SUITE_EXIT
    assert ("no postgres image for 12 here: the Debian suites and pinned wheels give only 13 14 15 16 17 18"
            in said.stderr)


def test_the_17_image_says_the_versions_it_holds() -> None:
    from verification.images import image_labels

    ensure_image("restoreproof/postgres:17")
    labels = image_labels("restoreproof/postgres:17")
    assert labels["restoreproof.postgres-major"] == "17"
    assert labels["restoreproof.pgbackrest-version"].startswith("2.55")


def test_with_no_image_setting_the_backup_restores_in_its_own_majors_image(pg17_repo: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["verify", str(pg17_repo), "--json", "--report-dir", str(tmp_path)],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    (database,) = report["databases"]
    # A good backup is never failed; pgBackRest 2.55.1's verify is read as 2.45's is.
    assert database["verdict"] != "failed", database["reasons"]
    checks = {check["name"]: check["status"] for check in database["checks"]}
    assert checks["pg_amcheck"] == "passed" and checks["pg_checksums"] == "passed", database["checks"]
    assert checks["pgbackrest_verify"] == "passed", database["checks"]
    run_dir = next(tmp_path.rglob("report.json")).parent
    versions = json.loads((run_dir / "evidence" / database["evidence"]["versions.json"]).read_text())
    assert versions["written_by"] == {"PostgreSQL": "17", "pgBackRest": "2.55.1"}
    assert versions["target"]["image"] == "restoreproof/postgres:17"
    assert versions["postgres"].startswith("postgres (PostgreSQL) 17.")
    said = database["versions"]
    assert said["backup"] == {"PostgreSQL": "17", "pgBackRest": "2.55.1"}
    assert said["target"]["pgBackRest"] == "2.55.1" and said["target"]["PostgreSQL"].startswith("17."), said
    assert leftovers(report["run_id"]) == []


@pytest.fixture(scope="module")
def unlabelled_13() -> Iterator[str]:
    """The 13 image with its pgBackRest label emptied: what an image made some other way looks like."""
    tag = f"restoreproof-test/unlabelled-13:{new_run_id().lower()}"
    client = docker_client()
    try:
        client.images.build(fileobj=io.BytesIO(b'FROM restoreproof/postgres:13\nLABEL restoreproof.pgbackrest-version=""\n'),
                            tag=tag, rm=True)
        yield tag
    finally:
        client.images.remove(tag, force=True)
        client.close()


def block_incremental_plan(major: str) -> RestorePlan:
    """A plan whose backup the captured 2.60 block incremental manifest describes."""
    from tests.unit.engines.postgres.test_repository_format import MANIFESTS

    text = gzip.decompress((MANIFESTS / "2.60.0-block" / "incr.manifest.gz").read_bytes())
    read = replace(ManifestRead("L", "backup/s/L/backup.manifest", "backup/s/L/backup.manifest"),
                   layout=layout_of(load_info(text)))
    plan = RestorePlan("postgres", "s", Chain(ChainStatus.COMPLETE, [], [], []),
                       written_by={"PostgreSQL": major, "pgBackRest": "2.60.0"}, needs=reader_needs([read], {}))
    return plan


def test_an_image_whose_pgbackrest_is_older_than_the_backup_s_layout_is_refused_naming_both(
        unlabelled_13: str) -> None:
    from verification.config import DockerSettings
    from verification.engines.postgres.versions import _reads_the_layout, image_tool_version

    assert image_tool_version("restoreproof/postgres:13") == "2.33"
    assert image_tool_version(unlabelled_13) == "2.33"  # asked of the image itself, in a container
    docker = DockerSettings(postgres_images={"13": unlabelled_13})
    with pytest.raises(TargetError) as refused:
        _reads_the_layout(unlabelled_13, docker, block_incremental_plan("13"))
    said = str(refused.value)
    assert said.startswith("s: the backup needs PostgreSQL 13 (written by pgBackRest 2.60.0); reading it needs "
                           "pgBackRest 2.48 or newer: block incremental: [backup] backup-block-incr in "
                           "backup/s/L/backup.manifest (read by pgBackRest 2.48 and newer); "), said
    assert (f"; the target image {unlabelled_13} (docker.postgres_images[13]) has pgBackRest 2.33; set "
            "docker.postgres_images: {13: <an image with PostgreSQL 13 and pgBackRest 2.48 or newer>}") in said
    _reads_the_layout("restoreproof/postgres:18", docker, block_incremental_plan("18"))  # 2.60 reads it


def test_an_image_that_never_answers_its_version_is_left_unsaid_and_removed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from verification.engines.postgres import versions

    tag = f"restoreproof-test/silent:{new_run_id().lower()}"
    client = docker_client()
    try:
        # An entry point that ignores the command it is given, as some images' do.
        client.images.build(fileobj=io.BytesIO(b'FROM restoreproof/postgres:13\nLABEL restoreproof.pgbackrest-version=""'
                                               b'\nENTRYPOINT ["sleep", "infinity"]\n'), tag=tag, rm=True)
        monkeypatch.setattr(versions, "PROBE_SECONDS", 2)
        assert versions.image_tool_version(tag) is None
        assert client.containers.list(all=True, filters={"ancestor": tag}) == []
    finally:
        client.images.remove(tag, force=True)
        client.close()
