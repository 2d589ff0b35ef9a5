"""Restored databases for the data checks, as SQLite files: Great Expectations' SQL data source and
SQLAlchemy's inspector read them as they read a restored server (its one schema is `main`)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from verification.checks.baseline import BaselineBasis, TableBaseline
from verification.checks.runner import DataCheckRunner
from verification.checks.suites import Suite, load_suites
from verification.config import ChecksSettings, Settings
from verification.engines.base import DataAccess, Evidence
from verification.model import CheckResult

# The restore point the server proved, and when the newest backup ended.
POINT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
BACKUP_END = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)


def sqlite_file(path: Path, script: str) -> Path:
    with sqlite3.connect(path) as connection:
        connection.executescript(script)
    connection.close()
    return path


def access(files: dict[str, Path], main: str | None = "shop", point: datetime | None = POINT,
           backup_end: datetime | None = BACKUP_END, secrets: tuple[str, ...] = ()) -> DataAccess:
    """The restored server as an engine gives it: one SQLite file per database."""
    return DataAccess(url=lambda database: f"sqlite:///{files[database]}", databases=tuple(files),
                      main_database=main, restore_point=point, backup_end=backup_end, secrets=secrets)


def run(folder: Path, checks: ChecksSettings, reach: DataAccess, previous: dict[str, TableBaseline] | None = None,
        rpo_seconds: float = 3600.0, suites: list[Suite] | None = None,
        basis: BaselineBasis | None = None) -> tuple[dict[str, CheckResult], Evidence]:
    """Every check the runner returns, by name (in its order), and the evidence it wrote."""
    settings = Settings(state_dir=folder / "state", checks=checks)
    evidence = Evidence(folder / "ev")
    runner = DataCheckRunner(settings, "shop", load_suites(checks, "shop") if suites is None else suites,
                             previous or {}, rpo_seconds, basis)
    results = runner(reach, evidence)
    named = {result.name: result for result in results}
    assert len(named) == len(results), [r.name for r in results]
    return named, evidence


def checks(**sections: Any) -> ChecksSettings:
    return ChecksSettings.model_validate(sections)
