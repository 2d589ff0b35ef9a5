"""Run the nightly DAG once through real Airflow (its SQLite metadata database, `dag.test()`).

Airflow reads its configuration when first imported, so the environment is set before that.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from verification.airflow_files import DAGS_DIR, PLUGINS_DIR

DAG_ID = "restore_verification"
POOL = "restoreproof_targets"


def configure(airflow_home: Path) -> None:
    os.environ.setdefault("AIRFLOW_HOME", str(airflow_home))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_DIR))
    os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(PLUGINS_DIR))
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    if str(PLUGINS_DIR) not in sys.path:
        sys.path.insert(0, str(PLUGINS_DIR))


def run_once(source: Path, airflow_home: Path, pool_slots: int = 2, conf: dict[str, Any] | None = None) -> Any:
    """Migrate the metadata database (idempotent), make the pool, run the DAG once; return the run."""
    configure(airflow_home)
    migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                              check=False)
    if migrated.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed: {migrated.stderr[-2000:]}")
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.pool import Pool

    logging.getLogger("airflow").setLevel(logging.WARNING)
    Pool.create_or_update_pool(POOL, pool_slots, "disposable restore targets at once", include_deferred=False)
    bag = DagBag(dag_folder=str(DAGS_DIR))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    dag = bag.get_dag(DAG_ID)
    return dag.test(run_conf={"source": str(source), **(conf or {})})
