"""Whether a repository can serve a point in time at all: not after the newest moment it holds.

A WAL segment is archived once it is complete, so every record in it was written before the
segment's archive time (the file's modification time in the repository); the newest moment a
repository holds is the newest of those times and of its backups' ends. A point after it needs WAL
the archive does not have: PostgreSQL would replay everything and then refuse ("recovery ended
before configured recovery target was reached"), which says nothing against the backups. So it is
refused before anything is restored, naming the archive's end. Where the source cannot tell the
newest segment's time (a copy that did not keep it), only a point in the future is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePosixPath

from verification.engines.postgres.repository import Stanza
from verification.model import ChainStatus, Problem, RestorePlan, RuleCheck
from verification.sources.base import Source

CODE = "point-beyond-archive"
# The repository host's clock writes the archive times, the database host's the commit times: a point
# within this of the end is let through (if no transaction follows it there, the restore says so).
CLOCK_TOLERANCE = timedelta(minutes=5)


@dataclass(frozen=True)
class ArchiveEnd:
    at: datetime | None  # None: not known (the newest segment's time cannot be read)
    what: str


def archive_end(source: Source, stanza: Stanza) -> ArchiveEnd:
    backups = [b.finish for b in stanza.backups if not b.error]
    # Each archive id's newest segment: after a stanza upgrade, the new cluster numbers its segments
    # from the start again, so segment numbers say nothing across archive ids.
    newest = [max((segment.number, segment.timeline, item.file) for segment, item in archive.segments.items())[2]
              for archive in stanza.archives.values() if archive.segments]
    archived: list[tuple[datetime, str]] = []
    for file in newest:
        if (when := source.modified(file)) is None:
            return ArchiveEnd(None, f"the archive time of {file} is not known")
        archived.append((when, file))
    last = max(archived, default=None)
    ends = [*backups, *([last[0]] if last is not None else [])]
    if not ends:
        return ArchiveEnd(None, "the stanza holds no backup and no WAL")
    end = max(ends)
    what = (f"WAL segment {PurePosixPath(last[1]).name[:24]} archived at {end.isoformat()}"
            if last is not None and last[0] == end else f"the newest backup's end, {end.isoformat()}")
    return ArchiveEnd(end, what)


def refuse_beyond(plan: RestorePlan, end: ArchiveEnd, now: datetime) -> None:
    """Refuse the plan's point when it comes after what the repository holds (or after now)."""
    at = plan.stop_at
    if at is None:
        return
    limit = (min(now, end.at) if end.at is not None else now) + CLOCK_TOLERANCE
    if at <= limit:
        plan.chain.rules.append(RuleCheck("point-within-archive", True, f"{at.isoformat()} is not after the "
                                          f"archive's end ({end.what})"))
        return
    where = (f"after now ({now.isoformat()})" if at > now + CLOCK_TOLERANCE else
             f"after the end of stanza {plan.database}'s archive: {end.what}")
    problem = Problem(code=CODE, message=f"the point {at.isoformat()} is {where}; the repository holds nothing "
                                         "that leads there: ask for a point at or before that end, or latest")
    plan.chain.problems.append(problem)
    plan.chain.rules.append(RuleCheck("point-within-archive", False, problem.message))
    if plan.chain.status is ChainStatus.COMPLETE:
        plan.chain.status = ChainStatus.REFUSED
