"""Domain types shared by every engine, target, store and report.

Engines translate what their tools say into these types; everything downstream (verdict, store,
reports) only ever sees these. Times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class BackupType(StrEnum):
    FULL = "full"
    DIFF = "diff"
    INCR = "incr"
    LOG = "log"


class ChainStatus(StrEnum):
    COMPLETE = "complete"
    BROKEN = "broken"


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


class PhaseStatus(StrEnum):
    MEASURED = "measured"
    # The engine has no such phase (file zeroing on PostgreSQL): recorded, never as zero seconds.
    ABSENT = "absent"
    # The phase should have happened but did not (an earlier step failed).
    NOT_REACHED = "not_reached"


@dataclass(frozen=True)
class BackupSet:
    """One backup as the repository describes it (a pgBackRest backup, a SQL Server backup set)."""

    database: str
    label: str
    type: BackupType
    start: datetime
    finish: datetime
    size_bytes: int | None = None
    repo_size_bytes: int | None = None
    # Labels of the backups this one needs (its full, its differential base, ...), oldest first.
    references: tuple[str, ...] = ()
    start_wal: str | None = None
    stop_wal: str | None = None
    start_lsn: str | None = None
    stop_lsn: str | None = None
    path: str | None = None
    error: bool = False
    # SQL Server: LSNs as decimal strings (they exceed 2**53), and this file's family as "k/n".
    first_lsn: str | None = None
    last_lsn: str | None = None
    family: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Problem:
    """Something that stops a chain from restoring, named precisely."""

    code: str
    message: str
    files: tuple[str, ...] = ()
    expected_lsn: str | None = None
    found_lsn: str | None = None


@dataclass(frozen=True)
class RuleCheck:
    """One chain rule that was checked, with its outcome, kept for the evidence."""

    rule: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class WalRange:
    timeline: int
    first: str
    last: str
    segments: int
    # Why the range ends where it does ("end of archive", "start of the next backup", ...).
    bound: str


@dataclass
class Chain:
    status: ChainStatus
    backups: list[BackupSet]
    problems: list[Problem] = field(default_factory=list)
    rules: list[RuleCheck] = field(default_factory=list)
    wal: WalRange | None = None


@dataclass(frozen=True)
class SecuredPoint:
    """A moment up to which a backup secured the data: a backup's end, a log backup, an archived WAL segment."""

    name: str
    at: datetime


@dataclass
class BackupHistory:
    """What a database's backups secure over time, for the achieved RPO."""

    points: list[SecuredPoint] = field(default_factory=list)
    # Where the times come from ("backup finish times and log backups", "WAL archive file times", ...).
    basis: str = ""

    @property
    def newest(self) -> SecuredPoint | None:
        return max(self.points, key=lambda p: p.at) if self.points else None


@dataclass
class RestorePlan:
    """What to restore for one database: the backup, the chain it needs, and the point to reach."""

    engine: str
    database: str
    chain: Chain
    # None means "latest": the end of the available log/WAL.
    stop_at: datetime | None = None
    target_backup: BackupSet | None = None
    # Source paths of every file the restore reads (hashed for the evidence bundle).
    files: list[str] = field(default_factory=list)
    history: BackupHistory | None = None


@dataclass
class PhaseTiming:
    name: str
    status: PhaseStatus
    seconds: float | None = None
    bytes: int | None = None
    started_at: datetime | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def absent(cls, name: str, why: str) -> PhaseTiming:
        return cls(name=name, status=PhaseStatus.ABSENT, details={"why": why})

    @classmethod
    def not_reached(cls, name: str, why: str) -> PhaseTiming:
        return cls(name=name, status=PhaseStatus.NOT_REACHED, details={"why": why})


@dataclass
class CheckResult:
    name: str
    status: CheckStatus
    summary: str
    # The findings that make a check fail, one line each, in the tool's own words.
    findings: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    # File name (relative to the run's evidence folder) holding the tool's full output.
    evidence: str | None = None
    # A required check that did not pass blocks a "passed" verdict.
    required: bool = True


@dataclass
class RestorePoint:
    target: str  # "latest" or an ISO 8601 time
    achieved: datetime | None = None
    detail: str | None = None


@dataclass
class DatabaseResult:
    database: str
    verdict: Verdict
    reasons: list[str]
    plan: RestorePlan
    restore_point: RestorePoint
    phases: list[PhaseTiming] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    target: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    # verification.prediction.phase_model.Prediction, made before the restore (kept untyped here
    # so the domain types do not depend on the model).
    prediction: Any = None

    @property
    def recovery_seconds(self) -> float | None:
        """Seconds from asking for a target to the database online (checks not counted)."""
        phases = [p for p in self.phases if p.name in RECOVERY_PHASES]
        if not phases or any(p.status is PhaseStatus.NOT_REACHED for p in phases):
            return None
        return sum(p.seconds or 0.0 for p in phases if p.status is PhaseStatus.MEASURED)


# Phases that together take a database from "asked for" to "online"; checks come after.
RECOVERY_PHASES = ("provision", "zeroing", "transfer", "log_restore", "server_start", "redo", "recovery_end")


@dataclass
class RunResult:
    run_id: str
    engine: str
    source: str
    started_at: datetime
    finished_at: datetime | None = None
    target_kind: str | None = None
    databases: list[DatabaseResult] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=dict)
    # Files that look like backups but could not be read: (path, kind, reason); kind "corrupt"
    # (a damaged backup: the run fails) or "needs-server" (readable only inside a target).
    unreadable: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        """The run's overall verdict, never passed when empty.

        `failed` (a backup is not restorable) outranks `error` (restoreproof could not finish one):
        a proven bad backup must not hide behind an infrastructure problem elsewhere in the run.
        """
        return overall_verdict([d.verdict for d in self.databases],
                               any(kind == "corrupt" for _, kind, _ in self.unreadable))


def overall_verdict(verdicts: list[str], corrupt_files: bool, unverified: bool = False) -> Verdict:
    """A run's verdict from its databases': failed, else error (also when empty, or when a database
    that was due was never verified), else passed."""
    if Verdict.FAILED in verdicts or corrupt_files:
        return Verdict.FAILED
    if not verdicts or Verdict.ERROR in verdicts or unverified:
        return Verdict.ERROR
    return Verdict.PASSED
