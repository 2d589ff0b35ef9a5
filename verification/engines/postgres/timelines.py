"""The timelines of a WAL archive: every fork its history files record, and whether it holds two histories.

A timeline history file (`0000000N.history`, written by PostgreSQL when recovery ends on a new
timeline and archived by the promoted server) lists every ancestor of timeline N with the LSN where
N's line of history left it (xlog.c writeTimeLineHistory). Its last line is N's own fork: parent,
fork LSN, and PostgreSQL's reason for ending recovery there (xlogrecovery.c getRecoveryStopReason),
which names a time only when recovery stopped for a time target ("before|after <commit time>").

Two histories. A promoted server writes from the fork LSN on its own timeline; the parent's WAL after
the fork is another history that the child never had. A default restore ("latest") follows the
highest timeline (recovery_target_timeline = 'latest') and so silently leaves the parent's later
WAL out. Which parent segments prove that the parent went on after the fork:

- a parent segment that begins at or after the fork LSN holds nothing but WAL written after the fork
  (a segment is archived under its full name only once completed, and PostgreSQL never switches a
  segment that is still empty: xlog.c XLogInsertRecord, "no need to switch" at a segment boundary),
  so its presence is proof that the parent wrote on;
- the parent's segment that holds a fork LSN inside it (not at its start) is shared up to the fork.
  The promoted server never archives it under its full name (xlog.c CleanupAfterArchiveRecovery
  renames its copy to `.partial`), so a full one was completed by the old primary; what it holds after
  the fork may be no more than what an old primary writes as it stops behind a lagging standby (its
  last records, a segment switch). That segment alone is not taken as a second history: it is named in
  the rule, and the segments after it decide.

Abandoned, not two. The parent's newer segments may all have been archived before the child existed:
production restored in place to a point before a mistake and promoted, or a standby promoted while
it lagged; the parent's WAL after the fork is then the history that was given up, kept until expire
removes it, and "latest" rightly follows the child. The archive tells the two apart by time: a parent
that went on archived a newer segment after the child's history file (the promoted server archives
that file at once). So each newer segment's archive time is compared with the history file's (the
repository's modification times): all before it, the parent's WAL is an abandoned history and is said
so; one after it, two histories; a time not known, not proven either way (an error for the operator,
who can choose with --timeline, never a verdict on the backups).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from verification.engines.postgres.repository import WalArchive
from verification.engines.postgres.wal import Segment, format_lsn, parse_lsn
from verification.model import BackupSet, TimelineFork

# "before 2026-11-28 09:30:00.123456+00": a time target's reason, with the commit time recovery stopped at.
REASON_TIME_RE = re.compile(r"^(?P<side>before|after) (?P<time>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?)"
                            r"(?P<zone>[+-]\d{2}(:?\d{2})?)$")
# How many of a parent's newer segments a message names one by one.
NAMES_SHOWN = 5


@dataclass(frozen=True)
class Fork:
    """Where `timeline` left `parent`, as the history files record it."""

    timeline: int
    parent: int
    lsn: int
    reason: str
    history: str  # the history file that records it


@dataclass(frozen=True)
class Divergence:
    """A parent that went on after a child forked from it: two histories in one archive."""

    fork: Fork
    newer: tuple[Segment, ...]  # the parent's segments that begin at or after the fork LSN
    at_fork: Segment | None  # the parent's segment that holds the fork LSN inside it, when archived
    # Whether a newer segment was archived after the child's history file (True: the parent went on),
    # all before it (False: an abandoned history), or a time is not known (None).
    went_on: bool | None = True

    def describe(self, segment_size: int) -> str:
        names = [s.name(segment_size) for s in self.newer]
        shown = ", ".join(names[:NAMES_SHOWN]) + (f" and {len(names) - NAMES_SHOWN} more"
                                                  if len(names) > NAMES_SHOWN else "")
        return (f"timeline {self.fork.parent} went on after timeline {self.fork.timeline} forked from it at "
                f"{format_lsn(self.fork.lsn)} ({self.fork.history}): {len(names)} segment(s) of timeline "
                f"{self.fork.parent} begin at or after the fork: {shown}")


def fork_time(reason: str) -> datetime | None:
    """The commit time a time target's reason names ("before 2026-11-28 09:30:00.1+00"), else None.

    The reason is written with the restored server's DateStyle and TimeZone: only the ISO form with an
    offset is read; any other is a time not known, never a time guessed."""
    match = REASON_TIME_RE.match(reason.strip())
    if match is None:
        return None
    text = match["time"].replace(" ", "T") + match["zone"]  # Python 3.11 reads an hour-only offset (+00)
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return None


def forks(archive: WalArchive) -> dict[int, Fork]:
    """Each timeline's fork from its parent, by child timeline. A timeline's own history file says
    where it left its parent; an ancestor's fork is also read from a descendant's file when the
    ancestor's own file is missing."""
    found: dict[int, Fork] = {}
    for timeline in sorted(archive.histories, reverse=True):
        switches = archive.histories[timeline]
        name = f"{timeline:08X}.history"
        children = [s.parent for s in switches[1:]] + [timeline]
        for switch, child in zip(switches, children, strict=True):
            if child == timeline or child not in found:
                found[child] = Fork(child, switch.parent, switch.switch_lsn, switch.reason, name)
    return found


def divergences(archive: WalArchive, segment_size: int,
                archived_at: Callable[[str], datetime | None] | None = None) -> list[Divergence]:
    """Every fork after which its parent's WAL goes on (see the module's note for the boundary), each
    with whether the parent went on after the child existed (`archived_at`: a repository file's
    archive time; without it, every one is taken as having gone on)."""
    found = []
    for fork in sorted(forks(archive).values(), key=lambda f: f.timeline):
        parent = sorted(s for s in archive.segments if s.timeline == fork.parent)
        newer = tuple(s for s in parent if s.number * segment_size >= fork.lsn)
        if not newer:
            continue
        holding = fork.lsn // segment_size if fork.lsn % segment_size else None
        at_fork = next((s for s in parent if s.number == holding), None)
        went_on = (True if archived_at is None
                   else _went_on(archived_at, archive.history_files.get(fork.timeline),
                                 [archive.segments[s].file for s in newer]))
        found.append(Divergence(fork, newer, at_fork, went_on))
    return found


def _went_on(archived_at: Callable[[str], datetime | None], history: str | None, newer: list[str]) -> bool | None:
    """Whether any of the parent's `newer` segment files was archived after the child's history file."""
    born = archived_at(history) if history is not None else None
    times = [archived_at(file) for file in newer]
    if born is not None and any(t is not None and t > born for t in times):
        return True
    if born is None or any(t is None or t == born for t in times):
        return None  # (the same time: a file system's clock ticks coarser than two writes)
    return False


def fork_segment_note(archive: WalArchive, segment_size: int) -> list[str]:
    """The parents' segments that hold a fork inside them, completed by the old primary: named, not judged."""
    notes = []
    for fork in sorted(forks(archive).values(), key=lambda f: f.timeline):
        if fork.lsn % segment_size == 0:
            continue
        segment = Segment(fork.parent, fork.lsn // segment_size)
        if segment in archive.segments:
            notes.append(f"segment {segment.name(segment_size)} of timeline {fork.parent} holds the fork of timeline "
                         f"{fork.timeline} at {format_lsn(fork.lsn)} and was completed by the old primary (what it "
                         f"wrote as it stopped); recovery on timeline {fork.timeline} reads that timeline's copy")
    return notes


def shared_until(fork: Fork, backups: list[BackupSet]) -> tuple[datetime | None, str]:
    """A time up to which the parent's history is known to be shared with the child's, and how it is known.

    From the history file's reason when it names the commit time recovery stopped at (commits before it
    are on both timelines); else from the backups: one taken on the parent whose WAL ends at or before
    the fork started at a time before which both timelines hold the same WAL (a point strictly before the
    returned time is on the shared history). None: the fork's time is not known."""
    named = fork_time(fork.reason)
    if named is not None:
        return named, f"{fork.history}: recovery stopped \"{fork.reason}\""
    shared = [b for b in backups if not b.error and b.start_wal and b.stop_lsn
              and int(b.start_wal[:8], 16) == fork.parent and parse_lsn(b.stop_lsn) <= fork.lsn]
    if shared:
        newest = max(shared, key=lambda b: b.start)
        return newest.start, (f"not in {fork.history} (\"{fork.reason}\"); at least up to the start of backup "
                              f"{newest.label} on timeline {fork.parent}, whose WAL ends before the fork")
    return None, f"unknown: {fork.history} names no time (\"{fork.reason}\") and no backup bounds it"


def entries(archive: WalArchive, backup_timeline: int, path: tuple[int, ...], target: int,
            backups: list[BackupSet]) -> list[TimelineFork]:
    """Every timeline of the archive (and the backup's), oldest first, with its fork and whether the
    restore replays it."""
    known = forks(archive)
    timelines = sorted(archive.timelines() | {backup_timeline, target})
    out = []
    for timeline in timelines:
        fork = known.get(timeline)
        if fork is None:
            out.append(TimelineFork(timeline, None, None, None, "no history file: a first timeline",
                                    timeline in path))
            continue
        named = fork_time(fork.reason)
        basis = (f"{fork.history}: recovery stopped \"{fork.reason}\"" if named is not None
                 else shared_until(fork, backups)[1])
        out.append(TimelineFork(timeline, fork.parent, format_lsn(fork.lsn), named, basis, timeline in path))
    return out
