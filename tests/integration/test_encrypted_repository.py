"""Encrypted pgBackRest repositories end to end (issue 16): a real repository made at test time by real
PostgreSQL 15 clusters and pgBackRest 2.45 with `repo1-cipher-type=aes-256-cbc` (`make_demo(cipher_pass=)`,
what `restoreproof demo --encrypt` makes), verified through the command line in real containers.

- the latest point and a point in time between two backups both pass, planned from the encrypted files;
- a missing and a wrong passphrase stop the run with exit 2 and their messages, before any container
  (Docker's own events: none created by the command's process);
- a flipped byte in an encrypted backup file (a copy) fails the database naming the file;
- bytes flipped in an encrypted manifest and its copy fail the database at planning, naming both, before
  any container; in the manifest alone, the plan loads its copy, as pgBackRest does;
- every backup of the report says it is encrypted (aes-256-cbc), how that is known, in report.json and
  report.html; a plain repository's, not encrypted;
- the evidence hashes the files as stored: encrypted;
- the passphrase, and the sub-passphrases the info files and manifests keep, are in none of a run's
  outputs: its stdout and stderr, every file of its report folder (report.json, report.html, evidence,
  JUnit, metrics, signed manifest), the results store (an SQL dump), and what Docker shows of the
  target while it lives (`docker inspect` of the container and of every command run in it, and the
  container's process list);
- a repository that is not encrypted, given a passphrase, passes with the warning in its report;
- in S3, staged and read directly by pgBackRest in the target, it passes too.

One encrypted demo for the module (one cluster, about a minute), besides the session's plain one.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from verification.demo.source import DemoResult, make_demo
from verification.engines.postgres.cipher import decrypt
from verification.engines.postgres.serverlog import parse_pg_timestamp
from verification.evidence.backup_hashes import parse_sha256sums
from verification.targets.docker import docker_client
from verification.targets.labels import slug
from verification.targets.lease import PID_LABEL

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "verification.cli"]
PASSPHRASE = f"Rp-Cipher-{secrets.token_urlsafe(18)}"
STANZA = "demo1"
MISSING = "encrypted repository (aes-256-cbc): set postgres.repo_cipher_pass"
# What report.json says of each backup of the encrypted repository.
ENCRYPTED = {"state": "encrypted", "algorithm": "aes-256-cbc", "encryptor_type": None, "encryptor_thumbprint": None,
             "tde_thumbprint": None, "basis": (
                 f"read offline from the repository: backup/{STANZA}/backup.info and the backup's manifest are in "
                 "pgBackRest's encrypted format (aes-256-cbc, repo1-cipher-type) and decrypt, with the passphrase "
                 "and the key backup.info keeps for the manifests; the backup's files are encrypted with the key "
                 "its manifest keeps")}


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    from tests.integration.conftest import leftovers

    made = make_demo(tmp_path_factory.mktemp("encrypted-demo"), scale=1, clusters=1, cipher_pass=SecretStr(PASSPHRASE))
    assert leftovers(made.run_id) == [], "making the demo left containers behind"
    assert made.manifest["cipher"] == "aes-256-cbc"
    return made


def sub_passphrases(repository: Path) -> list[str]:
    """The passphrases the repository's info files and manifests keep for the files below them."""
    def kept(path: Path, passphrase: str) -> str:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read_string(decrypt(path.read_bytes(), passphrase).decode())
        return str(json.loads(parser.get("cipher", "cipher-pass")))

    backup_key = kept(repository / "backup" / STANZA / "backup.info", PASSPHRASE)
    found = [backup_key, kept(repository / "archive" / STANZA / "archive.info", PASSPHRASE)]
    found += [kept(manifest, backup_key) for manifest in (repository / "backup" / STANZA).glob("*/backup.manifest")
              if not manifest.parent.is_symlink()]  # `latest` links to the newest backup's folder
    # backup.info's, archive.info's, and the full's manifest's, which its diff and incr keep too (they
    # reference its files: pgBackRest's backup.c sets a new backup's from its prior's).
    distinct = len(set(found))  # a count, so a failure never prints the keys
    assert distinct == 3
    return found


def environment(tmp_path: Path, passphrase: str | None = PASSPHRASE, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESTOREPROOF_")}
    env |= {"XDG_STATE_HOME": str(tmp_path / "state"), "RESTOREPROOF_PREDICTION__PROBES": "never", **extra}
    if passphrase is not None:
        env["RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS"] = passphrase
    return env


@dataclass
class Watched:
    """A command run in its own process, and what Docker showed of every container it made while it ran."""

    returncode: int
    stdout: str
    stderr: str
    docker_seen: list[str] = field(default_factory=list)   # inspect, exec inspect and process lists, as JSON
    containers: set[str] = field(default_factory=set)
    pid: int = 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_watched(args: list[str], env: dict[str, str], timeout: float = 900) -> Watched:
    """The CLI in a process of its own; meanwhile Docker is asked, every half second, about each
    container that process labelled as its own: `docker inspect` of it and of every command run in
    it (their environment is not shown there: the point), and its process list (`docker top`)."""
    process = subprocess.Popen([*CLI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    containers: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        client = docker_client()
        try:
            while not done.is_set():
                for container in client.containers.list(filters={"label": f"{PID_LABEL}={process.pid}"}):
                    containers.add(container.name)
                    try:
                        details = client.api.inspect_container(container.id)
                        seen.append(json.dumps(details))
                        for exec_id in details.get("ExecIDs") or []:
                            seen.append(json.dumps(client.api.exec_inspect(exec_id)))
                        seen.append(json.dumps(client.api.top(container.id, ps_args="auxww")))
                    except Exception:  # gone between the listing and the question: nothing more to see
                        continue
                done.wait(0.5)
        finally:
            client.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        done.set()
        watcher.join(30)
        if process.poll() is None:
            process.kill()
    return Watched(process.returncode, stdout, stderr, seen, containers, process.pid)


def created_by(pid: int, since: float) -> list[str]:
    """Containers Docker says a process created (its pid label) since `since`, from Docker's own events."""
    client = docker_client()
    try:
        events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                               filters={"type": "container", "event": "create", "label": f"{PID_LABEL}={pid}"})
        return [event.get("Actor", {}).get("Attributes", {}).get("name", "?") for event in events]
    finally:
        client.close()


def written_files(tmp_path: Path) -> list[Path]:
    return [p for folder in (tmp_path / "reports", tmp_path / "state") for p in folder.rglob("*") if p.is_file()]


def store_dump(tmp_path: Path) -> str:
    connection = sqlite3.connect(tmp_path / "state" / "restoreproof" / "results.db")
    try:
        return "\n".join(connection.iterdump())
    finally:
        connection.close()


def assert_nowhere(secrets_: list[str], run: Watched, tmp_path: Path, restored: bool = True) -> None:
    files = written_files(tmp_path)
    assert any(p.name == "report.json" for p in files) and any(p.name == "report.html" for p in files)
    assert any("evidence" in p.parts for p in files) is restored and any(p.name == "results.db" for p in files)
    dump = store_dump(tmp_path)
    assert ("pgbackrest" if restored else f"'{STANZA}'") in dump  # the dump holds the run's rows
    for secret in secrets_:
        assert secret not in run.output
        assert [str(p) for p in files if secret.encode() in p.read_bytes()] == []
        assert secret not in dump
        assert not any(secret in seen for seen in run.docker_seen)


def test_latest_and_a_point_in_time_pass_and_no_passphrase_is_in_any_output(encrypted, tmp_path):
    repository = encrypted.repository
    assert (repository / "backup" / STANZA / "backup.info").read_bytes().startswith(b"Salted__")
    markers = encrypted.manifest["stanzas"][STANZA]["markers"]
    before, after = parse_pg_timestamp(markers["pitr-before"]), parse_pg_timestamp(markers["pitr-after"])
    at = (before + (after - before) / 2).astimezone(UTC)
    # Each run with a results store of its own: the point in time has fewer rows than the latest (baselines).
    folders = {"latest": tmp_path / "latest", "timed": tmp_path / "timed"}
    planned = subprocess.run([*CLI, "plan", str(repository), "--json"], env=environment(folders["latest"]),
                             capture_output=True, text=True, timeout=300, check=False)
    assert planned.returncode == 0, planned.stderr
    (plan,) = json.loads(planned.stdout)["databases"]
    assert (plan["encryption"], plan["chain"]["status"]) == ("aes-256-cbc", "complete")
    manifests = next(r for r in plan["chain"]["rules"] if r["rule"] == "manifests-load")
    assert manifests == {"rule": "manifests-load", "passed": True, "detail": (
        "3 of 3 manifests load (decrypted with the key backup.info keeps (aes-256-cbc); format, checksum, label and "
        "files as pgBackRest checks them before a restore)")}
    assert all(b["encryption"] == ENCRYPTED for b in plan["chain"]["backups"])
    assert PASSPHRASE not in planned.stdout + planned.stderr
    latest = run_watched(["verify", str(repository), "--report-dir", str(folders["latest"] / "reports"), "--json"],
                         environment(folders["latest"]))
    assert latest.returncode == 0, latest.stderr[-3000:]
    timed = run_watched(["verify", str(repository), "--at", at.isoformat(), "--report-dir",
                         str(folders["timed"] / "reports"), "--json"], environment(folders["timed"]))
    assert timed.returncode == 0, timed.stderr[-3000:]
    for run, point, folder in ((latest, None, folders["latest"]), (timed, at, folders["timed"])):
        reports = folder / "reports"
        report = json.loads(run.stdout)
        (db,) = report["databases"]
        assert (report["verdict"], db["verdict"]) == ("passed", "passed"), db["reasons"]
        assert db["restore_point"]["target"] == (point.isoformat() if point else "latest")
        checks = {c["name"]: c["status"] for c in db["checks"]}
        assert checks["pgbackrest_verify"] == "passed" and checks["pg_amcheck"] == "passed"
        assert report["warnings"] == []
        # Each backup says it is encrypted, and how that is known, in report.json and report.html.
        assert db["chain"]["backups"] and all(b["encryption"] == ENCRYPTED for b in db["chain"]["backups"])
        html = (reports / report["run_id"] / "report.html").read_text()
        assert html.count("<td>encrypted (aes-256-cbc)</td>") == len(db["chain"]["backups"])
        assert f"<li>{ENCRYPTED['basis']}</li>".replace("'", "&#39;") in html
        # The watcher saw the target at work: pgBackRest's commands as Docker shows them, the server running.
        assert run.containers, "the watcher saw no target: nothing was searched there"
        assert any("--stanza=demo1" in seen and "ProcessConfig" in seen for seen in run.docker_seen)
        assert any("postgres -D" in seen for seen in run.docker_seen)
        # The evidence hashes the files as the repository holds them: encrypted.
        evidence = reports / report["run_id"] / "evidence" / slug(STANZA) / "backup-files.sha256"
        hashes = parse_sha256sums(evidence.read_text())
        backup_files = [p for p in hashes if p.startswith(f"backup/{STANZA}/") and "/pg_data/" in p]
        assert backup_files and all((repository / p).read_bytes().startswith(b"Salted__") for p in backup_files)
        assert all(digest == hashlib.sha256((repository / p).read_bytes()).hexdigest() for p, digest in hashes.items())
    timed_db = json.loads(timed.stdout)["databases"][0]
    achieved = datetime.fromisoformat(timed_db["restore_point"]["achieved"])
    assert before <= achieved <= at and timed_db["chain"]["backups"][-1]["type"] == "diff"
    # The key reached pgBackRest in the target (it restored and verified) and went nowhere else.
    for run, folder in ((latest, folders["latest"]), (timed, folders["timed"])):
        assert_nowhere([PASSPHRASE, *sub_passphrases(repository)], run, folder)


@pytest.mark.parametrize("given", [None, "Rp-Wrong-Passphrase-0123"], ids=["missing", "wrong"])
def test_a_missing_or_wrong_passphrase_stops_the_run_before_any_container(encrypted, tmp_path, given):
    started = time.time()
    process = subprocess.Popen([*CLI, "verify", str(encrypted.repository), "--report-dir", str(tmp_path / "reports")],
                               env=environment(tmp_path, given), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    stdout, stderr = process.communicate(timeout=300)
    said = " ".join((stdout + stderr).split())
    assert process.returncode == 2, said
    where = f"{encrypted.repository}/backup/{STANZA}/backup.info"
    if given is None:
        assert f"restoreproof: {MISSING} (stanza {STANZA}: {where} is encrypted)" in said
    else:
        assert (f"restoreproof: wrong passphrase: postgres.repo_cipher_pass does not decrypt backup/{STANZA}/backup.info"
                f" of the encrypted repository (aes-256-cbc) at {encrypted.repository}") in said
        assert given not in said
    assert created_by(process.pid, started) == []
    assert not list((tmp_path / "reports").rglob("report.json"))


def test_a_flipped_byte_in_an_encrypted_backup_file_fails_naming_it(encrypted, tmp_path):
    copy = tmp_path / "backups"
    shutil.copytree(encrypted.repository, copy)
    incr = sorted((copy / "backup" / STANZA).glob("*I"))[-1]
    victim = max((incr / "pg_data" / "base").rglob("*.gz"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    assert data.startswith(b"Salted__")
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    run = run_watched(["verify", str(copy), "--report-dir", str(tmp_path / "reports"), "--json"], environment(tmp_path))
    assert run.returncode == 1, run.stderr[-3000:]
    (db,) = json.loads(run.stdout)["databases"]
    assert db["verdict"] == "failed"
    named = str(victim.relative_to(copy))
    assert any(named in reason for reason in db["reasons"]), db["reasons"]
    assert any(reason.startswith(f"pgbackrest restore of backup {incr.name} failed") for reason in db["reasons"])
    assert_nowhere([PASSPHRASE, *sub_passphrases(copy)], run, tmp_path)


def test_bytes_flipped_in_an_encrypted_manifest_and_its_copy_fail_at_planning_naming_both(encrypted, tmp_path):
    copy = tmp_path / "backups"
    shutil.copytree(encrypted.repository, copy, symlinks=True)
    keys = sub_passphrases(copy)
    diff = sorted((copy / "backup" / STANZA).glob("*D"))[-1]
    manifest = f"backup/{STANZA}/{diff.name}/backup.manifest"
    for path in (copy / manifest, copy / f"{manifest}.copy"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01  # a block garbled, a byte of the next flipped: the padding stays valid
        path.write_bytes(bytes(data))
    started = time.time()
    run = run_watched(["verify", str(copy), "--report-dir", str(tmp_path / "reports"), "--json"],
                      environment(tmp_path))
    assert run.returncode == 1, run.stderr[-3000:]
    (db,) = json.loads(run.stdout)["databases"]
    assert db["verdict"] == "failed" and db["chain"]["status"] == "broken"
    (problem,) = db["chain"]["problems"]
    assert problem["code"] == "damaged-manifest" and problem["files"] == [manifest, f"{manifest}.copy"]
    assert db["reasons"][0].startswith("chain broken") and manifest in db["reasons"][0], db["reasons"]
    # Known at planning: nothing was started (the planned restore would have used the incr, on this diff).
    assert run.containers == set() and created_by(run.pid, started) == []
    assert_nowhere([PASSPHRASE, *keys], run, tmp_path, restored=False)
    # The manifest alone damaged, its copy sound: planned from the copy, as pgBackRest loads it.
    shutil.copy(encrypted.repository / f"{manifest}.copy", copy / f"{manifest}.copy")
    planned = subprocess.run([*CLI, "plan", str(copy), "--json"], env=environment(tmp_path), capture_output=True,
                             text=True, timeout=300, check=False)
    assert planned.returncode == 0, planned.stderr
    (plan,) = json.loads(planned.stdout)["databases"]
    rule = next(r for r in plan["chain"]["rules"] if r["rule"] == "manifests-load")
    assert rule["passed"] and rule["detail"].endswith(": its copy loaded instead, as pgBackRest does")
    assert f"; {manifest}: " in rule["detail"]


def test_a_plain_repository_given_a_passphrase_passes_with_a_warning(demo, tmp_path):
    run = run_watched(["verify", str(demo.repository), "-d", "demo1", "--report-dir", str(tmp_path / "reports"),
                       "--json"], environment(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    warning = (f"postgres.repo_cipher_pass is set, but the repository {demo.repository} is not encrypted (its info "
               "files are plain text): the passphrase is not used")
    assert report["verdict"] == "passed" and report["warnings"] == [warning]
    backups = report["databases"][0]["chain"]["backups"]
    assert backups and all(b["encryption"] == {
        "state": "not_encrypted", "algorithm": None, "encryptor_type": None, "encryptor_thumbprint": None,
        "tde_thumbprint": None, "basis": "read offline from the repository: backup/demo1/backup.info and the "
                                         "backup's manifest are plain text, not pgBackRest's encrypted format "
                                         "(repo1-cipher-type none)"} for b in backups)
    planned = subprocess.run([*CLI, "plan", str(demo.repository)], env=environment(tmp_path), capture_output=True,
                             text=True, timeout=300, check=False)
    assert planned.returncode == 0 and f"warning: {warning}" in " ".join(planned.stderr.split()), planned.stderr
    assert_nowhere([PASSPHRASE], run, tmp_path)


# -- in S3 -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_copy(encrypted) -> Iterator[tuple[Any, str]]:
    """The encrypted repository uploaded into a real local S3 endpoint (moto, TLS), by the name its
    certificate holds (pgBackRest checks DNS names only)."""
    from tests.integration.test_s3_stage import client_of, upload
    from verification.demo.s3_endpoint import LocalS3Endpoint

    with LocalS3Endpoint() as endpoint:
        bucket = f"rp-crypt-{uuid.uuid4().hex[:10]}"
        client_of(endpoint).create_bucket(Bucket=bucket)
        yield endpoint, upload(endpoint, bucket, encrypted.repository, "pg/repo1")


@pytest.mark.parametrize("mode", ["stage", "direct"])
def test_an_encrypted_repository_in_s3_passes_staged_and_read_directly(encrypted, s3_copy, tmp_path, mode):
    from tests.integration.test_s3_stage import AWS_NAMES

    endpoint, url = s3_copy
    aws = {**endpoint.client_environment(), "AWS_ENDPOINT_URL": f"https://localhost:{endpoint.port}",
           "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"), "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials")}
    env = {k: v for k, v in environment(tmp_path, RESTOREPROOF_S3__RESTORE_MODE=mode).items() if k not in AWS_NAMES}
    run = run_watched(["verify", url, "--report-dir", str(tmp_path / "reports"), "--json"], {**env, **aws})
    assert run.returncode == 0, run.stderr[-3000:]
    (db,) = json.loads(run.stdout)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    assert [p["status"] for p in db["phases"] if p["name"] == "download"] == (
        ["measured"] if mode == "stage" else ["absent"])
    assert all(b["encryption"] == ENCRYPTED for b in db["chain"]["backups"])
    assert_nowhere([PASSPHRASE, *sub_passphrases(encrypted.repository), aws["AWS_SECRET_ACCESS_KEY"]], run, tmp_path)


def test_nightly_encrypt_runs_the_dag_on_the_encrypted_demo(encrypted, tmp_path):
    """`restoreproof nightly --encrypt` on the demo made above (reused: the passphrase it keeps made it),
    through real Airflow in a process of its own: the configuration it writes for the DAG's tasks
    carries the passphrase (0600), and nothing Airflow keeps or the command says has it."""
    env = {k: v for k, v in environment(tmp_path, passphrase=None).items() if not k.startswith("AIRFLOW")}
    env["RESTOREPROOF_REPORT_DIR"] = str(tmp_path / "reports")
    airflow_home = tmp_path / "airflow"
    run = run_watched(["nightly", "--encrypt", "--workdir", str(encrypted.workdir), "--clusters", "1",
                       "--airflow-home", str(airflow_home)], env, timeout=1200)
    said = " ".join(run.stderr.split())
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"sample repository reused: {encrypted.repository}; encrypted, aes-256-cbc" in said
    config = encrypted.workdir / "restoreproof-demo.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert yaml.safe_load(config.read_text())["postgres"]["repo_cipher_pass"] == PASSPHRASE
    (report,) = [json.loads(p.read_text()) for p in (tmp_path / "reports").glob("*/report.json")]
    assert report["verdict"] == "passed" and [d["verdict"] for d in report["databases"]] == ["passed"]
    assert f"  {STANZA}: passed (" in run.stdout  # the DAG run's result, on stdout
    # Airflow's files: its metadata database (the runs, their XComs and params), configuration, any log.
    kept = [p for p in airflow_home.rglob("*") if p.is_file()]
    assert any(p.name == "airflow.db" for p in kept), kept
    for secret in [PASSPHRASE, *sub_passphrases(encrypted.repository)]:
        assert secret not in run.output
        assert [str(p) for p in kept if secret.encode() in p.read_bytes()] == []
    assert_nowhere([PASSPHRASE], run, tmp_path)
