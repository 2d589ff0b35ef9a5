"""Stage mode end to end: a real pgBackRest repository (the demo's: real PostgreSQL 15 clusters backed up
by pgBackRest 2.45) uploaded with boto3 into a real S3 endpoint (moto's server in its own process, TLS
from its own CA), verified through the command line from s3://bucket/prefix in a disposable container.

What is asserted: every stanza passes; its download phase is measured, its bytes the staged files'
sizes, its objects the plan's files, predicted; the plan is the one the folder gives; the evidence
hashes the bytes the restore read; and nothing is left (no staged folder, no record, no container).
Faults made on the endpoint between the plan and the staging (an object rewritten, one deleted) and
before it (an object whose bytes do not match the checksum S3 serves) each give exit 2 and the
database's error naming the object, with nothing left. And the SQL Server corpus, in Ola Hallengren's
layout in S3, gives the folder's verdicts offline.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.integration.conftest import leftovers
from tests.unit.sources.s3_helpers import lay_out, ola_layout, upload_tree
from verification.config import Settings
from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.evidence.backup_hashes import parse_sha256sums
from verification.model import RestorePlan
from verification.sources import LocalSource
from verification.targets.labels import slug

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "verification.cli"]
AWS_NAMES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
             "AWS_CA_BUNDLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[LocalS3Endpoint]:
    with LocalS3Endpoint() as started:
        yield started


def client_of(endpoint: LocalS3Endpoint) -> Any:
    env = endpoint.client_environment()
    return boto3.client("s3", endpoint_url=endpoint.url, verify=env["AWS_CA_BUNDLE"],
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                        region_name=env["AWS_DEFAULT_REGION"], config=Config(max_pool_connections=32))


@pytest.fixture(scope="module")
def bucket(endpoint: LocalS3Endpoint) -> str:
    name = f"rp-stage-{uuid.uuid4().hex[:10]}"
    client_of(endpoint).create_bucket(Bucket=name)
    return name


def upload(endpoint: LocalS3Endpoint, bucket: str, root: Path, prefix: str,
           mapping: dict[str, Path] | None = None) -> str:
    upload_tree(client_of(endpoint), bucket, prefix, root, mapping)
    return f"s3://{bucket}/{prefix}"


def environment(endpoint: LocalS3Endpoint, tmp_path: Path) -> dict[str, str]:
    """The command's environment: the endpoint's, and nothing of the host's AWS setup."""
    env = {k: v for k, v in os.environ.items() if k not in AWS_NAMES}
    return {**env, **endpoint.client_environment(), "XDG_STATE_HOME": str(tmp_path / "state"),
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"), "AWS_EC2_METADATA_DISABLED": "true"}


def cli(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def folder_plans(repository: Path) -> dict[str, RestorePlan]:
    from verification.engines.postgres.engine import PostgresEngine

    return {plan.database: plan for plan in PostgresEngine(Settings()).plan(LocalSource(repository), None).plans}


def nothing_left(run_id: str, tmp_path: Path) -> None:
    state = tmp_path / "state" / "restoreproof"
    assert list((state / "staging").glob("*")) == [], "a staged copy was left"
    assert list((state / "leftovers").glob("*")) == [], "a leftovers record was left"
    assert leftovers(run_id) == [], "a container or volume was left"


def test_a_repository_in_s3_is_staged_restored_and_passes_as_the_folder_does(demo, endpoint, bucket, tmp_path):
    url = upload(endpoint, bucket, demo.repository, "pgbackrest/repo1")
    env = environment(endpoint, tmp_path)
    # The same plans from the folder and from S3.
    from_s3, from_folder = (cli(["plan", where, "--json"], env) for where in (url, str(demo.repository)))
    assert (from_s3.returncode, from_folder.returncode) == (0, 0), from_s3.stderr + from_folder.stderr
    plans_s3, plans_folder = json.loads(from_s3.stdout), json.loads(from_folder.stdout)
    assert plans_s3["databases"] == plans_folder["databases"] and len(plans_s3["databases"]) == 2

    reports = tmp_path / "reports"
    run = cli(["verify", url, "--report-dir", str(reports), "--json"], env)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert (report["source"], report["verdict"], report["target_kind"]) == (url, "passed", "docker")
    planned = folder_plans(demo.repository)
    assert sorted(entry["database"] for entry in report["databases"]) == sorted(planned) == demo.stanzas
    for entry in report["databases"]:
        plan = planned[entry["database"]]
        assert entry["verdict"] == "passed", entry["reasons"]
        assert entry["chain"]["backups"] == next(d["chain"]["backups"] for d in plans_folder["databases"]
                                                 if d["database"] == entry["database"])
        download = entry["phases"][0]
        sizes = {path: (demo.repository / path).stat().st_size for path in plan.files}
        assert (download["name"], download["status"], download["bytes"]) == ("download", "measured",
                                                                              sum(sizes.values()))
        assert download["seconds"] > 0 and download["details"]["objects"] == len(plan.files)
        checked = download["details"]["checked"]
        assert (checked["if_match_etag"], checked["size"]) == (len(plan.files), len(plan.files))
        assert checked["checksum"] == {"CRC32": len(plan.files)}  # boto3 uploads each with its CRC32
        assert (download["bound"], download["prediction"]["bytes_read"]) == ("download rate", sum(sizes.values()))
        assert download["predicted_seconds"] is not None
        assert "download" in entry["objectives"]["rto"]["recovery_phases"]
        assert entry["recovery_seconds"] >= download["seconds"]
        assert [p["name"] for p in entry["phases"]][:3] == ["download", "provision", "zeroing"]
        # pgBackRest's own verify read the staged copy: every backup of the chain, its WAL.
        verify = next(c for c in entry["checks"] if c["name"] == "pgbackrest_verify")
        assert verify["status"] == "passed", verify["summary"]
        # ... and says it covered that chain only, never the whole repository.
        labels = [b["label"] for b in entry["chain"]["backups"]]
        wal = entry["chain"]["wal"]
        assert verify["summary"].endswith(
            f"; in the staged chain only (backup set{'s' if len(labels) > 1 else ''} {', '.join(labels)}, WAL "
            f"{wal['first']} to {wal['last']}: {len(plan.files)} objects staged from {url}), not the whole "
            "repository: its other backups and WAL were not staged, so not verified"), verify["summary"]
        assert verify["details"]["scope"]["backups"] == labels
        # The evidence hashes the bytes the restore read: the staged copy, the folder's own bytes.
        evidence = reports / report["run_id"] / "evidence" / slug(entry["database"]) / "backup-files.sha256"
        hashes = parse_sha256sums(evidence.read_text())
        assert list(hashes) == plan.files
        assert all(hashes[p] == hashlib.sha256((demo.repository / p).read_bytes()).hexdigest() for p in plan.files)
    # The key the endpoint signs with is nowhere in what the run said or wrote.
    secret = endpoint.client_environment()["AWS_SECRET_ACCESS_KEY"]
    assert secret not in run.stdout + run.stderr
    assert [p for p in reports.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []
    nothing_left(report["run_id"], tmp_path)


def wrong_crc32() -> str:
    return base64.b64encode(zlib.crc32(b"other bytes").to_bytes(4, "big")).decode()


@pytest.mark.parametrize("fault", ["rewritten", "deleted", "checksum"])
def test_an_object_not_as_planned_is_the_databases_error_naming_it(demo, endpoint, bucket, tmp_path,
                                                                   monkeypatch, fault):
    """Rewritten or deleted after the plan was made (just before the staging starts), or served with
    bytes that do not match its checksum: exit 2, the database's error names the object, nothing left."""
    from typer.testing import CliRunner

    from verification.cli import app
    from verification.sources.staging import Stager

    prefix = f"fault-{fault}"
    url = upload(endpoint, bucket, demo.repository, prefix)
    plan = folder_plans(demo.repository)["demo1"]
    victim = next(p for p in plan.files if "/pg_data/" in p)  # a backed-up data file of the chain
    key = f"{prefix}/{victim}"
    client = client_of(endpoint)
    body = (demo.repository / victim).read_bytes()
    if fault == "checksum":  # moto keeps the checksum given without checking it (S3 itself refuses it)
        client.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="CRC32", ChecksumCRC32=wrong_crc32())
    else:
        staging = Stager.stage

        def changed_first(self: Stager, files: Any, run_id: str, database: str, progress: Any = None) -> Any:
            if fault == "rewritten":
                client.put_object(Bucket=bucket, Key=key, Body=body + b"\0")
            else:
                client.delete_object(Bucket=bucket, Key=key)
            return staging(self, files, run_id, database, progress)

        monkeypatch.setattr(Stager, "stage", changed_first)
    for name, value in environment(endpoint, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in AWS_NAMES:
        if name not in endpoint.client_environment():
            monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["verify", url, "--database", "demo1", "--report-dir",
                                      str(tmp_path / "reports"), "--json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    (entry,) = report["databases"]
    said = {"rewritten": f"{url}/{victim} changed since the source was listed (its ETag is no longer the one listed; "
                         "GetObject with If-Match: PreconditionFailed, HTTP 412); not staged",
            "deleted": f"{url}/{victim}: gone since the source was listed (GetObject: NoSuchKey, HTTP 404)",
            "checksum": f"{url}/{victim}: the bytes downloaded do not match the CRC32 checksum S3 keeps for the "
                        f"object ({wrong_crc32()} kept, "}[fault]
    assert entry["verdict"] == "error" and len(entry["reasons"]) == 1
    assert entry["reasons"][0].startswith(f"the backup files were not staged from {url}: {said}")
    assert [(p["name"], p["status"]) for p in entry["phases"]] == [("download", "not_reached")]
    assert entry["target"] == {}  # no target was started
    nothing_left(report["run_id"], tmp_path)


def test_the_sql_server_corpus_in_s3_gives_the_folders_verdicts_offline(mssql_corpus, endpoint, bucket, tmp_path):
    layout = ola_layout(mssql_corpus)
    folder = lay_out(layout, tmp_path / "ola")
    url = upload(endpoint, bucket, folder, "sqlbackups", layout)
    env = environment(endpoint, tmp_path)
    runs = [cli(["verify", where, "--engine", "mssql", "--target", "offline", "--json",
                 "--report-dir", str(tmp_path / "reports" / name)], env)
            for name, where in (("s3", url), ("folder", str(folder)))]
    assert runs[0].returncode == runs[1].returncode == 1, runs[0].stderr[-2000:]  # damaged backups in the corpus

    def verdicts(run: subprocess.CompletedProcess[str]) -> Any:
        report = json.loads(run.stdout)
        return ({d["database"]: (d["verdict"], d["reasons"], [(c["name"], c["status"], c["summary"])
                                                              for c in d["checks"]]) for d in report["databases"]},
                [(u["path"], u["kind"]) for u in report["unreadable"]], report["verdict"])

    from_s3, from_folder = verdicts(runs[0]), verdicts(runs[1])
    assert from_s3 == from_folder
    assert len(from_s3[0]) == 22 and from_s3[2] == "failed"
    assert {verdict for verdict, _, _ in from_s3[0].values()} == {"failed", "error"}
