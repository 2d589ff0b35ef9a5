"""RTO drift: after every verification run, the trend of each database's recovery time against its RTO.

Triggered by the report Asset the nightly DAG publishes. Fails (and notifies) when an RTO was
missed or the trend will cross it within the configured horizon.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, Asset, task
from airflow.sdk.exceptions import AirflowFailException
from restoreproof_airflow.hooks import RestoreproofHook
from restoreproof_airflow.notifier import RestoreproofFailureNotifier

from verification import orchestration

with DAG(
    dag_id="rto_drift",
    description="Recovery-time trends per database, with alerts on RTO misses and predicted crossings.",
    schedule=[Asset("restoreproof://reports/restore_verification")],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["restoreproof"],
    on_failure_callback=RestoreproofFailureNotifier(),
) as dag:

    @task
    def trends() -> list[dict[str, Any]]:
        return orchestration.drift(RestoreproofHook().settings)

    @task
    def alert(results: list[dict[str, Any]]) -> None:
        for result in results:
            print(f"{result['database']}: {result['runs']} runs, last {result['last_seconds']} s, "
                  f"trend {result['slope_seconds_per_day']} s/day, RTO {result['rto_seconds']} s")
        alerts = [message for result in results for message in result["alerts"]]
        if alerts:
            raise AirflowFailException("RTO drift: " + " | ".join(alerts))

    alert(trends())  # type: ignore[arg-type]
