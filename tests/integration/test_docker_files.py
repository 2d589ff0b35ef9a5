"""The compose files we ship validate with the installed Compose."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def compose() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0:
        return ["docker", "compose"]
    pytest.skip("no Docker Compose installed")


def test_sql_server_compose_file_validates_and_demands_a_password():
    env = {**os.environ, "MSSQL_SA_PASSWORD": "An0ther-Str0ng-One"}
    ok = subprocess.run([*compose(), "-f", str(DOCKER / "mssql.compose.yaml"), "config"], env=env,
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "mcr.microsoft.com/mssql/server:2022-latest" in ok.stdout and "/backups:ro" in ok.stdout
    env.pop("MSSQL_SA_PASSWORD")
    refused = subprocess.run([*compose(), "-f", str(DOCKER / "mssql.compose.yaml"), "config"], env=env,
                             capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "set MSSQL_SA_PASSWORD" in refused.stderr


def test_team_compose_file_validates_and_demands_its_secrets():
    env = {**os.environ, "AIRFLOW_DB_PASSWORD": "a", "AIRFLOW_JWT_SECRET": "b", "RESTOREPROOF_BACKUPS": "/srv/backups"}
    env.pop("MSSQL_SA_PASSWORD", None)
    ok = subprocess.run([*compose(), "-f", str(DOCKER / "compose.yaml"), "config"], env=env, capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    services = subprocess.run([*compose(), "-f", str(DOCKER / "compose.yaml"), "--profile", "mssql", "config",
                               "--services"], env=env, capture_output=True, text=True, check=True).stdout.split()
    team = {"metadata", "s3", "airflow-init", "api-server", "scheduler", "dag-processor", "triggerer", "mssql"}
    # Compose v1 lists every service, v2 those of the profiles asked for (the celery profile's are not).
    assert team <= set(services) <= team | {"redis", "celery-worker"}
    assert "/var/run/docker.sock:/var/run/docker.sock" in ok.stdout
    assert "postgresql+psycopg://airflow:a@metadata/airflow" in ok.stdout
    import yaml

    rendered = yaml.safe_load(ok.stdout)["services"]
    assert rendered["mssql"]["profiles"] == ["mssql"]  # SQL Server starts only with --profile mssql
    assert rendered["scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    env.pop("AIRFLOW_DB_PASSWORD")
    refused = subprocess.run([*compose(), "-f", str(DOCKER / "compose.yaml"), "config"], env=env,
                             capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "set AIRFLOW_DB_PASSWORD" in refused.stderr


def volume_pairs(service: dict) -> set[tuple[str, str]]:  # type: ignore[type-arg]
    """(host path or volume, path inside) of a rendered service, from Compose v1's strings or v2's mappings."""
    pairs = set()
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            pairs.add((str(volume["source"]), str(volume["target"])))
        else:
            source, target = volume.split(":")[:2]
            pairs.add((source, target))
    return pairs


def test_celery_profile_validates_with_its_broker_and_workers():
    import yaml

    env = {**os.environ, "AIRFLOW_DB_PASSWORD": "a", "AIRFLOW_JWT_SECRET": "b", "RESTOREPROOF_BACKUPS": "/srv/backups",
           "RESTOREPROOF_EXECUTOR": "CeleryExecutor", "RESTOREPROOF_BROKER_PASSWORD": "brokerpw",
           "RESTOREPROOF_STATE_ROOT": "/var/lib/rp-workers", "RESTOREPROOF_CELERY_WORKERS": "3"}
    ok = subprocess.run([*compose(), "-f", str(DOCKER / "compose.yaml"), "--profile", "celery", "config"], env=env,
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    rendered = yaml.safe_load(ok.stdout)["services"]
    broker, worker = rendered["redis"], rendered["celery-worker"]
    # Both start only with --profile celery; the broker publishes no port and keeps a password.
    assert broker["profiles"] == ["celery"] and worker["profiles"] == ["celery"]
    assert "ports" not in broker and "--requirepass" in " ".join(broker["command"])
    assert int(worker.get("scale", worker.get("deploy", {}).get("replicas", 0))) == 3
    for name in ("scheduler", "api-server", "celery-worker"):
        environment = rendered[name]["environment"]
        assert environment["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        assert environment["AIRFLOW__CELERY__BROKER_URL"] == "redis://:brokerpw@redis:6379/0", name
        assert environment["AIRFLOW__CELERY__RESULT_BACKEND"] == "db+postgresql+psycopg://airflow:a@metadata/airflow"
    # What each worker's targets bind-mount is at the same path inside the worker as on the host, its
    # state folders (one per worker, by host name) under the state root; reports and the store shared.
    pairs = volume_pairs(worker)
    assert ("/var/lib/rp-workers", "/var/lib/rp-workers") in pairs
    assert ("/srv/backups", "/srv/backups") in pairs
    assert ("/var/run/docker.sock", "/var/run/docker.sock") in pairs
    assert any(target == "/srv/restoreproof/reports" for _, target in pairs)
    assert worker["environment"]["RESTOREPROOF_STATE_ROOT"] == "/var/lib/rp-workers"
    assert worker["environment"]["RESTOREPROOF_RESULTS_URL"] == "postgresql+psycopg://airflow:a@metadata/restoreproof"
    command = " ".join(worker["command"])
    assert 'RESTOREPROOF_STATE_DIR="$$RESTOREPROOF_STATE_ROOT/$$me/state"' in command.replace("$$$$", "$$")
    assert "celery worker --celery-hostname" in command
    # Without the profile's variables the LocalExecutor stays the default.
    env = {k: v for k, v in env.items() if k != "RESTOREPROOF_EXECUTOR"}
    plain = subprocess.run([*compose(), "-f", str(DOCKER / "compose.yaml"), "config"], env=env, capture_output=True,
                           text=True, check=True).stdout
    assert yaml.safe_load(plain)["services"]["scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
