"""What each phase of a SQL Server verification will move, from the plan alone (before any restore)."""

from __future__ import annotations

from verification.config import Settings
from verification.engines.base import data_checks_work
from verification.model import BackupFile, BackupType, PhaseName, PhaseWork, RestorePlan


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def zeroing(files: tuple[BackupFile, ...]) -> PhaseWork | None:
    """The classic model's re-initialisation terms: RESTORE creates every database file at its allocated
    size (FILELISTONLY's Size, from the full's header) and zeroes it before the copy: log files always,
    data files unless instant file initialisation applies. All are counted; the note names them."""
    if not files:
        return None
    logs = [f for f in files if f.type == "L"]
    data = [f for f in files if f.type != "L"]
    total = sum(f.size_bytes for f in files)

    def listed(group: list[BackupFile]) -> str:
        return ", ".join(f"{f.logical_name} ({_mib(f.size_bytes)})" for f in group)

    note = (f"allocated database files created and zeroed before the copy, {_mib(total)} in all: "
            + (f"log {listed(logs)}, always zeroed" if logs else "no log file listed")
            + (f"; data {listed(data)}, zeroed unless instant file initialisation applies" if data else ""))
    return PhaseWork(PhaseName.ZEROING, None, total, files=len(files), note=note)


def phase_work(plan: RestorePlan, settings: Settings) -> list[PhaseWork]:
    backups = plan.chain.backups
    data = sum(b.size_bytes or 0 for b in backups if b.type is not BackupType.LOG)
    logs = sum(b.size_bytes or 0 for b in backups if b.type is BackupType.LOG)
    full = sum(b.size_bytes or 0 for b in backups if b.type is BackupType.FULL)
    works = [PhaseWork(PhaseName.PROVISION)]
    # The containers are prepared when the full is restored, at the sizes its header lists.
    first_full = next((b for b in backups if b.type is BackupType.FULL), None)
    if first_full is not None and (zero := zeroing(first_full.database_files)) is not None:
        works.append(zero)
    works.append(PhaseWork(PhaseName.TRANSFER, data, data, note="full and differential backup files read and written"))
    if logs:
        works.append(PhaseWork(PhaseName.LOG_RESTORE, logs, logs, note="log backup files read"))
    works += [PhaseWork(PhaseName.REDO, logs or None, logs or None, note="log bytes to replay"),
              PhaseWork(PhaseName.RECOVERY_END)]
    # The data checks run once the database is online, before CHECKDB.
    if (checks := data_checks_work(settings, plan.database)) is not None:
        works.append(checks)
    works.append(PhaseWork(PhaseName.INTEGRITY_CHECK, full, full, note="the database's bytes checked"))
    return works
