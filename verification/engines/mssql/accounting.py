"""Account for every SQL Server file that could not be read as a backup.

A damaged backup must never just drop out of the catalog: a log backup whose head is damaged
would leave the chain "complete" with one log fewer and the restore point silently older. So each
corrupt file is attached to the database it belongs to, as a defect that fails that database:

- by its identity, when the trailer's configuration copy can still be read (server, database,
  creation date, LSNs): the exact database, and whether it was newer than the chain restored;
- else by where it lies: the folder a database's backups are read from, or the database folder of
  Ola Hallengren's <server>/<db>/FULL|DIFF|LOG layout;
- else it gets a database entry of its own (named from its folder, and said to be derived), with a
  broken chain, so a database whose backups are all unreadable still appears, failed.

A file in a layout the reader does not know ("unsupported") proves nothing: placed the same way (by
the database its configuration copy names, else by folder), it keeps that database from being
judged where it may hold a newer point or the chain's gap; a database known only from such files
appears with an entry of its own, error.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from datetime import datetime, timedelta

from verification.engines.mssql.catalog import BACKUP_FOLDERS, Catalog, DatabaseCatalog, Unreadable, server_identity
from verification.model import (
    POINT_ROUNDED_RULE,
    Chain,
    ChainStatus,
    Problem,
    RestorePlan,
    RuleCheck,
    UnreadableFile,
    UnreadableKind,
)


def _owner(catalog: Catalog, unread: Unreadable) -> DatabaseCatalog | None:
    identity = unread.identity
    if identity is None:
        return None
    # The server as the catalog groups by it (a LocalDB instance's name changes at each start).
    named = (server_identity(identity.server_name), identity.database_name, identity.database_creation)
    return next((db for db in catalog.databases if (db.server, db.database, db.created) == named), None)


def folder_database(path: str) -> str:
    """The database a file's folder stands for: Ola's <db>/FULL|DIFF|LOG, else the folder itself."""
    parts = path.split("/")[:-1]
    if len(parts) >= 2 and parts[-1].upper() in BACKUP_FOLDERS:
        return parts[-2]
    return parts[-1] if parts else "(source root)"


def _by_folder(plans: list[RestorePlan], path: str) -> RestorePlan | None:
    folder = posixpath.dirname(path)
    named = [p for p in plans if p.database == folder_database(path)]
    if len(named) == 1:
        return named[0]
    beside = [p for p in plans if any(posixpath.dirname(f) == folder for f in p.files)]
    return beside[0] if len(beside) == 1 else None


def _defect(unread: Unreadable, plan: RestorePlan) -> Problem:
    identity = unread.identity
    if identity is None:
        return Problem("unreadable-backup", f"{unread.path}, among the backups of {plan.database}, cannot be read: "
                                            f"{unread.reason}", files=(unread.path,))
    what = _what(unread)
    last = plan.chain.backups[-1] if plan.chain.backups else None
    moved = ""
    if last is not None and last.last_lsn is not None and identity.last_lsn > int(last.last_lsn):
        moved = (f"; it is newer than the chain restored, which ends at LastLSN {last.last_lsn} ({last.name}, "
                 f"finished {last.finish:%Y-%m-%d %H:%M:%S}): the restore point moves back by it")
    return Problem("unreadable-backup", f"{what} cannot be read: {unread.reason}{moved}", files=(unread.path,),
                   found_lsn=str(identity.last_lsn))


def _orphan_plan(name: str, unread: list[Unreadable], derived: bool) -> RestorePlan:
    how = ("named from its folder: no readable header says its name" if derived
           else "named by its damaged file's trailer")
    problem = Problem("no-readable-backup",
                      f"no backup of {name} ({how}) can be read: "
                      + "; ".join(u.reason for u in unread), files=tuple(u.path for u in unread))
    chain = Chain(ChainStatus.BROKEN, [], [problem], [RuleCheck("backup-readable", False, problem.message)])
    return RestorePlan("mssql", name, chain, files=[u.path for u in unread])


def account(catalog: Catalog, plans: dict[int, RestorePlan]) -> tuple[list[RestorePlan], list[UnreadableFile]]:
    """Attach corrupt files to their databases' plans (keyed by id() of the DatabaseCatalog); returns
    the plans made for databases known only from unreadable files, and every file as UnreadableFile."""
    known = list(plans.values())
    orphans: dict[tuple[str, bool], list[Unreadable]] = {}
    unknown: dict[str, list[Unreadable]] = {}
    files: list[UnreadableFile] = []
    for unread in catalog.unreadable:
        database = None
        if unread.kind == "corrupt":
            owner = _owner(catalog, unread)
            plan = plans[id(owner)] if owner is not None else None
            if plan is None and unread.identity is None:
                plan = _by_folder(known, unread.path)
            if plan is not None:
                plan.chain.defects.append(_defect(unread, plan))
                database = plan.database
            else:
                derived = unread.identity is None
                database = folder_database(unread.path) if derived else unread.identity.database_name  # type: ignore[union-attr]
                if any(p.database == database for p in known):
                    database = f"{database} ({'unidentified' if derived else 'unreadable'} backups)"
                orphans.setdefault((database, derived), []).append(unread)
        elif unread.kind in MAY_HOLD_A_BACKUP and unread.identity is not None:
            database = _identified_unread(catalog, plans, unread, known, unknown)
        files.append(UnreadableFile(unread.path, UnreadableKind(unread.kind), unread.reason, database))
    extra = [_orphan_plan(name, unread, derived) for (name, derived), unread in orphans.items()]
    return extra + [_unread_plan(name, unread) for name, unread in unknown.items()], files


def _identified_unread(catalog: Catalog, plans: dict[int, RestorePlan], unread: Unreadable,
                       known: list[RestorePlan], unknown: dict[str, list[Unreadable]]) -> str | None:
    """The database a file not read (a layout not known) names in its own configuration copy: its
    plan is not judged where the file may change it, else the file is only listed with it; a database
    no readable backup names gets an entry of its own, error (nothing proves its backups bad)."""
    identity = unread.identity
    assert identity is not None
    owner = _owner(catalog, unread)
    plan = plans[id(owner)] if owner is not None else None
    if plan is None and _beside(known, unread.path):
        return None  # no database read has its name, creation and server: placed by folder (attach_unread)
    if plan is None:
        name = identity.database_name
        if any(p.database == name for p in known):
            name = f"{name} (unread backups)"
        unknown.setdefault(name, []).append(unread)
        return name
    last = plan.chain.backups[-1] if plan.chain.backups else None
    newer = last is None or last.last_lsn is None or identity.last_lsn > int(last.last_lsn)
    if newer or plan.chain.status is not ChainStatus.COMPLETE:
        plan.chain.unread.append(Problem(
            "unread-backup", f"{_what(unread)} could not be read ({unread.kind}: {unread.reason}) and "
            + ("may hold the backups its chain lacks" if plan.chain.status is not ChainStatus.COMPLETE
               else "is newer than the chain's last backup"), files=(unread.path,)))
    return plan.database


def _what(unread: Unreadable) -> str:
    identity = unread.identity
    assert identity is not None
    return (f"{identity.backup_type} backup {unread.path} (LSN {identity.first_lsn} to {identity.last_lsn}"
            + (f", finished {identity.backup_finish:%Y-%m-%d %H:%M:%S}" if identity.backup_finish else "") + ")")


def _unread_plan(name: str, unread: list[Unreadable]) -> RestorePlan:
    """A database known only from backups restoreproof could not read (no damage proven): not judged."""
    problems = [Problem("unread-backup", f"{_what(u)} could not be read ({u.kind}: {u.reason})", files=(u.path,))
                for u in unread]
    problem = Problem("no-readable-backup", f"no backup of {name} could be read: its only backups are in a "
                      "layout restoreproof does not read", files=tuple(u.path for u in unread))
    chain = Chain(ChainStatus.BROKEN, [], [problem], [RuleCheck("backup-readable", False, problem.message)],
                  unread=problems)
    return RestorePlan("mssql", name, chain, files=[u.path for u in unread])


# Unread kinds that may be a backup of the database beside them: read by nobody here, so what they
# hold is unknown (a corrupt file is a defect instead; not-a-backup and excluded are no backups). An
# unsupported layout is such a file too: nothing proves it damaged, and a database beside it cannot pass;
# so is one this user may not read.
MAY_HOLD_A_BACKUP = ("needs-server", "archived", "unsupported", "permission")


def _beside(plans: list[RestorePlan], path: str) -> list[RestorePlan]:
    """The databases a file lies with: the one its folder names, else every one with a backup in its folder."""
    named = [p for p in plans if p.database == folder_database(path)]
    if named:
        return named
    folder = posixpath.dirname(path)
    return [p for p in plans if any(posixpath.dirname(f) == folder for f in p.files)]


# SQL Server writes its backups' times in the server's local time, read here as UTC; a file's time is
# real UTC. Local time is at most 14 hours ahead of UTC (UTC+14), so a file written less than that
# before a backup's recorded end may still be newer than it.
LOCAL_TIME_MARGIN = timedelta(hours=14)


def _may_matter(plan: RestorePlan, written: datetime | None) -> bool:
    """Whether an unread file could change this plan: fill a broken chain's gap, or hold a point newer than
    the chain's end when the latest point is asked for (or a point in time was rounded down to the newest
    backup before it). A file with no known time may be either."""
    if plan.chain.status is not ChainStatus.COMPLETE:
        return True
    rounded = any(r.rule == POINT_ROUNDED_RULE and r.passed for r in plan.chain.rules)
    if (plan.stop_at is not None and not rounded) or not plan.chain.backups:
        return not plan.chain.backups
    newest = max(b.finish for b in plan.chain.backups)
    if written is None:
        return True
    if plan.stop_at is not None and written > plan.stop_at + LOCAL_TIME_MARGIN:
        return False  # written after the point asked for: cannot hold a point before it
    return written > newest - LOCAL_TIME_MARGIN


def _placed_by_identity(catalog: Catalog, plans: list[RestorePlan], unread: Unreadable) -> bool:
    """Whether `account` placed the file by the database its configuration copy names (a database read
    has that identity, or none lies beside the file and it has an entry of its own)."""
    return unread.identity is not None and (_owner(catalog, unread) is not None or not _beside(plans, unread.path))


def attach_unread(catalog: Catalog, plans: list[RestorePlan], modified: Callable[[str], datetime | None]) -> None:
    """Name, on each database it may belong to, every file that may hold one of its backups and could not
    be read, where it could change the verdict (see Chain.unread): the database is then not judged."""
    for unread in catalog.unreadable:
        if unread.kind not in MAY_HOLD_A_BACKUP or _placed_by_identity(catalog, plans, unread):
            continue
        written = modified(unread.path)
        # A file no database can be placed by (logs in a folder of their own, the same database name on two
        # servers) may still fill any broken chain's gap.
        # In Ola Hallengren's layout the folder names the database: a file there belongs to no other chain.
        parts = unread.path.split("/")
        ola = len(parts) >= 3 and parts[-2].upper() in BACKUP_FOLDERS
        owners = _beside(plans, unread.path) or ([] if ola else
                                                 [p for p in plans if p.chain.status is not ChainStatus.COMPLETE])
        for plan in owners:
            if not _may_matter(plan, written):
                continue
            where = ("may hold the backups its chain lacks" if plan.chain.status is not ChainStatus.COMPLETE
                     else "may be newer than the chain's last backup" + (
                         f" (written {written:%Y-%m-%d %H:%M:%S})" if written is not None else " (no time known)"))
            plan.chain.unread.append(Problem(
                "unread-backup", f"{unread.path} could not be read ({unread.kind}: {unread.reason}) and {where}",
                files=(unread.path,)))
