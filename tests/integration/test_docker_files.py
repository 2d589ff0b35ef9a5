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
    assert set(services) == {"metadata", "s3", "airflow-init", "api-server", "scheduler", "dag-processor",
                             "triggerer", "mssql"}
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
