"""Every database of the restored cluster, and which check looked at which.

`pg_amcheck --all` checks only the databases that accept connections: one whose `datallowconn` is
false (template0, or any database an operator closed) is passed by without a word, and so is an
invalid database (`datconnlimit = -2`, left by an interrupted DROP DATABASE). The target is a
disposable copy, so restoreproof allows connections to every database that refuses them before
any check starts (ALTER DATABASE ... ALLOW_CONNECTIONS true), then compares what pg_amcheck says it
checked (its --verbose lines) with `pg_database`: a database no check looked at is named, with why,
and keeps the check from passing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from verification.model import (
    DATABASES_CHECKED,
    DATABASES_EXISTING,
    DATABASES_NOT_CHECKED,
    CheckResult,
    CheckStatus,
)

# pg_database.datconnlimit of a database an interrupted DROP DATABASE left behind (PostgreSQL 16, and
# 15.5, 14.10, 13.13, 12.17 on): PostgreSQL refuses every connection to it and every ALTER of it.
INVALID_CONNLIMIT = -2

# Every row of pg_database as one JSON array: a database's name may hold any character.
LIST_SQL = ("select coalesce(json_agg(json_build_object('name', datname, 'connections', datallowconn, "
            "'template', datistemplate, 'connlimit', datconnlimit) order by datname), '[]') "
            "from pg_catalog.pg_database")

INCLUDED = re.compile(r'^pg_amcheck: including database "(.*)"$')
RELATION = re.compile(r'^pg_amcheck: checking (?:heap table|btree index) "(.*)"$')


class UnrecognisedCatalog(ValueError):
    """psql's answer to LIST_SQL is not the list it asked for."""


@dataclass(frozen=True)
class Database:
    name: str
    # pg_database.datallowconn as restoreproof leaves it (after allowing connections where it could).
    connections: bool
    template: bool
    invalid: bool
    # restoreproof allowed its connections: it refused them in the backup.
    opened: bool = False
    # Why restoreproof could not allow its connections (the server's words).
    refused: str | None = None

    @property
    def unreachable(self) -> str | None:
        """Why no check can connect to it, or None when one can."""
        if self.invalid:
            return (f"invalid (pg_database.datconnlimit = {INVALID_CONNLIMIT}: an interrupted DROP DATABASE left it "
                    "half dropped); PostgreSQL refuses every connection to it, so no check could read it: drop it "
                    f"on the source (DROP DATABASE {quote_ident(self.name)})")
        if not self.connections:
            return ("it refuses connections (pg_database.datallowconn = false) and restoreproof could not allow them"
                    + (f": {self.refused}" if self.refused else ""))
        return None


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def allow_sql(name: str) -> str:
    return f"ALTER DATABASE {quote_ident(name)} ALLOW_CONNECTIONS true"


def parse_catalog(stdout: str) -> list[Database]:
    """pg_database as LIST_SQL gave it; UnrecognisedCatalog when it is anything else."""
    try:
        rows = json.loads(stdout)
    except ValueError:
        raise UnrecognisedCatalog(f"not the JSON list asked for: {stdout.strip()[:300]!r}") from None
    if not isinstance(rows, list) or not rows:
        raise UnrecognisedCatalog(f"not a list of databases: {stdout.strip()[:300]!r}")
    return [_database(row) for row in rows]


def _database(row: Any) -> Database:
    if (not isinstance(row, dict) or not isinstance(row.get("name"), str)
            or not isinstance(row.get("connections"), bool) or not isinstance(row.get("template"), bool)
            or type(row.get("connlimit")) is not int):
        raise UnrecognisedCatalog(f"not a row of pg_database: {row!r:.300}")
    return Database(row["name"], row["connections"], row["template"], row["connlimit"] == INVALID_CONNLIMIT)


def to_open(databases: list[Database]) -> list[Database]:
    """The databases that refuse connections and can be opened (an invalid one cannot)."""
    return [d for d in databases if not d.connections and not d.invalid]


def opened(database: Database, refused: str | None) -> Database:
    """The database once ALTER DATABASE ... ALLOW_CONNECTIONS true ran: `refused` is what the server
    said when it did not take it."""
    if refused is None:
        return replace(database, connections=True, opened=True)
    return replace(database, refused=refused)


def amcheck_relations(output: str) -> dict[str, int]:
    """Per database pg_amcheck included (its --verbose "including database" lines), how many
    relations it checked ("checking heap table/btree index "db.schema.name"", the longest included
    name that begins the relation's name: a database's name may hold a dot)."""
    lines = output.splitlines()
    counts = {m.group(1): 0 for line in lines if (m := INCLUDED.match(line))}
    # In reverse order a name comes after every name it begins ("shop.eu" before "shop"): the first
    # that begins the relation's name is the longest.
    names = sorted(counts, reverse=True)
    for line in lines:
        if m := RELATION.match(line):
            owner = next((name for name in names if m.group(1).startswith(name + ".")), None)
            if owner is not None:
                counts[owner] += 1
    return counts


@dataclass(frozen=True)
class Coverage:
    """Which databases of the restored cluster a check looked at, and why it did not look at the others."""

    existing: tuple[str, ...]
    checked: tuple[str, ...]
    not_checked: dict[str, str]

    @property
    def ratio(self) -> str:
        return f"{len(self.checked)} of {len(self.existing)} databases"

    def said(self) -> str:
        return "; ".join(f"{name}: {why}" for name, why in self.not_checked.items())

    def details(self) -> dict[str, Any]:
        return {DATABASES_CHECKED: list(self.checked), DATABASES_EXISTING: list(self.existing),
                DATABASES_NOT_CHECKED: dict(self.not_checked)}


def amcheck_coverage(databases: list[Database], relations: dict[str, int], options: list[str]) -> Coverage:
    """The databases pg_amcheck checked (included, and at least one relation of it checked)."""
    configured = f" (postgres.amcheck_options: {' '.join(options)})" if options else ""
    not_checked: dict[str, str] = {}
    for database in databases:
        if (why := database.unreachable) is not None:
            not_checked[database.name] = why
        elif database.name not in relations:
            not_checked[database.name] = f"pg_amcheck did not include it{configured}"
        elif relations[database.name] == 0:
            not_checked[database.name] = f"pg_amcheck included it but checked none of its relations{configured}"
    return Coverage(tuple(d.name for d in databases),
                    tuple(d.name for d in databases if d.name not in not_checked), not_checked)


TEMPLATE_LEFT_OUT = ("a template database (pg_database.datistemplate = true): the data checks read the databases "
                     "applications use; pg_amcheck checks its pages")


def data_coverage(databases: list[Database]) -> Coverage:
    """The databases the data checks read: every one a connection reaches, templates left out."""
    not_checked: dict[str, str] = {}
    for database in databases:
        if (why := database.unreachable) is not None:
            not_checked[database.name] = why
        elif database.template:
            not_checked[database.name] = TEMPLATE_LEFT_OUT
    return Coverage(tuple(d.name for d in databases),
                    tuple(d.name for d in databases if d.name not in not_checked), not_checked)


def covered(check: CheckResult, databases: list[Database] | None, relations: dict[str, int],
            options: list[str]) -> CheckResult:
    """pg_amcheck's result with the databases it covered: passed only when it checked every database
    of pg_database ("N of N databases"); a database it did not check makes it an error naming the
    database and why (never a failure: nothing says that database is damaged)."""
    if databases is None:
        check.details[DATABASES_CHECKED] = [name for name, count in relations.items() if count]
        if check.status is CheckStatus.PASSED:
            check.status = CheckStatus.ERROR
            check.summary = (f"pg_amcheck checked {len(check.details[DATABASES_CHECKED])} databases, but the restored "
                             "server's list of databases could not be read: none is known not to be left out")
        return check
    coverage = amcheck_coverage(databases, relations, options)
    check.details.update(coverage.details())
    check.details["connections_allowed_by_restoreproof"] = [d.name for d in databases if d.opened]
    if check.status is CheckStatus.PASSED:
        if coverage.not_checked:
            check.status = CheckStatus.ERROR
            check.summary = f"pg_amcheck checked {coverage.ratio}; not checked: {', '.join(coverage.not_checked)}"
            check.findings = [f"database {name} not checked: {why}" for name, why in coverage.not_checked.items()]
        else:
            check.summary = (f"{check.details['heap_tables']} tables and {check.details['btree_indexes']} indexes in "
                             f"{coverage.ratio}: no corruption")
    elif coverage.not_checked:
        check.summary += f"; {coverage.ratio} checked, not checked: {coverage.said()}"
    return check


def annotate(checks: list[CheckResult], names: tuple[str, ...], coverage: Coverage) -> None:
    """Each of the named checks says which databases it read and which not, and why."""
    for check in checks:
        if check.name in names:
            check.details.update(coverage.details())
