"""The interface every engine implements, and what a restore hands back to the pipeline."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from verification.config import Settings
from verification.model import (
    CheckResult,
    OverriddenSetting,
    PhaseName,
    PhaseStatus,
    PhaseTiming,
    PhaseWork,
    RestorePlan,
    UnreadableFile,
    UnreadableKind,
)
from verification.redaction import Redactor
from verification.restore_points import PointChoice
from verification.sources.base import Source
from verification.targets.base import Target, TargetProvider


@dataclass
class RestoreOutcome:
    phases: list[PhaseTiming] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    achieved: datetime | None = None
    achieved_detail: str | None = None
    # The backups did not restore or are not intact: verdict "failed".
    failures: list[str] = field(default_factory=list)
    # restoreproof could not finish (a timeout, a tool that would not run): verdict "error".
    errors: list[str] = field(default_factory=list)
    # The server came online with the restored data.
    online: bool = False
    # What the server's own words proved about the restore (the end of redo, the segments replayed,
    # the stop point it reported), quoted in a "passed" verdict's reasons.
    proofs: list[str] = field(default_factory=list)
    # Set by the pipeline where the target reads a staged copy of object storage holding only the
    # plan's files (what it is, e.g. "1,028 objects staged from s3://bucket/prefix"): a check that
    # covers "the repository" then covered that copy, and says so.
    staged_copy: str | None = None
    # Each resource the target ran out of (memory, its data volume's disk), with the limit and the tools'
    # words: what the restore and the checks of the restored server met is then no verdict on the backups.
    exhausted: list[str] = field(default_factory=list)
    # Settings of the backup the restored server was not allowed to keep, with the backup's values.
    overridden_settings: list[OverriddenSetting] = field(default_factory=list)


__all__ = ["DataAccess", "DataChecks", "Engine", "Evidence", "RestoreOutcome", "SourcePlan", "UnreadableFile"]


@dataclass(frozen=True)
class DataAccess:
    """How restoreproof's own process reaches the restored server for the data checks, as the engine
    made it: the target keeps no way out (PostgreSQL: a Unix socket in a host folder mounted into
    the target; SQL Server: a loopback relay into a container with no network)."""

    # A SQLAlchemy URL per database of the restored server.
    url: Callable[[str], str]
    # The restored server's own databases whose tables are checked (system databases left out).
    databases: tuple[str, ...]
    # Where a table named without a database is looked for; None when the server holds several
    # and none is the verified database's own (then an expectation must name its database).
    main_database: str | None
    # The restore point as the server proved it (its last replayed transaction), and when the
    # newest backup of the chain ended: freshness is measured against both.
    restore_point: datetime | None
    backup_end: datetime | None
    # Values that must never be shown (a password in a URL): scrubbed from every message.
    secrets: tuple[str, ...] = ()


def data_checks_off() -> PhaseTiming:
    """The data_checks phase of a verification that was not given any (checks.enabled: false)."""
    return PhaseTiming.absent(PhaseName.DATA_CHECKS, "data checks are turned off (checks.enabled: false)")


def data_checks_work(settings: Settings, database: str) -> PhaseWork | None:
    """What the data_checks phase will do, for prediction (None when checks.enabled is false)."""
    if not settings.checks.enabled:
        return None
    suites = len(settings.checks.expectations.get(database, [])) + len(settings.checks.sql)
    return PhaseWork(PhaseName.DATA_CHECKS, note=f"Great Expectations: {suites} configured suites, "
                     "baselines and freshness of every table")


def run_data_checks(checks: DataChecks, access: DataAccess, evidence: Evidence, outcome: RestoreOutcome,
                    started: float, **details: object) -> None:
    """Run the data checks and keep them with the phase data_checks, timed from `started` (monotonic).

    The target's own secrets (a password in its URL) are masked in everything the checks write into
    the evidence and in every check they return, whatever the checks did themselves."""
    evidence.hide(access.secrets)
    found = checks(access, evidence)
    redact = Redactor.of(access.secrets)
    for check in found:
        redact.in_place(check, "summary", "findings", "details", "evidence")
    outcome.checks += found
    outcome.phases.append(PhaseTiming(PhaseName.DATA_CHECKS, PhaseStatus.MEASURED, seconds=time.monotonic() - started,
                                      details={"checks": len(found), **details}))


class DataChecks(Protocol):
    """The data checks of one restored database, run by the engine once the server is online and
    before the integrity checks; never raises for what the data or the checks' tools did (those
    are results), so the engine's own steps still run after it."""

    def __call__(self, access: DataAccess, evidence: Evidence) -> list[CheckResult]: ...


@dataclass
class SourcePlan:
    plans: list[RestorePlan]
    unreadable: list[UnreadableFile] = field(default_factory=list)
    # What the engine found in the source that the configuration does not fit, said in the run's
    # report: e.g. a passphrase given for a repository that is not encrypted.
    warnings: list[str] = field(default_factory=list)

    @property
    def corrupt(self) -> list[UnreadableFile]:
        return [u for u in self.unreadable if u.kind is UnreadableKind.CORRUPT]


class Evidence:
    """Writes a database's raw tool outputs into the run's evidence folder."""

    # Files copied in as text, and so masked; anything else (a site's images) is copied as it is.
    TEXT_SUFFIXES = (".html", ".json", ".txt", ".js", ".css", ".svg", ".xml", ".md", ".csv")

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, str] = {}
        self._hidden = Redactor()

    def hide(self, secrets: Iterable[str]) -> None:
        """Values known only at run time (a target's password) masked in everything written from now on."""
        self._hidden = Redactor.of([*self._hidden.secrets, *secrets])

    def mask(self, text: str) -> str:
        return self._hidden(text)

    def write(self, name: str, text: str) -> str:
        (self.folder / name).parent.mkdir(parents=True, exist_ok=True)
        (self.folder / name).write_text(self.mask(text), encoding="utf-8")
        relative = f"{self.folder.name}/{name}"
        self.files[name] = relative
        return relative

    def copy_tree(self, source: Path, folder: str) -> None:
        """What a tool wrote elsewhere (a report site), copied into `folder` of the evidence, masked."""
        for path in sorted(source.rglob("*")):
            if not path.is_file():
                continue
            target = self.folder / folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix.lower() in self.TEXT_SUFFIXES:
                target.write_text(self.mask(path.read_text(encoding="utf-8", errors="replace")), encoding="utf-8")
            else:
                shutil.copyfile(path, target)


class Engine(Protocol):
    name: str
    # How reports and errors name the engine's backups ("pgBackRest (PostgreSQL)", "SQL Server").
    display_name: str
    # Whether prediction may time a throw-away start of its target (cheap for PostgreSQL; a SQL
    # Server start costs tens of seconds, so its documented default stands in).
    probe_container_start: bool

    def detect(self, source: Source) -> bool:
        """Does the source look like this engine's backups?"""
        ...

    def check_settings(self, source: Source, target: str) -> None:
        """Refuse what the configuration asks that this engine cannot do with this source and this kind
        of target (auto, docker, local, offline): raise ConfigError naming the setting. Called before a
        run is recorded or anything started, so a refusal leaves no trace (exit 2)."""
        ...

    def plan(self, source: Source, at: datetime | None, point: PointChoice | None = None) -> SourcePlan:
        """One plan per database found in the source; raises SourceError when it is not readable.

        With `point` (and no `at`), each database is planned to its own chosen restore point.
        """
        ...

    def check_backup_files(self, plan: RestorePlan, source: Source, evidence: Evidence) -> list[CheckResult]:
        """The checks of the chain's backup files that need no server (SQL Server's page checksums),
        run before any restore and also when none can run. Each is of kind `backup_files`: it can fail
        the database, never pass it. A file it could not read is named in an error, never skipped."""
        ...

    def restore_and_check(self, plan: RestorePlan, target: Target, evidence: Evidence,
                          outcome: RestoreOutcome | None = None,
                          data_checks: DataChecks | None = None) -> RestoreOutcome:
        """Restore the planned chain into the target, bring it online, run `data_checks` (timed as the
        phase data_checks; without them the phase is said absent), then the integrity checks.

        Fills `outcome` (a new one when None) as it goes and returns it: when it raises, what it
        found until then (a failure proven before the target died) is still in the caller's hands."""
        ...

    def target_provider(self, kind: str, plans: list[RestorePlan], source: Source | None = None) -> TargetProvider:
        """The provider of the disposable servers these plans restore into (`kind`: auto, docker, local);
        `source`, the one they were planned from (a repository in S3 may be read by the target itself);
        raises TargetError (or RestoreproofError for a kind the engine cannot use)."""
        ...

    def check_target(self, kind: str) -> None:
        """Raise TargetError when no target of this kind can be had now (for a scheduler's retry)."""
        ...

    def phase_work(self, plan: RestorePlan) -> list[PhaseWork]:
        """What each phase of restoring this plan will move, from the plan alone, for prediction."""
        ...

    def tool_versions(self, target: Target) -> dict[str, str]:
        """The versions of the tools that restored and checked, read inside the target, for the evidence."""
        ...

    def product_versions(self, tool_versions: dict[str, str]) -> dict[str, str]:
        """Product -> version (e.g. the server's and the backup tool's), read from tool_versions' words,
        for the report beside what wrote the backup; a tool whose words are not read is left out."""
        ...
