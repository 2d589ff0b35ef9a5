"""Real Airflow 3.3 with its SQLite metadata database, initialised once per session.

Airflow reads its configuration when first imported, so the environment is set here, at
collection, before any test imports it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="restoreproof-airflow-"))
os.environ.update({
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
})
sys.path.insert(0, str(ROOT / "plugins"))
POOL = "restoreproof_targets"


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> Iterator[Path]:
    migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                              env=os.environ.copy(), timeout=300)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    from airflow.models.pool import Pool

    Pool.create_or_update_pool(POOL, 2, "disposable restore targets at once", include_deferred=False)
    yield AIRFLOW_HOME
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture
def airflow_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """restoreproof's state and reports for one test, as the DAG's tasks will read them."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_REPORT_DIR", str(tmp_path / "reports"))
    return tmp_path


def load_dag(dag_id: str):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag(dag_id)
