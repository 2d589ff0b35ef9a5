"""What each phase of a PostgreSQL verification will move, from the plan alone (before any restore)."""

from __future__ import annotations

from verification.config import Settings
from verification.engines.base import data_checks_work
from verification.model import BackupType, PhaseName, PhaseWork, RestorePlan

COMPRESSED_SUFFIXES = (".gz", ".lz4", ".zst", ".bz2")


def phase_work(plan: RestorePlan, settings: Settings) -> list[PhaseWork]:
    pg = settings.postgres
    target = plan.target_backup
    size = target.size_bytes if target else None
    compressed = any(f.endswith(COMPRESSED_SUFFIXES) for f in plan.files if f.startswith("backup/"))
    wal = plan.chain.wal
    wal_bytes = wal.segments * (wal.segment_bytes or pg.wal_segment_size) if wal else None
    full = next((b for b in plan.chain.backups if b.type is BackupType.FULL and b.path), None)
    files = sum(1 for f in plan.files if full is not None and f.startswith(f"{full.path}/pg_data/")) or None
    works = [
        PhaseWork(PhaseName.PROVISION),
        PhaseWork(PhaseName.TRANSFER, target.repo_size_bytes if target else None, size, compressed,
                  pg.restore_process_max, files,
                  "the backup set's bytes in the repository read, the database's bytes written"),
        PhaseWork(PhaseName.SERVER_START),
        PhaseWork(PhaseName.REDO, wal_bytes, wal_bytes,
                  note=f"{wal.segments if wal else 0} WAL segments to replay (at most)"),
        PhaseWork(PhaseName.RECOVERY_END),
        PhaseWork(PhaseName.INTEGRITY_CHECK, size, size, note="the database's bytes checked"),
    ]
    if (checks := data_checks_work(settings, plan.database)) is not None:
        works.append(checks)
    if pg.repository_verify:
        works.append(PhaseWork(PhaseName.REPOSITORY_VERIFY))
    return works
