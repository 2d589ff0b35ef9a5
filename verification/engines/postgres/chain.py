"""Plan a pgBackRest restore and prove its chain before anything is restored.

Rules, each kept with its outcome:
- a backup exists that can reach the restore point (finished before it, not in error);
- every backup it references is listed in backup.info and has its manifest in the repository;
- the archive holds every WAL segment from the backup's start segment to its stop segment
  (without them the backup is not consistent), and on to the point to reach: the end of the
  archive for "latest", or, for a point in time, the start of the first backup after it
  (an upper bound: WAL up to there certainly covers the target).
"""

from __future__ import annotations

from datetime import datetime

from verification.engines.postgres.repository import Stanza, WalArchive, archive_id_for, manifest_present
from verification.engines.postgres.wal import Segment, parse_segment
from verification.model import BackupSet, Chain, ChainStatus, Problem, RestorePlan, RuleCheck, WalRange
from verification.sources.base import Source

# How many missing segment names a message spells out; `files` always carries all of them.
MESSAGE_NAME_LIMIT = 10


def choose_backup(stanza: Stanza, at: datetime | None) -> BackupSet | None:
    usable = [b for b in stanza.backups if not b.error]
    if at is not None:
        usable = [b for b in usable if b.finish <= at]
    return max(usable, key=lambda b: (b.finish, b.label), default=None)


def plan(source: Source, stanza: Stanza, at: datetime | None, segment_size: int) -> RestorePlan:
    rules: list[RuleCheck] = []
    problems: list[Problem] = []
    target = choose_backup(stanza, at)
    if target is None:
        when = f"finished before {at.isoformat()}" if at else "usable"
        problems.append(Problem(code="no-backup", message=f"stanza {stanza.name} has no backup {when}"))
        rules.append(RuleCheck("backup-available", False, problems[-1].message))
        return RestorePlan("postgres", stanza.name, Chain(ChainStatus.BROKEN, [], problems, rules), at, None)
    rules.append(RuleCheck(
        "backup-available", True,
        f"{target.type} backup {target.label} finished {target.finish.isoformat()}"
        + (f", before the target {at.isoformat()}" if at else ", the newest"),
    ))

    backups = _chain_backups(source, stanza, target, rules, problems)
    wal = _check_wal(stanza, target, at, segment_size, rules, problems)
    status = ChainStatus.COMPLETE if not problems else ChainStatus.BROKEN
    return RestorePlan("postgres", stanza.name, Chain(status, backups, problems, rules, wal), at, target)


def _chain_backups(
    source: Source, stanza: Stanza, target: BackupSet, rules: list[RuleCheck], problems: list[Problem]
) -> list[BackupSet]:
    chain: list[BackupSet] = []
    labels = [*target.references, target.label]
    missing: list[str] = []
    for label in labels:
        backup = stanza.backup(label)
        if backup is None or not manifest_present(source, stanza.name, label):
            missing.append(label)
            where = "backup.info" if backup is None else f"backup/{stanza.name}/{label}/backup.manifest"
            problems.append(Problem(
                code="missing-backup",
                message=f"backup {label}, needed by {target.label}, is missing from the repository "
                        f"(not found: {where})",
                files=(f"backup/{stanza.name}/{label}",),
            ))
            continue
        chain.append(backup)
    rules.append(RuleCheck(
        "referenced-backups-present", not missing,
        f"{len(labels) - len(missing)} of {len(labels)} backups present"
        + (f"; missing: {', '.join(missing)}" if missing else f": {', '.join(labels)}"),
    ))
    errored = [b.label for b in chain if b.error]
    rules.append(RuleCheck(
        "backups-not-in-error", not errored,
        "no backup of the chain is flagged in error" if not errored else f"flagged in error: {', '.join(errored)}",
    ))
    for label in errored:
        problems.append(Problem(code="backup-error", message=f"backup {label} is flagged in error by pgBackRest"))
    if chain and chain[0].type != "full":
        problems.append(Problem(code="no-full", message=f"the chain of {target.label} does not start with a full"))
        rules.append(RuleCheck("starts-with-full", False, f"first backup {chain[0].label} is {chain[0].type}"))
    elif chain:
        rules.append(RuleCheck("starts-with-full", True, f"full {chain[0].label}"))
    return chain


def _check_wal(
    stanza: Stanza,
    target: BackupSet,
    at: datetime | None,
    segment_size: int,
    rules: list[RuleCheck],
    problems: list[Problem],
) -> WalRange | None:
    if not target.start_wal or not target.stop_wal:
        problems.append(Problem(code="no-wal-range", message=f"backup {target.label} records no WAL range"))
        rules.append(RuleCheck("wal-range-known", False, problems[-1].message))
        return None
    start = parse_segment(target.start_wal, segment_size)
    stop = parse_segment(target.stop_wal, segment_size)
    archive_id = archive_id_for(stanza, target)
    archive = stanza.archives.get(archive_id) or WalArchive(archive_id, segment_size)

    on_timeline = [s for s in archive.timeline_segments(start.timeline) if s >= start]
    end, bound = stop, "the backup's stop segment"
    newest = on_timeline[-1] if on_timeline else None
    if at is None:
        if newest is not None and newest > end:
            end, bound = newest, "the end of the archive"
    else:
        later = [b for b in stanza.backups if b.start > at and b.start_wal and not b.error]
        if later:
            next_backup = min(later, key=lambda b: b.start)
            assert next_backup.start_wal is not None
            bound_segment = parse_segment(next_backup.start_wal, segment_size)
            if bound_segment.timeline == start.timeline and bound_segment > end:
                end, bound = bound_segment, f"the start of backup {next_backup.label}, the first after the target"
        elif newest is not None and newest > end:
            end, bound = newest, "the end of the archive (no backup after the target bounds it)"

    expected = [Segment(start.timeline, n) for n in range(start.number, end.number + 1)]
    missing = [s for s in expected if s not in archive.segments]
    consistency_missing = [s for s in missing if s <= stop]
    names = [s.name(segment_size) for s in missing]
    wal = WalRange(
        timeline=start.timeline,
        first=start.name(segment_size),
        last=end.name(segment_size),
        segments=len(expected),
        bound=bound,
    )
    rules.append(RuleCheck(
        "wal-for-consistency", not consistency_missing,
        f"segments {start.name(segment_size)} to {stop.name(segment_size)} (the backup's own WAL) "
        + ("present" if not consistency_missing
           else "incomplete: " + ", ".join(s.name(segment_size) for s in consistency_missing)),
    ))
    rules.append(RuleCheck(
        "wal-continuous-to-target", not missing,
        f"{len(expected) - len(missing)} of {len(expected)} segments present from {wal.first} to {wal.last} "
        f"(bound: {bound}) in archive {archive_id}",
    ))
    if missing:
        shown = ", ".join(names[:MESSAGE_NAME_LIMIT]) + (
            f" and {len(names) - MESSAGE_NAME_LIMIT} more" if len(names) > MESSAGE_NAME_LIMIT else "")
        problems.append(Problem(
            code="missing-wal",
            message=f"WAL archive {archive_id} of stanza {stanza.name} is missing {len(missing)} segment(s) "
                    f"needed to restore {target.label}: {shown}",
            files=tuple(names),
        ))
    return wal
