"""Direct mode without Docker: the S3 repository's pgBackRest options and keys, and the recorded demo
run replayed through a target that reads the repository in S3 (tests/integration/test_s3_direct.py
runs it against a real endpoint)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.unit.engines.postgres.test_engine import RecordedTarget, demo_plan, recorded, verify
from tests.unit.sources.conftest import Bucket, s3, s3_endpoint
from verification.config import S3Settings, Settings
from verification.engines.postgres.direct import (
    MASK,
    DirectTarget,
    S3Repository,
    _credentials,
    direct_repository,
    masked,
    uri_style,
)
from verification.errors import SourceError, TargetError
from verification.model import RestorePlan, Verdict
from verification.sources.local import LocalSource
from verification.sources.s3 import S3Source
from verification.targets.egress import Endpoint

__all__ = ["demo_plan", "s3", "s3_endpoint"]  # fixtures, used here by name

KEY, SECRET, TOKEN = "AKIATESTKEY0001", "test-secret/with+chars", "session-token-value"


def repository(**changes: object) -> S3Repository:
    fields: dict[str, object] = {"bucket": "backups", "prefix": "pg/main", "endpoint_url": "https://s3.example.com",
                                 "region": "eu-west-1", "access_key_id": SecretStr(KEY),
                                 "secret_access_key": SecretStr(SECRET)}
    return S3Repository(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_options_name_the_repository_and_never_a_key() -> None:
    repo = repository()
    assert repo.url == "s3://backups/pg/main/"
    assert repo.endpoint == Endpoint("s3.example.com", 443)
    assert repo.options("/var/lib/restoreproof/s3-ca.pem") == [
        "--repo1-type=s3", "--repo1-path=/pg/main", "--repo1-s3-bucket=backups", "--repo1-s3-endpoint=s3.example.com",
        "--repo1-storage-port=443", "--repo1-s3-region=eu-west-1", "--repo1-s3-uri-style=path",
        "--repo1-storage-ca-file=/var/lib/restoreproof/s3-ca.pem"]
    assert repo.environment() == {"PGBACKREST_REPO1_S3_KEY": KEY, "PGBACKREST_REPO1_S3_KEY_SECRET": SECRET}
    # The bucket's root; no CA of its own (the image's public CAs); TLS not verified when asked.
    root = repository(prefix="", endpoint_url="https://minio.internal:9000", verify_tls=False)
    assert root.url == "s3://backups/" and "--repo1-path=/" in root.options(None)
    assert "--repo1-storage-verify-tls=n" in root.options("/ca.pem")
    assert not any("ca-file" in option for option in root.options("/ca.pem"))
    assert "--repo1-storage-port=9000" in root.options(None)
    assert not any(KEY in option or SECRET in option for option in repo.options("/ca.pem") + root.options(None))


def test_a_session_token_and_host_style() -> None:
    repo = repository(session_token=SecretStr(TOKEN), uri_style="host")
    assert repo.environment()["PGBACKREST_REPO1_S3_TOKEN"] == TOKEN
    # pgBackRest connects to bucket.endpoint: the container resolves that name to its way out too.
    assert repo.endpoint.host_names == ("s3.example.com", "backups.s3.example.com")
    assert "--repo1-s3-uri-style=host" in repo.options(None)
    assert repo.secrets == (SECRET, TOKEN, KEY)  # longest first: one containing another is masked whole


def test_an_endpoint_named_by_its_address_is_refused_with_the_reason() -> None:
    # pgBackRest 2.45 matches a certificate's DNS names only: 127.0.0.1 would fail inside the target.
    with pytest.raises(TargetError, match=r"DNS name only: name the endpoint https://127.0.0.1:9000 by a name"):
        repository(endpoint_url="https://127.0.0.1:9000")


def test_masked() -> None:
    assert masked(f"key {KEY} secret {SECRET}.", (SECRET, KEY)) == f"key {MASK} secret {MASK}."


def test_a_key_shorter_than_the_runs_minimum_is_not_masked_in_every_word() -> None:
    # As every redactor of the run (verification.redaction.MIN_SECRET_LENGTH): "a" is no key to mask.
    repo = repository(access_key_id=SecretStr("a"), secret_access_key=SecretStr(SECRET),
                      session_token=SecretStr("tok"))
    assert repo.secrets == (SECRET,)
    said = f"ERROR: [039]: HTTP request failed with 403 (Forbidden) signed with a/{SECRET} at a bucket"
    assert masked(said, repo.secrets) == said.replace(SECRET, MASK)
    assert masked("a bucket", ("a", "bu")) == "a bucket"


def test_the_recorded_run_through_a_target_that_reads_s3(demo_plan: RestorePlan, tmp_path: Path) -> None:
    # pgBackRest printed the key (as a tool that echoes its environment would): it never reaches the evidence.
    leaky = recorded("pgbackrest-restore.log") + f"\nP00 DETAIL: signed with {KEY}/{SECRET}\n"
    inner = RecordedTarget(**{"pgbackrest restore": (0, leaky)})
    target = DirectTarget(inner, repository(), "/var/lib/restoreproof/s3-ca.pem")  # type: ignore[arg-type]
    _, (verdict, _) = verify(demo_plan, tmp_path, target)  # type: ignore[arg-type]
    assert verdict is Verdict.PASSED
    assert ["pgbackrest", "version"] in inner.sent  # which verify the target's pgBackRest prints
    commands = [argv for argv in inner.sent if argv[0] == "pgbackrest" and argv != ["pgbackrest", "version"]]
    assert sorted(argv[-1] for argv in commands) == ["restore", "verify"]  # verify runs alongside the restore
    for argv in commands:
        assert argv[2:10] == repository().options("/var/lib/restoreproof/s3-ca.pem")
        assert not any(a.startswith("--repo1-path=/repo") for a in argv)
        assert not any(KEY in a or SECRET in a for a in argv)
    # Every command gets the keys in its environment (recovery's archive-get runs under pg_ctl start).
    assert all(env["PGBACKREST_REPO1_S3_KEY"] == KEY and env["PGBACKREST_REPO1_S3_KEY_SECRET"] == SECRET
               for env in inner.env)
    evidence = (tmp_path / "evidence" / "pgbackrest-restore.log").read_text()
    assert f"signed with {MASK}/{MASK}" in evidence and KEY not in evidence and SECRET not in evidence
    assert target.describe() == {"kind": "recorded", "repository": "s3://backups/pg/main/"}
    assert target.repo_path == "s3://backups/pg/main/"


# -- from an S3 source, against a real endpoint ---------------------------------------------------

def test_only_a_source_in_s3_in_direct_mode_is_read_by_the_target(s3: Bucket, tmp_path: Path) -> None:
    s3.put("pg/backup/demo1/backup.info", b"[backrest]\n")
    assert direct_repository(LocalSource(tmp_path), Settings(s3=S3Settings(restore_mode="direct"))) is None
    staged = S3Settings(endpoint_url=f"https://localhost:{s3.endpoint.port}")
    with S3Source(s3.url("pg"), staged) as source:
        assert direct_repository(source, Settings(s3=staged)) is None   # stage is the default


def test_the_repository_comes_from_the_source(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.put("pg/main/backup/demo1/backup.info", b"[backrest]\n")
    # The keys of boto3's chain (here its environment), the CA of AWS_CA_BUNDLE, the endpoint by name.
    settings = S3Settings(endpoint_url=f"https://localhost:{s3.endpoint.port}", restore_mode="direct")
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    with S3Source(s3.url("pg/main"), settings) as source:
        repo = direct_repository(source, Settings(s3=settings))
    assert repo is not None
    assert repo.url == f"s3://{s3.name}/pg/main/"
    assert (repo.endpoint_url, repo.region, repo.uri_style) == (f"https://localhost:{s3.endpoint.port}", "us-east-1",
                                                                "path")
    assert repo.ca_file == s3.endpoint.ca_file and repo.verify_tls
    assert repo.environment() == {"PGBACKREST_REPO1_S3_KEY": os.environ["AWS_ACCESS_KEY_ID"],
                                  "PGBACKREST_REPO1_S3_KEY_SECRET": os.environ["AWS_SECRET_ACCESS_KEY"],
                                  "PGBACKREST_REPO1_S3_TOKEN": TOKEN}
    # The settings' own keys beat the chain's.
    own = settings.model_copy(update={"access_key_id": SecretStr(KEY), "secret_access_key": SecretStr(SECRET)})
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    with S3Source(s3.url("pg/main"), own) as source:
        repo = direct_repository(source, Settings(s3=own))
    assert repo is not None and repo.secrets == (SECRET, KEY)


def test_an_endpoint_by_address_and_no_keys_are_clear_errors(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.put("backup/demo1/backup.info", b"[backrest]\n")
    by_address = S3Settings(restore_mode="direct")   # AWS_ENDPOINT_URL: https://127.0.0.1:PORT
    with S3Source(s3.url(), by_address) as source, pytest.raises(TargetError, match="DNS name only"):
        direct_repository(source, Settings(s3=by_address))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(SourceError, match=r"direct needs S3 keys to give pgBackRest for s3://b: none in "
                                          r"s3.access_key_id/s3.secret_access_key nor in the AWS credential chain"):
        _credentials(S3Settings(), "s3://b")


def test_what_direct_mode_needs_is_checked_before_a_run(s3: Bucket, tmp_path: Path) -> None:
    from verification.engines.postgres.engine import PostgresEngine
    from verification.errors import ConfigError

    s3.put("pg/backup/demo1/backup.info", b"[backrest]\n")
    by_name = f"https://localhost:{s3.endpoint.port}"
    for mode, target, refused in [("stage", "local", None), ("direct", "offline", None), ("direct", "docker", None),
                                  ("direct", "auto", None), ("direct", "local", "not --target local")]:
        settings = S3Settings(endpoint_url=by_name, restore_mode=mode)  # type: ignore[arg-type]
        with S3Source(s3.url("pg"), settings) as source:
            engine = PostgresEngine(Settings(s3=settings))
            if refused is None:
                engine.check_settings(source, target)
            else:
                with pytest.raises(ConfigError, match=refused):
                    engine.check_settings(source, target)
    # A folder is read in place whatever s3.restore_mode says.
    PostgresEngine(Settings(s3=S3Settings(restore_mode="direct"))).check_settings(LocalSource(tmp_path), "local")


@pytest.mark.parametrize(("style", "endpoint", "expected"), [
    ("path", None, "path"), ("virtual", "https://minio:9000", "host"), ("auto", "https://minio:9000", "path"),
    ("auto", None, "host")])
def test_the_uri_style(style: str, endpoint: str | None, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert uri_style(S3Settings(addressing_style=style, endpoint_url=endpoint)) == expected


# -- what a failed restore from S3 is judged ------------------------------------------------------

# What pgBackRest 2.45 prints for a request S3 refuses (common/io/http/request.c httpRequestError).
DENIED = """P00   INFO: restore command begin 2.45: --repo1-type=s3 --set=20261122-195034F
P00  ERROR: [039]: HTTP request failed with 403 (Forbidden):
            *** Path/Query ***:
            GET /pg/main/backup/demo1/backup.info
            *** Response Content ***:
            <Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>
P00   INFO: restore command end: aborted with exception [039]
"""
# An object of the backup set deleted after the plan listed it (storage/s3/read.c, raised in a worker).
DELETED = ("P00   INFO: restore command begin 2.45: --repo1-type=s3\n"
           "P00  ERROR: [055]: raised from local-1 shim protocol: unable to open missing file "
           "'/pg/main/backup/demo1/20261122-195034F/pg_data/base/1/1247.gz' for read\n"
           "P00   INFO: restore command end: aborted with exception [055]\n")


@pytest.mark.parametrize(("answer", "reason"), [
    (DENIED, "could not read the repository s3://backups/pg/main/: [039] ProtocolError: HTTP request failed with 403 "
             "(Forbidden) (GET /pg/main/backup/demo1/backup.info): AccessDenied Access Denied"),
    ("P00  ERROR: [049]: unable to get address for 's3.example.com': [-2] Name or service not known\n",
     "could not read the repository s3://backups/pg/main/: [049] HostConnectError: unable to get address for "
     "'s3.example.com': [-2] Name or service not known"),
    ("P00  ERROR: [101]: [503] Service Unavailable\n",
     "could not read the repository s3://backups/pg/main/: [101] ServiceError: [503] Service Unavailable"),
    (DELETED, "s3://backups/pg/main/backup/demo1/20261122-195034F/pg_data/base/1/1247.gz gone from S3 since the "
              "plan listed it (deleted since)"),
])
def test_a_restore_s3_would_not_serve_is_an_error_naming_the_cause(demo_plan: RestorePlan, tmp_path: Path,
                                                                    answer: str, reason: str) -> None:
    inner = RecordedTarget(**{"pgbackrest restore": (39, answer)})
    target = DirectTarget(inner, repository(), None)  # type: ignore[arg-type]
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)  # type: ignore[arg-type]
    assert verdict is Verdict.ERROR and outcome.failures == []
    label = demo_plan.target_backup.label if demo_plan.target_backup else "?"
    assert reasons[0].startswith(f"pgbackrest restore of backup {label}")
    assert reason in reasons[0]
    assert KEY not in reasons[0] and SECRET not in reasons[0]
