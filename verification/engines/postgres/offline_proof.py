"""Prove from the server's own log that an offline backup restored to its own point.

pgBackRest backs up a stopped server with --no-online: the files are consistent by themselves, it
records no WAL range, and it restores them without recovery settings. The server then starts as it
was shut down, replaying nothing. So the point reached is proven when the log shows all of:

- the startup process found a clean shutdown (`database system was shut down at <time>`), no earlier
  than the backup's previous point could be and no later than the backup's start (the server was
  stopped while pgBackRest copied it);
- no redo ran (`redo starts at` would mean the folder was not cleanly shut down: crash recovery from
  whatever WAL the folder held, to a point nothing planned).
"""

from __future__ import annotations

from datetime import timedelta

from verification.engines.postgres.recovery_proof import RecoveryProof
from verification.engines.postgres.serverlog import RecoveryLog
from verification.model import RestorePlan

# The shutdown time is printed to the second (pg_control's time), the backup's start likewise.
CLOCK_ROUNDING = timedelta(seconds=1)


def prove_offline(log: RecoveryLog, plan: RestorePlan) -> RecoveryProof:
    proof = RecoveryProof()
    backup = plan.target_backup
    if backup is None or backup.online is not False:
        raise ValueError(f"not a plan of an offline backup: {plan.database}")
    if log.redo_start_lsn is not None:
        proof.errors.append(f"offline backup {backup.label}: the server replayed WAL on start (redo starts at "
                            "... in its log), so the folder was not cleanly shut down when it was backed up; the "
                            "point reached is not the backup's own and is not proven")
        return proof
    if log.shut_down_at is None:
        proof.errors.append(f"offline backup {backup.label}: the server's log does not say it found a clean "
                            "shutdown ('database system was shut down at'), so the point reached is unproven")
        return proof
    if log.shut_down_at > backup.start + CLOCK_ROUNDING:
        proof.errors.append(f"offline backup {backup.label}: the restored folder says its server was shut down at "
                            f"{log.shut_down_at.isoformat()}, after the backup started ({backup.start.isoformat()}); "
                            "the backup cannot hold that state, so the point reached is unproven")
        return proof
    proof.proofs.append(f"server log: \"database system was shut down at {log.shut_down_at.isoformat()}\" and no "
                        f"redo: offline backup {backup.label} restored to its own point, the clean shutdown before "
                        f"it started ({backup.start.isoformat()})")
    return proof
