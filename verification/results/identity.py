"""Which stored results are one database's, and which of them a verification may be held to.

A database is its source, its name there and the identifier its backups record
(`model.DatabaseIdentity`): a stanza "main" in two repositories, or a stanza name that a new cluster
took over (another db-system-id), is two databases, never one baseline, history, trend, calibration
or rotation place. A stored entry carrying an identity belongs to a database exactly when the keys
are equal. An entry recorded before restoreproof kept identities carries none: it is matched by
what it does know, its run's source and its name (`Match.NAME`), and every use of such a match says
so.

Points: what a restore shows depends on the point it reached. Two verifications are comparable when
they asked for the same point of the same database: both "latest" (the newest the backups hold,
which moves forward between runs: the baseline's drop tolerance is for that), or both the same
moment (`--at`, a `--point` strategy's choice, a backup's end). The data at a fixed moment of one
cluster is fixed by its history, whichever backup a restore starts from, so a second verification of
that moment must find what the first found. A verification of another moment is not comparable:
its tables held what they held then, more or fewer rows than now. Only comparable runs hold each
other to a baseline, and the trends of recovery times are drawn through runs of one kind (latest, or
a point in time), never through both.
"""

from __future__ import annotations

from enum import StrEnum

from verification.model import DatabaseIdentity
from verification.report_model import DatabaseEntry

LATEST = "latest"


class Match(StrEnum):
    """How a stored entry was found to be a database's."""

    IDENTITY = "identity"
    # Recorded before identities were kept: its run's source and its name are all it has.
    NAME = "source and name"


# What a report says of an entry matched by name.
NAME_MATCH_NOTE = ("recorded before restoreproof kept database identities (source, name, system id): matched "
                   "by its run's source and its name")


def match(identity: DatabaseIdentity, source: str, entry: DatabaseEntry) -> Match | None:
    """Whether `entry` (of a run whose source is `source`) is `identity`'s, and how; None when not."""
    if entry.identity is not None:
        return Match.IDENTITY if entry.identity.key == identity.key else None
    if source == identity.source and entry.database == identity.name:
        return Match.NAME
    return None


def point_of(entry: DatabaseEntry) -> str:
    """The point an entry's restore asked for: "latest" or the moment as its report names it."""
    return entry.restore_point.target


def is_latest(point: str) -> bool:
    return point == LATEST


def comparable(point: str, other: str) -> bool:
    """Two verifications of one database restored the same point (see the module's docstring)."""
    return point == other


def describe_point(point: str) -> str:
    return "the latest point" if is_latest(point) else f"the point {point}"
