"""Prove from the server's own log that a restore stopped at its backup's consistent point.

A backup's own point (`recovery_target = 'immediate'`) is where replaying its WAL first makes the
database consistent: the end of the backup, pgBackRest's backup-lsn-stop. It is reached whether or
not anything was written after the backup, so it tests an older backup on a quiet database as well
as on a busy one (a time target needs a transaction after it to stop at). Proven when the log shows
`consistent recovery state reached at <LSN>` at the backup's stop LSN and `recovery stopping after
reaching consistency`. (`redo done at` names the start of the record after the backup's end, which is
that LSN only when the end is not on a page boundary: not compared.)
"""

from __future__ import annotations

from verification.engines.postgres.recovery_proof import RecoveryProof
from verification.engines.postgres.serverlog import CONSISTENCY_STOP, RecoveryLog
from verification.engines.postgres.wal import format_lsn, parse_lsn
from verification.model import RestorePlan


def prove_consistent_point(log: RecoveryLog, plan: RestorePlan) -> RecoveryProof:
    proof = RecoveryProof()
    backup = plan.target_backup
    if backup is None or not plan.consistent_point:
        raise ValueError(f"not a plan to a backup's consistent point: {plan.database}")
    if backup.stop_lsn is None:
        proof.errors.append(f"backup {backup.label} records no stop LSN (backup-lsn-stop), so its consistent point "
                            "cannot be checked")
        return proof
    stop = parse_lsn(backup.stop_lsn)
    if log.stop_detail != CONSISTENCY_STOP:
        proof.failures.append(f"recovery to backup {backup.label}'s consistent point: the server never said "
                              f"\"{CONSISTENCY_STOP}\"")
    if log.consistent_lsn is None:
        proof.failures.append(f"recovery to backup {backup.label}'s consistent point: the server never said where it "
                              "reached a consistent state")
    elif log.consistent_lsn != stop:
        proof.failures.append(f"the server reached a consistent state at {format_lsn(log.consistent_lsn)}, not at "
                              f"backup {backup.label}'s end ({backup.stop_lsn}, backup-lsn-stop)")
    if not proof.failures:
        proof.proofs.append(f"server log: \"consistent recovery state reached at {format_lsn(stop)}\", backup "
                            f"{backup.label}'s end (backup-lsn-stop), and \"{CONSISTENCY_STOP}\"")
    return proof
