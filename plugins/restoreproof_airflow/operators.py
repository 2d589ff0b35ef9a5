"""Classic operators over the same steps as the TaskFlow DAG, for teams that prefer them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from restoreproof_airflow.hooks import RestoreproofHook
from verification import orchestration
from verification.pipeline import run_verification


class RestoreVerificationOperator(BaseOperator):
    """Verify every database of a source in one task (plan, restore, check, report).

    Fails, without retry, when any database did not pass; the reasons are in the task log."""

    template_fields: Sequence[str] = ("source", "engine", "at")

    def __init__(self, *, source: str, engine: str = "auto", at: str | None = None, target: str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.engine, self.at, self.target = source, engine, at, target

    def execute(self, context: Any) -> dict[str, Any]:
        from datetime import datetime

        settings = RestoreproofHook().settings
        at = datetime.fromisoformat(self.at) if self.at else None
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

    def __init__(self, *, run_id_: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id_ = run_id_

    def execute(self, context: Any) -> dict[str, Any]:
        return orchestration.publish(RestoreproofHook().settings, self.run_id_)
