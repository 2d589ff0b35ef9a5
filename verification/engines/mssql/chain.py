"""Choose and prove a SQL Server restore chain from offline headers.

The rules (docs: SQL Server reference, section 2), each kept with its outcome:
- full: the newest complete full (highest LastLSN) finished before the target;
- differential: finished before the target and based on that full (DatabaseBackupLSN equals the
  full's CheckpointLSN: the base is checked, not assumed); the newest such;
- log base: the differential's LastLSN, else the full's;
- logs: not empty (FirstLSN != LastLSN), LastLSN beyond the base, in (LastLSN, FirstLSN) order;
  each must begin at or before the LSN reached so far (else SQL Server raises 4305);
  logs taken during a full are accepted by LSN, whatever their DatabaseBackupLSN;
- point in time: the first log that starts at or after the target is the terminal one
  (RESTORE LOG ... WITH STOPAT); none means the target cannot be reached. A log backup holds the
  records logged from the previous log backup up to the moment it began reading the log, near its
  BackupStartDate; its BackupFinishDate is only when it finished writing. A log that started
  before the target but finished after it can therefore end before the target: chosen by its
  finish, STOPAT would run past its end, SQL Server would leave the database restoring with message
  4322 and recovery would stop at the log's end, short of the target (the reference's "first log
  whose finish is at or after the target" is dbatools' rule, and this is where it falls short);
- every set's families present (a striped set needs all its files).

Not checked offline: recovery forks (FirstRecoveryForkID/RecoveryForkID are not in the headers read
here); SQL Server itself refuses a log from another fork when it is restored.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from verification.engines.mssql.catalog import DatabaseCatalog, MediaSet
from verification.model import (
    BackupHistory,
    BackupSet,
    BackupType,
    Chain,
    ChainStatus,
    Problem,
    RestorePlan,
    RuleCheck,
    SecuredPoint,
)

MSG_4305 = ("The log in this backup set begins at LSN {found}, which is too recent to apply to the database. "
            "An earlier log backup that includes LSN {expected} can be restored.")
MSG_4326 = ("The log in this backup set terminates at LSN {found}, which is too early to apply to the database. "
            "A more recent log backup that includes LSN {expected} can be restored.")


def backup_sets(media: MediaSet) -> list[BackupSet]:
    """One BackupSet per file of the media set, in family order."""
    h = media.header
    return [
        BackupSet(
            database=h.database_name, label=f"{header.path}", type=BackupType(h.backup_type),
            start=media.start, finish=media.finish, size_bytes=header.size_bytes, path=header.path,
            first_lsn=str(h.first_lsn), last_lsn=str(h.last_lsn),
            family=f"{header.family_number}/{header.family_count}",
            checkpoint_lsn=str(h.checkpoint_lsn), database_backup_lsn=str(h.database_backup_lsn),
            media_set_guid=h.media_set_guid, database_version=h.database_version,
            software_version=f"{h.software_version[0]}.{h.software_version[1]}", server=h.server_name,
            has_checksums=h.has_checksums,
        )
        for header in (media.families[n] for n in sorted(media.families))
    ]


def backup_history(db: DatabaseCatalog) -> BackupHistory:
    """Each complete backup set's end: what a failure after it could fall back to."""
    points = sorted((SecuredPoint(f"{m.header.backup_type} {m.files[0]}", m.finish) for m in db.sets if m.complete),
                    key=lambda p: p.at)
    return BackupHistory(points, "backup finish times (full, differential and log backups) from the backup headers")


def _files(*sets: MediaSet) -> tuple[str, ...]:
    return tuple(path for media in sets for path in media.files)


def _listed(items: Sequence[str] | Sequence[int]) -> str:
    """Files or family numbers as every message names them."""
    return ", ".join(str(item) for item in items)


def plan(db: DatabaseCatalog, name: str, at: datetime | None) -> RestorePlan:
    rules: list[RuleCheck] = []
    problems: list[Problem] = []
    defects: list[Problem] = []
    chosen: list[MediaSet] = []

    def done() -> RestorePlan:
        # Broken exactly when a problem was recorded: no path decides the status apart from its reason.
        final = ChainStatus.COMPLETE if not problems else ChainStatus.BROKEN
        backups = [b for media in chosen for b in backup_sets(media)]
        return RestorePlan("mssql", name, Chain(final, backups, problems, rules, defects=defects), at,
                           backups[0] if backups else None, files=list(_files(*chosen)),
                           history=backup_history(db))

    for media in db.sets:
        if media.copies:
            # Said, so that an auditor knows which of two identical-looking files was restored.
            rules.append(RuleCheck("copies-not-restored", True,
                                   f"{_listed(media.copies)}: another copy of {media.describe()}; "
                                   f"only {_listed(media.files)} is planned"))
        if not media.complete:
            # Only a problem for the chain if the set is needed; recorded as a rule either way.
            rules.append(RuleCheck("media-set-complete", False,
                                   f"{media.describe()} belongs to a media set of {media.family_count} families "
                                   f"(media set {media.media_set_guid}); family {_listed(media.missing_families)} "
                                   "is missing"))

    def usable(media: MediaSet) -> bool:
        return media.complete and (at is None or media.finish <= at)

    fulls = [m for m in db.of_type("full") if usable(m)]
    incomplete_fulls = [m for m in db.of_type("full") if not m.complete and (at is None or m.finish <= at)]
    if not fulls:
        if incomplete_fulls:
            newest = max(incomplete_fulls, key=lambda m: m.header.last_lsn)
            problems.append(Problem(
                code="missing-family",
                message=f"the only full backup(s) before the target are incomplete: {newest.describe()} misses "
                        f"family {_listed(newest.missing_families)} of {newest.family_count}",
                files=_files(newest)))
        else:
            when = f" finished before {at.isoformat()}" if at else ""
            problems.append(Problem(code="no-full", message=f"no full backup of {name}{when}"))
        rules.append(RuleCheck("full-available", False, problems[-1].message))
        return done()
    full = max(fulls, key=lambda m: (m.header.last_lsn, m.finish))
    chosen.append(full)
    rules.append(RuleCheck("full-available", True,
                           f"full {_listed(full.files)} (LastLSN {full.header.last_lsn}, "
                           f"{full.family_count} famil{'y' if full.family_count == 1 else 'ies'}), the newest "
                           + (f"finished before {at.isoformat()}" if at else "complete one")))
    newer_incomplete = [m for m in incomplete_fulls if m.header.last_lsn > full.header.last_lsn]
    for media in newer_incomplete:
        rules.append(RuleCheck("newer-full-usable", False,
                               f"newer full {_listed(media.files)} skipped: family "
                               f"{_listed(media.missing_families)} of {media.family_count} missing"))
        # The newest full cannot be restored: the chain falls back, and that must not pass unsaid.
        defects.append(Problem(
            code="newer-full-incomplete",
            message=f"the newest full {_listed(media.files)} (LastLSN {media.header.last_lsn}) cannot be restored: "
                    f"family {_listed(media.missing_families)} of {media.family_count} is missing "
                    f"(media set {media.media_set_guid}); the restore falls back to full {_listed(full.files)}",
            files=tuple(media.files), found_lsn=str(media.header.last_lsn)))

    base_lsn = full.header.last_lsn
    diffs = [m for m in db.of_type("diff") if usable(m) and m.header.last_lsn > full.header.last_lsn]
    older = [m for m in db.of_type("diff") if usable(m) and m not in diffs]
    if older:
        rules.append(RuleCheck("older-differentials-skipped", True,
                               f"{_listed(_files(*older))}: not newer than full {_listed(full.files)} "
                               f"(LastLSN {full.header.last_lsn})"))
    on_base = [m for m in diffs if m.header.database_backup_lsn == full.header.checkpoint_lsn]
    for media in diffs:
        if media not in on_base:
            message = (f"differential {_listed(media.files)} skipped: its base (DatabaseBackupLSN "
                       f"{media.header.database_backup_lsn}) is not full {_listed(full.files)} (CheckpointLSN "
                       f"{full.header.checkpoint_lsn})")
            rules.append(RuleCheck("differential-base", False, message))
            # Newer than the full restored, yet on a base that is not here: its full is missing or
            # unreadable, so the point it secured can only be reached (if at all) through logs.
            defects.append(Problem(code="differential-on-another-base",
                                   message=f"{message}: the full it was taken on is not among the backups read",
                                   files=tuple(media.files), expected_lsn=str(full.header.checkpoint_lsn),
                                   found_lsn=str(media.header.database_backup_lsn)))
    if on_base:
        diff = max(on_base, key=lambda m: (m.header.last_lsn, m.finish))
        chosen.append(diff)
        base_lsn = diff.header.last_lsn
        rules.append(RuleCheck("differential-base", True,
                               f"differential {_listed(diff.files)}: DatabaseBackupLSN "
                               f"{diff.header.database_backup_lsn} equals the full's CheckpointLSN"))
    else:
        rules.append(RuleCheck("differential-base", True,
                               "no differential on this full" + (" before the target" if at else "")))

    logs = sorted(db.of_type("log"), key=lambda m: (m.header.last_lsn, m.header.first_lsn))
    empty = [m for m in logs if m.header.first_lsn == m.header.last_lsn]
    if empty:
        rules.append(RuleCheck("empty-logs-skipped", True,
                               f"{len(empty)} empty log backup(s) skipped (FirstLSN = LastLSN): "
                               + _listed(_files(*empty))))
    candidates = [m for m in logs if m.header.first_lsn != m.header.last_lsn and m.header.last_lsn > base_lsn]
    reached = base_lsn
    previous: MediaSet = chosen[-1]
    terminal: MediaSet | None = None
    superseded: list[str] = []
    straddling: list[MediaSet] = []  # logs started before the target and finished at or after it
    # A data backup that ends at the target is the point itself: no log, no STOPAT.
    data_reaches = at is not None and previous.finish >= at
    for media in [] if data_reaches else candidates:
        header = media.header
        if header.last_lsn <= reached:
            # Covered by an earlier log; restoring it would raise 4326.
            superseded.append(f"{_listed(media.files)}: " + MSG_4326.format(found=header.last_lsn, expected=reached))
            continue
        if header.first_lsn > reached:
            problems.append(Problem(
                code="log-gap",
                message=f"log chain broken between {_listed(previous.files)} and {_listed(media.files)}: "
                        + MSG_4305.format(found=header.first_lsn, expected=reached) + " (SQL Server error 4305)",
                files=_files(previous, media), expected_lsn=str(reached), found_lsn=str(header.first_lsn)))
            rules.append(RuleCheck("log-continuity", False, problems[-1].message))
            return done()
        if not media.complete:
            problems.append(Problem(
                code="missing-family",
                message=f"{media.describe()} is needed but family "
                        f"{_listed(media.missing_families)} of {media.family_count} is missing "
                        f"(media set {media.media_set_guid})", files=_files(media)))
            rules.append(RuleCheck("media-set-complete", False, problems[-1].message))
            return done()
        chosen.append(media)
        previous = media
        reached = header.last_lsn
        if at is not None and media.start >= at:
            terminal = media
            break
        if at is not None and media.finish >= at:
            straddling.append(media)
    if superseded:
        rules.append(RuleCheck("superseded-logs-skipped", True, "; ".join(superseded)))
    # A differential that cannot be restored (a family missing) secured a point: unless what is
    # restored reaches beyond it, that point is lost, and that must not pass unsaid.
    for media in db.of_type("diff"):
        if (not media.complete and (at is None or media.finish <= at) and media.header.last_lsn > reached
                and media.header.database_backup_lsn == full.header.checkpoint_lsn):
            defects.append(Problem(
                code="newer-diff-incomplete",
                message=f"the differential {_listed(media.files)} (LastLSN {media.header.last_lsn}) cannot be "
                        f"restored: family {_listed(media.missing_families)} of {media.family_count} is missing "
                        f"(media set {media.media_set_guid}); what is restored ends at LSN {reached}",
                files=tuple(media.files), expected_lsn=str(media.header.last_lsn), found_lsn=str(reached)))
    log_count = sum(1 for media in chosen if media.header.backup_type == "log")
    rules.append(RuleCheck("log-continuity", True,
                           f"{log_count} log backup(s) continue the chain from LSN {base_lsn} to {reached}"))
    if at is not None:
        # Said for each, so that an auditor sees why a log that finished after the target is not the terminal one.
        rules.extend(RuleCheck(
            "terminal-log-by-start", True,
            f"{_listed(media.files)} started at {media.start.isoformat()}, before the target, and finished at "
            f"{media.finish.isoformat()}: its records end near its start, so it is restored whole and is not "
            "the terminal log") for media in straddling)
        if terminal is not None:
            rules.append(RuleCheck("terminal-log", True,
                                   f"{_listed(terminal.files)} starts at {terminal.start.isoformat()}, at or "
                                   f"after the target, and holds the records up to its start: RESTORE LOG ... WITH "
                                   f"STOPAT = '{at.isoformat()}'"))
        elif data_reaches:
            rules.append(RuleCheck("terminal-log", True,
                                   f"the target is the end of {_listed(chosen[-1].files)} "
                                   f"({chosen[-1].finish.isoformat()}): restored without a log or STOPAT"))
        else:
            last = chosen[-1]
            problems.append(Problem(
                code="terminal-log-missing",
                message=f"no log backup reaches {at.isoformat()}: the chain ends with {_listed(last.files)} "
                        f"(started {last.start.isoformat()}, finished {last.finish.isoformat()}, LastLSN "
                        f"{last.header.last_lsn}); no log backup started at or after the target",
                files=_files(last), found_lsn=str(last.header.last_lsn)))
            rules.append(RuleCheck("terminal-log", False, problems[-1].message))
    return done()
