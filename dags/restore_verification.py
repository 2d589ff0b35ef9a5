"""Nightly restore verification: every database of a backup source restored and checked.

Only wiring lives here; the work is restoreproof's (verification.orchestration over the pipeline's
steps), the same code the CLI runs. Tasks:

    discover -> database[db]: reserve_target (setup) -> verify -> remove_target (teardown)
             -> publish (report Asset) -> verdict

- `discover` first removes what dead runs left (workers killed at work: judged by their leases,
  never a live run's), then reads and plans the source once and records each database's plan in
  the results store; each mapped task gets only the database's name and works from its recorded plan;
- a task group mapped per database (each task named by the database), so each database's
  teardown follows its own verification; `verify` runs in the pool `restoreproof_targets` and
  creates and removes its target itself, so the pool's slots bound how many targets exist at once;
- the setup task reserves and checks the target (retried: only restoreproof's own
  infrastructure is retried); the teardown removes whatever carries the run's and database's
  labels, also when `verify` failed or timed out, and records a database whose worker was killed
  (its lease left open) as "error" with why;
- `publish` follows every database's teardown (not only its `verify`), so what a teardown records is
  in the report; a killed task whose teardown could not record it is recorded by `publish`;
- a verification that failed is never retried: the task fails with the reasons in its log;
- a time budget stops starting new verifications; next night a database that ended in error (a
  killed worker) goes first, then the never verified, then the least recently verified.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, Param, get_current_context, setup, task, task_group, teardown
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from restoreproof_airflow.hooks import RestoreproofHook
from restoreproof_airflow.notifier import RestoreproofFailureNotifier

from verification import orchestration
from verification.config import Settings
from verification.errors import TargetError

POOL = os.environ.get("RESTOREPROOF_POOL", "restoreproof_targets")
REPORT_ASSET = Asset("restoreproof://reports/restore_verification")


def _params() -> orchestration.NightlyParams:
    context = get_current_context()
    params = orchestration.NightlyParams.from_mapping(dict(context["params"]))
    if params.seed is None:
        # The run's own date, so a cleared or late task rotates to the same point as its run.
        run_date = context["dag_run"].run_after or datetime.now(UTC)
        params = replace(params, seed=int(run_date.strftime("%Y%m%d")))
    return params


def _settings() -> Settings:
    """The run's settings, the same in every task: the `config` param's file, else the worker's own,
    with what the run's params set over it (`pages`)."""
    params = _params()
    return RestoreproofHook(config=params.config, **params.settings_overrides()).settings


def _run_id() -> str:
    context = get_current_context()
    return orchestration.scheduler_run_id(context["dag"].dag_id, context["run_id"])


def _deadline(params: orchestration.NightlyParams) -> datetime | None:
    # From the run's start as Airflow records it now: clearing a task re-runs it under a fresh
    # budget instead of skipping it against yesterday's deadline.
    started = get_current_context()["dag_run"].start_date or datetime.now(UTC)
    return started + timedelta(minutes=params.time_budget_minutes) if params.time_budget_minutes else None


with DAG(
    dag_id=orchestration.DAG_ID,
    description="Restore every database's backup chain in a disposable server, time it, check it, report.",
    # RESTOREPROOF_SCHEDULE: a cron expression, or "none" for runs only when triggered.
    schedule=None if os.environ.get("RESTOREPROOF_SCHEDULE", "").lower() == "none"
    else os.environ.get("RESTOREPROOF_SCHEDULE", "0 1 * * *"),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["restoreproof"],
    params={
        "source": Param(os.environ.get("RESTOREPROOF_SOURCE", "demo/backups"), type="string",
                        description="The backup repository (pgBackRest repository root or SQL Server backup "
                                    "folder): a folder, or s3://bucket/prefix."),
        "engine": Param("auto", enum=["auto", "postgres", "mssql"]),
        "include": Param([], type="array", description="Only these databases (empty: all)."),
        "exclude": Param([], type="array"),
        "point": Param("latest", enum=["latest", "older-full", "random"],
                       description="Restore point per database; random rotates nightly through the retention window."),
        "seed": Param(None, type=["null", "integer"], description="Seed for older-full/random (default: the date)."),
        "at": Param(None, type=["null", "string"],
                    description="Restore every database to this point in time instead (ISO 8601 with a UTC offset, "
                                "e.g. 2026-11-22T01:30:00Z); a time without an offset is refused."),
        "target": Param("docker", enum=["docker", "local", "auto", "offline"]),
        "pages": Param(None, type=["null", "string"], enum=[None, "chain", "all"],
                       description="SQL Server: whose pages are verified offline: chain (the planned chain's full "
                                   "and differential backups) or all (every one of the database's in the source; a "
                                   "damaged one fails the database). Default: the setting mssql.pages (chain)."),
        "time_budget_minutes": Param(360, type=["null", "number"],
                                     description="Stop starting new verifications after this long."),
        "config": Param(os.environ.get("RESTOREPROOF_CONFIG"), type=["null", "string"],
                        description="restoreproof's YAML configuration for every task of the run (default: "
                                    "the workers' RESTOREPROOF_CONFIG, else their user or system file, as the "
                                    "CLI finds one), as `restoreproof verify --config` takes it."),
    },
    on_failure_callback=RestoreproofFailureNotifier(),
) as dag:

    @task
    def discover() -> list[str]:
        """Remove what dead runs left, then plan the source once (each chain's status logged); the
        databases to verify tonight: those that ended in error last time first, then the never and
        least recently verified."""
        context = get_current_context()
        started = context["dag_run"].start_date or datetime.now(UTC)
        return orchestration.discover(_settings(), _params(), _run_id(), started)

    @setup
    @task(retries=2, retry_delay=timedelta(seconds=30), map_index_template="{{ database }}")
    def reserve_target(database: str) -> dict[str, Any]:
        """Check that a target can be had for this database (image present, engine reachable)."""
        get_current_context()["database"] = database  # type: ignore[typeddict-unknown-key]
        try:
            orchestration.reserve(_settings(), _run_id())
        except TargetError as exc:
            raise RuntimeError(f"target not available: {exc}") from exc  # retried: infrastructure
        return {"database": database, "run_id": _run_id()}

    @task(pool=POOL, retries=0, execution_timeout=timedelta(hours=6), map_index_template="{{ database }}")
    def verify(handle: dict[str, Any]) -> dict[str, Any]:
        """Restore and check one database; fails (no retry) when it did not pass."""
        database = handle["database"]
        get_current_context()["database"] = database  # type: ignore[typeddict-unknown-key]
        params = _params()
        try:
            result = orchestration.verify(_settings(), params, handle["run_id"], database,
                                          _deadline(params))
        except orchestration.BudgetExceeded as exc:
            raise AirflowSkipException(str(exc)) from exc
        for reason in result["reasons"]:
            print(f"{database}: {result['verdict']}: {reason}")
        if result["verdict"] != "passed":
            raise AirflowFailException(f"{database} {result['verdict']}: " + "; ".join(result["reasons"]))
        return result

    @teardown(on_failure_fail_dagrun=True)  # type: ignore[untyped-decorator]
    @task(retries=3, retry_delay=timedelta(seconds=20), map_index_template="{{ database }}")
    def remove_target(handle: dict[str, Any]) -> list[str]:
        """Remove everything labelled with this run and database: runs whatever verify did."""
        get_current_context()["database"] = handle["database"]  # type: ignore[typeddict-unknown-key]
        report = orchestration.remove(_settings(), handle["run_id"], handle["database"])
        if report.errors:
            raise RuntimeError("cleanup incomplete: " + "; ".join(report.errors))  # retried, then fails the run
        return report.containers + report.volumes + report.folders

    @task_group
    def database(name: str) -> Any:
        """One database: its target reserved, verified, removed; the group is mapped per database."""
        handle = reserve_target(name)
        removed = remove_target(handle)
        handle >> verify(handle) >> removed
        # What follows the group follows the teardown: a group's leaves skip its teardowns, so `publish`
        # would otherwise start as soon as `verify` ended and close the run before the teardown of a
        # killed worker's task had recorded it.
        return removed

    @task(trigger_rule="all_done", outlets=[REPORT_ASSET])
    def publish() -> dict[str, Any]:
        """The run's report.json and report.html, from the results store; published as an Asset."""
        result = orchestration.publish(_settings(), _run_id())
        print(f"report: {result['report_html']}")
        return result

    @task
    def verdict(published: dict[str, Any]) -> None:
        """Fail the run when any database did not pass, so the failure shows on the run itself."""
        if published["verdict"] != "passed":
            raise AirflowFailException(f"restore verification {published['verdict']}: {published['summary']}; "
                                       f"not passed: {', '.join(published['failed']) or 'none'}; "
                                       f"report: {published['report_html']}")

    per_database = database.expand(name=discover())
    published = publish()
    per_database >> published
    verdict(published)  # type: ignore[arg-type]
