"""A point restoreproof chose on a quiet database, proven as the archive's end.

PostgreSQL stops at a time only on a transaction (commit or abort) record after it. When the
archive holds none after the moment M, it replays all the WAL it can get and refuses to end
recovery ("recovery ended before configured recovery target was reached"). Those words prove the
archive holds no transaction after M, so the database's state at M is its state at the archive's
end. For a point restoreproof chose (`--point random`), recovery then goes on to the end on the same
restored data (no second restore) and is proven as "latest" is: every segment restored, the archive's
end read to the record.

Sound only where the archive covers M: M not after the newest backup's end (an online backup waits
for its WAL to be archived, so every moment up to that end is in the archive), and the WAL from the
restored backup to the archive's end held whole. Otherwise, and for a point asked for (`--at`), the
refusal stays an error: an operator who asked for M is told the archive cannot stop there.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from verification.engines.postgres.chain import on_history, wal_to_end
from verification.engines.postgres.repository import Stanza
from verification.engines.postgres.serverlog import NO_RECORD_AFTER_TARGET, RecoveryLog
from verification.engines.postgres.wal import format_lsn, parse_segment
from verification.model import ChosenPoint, RestorePlan


def chosen_point(stanza: Stanza, plan: RestorePlan, strategy: str, segment_size: int,
                 timeline: int | None = None) -> ChosenPoint | None:
    """What a plan to a point restoreproof chose needs to go on to the archive's end (None: a plan with
    no backup to restore)."""
    target = plan.target_backup
    if target is None:
        return None
    wal, gap = wal_to_end(stanza, target, segment_size, timeline)
    # Only a backup of the same cluster (db-id) says anything of this archive: after a stanza upgrade,
    # another cluster's WAL runs on timeline 1 again, its segment numbers from the start.
    backups = [b for b in stanza.backups if not b.error and b.stop_wal and b.db_id == target.db_id
               and (wal is None or on_history(stanza, b, wal.timeline))]
    newest = max(backups, key=lambda b: (b.finish, b.label), default=None)
    if wal is not None and newest is not None and newest.stop_wal is not None and (
            parse_segment(newest.stop_wal, segment_size).number > parse_segment(wal.last, segment_size).number):
        gap = (f"the archive's WAL from backup {target.label} ends at {wal.last}, before backup {newest.label}'s "
               f"stop segment {newest.stop_wal}")
        wal = None
    return ChosenPoint(strategy, newest.label if newest else None, newest.finish if newest else None, wal, gap)


def why_not_to_end(plan: RestorePlan) -> str | None:
    """None when a restore to the plan's point, refused for want of a transaction after it, may go on to
    the archive's end and be proven there; else why not."""
    at, chosen = plan.stop_at, plan.chosen_point
    if at is None or plan.consistent_point:
        return "no point in time was planned"
    if chosen is None:
        return f"{at.isoformat()} was asked for, not chosen by restoreproof"
    if chosen.newest_backup_end is None:
        return "no backup on the history restored records its end, so the archive is not shown to cover the point"
    if at > chosen.newest_backup_end:
        return (f"{at.isoformat()} is after the newest backup's end ({chosen.newest_backup}, "
                f"{chosen.newest_backup_end.isoformat()}): the archive is not shown to cover it, and a transaction "
                "after it may never have been archived")
    if chosen.wal_to_end is None:
        return f"the archive does not hold the WAL to its end whole: {chosen.gap or 'not known'}"
    return None


def to_latest(plan: RestorePlan) -> RestorePlan:
    """The plan as a restore to latest from the same backup sees it: no point, the WAL to the archive's end."""
    assert plan.chosen_point is not None and plan.chosen_point.wal_to_end is not None
    return replace(plan, stop_at=None, consistent_point=False,
                   chain=replace(plan.chain, wal=plan.chosen_point.wal_to_end))


def continued(first: RecoveryLog, second: RecoveryLog) -> RecoveryLog:
    """The two starts as one recovery: the second's end, and every segment either restored (the second
    resumes from its last restartpoint, so it fetches only the later ones again)."""
    return replace(second, segments_restored=list(dict.fromkeys(first.segments_restored + second.segments_restored)),
                   early_end=first.early_end + second.early_end,
                   archive_get_errors=list(dict.fromkeys(first.archive_get_errors + second.archive_get_errors)))


def replay_gap(first: RecoveryLog, second: RecoveryLog) -> str | None:
    """Why the two starts are not shown to be one replay (an error), or None: the second must begin redo
    at or before where the first ended it."""
    if first.redo_done_lsn is None:
        return ("the first start's log does not say where redo ended (no 'redo done at' line), so the replay "
                "continued to the archive's end is not shown to follow it")
    if second.redo_start_lsn is None:
        return ("recovery continued to the archive's end, but its log does not say where redo began (no 'redo "
                "starts at' line), so it is not shown to follow the first start's replay")
    if second.redo_start_lsn > first.redo_done_lsn:
        return (f"recovery continued to the archive's end began redo at {format_lsn(second.redo_start_lsn)}, after "
                f"the first start's redo done at {format_lsn(first.redo_done_lsn)}: the WAL between is not shown "
                "replayed")
    return None


def explained(plan: RestorePlan) -> str:
    """What happened, for the restore point's detail and the reasons."""
    at = plan.stop_at.isoformat() if plan.stop_at else "the point"
    chosen = plan.chosen_point
    strategy = chosen.strategy if chosen is not None else "point"
    return (f'{strategy}: {at}; the archive holds no transaction after {at} (server: "{NO_RECORD_AFTER_TARGET}"), '
            f"so the state at {at} is the archive's end: recovery continued to the end and is proven as latest")


def achieved_detail(plan: RestorePlan, last: datetime | None) -> str:
    said = (f"last transaction replayed {last.isoformat()}" if last is not None else
            "no transaction replayed after the backup's start: its time is the point's")
    return f"{explained(plan)} ({said})"
