"""Classic operators over the same steps as the TaskFlow DAG, for teams that prefer them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from restoreproof_airflow.hooks import RestoreproofHook
from verification import orchestration
from verification.pipeline import run_verification


class RestoreVerificationOperator(BaseOperator):
    """Verify every database of a source in one task (plan, restore, check, report).

    Fails, without retry, when any database did not pass; the reasons are in the task log."""

    template_fields: Sequence[str] = ("source", "engine", "at", "config")

    def __init__(self, *, source: str, engine: str = "auto", at: str | datetime | None = None, target: str = "auto",
                 config: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.engine, self.at, self.target, self.config = source, engine, at, target, config
        utc_point(at)  # a naive or malformed time is refused when the DAG is parsed, not at 1 a.m.

    def execute(self, context: Any) -> dict[str, Any]:
        settings = RestoreproofHook(config=self.config).settings
        at = utc_point(self.at)
        result = run_verification(settings, self.source, engine_name=self.engine, at=at, target_kind=self.target,
                                  progress=self.log.info)
        for db in result.run.databases:
            self.log.info("%s: %s — %s", db.database, db.verdict, "; ".join(db.reasons))
        if result.run.verdict != "passed":
            raise AirflowFailException(f"restore verification {result.run.verdict}: see {result.html_path}")
        return {"verdict": str(result.run.verdict), "report_html": str(result.html_path)}


class PublishReportOperator(BaseOperator):
    """Write the report of a run whose databases were verified by separate tasks."""

    template_fields: Sequence[str] = ("run_id_",)

    def __init__(self, *, run_id_: str, config: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id_, self.config = run_id_, config

    def execute(self, context: Any) -> dict[str, Any]:
        return orchestration.publish(RestoreproofHook(config=self.config).settings, self.run_id_)


def utc_point(value: str | datetime | None) -> datetime | None:
    """A restore point in UTC. A time without an offset is refused: 01:30 on the worker, in the
    database's zone or in UTC are three different points, and a guess would restore the wrong one.
    A templated value ("{{ ... }}") is checked once rendered, at execution."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if "{{" in value:
            return None
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"restore point {value!r} is not an ISO 8601 time (for example "
                             "2026-11-22T01:30:00Z)") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"restore point {value.isoformat()} has no UTC offset: add one (Z, +00:00, +01:00, ...)")
    return value.astimezone(UTC)
