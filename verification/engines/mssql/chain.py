"""Choose and prove a SQL Server restore chain from offline headers.

The rules (docs: SQL Server reference, section 2), each kept with its outcome:
- full: the newest complete full (highest LastLSN) finished before the target; where that one is
  copy-only and an older regular full has a differential ending later, that full and differential
  (a later point, fewer logs; a log lost after the copy-only full then breaks nothing);
- differential: finished before the target and based on that full: its DifferentialBaseGUID equals the
  full's BackupSetGUID where the header carries both (every MTF backup SQL Server 2008 R2 and 2016
  wrote), else its DatabaseBackupLSN equals the full's CheckpointLSN; the base is checked, not assumed.
  The newest such. A copy-only full is never a differential base: a differential that names one is
  refused. A differential on an older full that is among the backups read (the newest full being
  copy-only) is said as such, not as a lost base;
- SIMPLE recovery (the newest data backup restored says so): there is no log chain. The restore is the
  newest full and differential finished before the target; a target between backups is rounded down
  to the end of that backup, and the rule says by how much. Not a broken chain. A FULL or BULK_LOGGED
  database whose logs are missing still is;
- recovery forks: a log backup is applied only on the fork the chain is on (RecoveryForkID), or on a
  fork that branched off it (its parent fork and fork point LSN) at or after the LSN reached; any other
  is skipped and named with its fork. SQL Server would refuse it;
- copy-only logs: never required (a later regular log continues from the same LSN) and never breaking;
  one is used only where no regular log continues the chain;
- damaged backups (IsDamaged, written WITH CONTINUE_AFTER_ERROR): a chain that needs one is broken
  (a problem naming its files). The offline reader cannot tell copy-only and damaged backups (see
  mtf.py); where a header says None these rules have nothing to check and say nothing;
- log base: the differential's LastLSN, else the full's;
- logs: not empty (FirstLSN != LastLSN), LastLSN beyond the base, in (LastLSN, FirstLSN) order;
  each must begin at or before the LSN reached so far (else SQL Server raises 4305);
  logs taken during a full are accepted by LSN, whatever their DatabaseBackupLSN;
- point in time: the first log that starts at or after the target is the terminal one
  (RESTORE LOG ... WITH STOPAT); none means the target cannot be reached: a broken chain where a
  backup of the database finished after the target (the log that leads there is missing), a refused
  request (error, not failed) where none did (no file can be missing for a point nothing was written
  after: the next log is not taken yet, or the point is in the future); a point before every full
  and differential is refused too (retention removed what led there). A log backup holds the
  records logged from the previous log backup up to the moment it began reading the log, near its
  BackupStartDate; its BackupFinishDate is only when it finished writing. A log that started
  before the target but finished after it can therefore end before the target: chosen by its
  finish, STOPAT would run past its end, SQL Server would leave the database restoring with message
  4322 and recovery would stop at the log's end, short of the target (the reference's "first log
  whose finish is at or after the target" is dbatools' rule, and this is where it falls short);
- every set's families present (a striped set needs all its files).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from verification.engines.mssql.catalog import DatabaseCatalog, MediaSet, shares_file
from verification.engines.mssql.mtf import BackupHeader
from verification.model import (
    POINT_ROUNDED_RULE,
    BackupFile,
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
    return [_backup_set(media, media.families[n]) for n in sorted(media.families)]


def data_backups(db: DatabaseCatalog) -> list[BackupSet]:
    """Every file of the database's full and differential backups, whether a chain uses it or not:
    each family read (also of a set with a family missing), then each further copy of one; oldest
    set first. From the headers already read: nothing is read again."""
    return [_backup_set(media, header) for media in db.sets if media.header.backup_type != "log"
            for header in [*(media.families[n] for n in sorted(media.families)), *media.copy_headers]]


def _backup_set(media: MediaSet, header: BackupHeader) -> BackupSet:
    """One file of the set: its own path, size and family; the set's facts from its first family."""
    h = media.header
    return BackupSet(
        database=h.database_name, label=f"{header.path}", type=BackupType(h.backup_type),
        start=media.start, finish=media.finish, size_bytes=set_bytes(header), path=header.path,
        first_lsn=str(h.first_lsn), last_lsn=str(h.last_lsn),
        family=f"{header.family_number}/{header.family_count}",
        checkpoint_lsn=str(h.checkpoint_lsn), database_backup_lsn=str(h.database_backup_lsn),
        media_set_guid=h.media_set_guid, database_version=h.database_version,
        software_version=f"{h.software_version[0]}.{h.software_version[1]}", server=h.server_name,
        has_checksums=h.has_checksums, recovery_model=h.recovery_model, copy_only=h.is_copy_only,
        backup_set_guid=h.backup_set_guid, differential_base_lsn=_lsn_text(h.differential_base_lsn),
        differential_base_guid=h.differential_base_guid, recovery_fork_guid=h.recovery_fork_guid,
        fork_point_lsn=_lsn_text(h.fork_point_lsn), parent_fork_guid=h.parent_fork_guid,
        begins_log_chain=h.begins_log_chain, bulk_logged=h.has_bulk_logged_data, damaged=h.is_damaged,
        compatibility_level=h.compatibility_level, collation=h.collation,
        database_files=tuple(BackupFile(f.logical_name, f.file_type, f.size_bytes, f.file_id, f.filegroup,
                                        f.physical_name) for f in h.files),
        encryption=h.encryption, position=header.position, writer=h.writer, layout_proven=h.layout_proven,
        set_offset=header.set_offset,
        shares_file=shares_file(header),
    )


def set_bytes(header: BackupHeader) -> int:
    """The bytes of the file that are this set's: the whole file for a file of one set (its media header
    with it); where sets were appended, the first from the file's start, each later one its own range."""
    if not header.set_end or (header.position == 1 and header.set_end == header.size_bytes):
        return header.size_bytes
    return header.set_end - (header.set_offset if header.position > 1 else 0)


def written_by(backups: Sequence[BackupSet]) -> dict[str, str]:
    """The SQL Server version(s) that wrote the chain's backups, as their headers say (the report's
    versions.backup): each one once, in restore order."""
    said = list(dict.fromkeys(b.writer.removeprefix("SQL Server ") for b in backups if b.writer))
    return {"SQL Server": ", ".join(said)} if said else {}


def _lsn_text(lsn: int | None) -> str | None:
    return None if lsn is None else str(lsn)


def duration(seconds: float) -> str:
    """'2 h 13 min', '45 s', '3 d 4 h': how far a point was rounded, as a reader says it."""
    total = round(seconds)
    if 0 < seconds < 1:  # a rounding never reads as none at all
        return "under 1 s"
    if total < 60:
        return f"{total} s"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    parts += [f"{hours} h"] if hours else []
    if not days:
        parts += [f"{minutes} min"] if minutes else []
        parts += [f"{secs} s"] if secs and not hours else []
    return " ".join(parts)


def on_base(diff: BackupHeader, full: BackupHeader) -> bool:
    """Whether the differential was taken on this full: by LSN (DatabaseBackupLSN = the full's
    CheckpointLSN) and, where both carry one, by GUID too: a header whose two disagree is not trusted."""
    same_lsn = diff.database_backup_lsn == full.checkpoint_lsn
    if diff.differential_base_guid and full.backup_set_guid:
        return same_lsn and diff.differential_base_guid == full.backup_set_guid
    return same_lsn


def _base_named(diff: BackupHeader, full: BackupHeader) -> str:
    if diff.differential_base_guid and full.backup_set_guid:
        return (f"DifferentialBaseGUID {diff.differential_base_guid} equals the full's BackupSetGUID "
                f"(DatabaseBackupLSN {diff.database_backup_lsn}, the full's CheckpointLSN {full.checkpoint_lsn})")
    return f"DatabaseBackupLSN {diff.database_backup_lsn} equals the full's CheckpointLSN"


def backup_history(db: DatabaseCatalog) -> BackupHistory:
    """Each complete backup set's end: what a failure after it could fall back to."""
    points = sorted((SecuredPoint(f"{m.header.backup_type} {m.names[0]}", m.finish) for m in db.sets if m.complete),
                    key=lambda p: p.at)
    return BackupHistory(points, "backup finish times (full, differential and log backups) from the backup headers")


def _files(*sets: MediaSet) -> tuple[str, ...]:
    return tuple(path for media in sets for path in media.files)


def _names(*sets: MediaSet) -> tuple[str, ...]:
    """The sets' files as messages name them (MediaSet.names); `_files` gives their paths."""
    return tuple(name for media in sets for name in media.names)


def _listed(items: Sequence[str] | Sequence[int]) -> str:
    """Files or family numbers as every message names them."""
    return ", ".join(str(item) for item in items)


def _full_reaching_furthest(db: DatabaseCatalog, fulls: list[MediaSet], usable: Callable[[MediaSet], bool],
                            rules: list[RuleCheck]) -> MediaSet:
    """The newest full; but where that one is copy-only (it never moves the differential base), an
    older regular full whose differential ends later reaches a later point with fewer logs: that one."""
    newest = max(fulls, key=lambda m: (m.header.last_lsn, m.finish))
    if newest.header.is_copy_only is not True:
        return newest
    reach = [(d.header.last_lsn, f) for f in fulls if f.header.is_copy_only is not True
             for d in db.of_type("diff") if usable(d) and on_base(d.header, f.header)]
    if not reach or max(reach, key=lambda r: r[0])[0] <= newest.header.last_lsn:
        return newest
    last_lsn, full = max(reach, key=lambda r: r[0])
    rules.append(RuleCheck("copy-only-full", True,
                           f"full {_listed(newest.names)} is copy-only and ends at LSN {newest.header.last_lsn}; "
                           f"full {_listed(full.names)} with its differential reaches LSN {last_lsn}: "
                           "restored instead"))
    return full


def _beyond_every_backup(db: DatabaseCatalog, at: datetime) -> Problem | None:
    """The point asked for comes after every backup of the database finished: nothing in the source
    was even written then, so no file can be missing for it (the next log backup is not taken yet, or
    the point is in the future). A request the backups cannot serve, said with the point they can."""
    newest = max(db.sets, key=lambda m: m.finish, default=None)
    if newest is None or newest.finish > at:
        return None
    return Problem(code="point-beyond-backups",
                   message=f"the point {at.isoformat()} is after every backup of database {db.database} (the newest, "
                           f"{_listed(newest.names)}, finished {newest.finish.isoformat()}): nothing in the source "
                           "leads there; ask for a point at or before that, or latest")


def _before_every_backup(db: DatabaseCatalog, at: datetime) -> Problem | None:
    """The point asked for comes before every full and differential of the database: the source keeps
    nothing that restores to it (retention removed it, or it is before the first backup), and no file
    is proven missing. A differential before the point whose full is gone is not this: that is broken."""
    data = [m for m in db.sets if m.header.backup_type in ("full", "diff")]
    fulls = [m for m in data if m.header.backup_type == "full" and m.complete]
    if not fulls or any(m.finish <= at for m in data):
        return None
    oldest = min(fulls, key=lambda m: m.finish)
    return Problem(code="point-before-backups",
                   message=f"the point {at.isoformat()} is before every full backup of database {db.database} (the "
                           f"oldest, {_listed(oldest.names)}, finished {oldest.finish.isoformat()}): the source keeps "
                           "nothing that restores to it; ask for a point at or after that, or latest")


def plan(db: DatabaseCatalog, name: str, at: datetime | None) -> RestorePlan:
    rules: list[RuleCheck] = []
    problems: list[Problem] = []
    defects: list[Problem] = []
    chosen: list[MediaSet] = []
    # Problems of the request, not of the backups: the plan is refused (error), never broken (failed).
    refused: list[Problem] = []

    def done() -> RestorePlan:
        damaged = [m for m in chosen if any(h.is_damaged for h in m.families.values())]
        for media in damaged:
            problems.append(Problem(
                code="damaged-backup",
                message=f"{media.describe()} is marked damaged (IsDamaged: written WITH CONTINUE_AFTER_ERROR "
                        "over read errors); the chain needs it", files=tuple(media.files)))
        if damaged:
            rules.append(RuleCheck("backups-not-damaged", False, "; ".join(p.message for p in problems
                                                                           if p.code == "damaged-backup")))
        elif chosen and all(h.is_damaged is False for m in chosen for h in m.families.values()):
            rules.append(RuleCheck("backups-not-damaged", True, "no backup of the chain is marked damaged"))
        # Broken exactly when a problem was recorded: no path decides the status apart from its reason.
        final = (ChainStatus.COMPLETE if not problems else
                 ChainStatus.REFUSED if all(p in refused for p in problems) else ChainStatus.BROKEN)
        backups = [b for media in chosen for b in backup_sets(media)]
        return RestorePlan("mssql", name, Chain(final, backups, problems, rules, defects=defects), at,
                           # Each file once: one file may hold several of the chain's sets.
                           backups[0] if backups else None, files=list(dict.fromkeys(_files(*chosen))),
                           history=backup_history(db), data_backups=data_backups(db))

    def forks_said(skipped: list[str], fork: str | None) -> None:
        # Called once per plan: where the chain breaks (and returns), or after the last log.
        if skipped:
            rules.append(RuleCheck("recovery-fork", True,
                                   f"not applied, being on another recovery fork than the chain's ({fork}): "
                                   f"{_listed(skipped)}"))

    def follow_newest_fork(candidates: list[MediaSet], fork: str | None, base: int) -> list[MediaSet]:
        """For "latest": where the newest log is on a fork that branched off the chain's fork after the
        data restored, the old fork's logs past the branch point are an abandoned branch, not the chain."""
        newest = max(candidates, key=lambda m: (m.finish, m.header.last_lsn), default=None)
        if at is not None or newest is None or fork is None:
            return candidates
        header = newest.header
        branch, point = header.recovery_fork_guid, header.fork_point_lsn
        if branch in (None, fork) or header.parent_fork_guid != fork or point is None or point < base:
            return candidates
        abandoned = [m for m in candidates if m.header.recovery_fork_guid == fork and m.header.first_lsn >= point]
        if abandoned:
            rules.append(RuleCheck("recovery-fork", True,
                                   f"the newest log backup {_listed(newest.names)} is on recovery fork {branch}, "
                                   f"which branched off fork {fork} at LSN {point}: the logs of fork {fork} after "
                                   f"that point are an abandoned branch, not applied: {_listed(_names(*abandoned))}"))
        return [m for m in candidates if m not in abandoned]

    def simple(last: MediaSet) -> RestorePlan:
        """SIMPLE recovery: the data backups are the chain; a point between them is rounded down."""
        what = f"{last.header.backup_type} {_listed(last.names)}"
        rules.append(RuleCheck("recovery-model", True,
                               f"{what} was taken under the SIMPLE recovery model: there is no log chain, and "
                               "no log backup is needed or applied"))
        lost_differentials(last.header.last_lsn)
        if at is not None:
            late = (at - last.finish).total_seconds()
            if late > 0:
                rules.append(RuleCheck(
                    POINT_ROUNDED_RULE, True,
                    f"SIMPLE recovery restores only to the end of a backup: the target {at.isoformat()} is rounded "
                    f"down by {duration(late)} to the end of {what} ({last.finish.isoformat()})"))
            else:
                rules.append(RuleCheck("terminal-log", True, f"the target {at.isoformat()} is the end of {what}: "
                                                             "restored without a log or STOPAT"))
        return done()

    def lost_differentials(reached: int) -> None:
        """A differential that cannot be restored (a family missing) secured a point: unless what is
        restored reaches beyond it, that point is lost, and that must not pass unsaid."""
        for media in db.of_type("diff"):
            if (not media.complete and (at is None or media.finish <= at) and media.header.last_lsn > reached
                    and on_base(media.header, full.header)):
                defects.append(Problem(
                    code="newer-diff-incomplete",
                    message=f"the differential {_listed(media.names)} (LastLSN {media.header.last_lsn}) cannot be "
                            f"restored: family {_listed(media.missing_families)} of {media.family_count} is missing "
                            f"(media set {media.media_set_guid}); what is restored ends at LSN {reached}",
                    files=tuple(media.files), expected_lsn=str(media.header.last_lsn), found_lsn=str(reached)))

    for media in db.sets:
        if media.copies:
            # Said, so that an auditor knows which of two identical-looking files was restored.
            rules.append(RuleCheck("copies-not-restored", True,
                                   f"{_listed(media.copy_names)}: another copy of {media.describe()}; "
                                   f"only {_listed(media.names)} is planned"))
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
        elif at is not None and (before := _before_every_backup(db, at)) is not None:
            refused.append(before)
            problems.append(before)
        else:
            when = f" finished before {at.isoformat()}" if at else ""
            problems.append(Problem(code="no-full", message=f"no full backup of {name}{when}"))
        rules.append(RuleCheck("full-available", False, problems[-1].message))
        return done()
    full = _full_reaching_furthest(db, fulls, usable, rules)
    chosen.append(full)
    rules.append(RuleCheck("full-available", True,
                           f"full {_listed(full.names)} (LastLSN {full.header.last_lsn}, "
                           f"{full.family_count} famil{'y' if full.family_count == 1 else 'ies'}), the newest "
                           + (f"finished before {at.isoformat()}" if at else "complete one")))
    newer_incomplete = [m for m in incomplete_fulls if m.header.last_lsn > full.header.last_lsn]
    for media in newer_incomplete:
        rules.append(RuleCheck("newer-full-usable", False,
                               f"newer full {_listed(media.names)} skipped: family "
                               f"{_listed(media.missing_families)} of {media.family_count} missing"))
        # The newest full cannot be restored: the chain falls back, and that must not pass unsaid.
        defects.append(Problem(
            code="newer-full-incomplete",
            message=f"the newest full {_listed(media.names)} (LastLSN {media.header.last_lsn}) cannot be restored: "
                    f"family {_listed(media.missing_families)} of {media.family_count} is missing "
                    f"(media set {media.media_set_guid}); the restore falls back to full {_listed(full.names)}",
            files=tuple(media.files), found_lsn=str(media.header.last_lsn)))

    base_lsn = full.header.last_lsn
    diffs = [m for m in db.of_type("diff") if usable(m) and m.header.last_lsn > full.header.last_lsn]
    older = [m for m in db.of_type("diff") if usable(m) and m not in diffs]
    if older:
        rules.append(RuleCheck("older-differentials-skipped", True,
                               f"{_listed(_names(*older))}: not newer than full {_listed(full.names)} "
                               f"(LastLSN {full.header.last_lsn})"))
    full_copy_only = full.header.is_copy_only is True
    based = [] if full_copy_only else [m for m in diffs if on_base(m.header, full.header)]
    for media in diffs:
        if media in based:
            continue
        base_full = next((f for f in db.of_type("full") if f is not full and on_base(media.header, f.header)
                          and f.header.is_copy_only is not True), None)
        if full_copy_only and on_base(media.header, full.header):
            # SQL Server never takes a differential on a copy-only full: a header saying so is wrong.
            message = (f"differential {_listed(media.names)} refused: it names full {_listed(full.names)} as its "
                       f"base (DifferentialBaseGUID {media.header.differential_base_guid}), a copy-only full, "
                       "which is never a differential base")
            rules.append(RuleCheck("differential-base", False, message))
            defects.append(Problem(code="differential-on-copy-only-full", message=message,
                                   files=tuple(media.files)))
        elif base_full is not None and base_full.header.last_lsn < full.header.last_lsn:
            # The newest full is copy-only (it did not reset the base): this differential's full is older.
            rules.append(RuleCheck("differential-base", True,
                                   f"differential {_listed(media.names)} is on the older full "
                                   f"{_listed(base_full.names)}, not on full {_listed(full.names)} "
                                   f"({'copy-only' if full_copy_only else 'restored'}): not used"))
        else:
            message = (f"differential {_listed(media.names)} skipped: its base (DatabaseBackupLSN "
                       f"{media.header.database_backup_lsn}"
                       + (f", DifferentialBaseGUID {media.header.differential_base_guid}"
                          if media.header.differential_base_guid else "")
                       + f") is not full {_listed(full.names)} (CheckpointLSN {full.header.checkpoint_lsn}"
                       + (f", BackupSetGUID {full.header.backup_set_guid}" if full.header.backup_set_guid else "")
                       + ")")
            rules.append(RuleCheck("differential-base", False, message))
            # Newer than the full restored, yet on a base that is not here: its full is missing or
            # unreadable, so the point it secured can only be reached (if at all) through logs.
            defects.append(Problem(code="differential-on-another-base",
                                   message=f"{message}: the full it was taken on is not among the backups read",
                                   files=tuple(media.files), expected_lsn=str(full.header.checkpoint_lsn),
                                   found_lsn=str(media.header.database_backup_lsn)))
    if based:
        diff = max(based, key=lambda m: (m.header.last_lsn, m.finish))
        chosen.append(diff)
        base_lsn = diff.header.last_lsn
        rules.append(RuleCheck("differential-base", True,
                               f"differential {_listed(diff.names)}: {_base_named(diff.header, full.header)}"))
    elif full_copy_only:
        rules.append(RuleCheck("differential-base", True,
                               f"full {_listed(full.names)} is copy-only: never a differential base"))
    else:
        rules.append(RuleCheck("differential-base", True,
                               "no differential on this full" + (" before the target" if at else "")))

    data_backup = chosen[-1]
    if data_backup.header.recovery_model == "SIMPLE":
        return simple(data_backup)

    logs = sorted(db.of_type("log"), key=lambda m: (m.header.last_lsn, m.header.first_lsn))
    empty = [m for m in logs if m.header.first_lsn == m.header.last_lsn]
    if empty:
        rules.append(RuleCheck("empty-logs-skipped", True,
                               f"{len(empty)} empty log backup(s) skipped (FirstLSN = LastLSN): "
                               + _listed(_names(*empty))))
    nonempty = [m for m in logs if m.header.first_lsn != m.header.last_lsn]
    candidates = [m for m in nonempty if m.header.last_lsn > base_lsn]
    reached = base_lsn
    previous: MediaSet = chosen[-1]
    terminal: MediaSet | None = None
    superseded: list[str] = []
    straddling: list[MediaSet] = []  # logs started before the target and finished at or after it
    # A data backup that ends at the target is the point itself: no log, no STOPAT.
    data_reaches = at is not None and previous.finish >= at
    fork = previous.header.recovery_fork_guid
    other_fork: list[str] = []
    candidates = follow_newest_fork(candidates, fork, base_lsn)
    copy_only_skipped: list[str] = []
    for media in [] if data_reaches else candidates:
        header = media.header
        if fork is not None and header.recovery_fork_guid is not None and header.recovery_fork_guid != fork:
            if (header.parent_fork_guid == fork and header.fork_point_lsn is not None
                    and reached <= header.fork_point_lsn):
                rules.append(RuleCheck("recovery-fork", True,
                                       f"{_listed(media.names)} continues on recovery fork "
                                       f"{header.recovery_fork_guid}, which branched off fork {fork} at LSN "
                                       f"{header.fork_point_lsn}"))
                fork = header.recovery_fork_guid
            else:
                other_fork.append(f"{_listed(media.names)} (recovery fork {header.recovery_fork_guid})")
                continue
        if header.is_copy_only and any(
                not other.header.is_copy_only and other.header.first_lsn <= reached < other.header.last_lsn
                for other in candidates if other is not media):
            copy_only_skipped.append(_listed(media.names))
            continue
        if header.last_lsn <= reached:
            # Covered by an earlier log; restoring it would raise 4326.
            superseded.append(f"{_listed(media.names)}: " + MSG_4326.format(found=header.last_lsn, expected=reached))
            continue
        if header.first_lsn > reached:
            forks_said(other_fork, fork)
            problems.append(Problem(
                code="log-gap",
                message=f"log chain broken between {_listed(previous.names)} and {_listed(media.names)}: "
                        + MSG_4305.format(found=header.first_lsn, expected=reached) + " (SQL Server error 4305)"
                        + (f"; not applied, being on another recovery fork than {fork}: {_listed(other_fork)}"
                           if other_fork else ""),
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
    forks_said(other_fork, fork)
    if copy_only_skipped:
        rules.append(RuleCheck("copy-only-logs", True,
                               f"copy-only log backup(s) not required, a regular log continuing from the same LSN: "
                               f"{_listed(copy_only_skipped)}"))
    if superseded:
        rules.append(RuleCheck("superseded-logs-skipped", True, "; ".join(superseded)))
    lost_differentials(reached)
    last_log = max(nonempty, key=lambda m: (m.finish, m.header.last_lsn), default=None)
    last_fork = last_log.header.recovery_fork_guid if last_log is not None else None
    if at is None and last_log is not None and last_log not in chosen and last_fork not in (None, fork):
        # "latest" is the newest log's point: a chain that ends on another branch never reaches it.
        defects.append(Problem(
            code="newest-log-on-another-fork",
            message=f"the newest log backup {_listed(last_log.names)} (finished {last_log.finish.isoformat()}, "
                    f"recovery fork {last_fork}) is not on the branch restored (fork {fork}, ending at LSN "
                    f"{reached}): the latest point is not what is restored",
            files=tuple(last_log.files), found_lsn=str(reached)))
    log_count = sum(1 for media in chosen if media.header.backup_type == "log")
    rules.append(RuleCheck("log-continuity", True,
                           f"{log_count} log backup(s) continue the chain from LSN {base_lsn} to {reached}"))
    if at is not None:
        # Said for each, so that an auditor sees why a log that finished after the target is not the terminal one.
        rules.extend(RuleCheck(
            "terminal-log-by-start", True,
            f"{_listed(media.names)} started at {media.start.isoformat()}, before the target, and finished at "
            f"{media.finish.isoformat()}: its records end near its start, so it is restored whole and is not "
            "the terminal log") for media in straddling)
        if terminal is not None:
            rules.append(RuleCheck("terminal-log", True,
                                   f"{_listed(terminal.names)} starts at {terminal.start.isoformat()}, at or "
                                   f"after the target, and holds the records up to its start: RESTORE LOG ... WITH "
                                   f"STOPAT = '{at.isoformat()}'"))
        elif data_reaches:
            rules.append(RuleCheck("terminal-log", True,
                                   f"the target is the end of {_listed(chosen[-1].names)} "
                                   f"({chosen[-1].finish.isoformat()}): restored without a log or STOPAT"))
        elif (beyond := _beyond_every_backup(db, at)) is not None:
            refused.append(beyond)
            problems.append(beyond)
            rules.append(RuleCheck("point-within-backups", False, beyond.message))
        else:
            last = chosen[-1]
            problems.append(Problem(
                code="terminal-log-missing",
                message=f"no log backup reaches {at.isoformat()}: the chain ends with {_listed(last.names)} "
                        f"(started {last.start.isoformat()}, finished {last.finish.isoformat()}, LastLSN "
                        f"{last.header.last_lsn}); no log backup started at or after the target",
                files=_files(last), found_lsn=str(last.header.last_lsn)))
            rules.append(RuleCheck("terminal-log", False, problems[-1].message))
    return done()
