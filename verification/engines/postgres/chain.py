"""Plan a pgBackRest restore and prove its chain before anything is restored.

Rules, each kept with its outcome:
- a backup exists that can reach the restore point (finished before it, not in error); a point before
  every backup (expired, or before the first) is refused (error): no file is missing for it;
- every backup it references is listed in backup.info and has its manifest in the repository;
- each of those manifests loads as pgBackRest loads it before a restore (manifest.py: the manifest or
  its copy, decrypted with the key backup.info keeps when encrypted, its format and checksum right, the
  manifest of that very backup): one that does not is what is wrong with the backups;
- the archive holds every WAL segment from the backup's start segment to its stop segment
  (without them the backup is not consistent), and on to the point to reach: the end of the
  archive for "latest", or, for a point in time, the start of the first backup after it
  (an upper bound: WAL up to there certainly covers the target);
- WAL on a newer timeline (after a failover or an earlier restore) is followed as PostgreSQL
  follows it: through the newest timeline's history file (or the history of the timeline asked for
  with --timeline), which must exist and descend from the backup's timeline after the backup started;
  each segment is expected on the timeline that supplies it;
- one history (timelines.py): no timeline's WAL goes on after a child forked from it. Two histories
  fail "latest" (a default restore silently takes the child's); a point in time is restored on the
  timeline that held it, told to PostgreSQL explicitly, or refused (error) when nothing proves which
  one did; --timeline chooses one history explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from verification.engines.postgres.cipher import backup_encryption
from verification.engines.postgres.manifest import ManifestRead, read_manifest
from verification.engines.postgres.repository import Stanza, WalArchive, archive_id_for
from verification.engines.postgres.repository_format import reader_needs
from verification.engines.postgres.timelines import divergences, entries, fork_segment_note, forks, shared_until
from verification.engines.postgres.wal import Segment, format_lsn, parse_lsn, parse_segment, timeline_of
from verification.model import (
    BackupSet,
    Chain,
    ChainStatus,
    Problem,
    RestorePlan,
    RuleCheck,
    TimelineFork,
    WalRange,
)
from verification.sources.base import Source

# How many missing segment names a message spells out; `files` always carries all of them.
MESSAGE_NAME_LIMIT = 10
# Problems with what was asked, not with the backups (ChainStatus.REFUSED when they are all there is).
REFUSALS = frozenset({"point-after-offline-backup", "point-beyond-archive"})


def choose_backup(stanza: Stanza, at: datetime | None, timeline: int | None) -> BackupSet | None:
    usable = [b for b in stanza.backups if not b.error]
    if at is not None:
        usable = [b for b in usable if b.finish <= at]
    if timeline is not None:
        usable = [b for b in usable if on_history(stanza, b, timeline)]
    return max(usable, key=lambda b: (b.finish, b.label), default=None)


def on_history(stanza: Stanza, backup: BackupSet, timeline: int) -> bool:
    """Whether recovery along `timeline` can start from the backup: the backup was taken on the timeline,
    or on an ancestor before the timeline's history left it (its history file says where)."""
    if not backup.start_wal:
        return False
    taken_on = timeline_of(backup.start_wal)
    if taken_on == timeline:
        return True
    archive = stanza.archives.get(archive_id_for(stanza, backup))
    history = archive.histories.get(timeline, []) if archive is not None else []
    left = next((s.switch_lsn for s in history if s.parent == taken_on), None)
    return left is not None and backup.start_lsn is not None and parse_lsn(backup.start_lsn) < left


def known_timelines(stanza: Stanza) -> set[int]:
    found = {t for archive in stanza.archives.values() for t in archive.timelines()}
    return found | {timeline_of(b.start_wal) for b in stanza.backups if b.start_wal}


def _before_every_backup(stanza: Stanza, at: datetime | None, timeline: int | None) -> Problem | None:
    """The point asked for comes before every backup of the stanza finished: expire (retention) removed
    what led there, or it is before the first backup. A request the repository cannot serve, no file
    missing: refused, naming the point it can serve."""
    usable = [b for b in stanza.backups if not b.error]
    if at is None or timeline is not None or not usable or any(b.finish <= at for b in usable):
        return None
    oldest = min(usable, key=lambda b: b.finish)
    return Problem(code="point-before-backups",
                   message=f"the point {at.isoformat()} is before every backup of stanza {stanza.name} (the oldest, "
                           f"{oldest.label}, finished {oldest.finish.isoformat()}): the repository keeps nothing that "
                           "restores to it; ask for a point at or after that, or latest")


def plan(source: Source, stanza: Stanza, at: datetime | None, segment_size: int,
         timeline: int | None = None) -> RestorePlan:
    rules: list[RuleCheck] = []
    problems: list[Problem] = []
    if timeline is not None and timeline not in (known := known_timelines(stanza)):
        # A request the archive cannot serve: refused (error), nothing is wrong with the backups.
        refusal = Problem(code="timeline-unknown",
                          message=f"--timeline {timeline}: stanza {stanza.name} has no timeline {timeline} (its "
                                  f"archive and backups hold timelines {', '.join(map(str, sorted(known)))})")
        rules.append(RuleCheck("timeline-chosen", False, refusal.message))
        return RestorePlan("postgres", stanza.name, Chain(ChainStatus.BROKEN, [], [refusal], rules, unread=[refusal]),
                           at)
    target = choose_backup(stanza, at, timeline)
    if target is None and (before := _before_every_backup(stanza, at, timeline)) is not None:
        rules.append(RuleCheck("backup-available", False, before.message))
        return RestorePlan("postgres", stanza.name, Chain(ChainStatus.REFUSED, [], [before], rules), at)
    if target is None:
        when = f"finished before {at.isoformat()}" if at else "usable"
        on = f" from which timeline {timeline} can be recovered" if timeline is not None else ""
        problems.append(Problem(code="no-backup", message=f"stanza {stanza.name} has no backup {when}{on}"))
        rules.append(RuleCheck("backup-available", False, problems[-1].message))
        return RestorePlan("postgres", stanza.name, Chain(ChainStatus.BROKEN, [], problems, rules), at)
    rules.append(RuleCheck(
        "backup-available", True,
        f"{target.type} backup {target.label} finished {target.finish.isoformat()}"
        + (f", at or before the target {at.isoformat()}" if at else ", the newest"),
    ))

    backups, manifests = _chain_backups(source, stanza, target, rules, problems)
    wal = _check_wal(stanza, target, at, segment_size, rules, problems, timeline)
    defects = _newer_in_error(stanza, target, at, rules)
    unread: list[Problem] = []
    history = _check_histories(stanza, target, at, timeline, wal, segment_size, rules, problems, unread,
                               source.modified)
    status = (ChainStatus.COMPLETE if not problems else ChainStatus.REFUSED
              if all(p.code in REFUSALS for p in problems) else ChainStatus.BROKEN)
    chain = Chain(status, backups, problems, rules, wal, defects, unread,
                  timelines=history.entries, timeline=wal.timeline if wal else None, timeline_choice=history.choice)
    writers = {b.label: str(b.extra["backrest_version"]) for b in backups if b.extra.get("backrest_version")}
    return RestorePlan("postgres", stanza.name, chain, at, target, target_timeline=history.target_timeline,
                       needs=reader_needs([m for m in manifests if m.ok], writers))



def wal_to_end(stanza: Stanza, target: BackupSet, segment_size: int,
               timeline: int | None = None) -> tuple[WalRange | None, str | None]:
    """The WAL a restore of `target` to latest replays (to the archive's end, along the same timelines
    as any point from it), or None and why where the archive does not hold it whole."""
    rules: list[RuleCheck] = []
    problems: list[Problem] = []
    wal = _check_wal(stanza, target, None, segment_size, rules, problems, timeline)
    if problems:
        return None, "; ".join(p.message for p in problems)
    if wal is None:
        return None, f"backup {target.label} records no WAL range"
    return wal, None

@dataclass(frozen=True)
class _Histories:
    entries: list[TimelineFork]
    choice: str | None
    target_timeline: int | None  # told to PostgreSQL explicitly; None: its default (the newest)


def _check_histories(stanza: Stanza, target: BackupSet, at: datetime | None, timeline: int | None,
                     wal: WalRange | None, segment_size: int, rules: list[RuleCheck], problems: list[Problem],
                     unread: list[Problem], archived_at: Callable[[str], datetime | None]) -> _Histories:
    """The rule that the archive holds one history (timelines.py), and the timeline the restore takes."""
    if wal is None or not target.start_wal:
        return _Histories([], None, timeline)
    archive = stanza.archives.get(archive_id_for(stanza, target)) or WalArchive("", segment_size)
    restored = wal.timeline
    path = tuple(t for t, _ in wal.timelines) or (restored,)
    listed = entries(archive, parse_segment(target.start_wal, segment_size).timeline, path, restored, stanza.backups)
    split = divergences(archive, segment_size, archived_at)
    notes = "".join(f"; {note}" for note in fork_segment_note(archive, segment_size))
    if at is None and timeline is None:
        # "Latest" follows the child past a parent's WAL archived before the child existed: given up.
        for given_up in [d for d in split if d.went_on is False]:
            fork = given_up.fork
            notes += (f"; timeline {fork.parent}'s {len(given_up.newer)} segment(s) from the fork of timeline "
                      f"{fork.timeline} at {format_lsn(fork.lsn)} on were all archived before {fork.history}: an "
                      "abandoned history (a restore in place, a lagging standby promoted), not replayed")
        split = [d for d in split if d.went_on is not False]
    two = "; ".join(d.describe(segment_size) for d in split)
    if timeline is not None:
        rules.append(RuleCheck("one-history", True, f"timeline {timeline} chosen with --timeline {timeline}"
                               + (f"; the archive holds two histories: {two}" if split else "") + notes))
        return _Histories(listed, f"--timeline {timeline}", timeline)
    forked = bool(forks(archive))
    if not split:
        rules.append(RuleCheck("one-history", True, ("no timeline's WAL goes on after a fork from it"
                                                     if forked else "one timeline, no fork") + notes))
        if at is None:
            return _Histories(listed, "latest: the newest timeline", None)
        # A point in time on a forked archive: the timeline is said to PostgreSQL, never left to its default.
        return _Histories(listed, f"the one history holding {at.isoformat()}", restored if forked else None)
    if at is None:
        newest = max(archive.timelines() | {restored})  # PostgreSQL's default, recovery_target_timeline = 'latest'
        for divergence in split:
            if divergence.went_on is None:
                unproven = Problem(
                    code="two-histories-unproven",
                    message=f"archive {archive.archive_id} of stanza {stanza.name}: {divergence.describe(segment_size)}"
                            f"; whether it went on after timeline {divergence.fork.timeline} existed or was given "
                            "up before is not known (the repository does not keep the files' archive times). "
                            f"Restore one history explicitly: --timeline {divergence.fork.parent} or --timeline "
                            f"{divergence.fork.timeline}",
                    files=(divergence.fork.history,))
                unread.append(unproven)
                problems.append(unproven)
                continue
            problems.append(Problem(
                code="two-histories",
                message=f"two histories in archive {archive.archive_id} of stanza {stanza.name}: "
                        f"{divergence.describe(segment_size)}; a restore to latest follows timeline {newest} and "
                        f"leaves that WAL out. Restore one history explicitly: --timeline "
                        f"{divergence.fork.parent} or --timeline {divergence.fork.timeline}",
                files=tuple(s.name(segment_size) for s in divergence.newer)))
        rules.append(RuleCheck("one-history", False, f"two histories: {two}{notes}"))
        return _Histories(listed, None, None)
    unknown = []
    for divergence in split:
        until, basis = shared_until(divergence.fork, stanza.backups)
        if until is None or at >= until:
            unknown.append((divergence, basis))
    if not unknown:
        rules.append(RuleCheck("one-history", True, f"two histories ({two}), but {at.isoformat()} is before each "
                               f"fork, on the history both share{notes}"))
        return _Histories(listed, f"the history all timelines share before {at.isoformat()}", restored)
    for divergence, basis in unknown:
        fork = divergence.fork
        refusal = Problem(
            code="timeline-ambiguous",
            message=f"--at {at.isoformat()}: which history held that time is not proven: timeline {fork.timeline} "
                    f"forked from timeline {fork.parent} at {format_lsn(fork.lsn)} (fork time {basis}) and both went "
                    f"on after it ({divergence.describe(segment_size)}). Choose one: --timeline {fork.parent} or "
                    f"--timeline {fork.timeline}",
            files=(fork.history,))
        unread.append(refusal)
        problems.append(refusal)
    rules.append(RuleCheck("one-history", False, f"two histories, and {at.isoformat()} may be after the fork: "
                           + "; ".join(p.message for p in unread)))
    return _Histories(listed, None, None)


def _newer_in_error(stanza: Stanza, target: BackupSet, at: datetime | None, rules: list[RuleCheck]) -> list[Problem]:
    """Backups newer than the chosen one (and before the target time) that pgBackRest flagged in error.

    The plan restores the newest usable backup instead, which still proves something, but the
    recovery point the newest backup was meant to secure is lost: said first, never passed over.
    """
    newer = [b for b in stanza.backups if b.error and (b.finish, b.label) > (target.finish, target.label)
             and (at is None or b.finish <= at)]
    defects = [Problem(
        code="newer-backup-error",
        message=f"{b.type} backup {b.label} (finished {b.finish.isoformat()}) is flagged in error by pgBackRest "
                f"(backup-error in {stanza.info_file}): the restore falls back to {target.type} backup {target.label}, "
                f"finished {target.finish.isoformat()}",
        files=(f"backup/{stanza.name}/{b.label}",)) for b in newer]
    rules.append(RuleCheck(
        "newest-backup-usable", not defects,
        "no newer backup is flagged in error" if not defects
        else "newer backup(s) flagged in error: " + ", ".join(b.label for b in newer)))
    return defects


def _chain_backups(
    source: Source, stanza: Stanza, target: BackupSet, rules: list[RuleCheck], problems: list[Problem]
) -> tuple[list[BackupSet], list[ManifestRead]]:
    """The chain's backups, oldest first, and the manifests that were read of them."""
    chain: list[BackupSet] = []
    labels = [*target.references, target.label]
    missing: list[str] = []
    manifests: list[ManifestRead] = []
    for label in labels:
        backup = stanza.backup(label)
        folder = f"backup/{stanza.name}/{label}"
        manifest = None if backup is None else read_manifest(source, folder, label, stanza.manifest_key)
        if backup is None or manifest is None or not manifest.present:
            missing.append(label)
            where = "backup.info" if backup is None else f"{folder}/backup.manifest"
            problems.append(Problem(
                code="missing-backup",
                message=f"backup {label}, needed by {target.label}, is missing from the repository "
                        f"(not found: {where})",
                files=(folder,),
            ))
            continue
        manifests.append(manifest)
        if manifest.ok:  # what the manifest adds to how its encryption is known
            backup = replace(backup, encryption=backup_encryption(stanza.cipher, stanza.info_file, manifest_read=True))
        chain.append(backup)
    rules.append(RuleCheck(
        "referenced-backups-present", not missing,
        f"{len(labels) - len(missing)} of {len(labels)} backups present"
        + (f"; missing: {', '.join(missing)}" if missing else f": {', '.join(labels)}"),
    ))
    if manifests:
        _check_manifests(manifests, target, stanza.cipher, rules, problems)
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
    if source_rule := _copied_from_standby(chain, stanza.info_file):
        rules.append(source_rule)
    return chain, manifests


def _copied_from_standby(chain: list[BackupSet], info_file: str) -> RuleCheck | None:
    """Where the chain's files were copied from, said when a standby was (backup-standby): shown, never
    decided on. pgBackRest still begins and ends such a backup on the primary, so its WAL range and
    its end (backup-lsn-stop) are the primary's and prove it as they prove any online backup."""
    standby = [b for b in chain if b.extra.get("backup_standby") is True]
    if not standby:
        return None
    primary = [b for b in chain if b not in standby]
    return RuleCheck("copied-from-standby", True, (
        f"{', '.join(f'{b.type} {b.label}' for b in standby)} copied from a standby (option-backup-standby in "
        f"{info_file}), begun and ended on the primary (backup_label, WAL range and backup-lsn-stop are the primary's)"
        + (f"; {', '.join(f'{b.type} {b.label}' for b in primary)} copied from the primary" if primary else "")))


def _check_manifests(manifests: list[ManifestRead], target: BackupSet, cipher: str | None,
                     rules: list[RuleCheck], problems: list[Problem]) -> None:
    """The rule that each manifest of the chain loads as pgBackRest loads it, with each one that does
    not as a problem naming its files; a manifest pgBackRest would pass over for its copy is said too."""
    damaged = [m for m in manifests if m.damaged]
    unread = [m for m in manifests if m.unread is not None]
    for manifest in damaged:
        problems.append(Problem(
            code="damaged-manifest",
            message=f"backup {manifest.label}, needed by {target.label}, cannot be restored: {manifest.problem}",
            files=manifest.damaged_files,
        ))
    how = (f"decrypted with the key backup.info keeps ({cipher}); " if cipher else "") + \
        "format, checksum, label and files as pgBackRest checks them before a restore"
    copies = [f"{m.said_refused()}: its copy loaded instead, as pgBackRest does" for m in manifests
              if m.ok and m.used != m.manifest]
    # One not read is not proven: the rule does not pass, though nothing says the backups are wrong.
    rules.append(RuleCheck(
        "manifests-load", not damaged and not unread,
        f"{sum(m.ok for m in manifests)} of {len(manifests)} manifests load ({how})"
        + (f"; not: {', '.join(m.label for m in damaged)}" if damaged else "")
        + "".join(f"; not read: {m.unread}" for m in unread)
        + "".join(f"; {said}" for said in copies),
    ))


@dataclass(frozen=True)
class TimelinePath:
    """The timelines recovery walks, oldest first, with the first segment each one supplies.

    PostgreSQL (recovery_target_timeline = 'latest', the default) follows the newest timeline
    in the archive; for a segment number it reads the file of the newest timeline on the path
    that had begun by then.
    """

    steps: tuple[tuple[int, int], ...]  # (timeline, first segment number it supplies)

    @property
    def target(self) -> int:
        return self.steps[-1][0]

    def timeline_for(self, number: int) -> int:
        return next(tli for tli, begins in reversed(self.steps) if begins <= number)

    def describe(self) -> str:
        return " -> ".join(str(tli) for tli, _ in self.steps)


def _timeline_path(archive: WalArchive, backup_timeline: int, start_lsn: int | None, segment_size: int,
                   problems: list[Problem], rules: list[RuleCheck], wanted: int | None = None) -> TimelinePath | None:
    """The path to `wanted` (--timeline), else to the newest timeline of the archive (PostgreSQL's 'latest')."""
    newest = wanted if wanted is not None else max([backup_timeline, *archive.timelines()])
    if newest == backup_timeline:
        return TimelinePath(((backup_timeline, 0),))
    history = archive.histories.get(newest)
    name = f"{newest:08X}.history"
    if history is None:
        problems.append(Problem(code="missing-history",
                                message=f"WAL exists on timeline {newest} but its history file {name} is missing "
                                        f"from archive {archive.archive_id}", files=(name,)))
        rules.append(RuleCheck("timeline-history", False, problems[-1].message))
        return None
    steps: list[tuple[int, int]] = []
    begins = 0
    for switch in history:
        steps.append((switch.parent, begins))
        begins = switch.switch_lsn // segment_size
    steps.append((newest, begins))
    ancestors = {tli: i for i, (tli, _) in enumerate(steps)}
    if backup_timeline not in ancestors:
        problems.append(Problem(code="timeline-not-descendant",
                                message=f"timeline {newest}, the newest in the archive, does not descend from the "
                                        f"backup's timeline {backup_timeline} (history {name})", files=(name,)))
        rules.append(RuleCheck("timeline-history", False, problems[-1].message))
        return None
    index = ancestors[backup_timeline]
    # The backup's timeline is not the newest (returned above), so the history records where it was left.
    switch_out = history[index].switch_lsn
    if start_lsn is not None and switch_out <= start_lsn:
        problems.append(Problem(
            code="timeline-not-descendant",
            message=f"timeline {newest} left timeline {backup_timeline} at {format_lsn(switch_out)}, "
                    f"at or before the backup's start at {format_lsn(start_lsn)} (history {name})",
            files=(name,)))
        rules.append(RuleCheck("timeline-history", False, problems[-1].message))
        return None
    path = TimelinePath(tuple(steps[index:]))
    rules.append(RuleCheck("timeline-history", True,
                           f"recovery follows timelines {path.describe()} (history {name})"))
    return path


def _check_wal(
    stanza: Stanza,
    target: BackupSet,
    at: datetime | None,
    segment_size: int,
    rules: list[RuleCheck],
    problems: list[Problem],
    timeline: int | None = None,
) -> WalRange | None:
    if target.online is False and not target.start_wal and not target.stop_wal:
        # pgBackRest records no WAL for a backup of a stopped server: it needs none, and pgBackRest
        # restores it without recovery settings, so the server starts where it was shut down.
        rules.append(RuleCheck("wal-range-known", True, f"backup {target.label} was taken offline (option-online "
                               "false): consistent by itself, restored to its own point with no WAL replayed"))
        if at is not None and at > target.finish:
            problems.append(Problem(
                code="point-after-offline-backup",
                message=f"the point {at.isoformat()} comes after offline backup {target.label} (finished "
                        f"{target.finish.isoformat()}), the newest backup before it; pgBackRest records no WAL "
                        "for an offline backup, so no replay from it to that point can be planned: ask for latest, "
                        "or a point covered by an online backup's WAL"))
            rules.append(RuleCheck("point-reachable", False, problems[-1].message))
        return None
    if not target.start_wal or not target.stop_wal:
        problems.append(Problem(code="no-wal-range", message=f"backup {target.label} records no WAL range"))
        rules.append(RuleCheck("wal-range-known", False, problems[-1].message))
        return None
    start = parse_segment(target.start_wal, segment_size)
    stop = parse_segment(target.stop_wal, segment_size)
    archive_id = archive_id_for(stanza, target)
    archive = stanza.archives.get(archive_id) or WalArchive(archive_id, segment_size)
    start_lsn = parse_lsn(target.start_lsn) if target.start_lsn else None
    path = _timeline_path(archive, start.timeline, start_lsn, segment_size, problems, rules, timeline)
    if path is None:
        path = TimelinePath(((start.timeline, 0),))  # still name the backup's own missing WAL below

    def on_path(segment: Segment) -> bool:
        return segment.number >= start.number and segment.timeline == path.timeline_for(segment.number)

    newest = max((s.number for s in archive.segments if on_path(s)), default=None)
    end, bound = stop.number, "the backup's stop segment"
    if at is None:
        if newest is not None and newest > end:
            end, bound = newest, "the end of the archive"
    else:
        # Only a backup on the history restored bounds it: another timeline's backup says nothing of its WAL.
        # Only the same cluster's (db-id): another's WAL numbers its segments from the start again.
        later = [b for b in stanza.backups if b.start > at and b.start_wal and not b.error and b.db_id == target.db_id
                 and (timeline is None or on_history(stanza, b, timeline))]
        if later:
            next_backup = min(later, key=lambda b: b.start)
            assert next_backup.start_wal is not None
            bound_number = parse_segment(next_backup.start_wal, segment_size).number
            if bound_number > end:
                end, bound = bound_number, f"the start of backup {next_backup.label}, the first after the target"
        elif newest is not None and newest > end:
            end, bound = newest, "the end of the archive (no backup after the target bounds it)"

    expected = [Segment(path.timeline_for(n), n) for n in range(start.number, end + 1)]
    missing = [s for s in expected if s not in archive.segments]
    consistency_missing = [s for s in missing if s.number <= stop.number]
    names = [s.name(segment_size) for s in missing]
    wal = WalRange(
        timeline=path.target,
        first=expected[0].name(segment_size),
        last=expected[-1].name(segment_size),
        segments=len(expected),
        bound=bound if len(path.steps) == 1 else f"{bound}, across timelines {path.describe()}",
        timelines=path.steps,
        segment_bytes=segment_size,
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
        f"(bound: {wal.bound}) in archive {archive_id}",
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
