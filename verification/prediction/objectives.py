"""RTO and RPO of one verified database against its targets.

Measured recovery time runs from asking for a target to the database online; the integrity and
data checks are reported beside it and counted only when configured. The achieved RPO has two
parts: how far the restore point reached lies behind the newest backup, and the worst gap between
consecutive secured points (the data a failure at the worst moment would have lost).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from typing import Literal

from verification.model import RECOVERY_PHASES, BackupHistory, PhaseName, PhaseStatus, PhaseTiming
from verification.report_model import LogGap, RpoObjective, RtoObjective

TargetSource = Literal["configured", "default"]

CHECK_PHASES = (PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK)


def checks_seconds(phases: list[PhaseTiming]) -> float | None:
    measured = [p.seconds for p in phases if p.name in CHECK_PHASES and p.status is PhaseStatus.MEASURED]
    return sum(s or 0.0 for s in measured) if measured else None


def rto(target_seconds: float, recovery_seconds: float | None, phases: list[PhaseTiming],
        predicted_seconds: float | None, count_checks: bool, *, verified: bool = True,
        target_source: TargetSource = "configured") -> RtoObjective:
    """`met` only on evidence: the database passed (a corrupt restore recovered nothing), it came
    online, and every phase counted was measured."""
    checks = checks_seconds(phases)
    measured = recovery_seconds
    if measured is not None and count_checks:
        unmeasured = [p for p in phases if p.name in CHECK_PHASES and p.status is PhaseStatus.NOT_REACHED]
        measured = None if unmeasured else measured + (checks or 0.0)
    known = measured is not None and verified
    return RtoObjective(target_seconds=target_seconds, target_source=target_source,
                        measured_seconds=_round(measured), predicted_seconds=_round(predicted_seconds),
                        counts_checks=count_checks, checks_seconds=_round(checks),
                        margin_seconds=_round(target_seconds - measured) if measured is not None else None,
                        met=(measured <= target_seconds) if known and measured is not None else None,
                        recovery_phases=list(RECOVERY_PHASES))


def worst_gap(history: BackupHistory) -> tuple[float, LogGap] | None:
    points = sorted(history.points, key=lambda p: p.at)
    gaps = [(b.at - a.at, a, b) for a, b in pairwise(points)]
    if not gaps:
        return None
    gap, first, second = max(gaps, key=lambda g: g[0])
    return gap / timedelta(seconds=1), LogGap(from_=first.name, to=second.name, start=first.at, end=second.at)


def rpo(target_seconds: float, history: BackupHistory | None, achieved: datetime | None,
        now: datetime, *, target_source: TargetSource = "configured") -> RpoObjective:
    """`met` needs the restore point reached, the gaps and the newest backup's age; all three count:
    backups that stopped days ago lose days of data, however regular they were."""
    newest = history.newest if history else None
    behind = None
    if newest is not None and achieved is not None:
        behind = max(0.0, (newest.at - achieved) / timedelta(seconds=1))
    gap = worst_gap(history) if history else None
    age = (now - newest.at) / timedelta(seconds=1) if newest is not None else None
    parts = [behind, gap[0] if gap else None, age]
    known = all(v is not None for v in parts)
    return RpoObjective(target_seconds=target_seconds, target_source=target_source, restore_point=achieved,
                        newest_backup=newest.at if newest else None, newest_backup_name=newest.name if newest else None,
                        behind_newest_seconds=_round(behind), worst_log_gap_seconds=_round(gap[0]) if gap else None,
                        worst_log_gap=gap[1] if gap else None, newest_backup_age_seconds=_round(age),
                        stale=age is not None and age > target_seconds,
                        points=len(history.points) if history else 0,
                        basis=history.basis if history else "no backup times known",
                        met=(max(v for v in parts if v is not None) <= target_seconds) if known else None)


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
