"""pgBackRest writing and reading a repository in S3 from containers that have no network, against a
real local S3 endpoint (moto in its own process, TLS from a CA made at start):

- the demo's source cluster writes its repository into the bucket (repo1-type=s3), through the
  egress link, and the bucket then holds a real pgBackRest repository;
- `pgbackrest info` from a second container reads it;
- direct mode: a stanza planned from the bucket (S3Source), restored by pgBackRest in the target
  straight from S3 (no repository mount) and verified with the real pipeline pieces, the target
  chosen by the engine from the source and s3.restore_mode direct;
- the keys: random ones (moto takes any), searched for in every output of the module's runs.

One demo for the module (one cluster, about a minute).
"""

from __future__ import annotations

import configparser
import json
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from verification.config import S3Settings, Settings
from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.demo.source import CONF_INSIDE, DemoResult, DemoS3, _SourceCluster, make_demo
from verification.engines.base import Evidence
from verification.engines.postgres.direct import DirectTargetProvider, S3Repository
from verification.engines.postgres.engine import PostgresEngine
from verification.model import ChainStatus, CheckStatus, PhaseStatus
from verification.pipeline import verify_database
from verification.reports.json_report import database_entry
from verification.sources.s3 import S3Source
from verification.targets.docker import docker_client, run_in_container
from verification.targets.egress import EgressLink
from verification.targets.exchange import EXCHANGE_PATH, make_exchange
from verification.targets.labels import RUN_LABEL, new_run_id

IMAGE = "restoreproof/postgres:15"
KEY = f"AKIARP{secrets.token_hex(6).upper()}"
SECRET = f"rp-secret-{secrets.token_urlsafe(24)}"
STANZA = "demo1"
SEGMENT_RE = re.compile(r"^archive/demo1/15-1/0000000100000000/0000000100000000[0-9A-F]{8}-[0-9a-f]{40}\.gz$")


@dataclass
class S3Demo:
    endpoint: LocalS3Endpoint
    s3: DemoS3
    demo: DemoResult
    root: Path


@pytest.fixture(scope="module")
def s3_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Demo]:
    root = tmp_path_factory.mktemp("s3demo")
    with LocalS3Endpoint() as endpoint:
        s3 = DemoS3(f"https://localhost:{endpoint.port}", KEY, SecretStr(SECRET), ca_file=endpoint.ca_file)
        demo = make_demo(root / "work", scale=1, clusters=1, s3=s3, state_dir=root / "state")
        yield S3Demo(endpoint, s3, demo, root)


def objects(s3: DemoS3) -> dict[str, int]:
    client = s3.client()
    try:
        return {item["Key"]: item["Size"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket)
                for item in page.get("Contents", [])}
    finally:
        client.close()


def leftovers(run_id: str) -> list[str]:
    client = docker_client()
    try:
        selector = {"label": f"{RUN_LABEL}={run_id}"}
        return ([c.name or "" for c in client.containers.list(all=True, filters=selector)]
                + [v.name or "" for v in client.volumes.list(filters=selector)])
    finally:
        client.close()


def link_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-egress")]


def test_the_bucket_holds_a_real_pgbackrest_repository(s3_demo: S3Demo) -> None:
    demo, s3 = s3_demo.demo, s3_demo.s3
    assert demo.url == demo.source == "s3://restoreproof-demo/" and demo.manifest["repository"] == demo.url
    assert not demo.repository.exists()   # nothing was written to a local repository
    found = objects(s3)
    info = configparser.ConfigParser(strict=False)  # pgBackRest repeats [backrest] for its checksum
    info.optionxform = str  # type: ignore[assignment,method-assign]  # labels keep their case
    client = s3.client()
    try:
        info.read_string(client.get_object(Bucket=s3.bucket, Key=f"backup/{STANZA}/backup.info")["Body"].read().decode())
        archive_info = client.get_object(Bucket=s3.bucket, Key=f"archive/{STANZA}/archive.info")["Body"].read().decode()
    finally:
        client.close()
    labels = sorted(info["backup:current"])
    assert [label[-1] for label in labels] == ["F", "D", "I"]   # full, diff on it, incr on the diff
    for label in labels:
        assert f"backup/{STANZA}/{label}/backup.manifest" in found
        assert any(key.startswith(f"backup/{STANZA}/{label}/pg_data/base/") for key in found)
    assert "db-id=1" in archive_info and f"archive/{STANZA}/archive.info.copy" in found
    segments = [key for key in found if SEGMENT_RE.match(key)]
    assert len(segments) >= 5 and all(found[key] > 0 for key in segments)
    # A leftover of a failed backup would show here: every object belongs to the repository.
    assert set(found) - {".restoreproof-demo"} == {k for k in found if k.startswith(("backup/demo1/", "archive/demo1/"))}
    assert leftovers(demo.run_id or "") == [] and link_threads() == []
    assert list((s3_demo.root / "state" / "leftovers").glob("*.json")) == []   # exchange folders removed


def test_pgbackrest_info_from_a_second_container(s3_demo: S3Demo, tmp_path: Path) -> None:
    s3 = s3_demo.s3
    run_id = f"s3-info-{new_run_id()}"
    exchange = make_exchange(tmp_path / "state", run_id, STANZA)
    client = docker_client()
    container = client.containers.create(IMAGE, ["sleep", "infinity"], name=f"restoreproof-{run_id}",
                                         labels={RUN_LABEL: run_id}, network_mode="none",
                                         volumes={str(exchange.shared): {"bind": EXCHANGE_PATH, "mode": "rw"}})
    try:
        container.start()
        assert s3.ca_file is not None
        (exchange.shared / "ca.pem").write_text(s3.ca_file.read_text())
        repository = S3Repository(s3.bucket, "", s3.endpoint_url, s3.region, SecretStr(KEY), SecretStr(SECRET),
                                  ca_file=s3.ca_file)
        with EgressLink(client, container, repository.endpoint, (EXCHANGE_PATH, str(exchange.shared))) as link:
            result = run_in_container(client, container,
                                      ["pgbackrest", *repository.options(f"{EXCHANGE_PATH}/ca.pem"),
                                       f"--stanza={STANZA}", "--output=json", "--log-level-file=off", "info"],
                                      timeout=120, user="postgres", env=repository.environment())
            assert result.ok, result.output
            assert link.bridge.accepted > 0
        (stanza,) = json.loads(result.stdout)
        assert stanza["name"] == STANZA and stanza["status"]["message"] == "ok"
        assert [b["type"] for b in stanza["backup"]] == ["full", "diff", "incr"]
        assert stanza["archive"][0]["min"] and stanza["archive"][0]["max"] > stanza["archive"][0]["min"]
        assert KEY not in result.output and SECRET not in result.output
    finally:
        container.remove(force=True)
        client.close()
        exchange.remove()
    assert leftovers(run_id) == [] and link_threads() == []


def test_the_source_keeps_its_keys_in_a_file_only_postgres_reads(s3_demo: S3Demo, tmp_path: Path) -> None:
    client = docker_client()
    run_id = f"s3-conf-{new_run_id()}"
    cluster = _SourceCluster(client, IMAGE, "demo9", tmp_path, run_id, s3_demo.s3, tmp_path / "state")
    try:
        cluster.configure()
        assert cluster.sh(f"stat -c '%a %U %G' {CONF_INSIDE}", user="root").split() == ["600", "postgres", "postgres"]
        # Where the keys are (so the searches of this module look for the right strings) ...
        conf = cluster.container.exec_run(["cat", CONF_INSIDE], user="postgres").output.decode()
        assert f"repo1-s3-key={KEY}" in conf and f"repo1-s3-key-secret={SECRET}" in conf
        # ... and no other user of the container reads them.
        code, output = cluster.container.exec_run(["cat", CONF_INSIDE], user="nobody")
        assert code != 0 and b"Permission denied" in output
        # Not on any process's command line either (the forwarder's among them).
        cmdlines = cluster.sh("cat /proc/[0-9]*/cmdline | tr '\\0' ' '", user="root")
        assert "socat" in cmdlines and KEY not in cmdlines and SECRET not in cmdlines
    finally:
        cluster.remove()
        client.close()
    assert leftovers(run_id) == [] and link_threads() == []


def test_direct_mode_restores_and_verifies_from_s3(s3_demo: S3Demo, settings: Settings, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    s3 = s3_demo.s3
    caplog.set_level("DEBUG")
    settings = settings.model_copy(update={"s3": S3Settings(
        endpoint_url=s3.endpoint_url, region=s3.region, addressing_style="path", ca_bundle=s3.ca_file,
        access_key_id=SecretStr(KEY), secret_access_key=SecretStr(SECRET), restore_mode="direct")})
    engine = PostgresEngine(settings)
    with S3Source(s3.url, settings.s3) as source:
        (plan,) = engine.plan(source, None).plans
        assert plan.chain.status is ChainStatus.COMPLETE and plan.target_backup is not None
        provider = engine.target_provider("auto", [plan], source)
        assert isinstance(provider, DirectTargetProvider)
        repository = provider.repository
        assert (repository.url, repository.endpoint_url) == ("s3://restoreproof-demo/", s3.endpoint_url)
        run_id = new_run_id()
        moto_log = s3_demo.endpoint.folder / "moto.log"
        requests_before = len(moto_log.read_text().splitlines())
        evidence = Evidence(tmp_path / "evidence" / STANZA)
        result = verify_database(engine, plan, provider, run_id, source.describe(), evidence, source=source)

    assert result.verdict == "passed", result.reasons
    checks = {c.name: c for c in result.checks}
    assert checks["pgbackrest_verify"].status is CheckStatus.PASSED
    assert {p.name: p.status for p in result.phases}["transfer"] is PhaseStatus.MEASURED
    # The target had no repository mount and read the repository in S3 itself.
    assert result.target is not None and result.target["repository"] == "s3://restoreproof-demo/"
    assert result.target["egress"] == f"localhost:{s3_demo.endpoint.port}"
    restore_log = (evidence.folder / "pgbackrest-restore.log").read_text()
    assert "--repo1-type=s3" in restore_log and "--repo1-s3-bucket=restoreproof-demo" in restore_log
    assert "--repo1-path=/repo" not in restore_log
    served = moto_log.read_text().splitlines()[requests_before:]
    label = plan.target_backup.label
    assert any(f"GET /restoreproof-demo/backup/{STANZA}/{label}/backup.manifest" in line for line in served)
    assert any(re.search(rf"GET /restoreproof-demo/backup/{STANZA}/[^/ ]+/pg_data/base/", line) for line in served)
    assert any(re.search(r"GET /restoreproof-demo/archive/demo1/15-1/0000000100000000/\w+-\w+\.gz", line)
               for line in served), "recovery's archive-get read WAL from S3"
    # The server's own words: recovery ended at the planned point, from segments fetched from S3.
    assert any(reason.startswith("server log: redo done at") and "restored from the archive" in reason
               for reason in result.reasons), result.reasons

    # Nothing left: no container, no volume, no exchange folder, no link thread.
    assert leftovers(run_id) == [] and link_threads() == []
    assert list((settings.state_dir / "leftovers").glob("*.json")) == []

    # The keys: in no evidence file, no result or report entry, no log record, nothing printed.
    outputs = {f"evidence/{p.relative_to(evidence.folder)}": p.read_text(errors="replace")
               for p in evidence.folder.rglob("*") if p.is_file()}
    outputs["report entry"] = database_entry(result).model_dump_json()
    outputs["reasons"] = "\n".join(result.reasons)
    outputs["log"] = caplog.text + "\n".join(str(r.args) for r in caplog.records)
    captured = capfd.readouterr()
    outputs["stdout"], outputs["stderr"] = captured.out, captured.err
    outputs["moto log"] = moto_log.read_text()
    outputs["demo manifest"] = (s3_demo.demo.workdir / "demo.json").read_text()
    assert len(outputs) > 8 and "pgbackrest-restore.log" in " ".join(outputs)
    assert [name for name, text in outputs.items() if KEY in text or SECRET in text] == []
    # pgBackRest said it had keys, without saying them.
    assert "--repo1-s3-key=<redacted>" in restore_log and "--repo1-s3-key-secret=<redacted>" in restore_log
