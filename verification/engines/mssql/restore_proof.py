"""Prove from SQL Server's own catalog which point a restore reached, instead of copying the plan.

After the chain is restored and recovered, msdb records every RESTORE it ran: a row in
`msdb.dbo.restorehistory` per restore (with `stop_at` for STOPAT) joined to the backup set it read
in `msdb.dbo.backupset` (its `first_lsn`, `last_lsn`, `backup_finish_date`). The newest row for the
restored database is the last backup applied (the final `RESTORE ... WITH RECOVERY` reads no
backup and adds no row). The claim "restored to latest" needs that set's LastLSN to be the planned
chain's last LastLSN; a point in time needs its `stop_at` to be the planned STOPAT.

msdb's `stop_at` is only the STOPAT restoreproof sent, echoed back: it is no proof that the point was
reached. SQL Server says so itself when it was not: a RESTORE LOG ... STOPAT whose records all precede
the point succeeds with message 4322 ("This backup set contains records that were logged before the
designated point in time. The database is being left in the restoring state ..."), and the recovery
that follows stops at the log's end, short of the point. So a point in time is proven by the terminal
RESTORE LOG's own messages: "RESTORE LOG successfully processed" and no 4322 (its errors, such as
4338 "The STOPAT clause specifies a point too early", never reach here: the statement failed). A log
that stops inside its records prints nothing more, so that is all the server says.

Columns and types are those of the documented msdb schema (numeric(25,0) LSNs are converted to
text: they exceed what a float keeps exactly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from verification.engines.mssql import tsql
from verification.engines.mssql.outputs import PROCESSED_TOTAL_RE, stopat_not_reached
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


def point_not_reached(at: datetime, log: str | None, terminal: str) -> str | None:
    """The failure, in SQL Server's words, when the terminal RESTORE LOG ... STOPAT on `log` ended before `at`."""
    refusal = stopat_not_reached(terminal)
    if refusal is None:
        return None
    return (f"SQL Server did not reach {at.isoformat()}: {log} ends before it, and recovery would stop at its end: "
            f"{refusal.plain}")


def _terminal_said(at: datetime, last: str | None, terminal: str | None, proof: PointProof) -> bool:
    """Whether the terminal RESTORE LOG ... STOPAT's own messages let the point stand (reasons added if not)."""
    if terminal is None:
        proof.errors.append(f"the messages of RESTORE LOG ... STOPAT on {last} were not kept: the point reached is "
                            "unproven")
        return False
    refusal = point_not_reached(at, last, terminal)
    if refusal is not None:
        proof.failures.append(refusal)
        return False
    if not any((m := PROCESSED_TOTAL_RE.match(line.strip())) and m["what"] == "RESTORE LOG"
               for line in terminal.splitlines()):
        proof.errors.append(f"RESTORE LOG ... STOPAT on {last} printed no 'RESTORE LOG successfully processed': the "
                            f"point reached is unproven ({terminal.strip()[-300:]})")
        return False
    return True


def prove_point(plan: RestorePlan, rows: list[dict[str, str | None]], terminal: str | None = None) -> PointProof:
    """The point reached; `terminal` is what the terminal RESTORE LOG ... STOPAT printed (a point in time only)."""
    proof = PointProof()
    # A point in time is stopped at inside the terminal log; a target at a data backup's end needs no STOPAT.
    at = plan.stop_at if plan.chain.backups and plan.chain.backups[-1].type == "log" else None
    # The server's own word that the point was not reached decides first, whatever msdb holds.
    if at is not None and not _terminal_said(at, plan.chain.backups[-1].name, terminal, proof):
        return proof
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
                              f"{last.name} ends at LastLSN {last.last_lsn} ({source})")
        return proof
    if at is not None:
        # msdb keeps STOPAT as a datetime (steps of 1/300 s) shown to the millisecond: within 4 ms is the same point.
        if stop_at is None or abs((stop_at - at).total_seconds()) > STOPAT_TOLERANCE_S:
            proof.failures.append(f"the server's last restore stopped at {row.get('stop_at') or 'no STOPAT'}, not at "
                                  f"the planned {at.isoformat()} ({source})")
            return proof
        proof.achieved = stop_at
        proof.detail = ("the requested point, confirmed by a successful RESTORE LOG ... STOPAT on the terminal log "
                        "without SQL Server's message 4322")
        proof.proofs.append(f"the requested point {at.isoformat()}, confirmed by a successful RESTORE LOG "
                            f"... WITH STOPAT on {last.name} (RESTORE LOG successfully processed) without SQL Server's "
                            f"message 4322 (the log ends before the point); {source}, the planned terminal log's "
                            f"LastLSN; msdb's stop_at {row.get('stop_at')} is that STOPAT as sent, not a measure of "
                            "the point reached")
        return proof
    proof.achieved, proof.detail = finish, "the end of the last backup restored, as msdb records it"
    proof.proofs.append(f"{source}, the planned chain's last LastLSN ({last.name})")
    return proof
