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
