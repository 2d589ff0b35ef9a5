"""What each phase of a SQL Server verification will move, from the plan alone (before any restore)."""

from __future__ import annotations

from verification.model import BackupType, PhaseName, PhaseWork, RestorePlan


def phase_work(plan: RestorePlan) -> list[PhaseWork]:
    backups = plan.chain.backups
    data = sum(b.size_bytes or 0 for b in backups if b.type is not BackupType.LOG)
    logs = sum(b.size_bytes or 0 for b in backups if b.type is BackupType.LOG)
    full = sum(b.size_bytes or 0 for b in backups if b.type is BackupType.FULL)
    works = [
        PhaseWork(PhaseName.PROVISION),
        PhaseWork(PhaseName.TRANSFER, data, data, note="full and differential backup files read and written"),
    ]
    if logs:
        works.append(PhaseWork(PhaseName.LOG_RESTORE, logs, logs, note="log backup files read"))
    works += [PhaseWork(PhaseName.REDO, logs or None, logs or None, note="log bytes to replay"),
              PhaseWork(PhaseName.RECOVERY_END),
              PhaseWork(PhaseName.INTEGRITY_CHECK, full, full, note="the database's bytes checked")]
    return works
