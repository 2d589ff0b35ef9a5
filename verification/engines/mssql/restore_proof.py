"""Prove from SQL Server's own catalog which point a restore reached, instead of copying the plan.

After the chain is restored and recovered, msdb records every RESTORE it ran: a row in
`msdb.dbo.restorehistory` per restore (with `stop_at` for STOPAT) joined to the backup set it read
in `msdb.dbo.backupset` (its `first_lsn`, `last_lsn`, `backup_finish_date`). The newest row for the
restored database is the last backup applied (the final `RESTORE ... WITH RECOVERY` reads no
backup and adds no row). The claim "restored to latest" needs that set's LastLSN to be the planned
chain's last LastLSN; a point in time needs its `stop_at` to be the planned STOPAT.

Columns and types are those of the documented msdb schema (numeric(25,0) LSNs are converted to
text: they exceed what a float keeps exactly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from verification.engines.mssql import tsql
from verification.model import RestorePlan

STOPAT_TOLERANCE_S = 0.004


def last_restore_query(database: str) -> str:
    return ("SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id, CONVERT(varchar(40), bs.first_lsn) AS first_lsn, "
            "CONVERT(varchar(40), bs.last_lsn) AS last_lsn, CONVERT(varchar(23), rh.stop_at, 126) AS stop_at, "
            "CONVERT(varchar(23), bs.backup_finish_date, 126) AS backup_finish_date, bs.type AS backup_type "
            "FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id "
            f"WHERE rh.destination_database_name = {tsql.literal(database)} ORDER BY rh.restore_history_id DESC;")


@dataclass
class PointProof:
    achieved: datetime | None = None
    detail: str | None = None
    proofs: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    # msdb keeps the server's local time without a zone; restoreproof reads header times as UTC too.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def prove_point(plan: RestorePlan, rows: list[dict[str, str | None]]) -> PointProof:
    proof = PointProof()
    if not rows:
        proof.errors.append("msdb.dbo.restorehistory has no restore of the database: the point reached is unproven")
        return proof
    row = rows[0]
    last = plan.chain.backups[-1] if plan.chain.backups else None
    restored_lsn = row.get("last_lsn")
    if last is None or restored_lsn is None or not restored_lsn.isdigit():
        proof.errors.append(f"the server's restore history cannot be read (row: {row}): the point reached is unproven")
        return proof
    finish = _time(row.get("backup_finish_date"))
    stop_at = _time(row.get("stop_at"))
    source = (f"msdb restorehistory/backupset: the last backup restored ended at LSN {restored_lsn}"
              f" (finished {finish.isoformat() if finish else 'at an unknown time'})")
    if restored_lsn != last.last_lsn:
        proof.failures.append(f"the server restored up to LSN {restored_lsn}, not to the planned chain's end: "
                              f"{last.path} ends at LastLSN {last.last_lsn} ({source})")
        return proof
    if plan.stop_at is not None and last.type == "log":
        # msdb keeps STOPAT as a datetime (steps of 1/300 s) shown to the millisecond: within 4 ms is the same point.
        if stop_at is None or abs((stop_at - plan.stop_at).total_seconds()) > STOPAT_TOLERANCE_S:
            proof.failures.append(f"the server's last restore stopped at {row.get('stop_at') or 'no STOPAT'}, not at "
                                  f"the planned {plan.stop_at.isoformat()} ({source})")
            return proof
        proof.achieved, proof.detail = stop_at, f"STOPAT {row.get('stop_at')} recorded by msdb on the terminal log"
        proof.proofs.append(f"{source}, the planned terminal log's LastLSN, with STOPAT {row.get('stop_at')} as "
                            "planned")
        return proof
    proof.achieved, proof.detail = finish, "the end of the last backup restored, as msdb records it"
    proof.proofs.append(f"{source}, the planned chain's last LastLSN ({last.path})")
    return proof
