"""The amcheck extension's SQL functions, for the PostgreSQL majors that have no `pg_amcheck` program.

`pg_amcheck` came with PostgreSQL 14, and so did amcheck's heap check (`verify_heapam`). PostgreSQL
11 to 13 ship the amcheck extension with its btree checks only, so on them restoreproof does, per
database, what `pg_amcheck --install-missing --heapallindexed` does with its btree half: install
amcheck where it is missing (the target is a disposable copy), then run
`bt_index_check(index, heapallindexed => true)` on every btree index of the catalogue, each in its
own transaction. `bt_index_check` verifies the index's structure page by page; `heapallindexed`
then reads the index's table and verifies that every row the index should hold has its index tuple.
What is *not* checked on these majors: the heap pages themselves (their tuple headers, line
pointers, TOAST links) as `verify_heapam` checks them, and a table with no btree index is not read
at all; `pg_checksums` still reads every page and checks its checksum when the cluster has checksums.

A check passes only on positive proof: the script ran to its end, every checkable btree index of the
catalogue has its result and every result says checked. An index amcheck reports damaged (SQLSTATE
XX001 data corrupted, XX002 index corrupted) fails it in the server's words; anything else is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from verification.engines.postgres.databases import Coverage, Database
from verification.engines.postgres.integrity import COLLATION_MISMATCH
from verification.model import CheckName, CheckResult, CheckStatus
from verification.targets.base import not_started

# The first major with the `pg_amcheck` program and amcheck's heap check.
PG_AMCHECK_SINCE = 14
CORRUPTION_STATES = frozenset({"XX001", "XX002"})
DONE = {"done": True}

# Read by psql from its standard input, connected to one database. Every btree index is checked by a
# statement of its own (\gexec), so each is its own transaction: its locks are let go at once (a
# database of thousands of indexes would otherwise fill the lock table), and a damaged index's error
# is caught in a subtransaction and said as a row, so the other indexes are still checked.
SCRIPT = r"""\set VERBOSITY verbose
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck WITH SCHEMA pg_catalog;
CREATE EXTENSION IF NOT EXISTS plpgsql;
CREATE TEMPORARY VIEW restoreproof_btree AS
  SELECT c.oid, n.nspname AS schema, c.relname AS name,
         c.relpersistence = 't' AS temporary, i.indisvalid AND i.indisready AND i.indislive AS valid
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_catalog.pg_am a ON a.oid = c.relam
   WHERE a.amname = 'btree' AND c.relkind = 'i';
CREATE FUNCTION pg_temp.restoreproof_bt_index_check(index oid) RETURNS json LANGUAGE plpgsql AS $check$
DECLARE
  state text; message text; detail text; hint text;
BEGIN
  EXECUTE pg_catalog.format('SELECT %I.bt_index_check($1, true)',
    (SELECT n.nspname FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace
      WHERE x.extname = 'amcheck'))
    USING index::pg_catalog.regclass;
  RETURN pg_catalog.json_build_object('oid', index::bigint, 'checked', true);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
                          hint = PG_EXCEPTION_HINT;
  RETURN pg_catalog.json_build_object('oid', index::bigint, 'checked', false, 'state', state, 'message', message,
                                      'detail', detail, 'hint', hint);
END
$check$;
SELECT pg_catalog.json_build_object(
  'database', pg_catalog.current_database(),
  'amcheck', (SELECT pg_catalog.json_build_object('version', x.extversion, 'schema', n.nspname)
                FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace
               WHERE x.extname = 'amcheck'),
  'indexes', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
                'oid', oid::bigint, 'name', schema || '.' || name, 'temporary', temporary, 'valid', valid)
                ORDER BY oid), '[]')
                FROM pg_temp.restoreproof_btree));
SELECT pg_catalog.format('SELECT pg_temp.restoreproof_bt_index_check(%s)', oid)
  FROM pg_temp.restoreproof_btree WHERE NOT temporary AND valid ORDER BY oid \gexec
SELECT pg_catalog.json_build_object('done', true);
"""

# The script goes to psql's standard input through the environment (a target's commands have no stdin).
AMCHECK_SCRIPT_VARIABLE = "RESTOREPROOF_AMCHECK_SQL"


def amcheck_sql_argv(socket_dir: str, port: int, user: str, database: str) -> list[str]:
    """psql reading SCRIPT, connected to `database` (run with SCRIPT in AMCHECK_SCRIPT_VARIABLE)."""
    return ["bash", "-c", f'psql "$@" <<<"${AMCHECK_SCRIPT_VARIABLE}"', "amcheck", "-X", "-A", "-t", "-q",
            "-v", "ON_ERROR_STOP=1", "-h", socket_dir, "-p", str(port), "-U", user, "-d", database]


def options_not_applied(options: list[str]) -> list[str]:
    """postgres.amcheck_options are pg_amcheck's: the SQL functions always check with heapallindexed,
    one index after the other; any other option (a relation left out, say) is not applied, and said."""
    ignored: list[str] = []
    after_jobs = False
    for option in options:
        if not after_jobs and option != "--heapallindexed" and not option.startswith(("--jobs", "-j")):
            ignored.append(option)
        after_jobs = option in ("-j", "--jobs")
    return ignored


WHAT_IS_CHECKED = ("bt_index_check(index, heapallindexed => true) on every btree index: each index's pages and "
                   "order, and every row of its table that it should hold (the table's rows are read for that)")
NOT_CHECKED = ("heap pages (tuple headers, line pointers, TOAST links) were not checked by amcheck: PostgreSQL {major} "
               "has no verify_heapam (PostgreSQL 14 and later); a table with no btree index was not read by amcheck; "
               "pg_checksums checks every page's checksum when the cluster has data checksums")

# psql's prefix on what it says while reading a script from standard input.
PSQL_LOCUS = re.compile(r"^psql:<stdin>:\d+: ")
SERVER_MESSAGE = re.compile(r"^(?P<level>WARNING|NOTICE|INFO|ERROR|FATAL|PANIC):  (?:(?P<state>[0-9A-Z]{5}): )?"
                            r"(?P<text>.*)$")
CONTINUATION = re.compile(r"^(DETAIL|HINT|LOCATION|CONTEXT|QUERY):  ")


class UnrecognisedOutput(ValueError):
    """A line of psql's standard output that is not one the script prints."""


@dataclass
class DatabaseRun:
    """What the script met in one database: the catalogue's btree indexes and each one's result."""

    database: str
    catalogued: int = 0
    checked: int = 0
    amcheck_version: str | None = None
    # Each finding of damage, in the server's words, and the indexes it was found in.
    corrupt: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)
    # Why the database is not proven sound (nothing says it is damaged either).
    errors: list[str] = field(default_factory=list)
    # Indexes amcheck cannot check, with why (not used by any query either).
    not_checkable: dict[str, str] = field(default_factory=dict)
    # The server's warnings about the data (SQLSTATE XX001, XX002), and any other it gave.
    warnings: list[str] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return not self.corrupt and not self.errors and self.checked > 0


def run_database(database: str, stdout: str, stderr: str, exit_code: int) -> DatabaseRun:
    """The script's outputs in one database, read strictly: every line of its standard output is one
    it prints, and it reached its last statement."""
    run = DatabaseRun(database)
    if (why := not_started("psql", stdout + stderr, exit_code)) is not None:
        run.errors.append(why)
        return run
    _read_messages(run, stderr)
    try:
        rows = [_row(line) for line in stdout.splitlines() if line.strip()]
    except UnrecognisedOutput as exc:
        run.errors.append(f"psql printed a line restoreproof does not know: {exc}")
        return run
    if exit_code != 0 or not rows or rows[-1] != DONE:
        run.errors.append(f"the check did not reach its end (psql exit {exit_code}): {_last_said(stderr, stdout)}")
    _read_rows(run, [row for row in rows if row != DONE])
    return run


def _row(line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except ValueError:
        raise UnrecognisedOutput(repr(line[:300])) from None
    if not isinstance(row, dict) or not (row == DONE or "indexes" in row or "oid" in row):
        raise UnrecognisedOutput(repr(line[:300]))
    return row


def _read_rows(run: DatabaseRun, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    indexes = _catalogue(run, rows[0])
    if indexes is None:
        return
    names = {index["oid"]: index["name"] for index in indexes}
    checkable = {index["oid"] for index in indexes if index["valid"] and not index["temporary"]}
    run.catalogued = len(indexes)
    run.not_checkable = {index["name"]: _why_not_checkable(index) for index in indexes if index["oid"] not in checkable}
    seen: list[Any] = [result.get("oid") for result in rows[1:]]
    for result in rows[1:]:
        _read_result(run, result, names.get(result.get("oid"), f"oid {result.get('oid')}"))
    if missing := sorted(checkable - set(seen)):
        run.errors.append(f"{len(missing)} of {len(checkable)} btree indexes have no result: "
                          + ", ".join(names[oid] for oid in missing[:5]))
    if unasked := [oid for oid in seen if oid not in checkable or seen.count(oid) > 1]:
        run.errors.append(f"results not asked for (not a checkable index of the catalogue, or twice): {unasked[:5]}")


def _catalogue(run: DatabaseRun, row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The catalogue's btree indexes, each with its oid, name and whether amcheck can check it; None
    (said in the errors) when the row is not the catalogue asked for."""
    indexes = row.get("indexes")
    if (row.get("database") != run.database or not isinstance(indexes, list)
            or not all(isinstance(index, dict) and type(index.get("oid")) is int and isinstance(index.get("name"), str)
                       and isinstance(index.get("valid"), bool) and isinstance(index.get("temporary"), bool)
                       for index in indexes)):
        run.errors.append(f"the catalogue of btree indexes was not the one asked for: {json.dumps(row)[:300]}")
        return None
    run.amcheck_version = (row.get("amcheck") or {}).get("version")
    return indexes


def _why_not_checkable(index: dict[str, Any]) -> str:
    if index["temporary"]:
        return "a temporary index (of a session that no longer exists): nothing to check"
    return "not valid (an interrupted CREATE INDEX CONCURRENTLY or REINDEX): no query uses it, amcheck refuses it"


def _read_result(run: DatabaseRun, result: dict[str, Any], name: str) -> None:
    if result.get("checked") is True:
        run.checked += 1
        return
    said = f'btree index "{run.database}.{name}": {result.get("state")}: {result.get("message")}'
    said += "".join(f"; {key.upper()}: {result[key]}" for key in ("detail", "hint") if result.get(key))
    if result.get("state") in CORRUPTION_STATES:
        run.corrupt.append(said)
        run.damaged.append(f"{run.database}.{name}")
    else:
        run.errors.append(said)


def _read_messages(run: DatabaseRun, stderr: str) -> None:
    """The server's warnings (data-corrupted ones are findings) and psql's own errors, kept."""
    for line in stderr.splitlines():
        text = PSQL_LOCUS.sub("", line)
        message = SERVER_MESSAGE.match(text)
        if message is not None and message["level"] == "WARNING":
            run.warnings.append(text)
            if message["state"] in CORRUPTION_STATES:
                run.corrupt.append(f'database "{run.database}": {text}')


def _last_said(stderr: str, stdout: str) -> str:
    said = [PSQL_LOCUS.sub("", line) for line in stderr.splitlines() if line.strip()]
    said = [line for line in said if not CONTINUATION.match(line)] or stdout.strip().splitlines()[-1:]
    return said[-1][:300] if said else "(nothing said)"


def method(major: int) -> str:
    return f"the amcheck extension's SQL functions (PostgreSQL {major} has no pg_amcheck program)"


def amcheck_result(major: int, runs: list[DatabaseRun], databases: list[Database] | None) -> CheckResult:
    """One check of every database's btree indexes: failed on damage (in the server's words), passed
    only when every database of pg_database had every checkable btree index checked, else error."""
    details = _details(major, runs)
    if databases is None:
        return CheckResult(CheckName.AMCHECK, CheckStatus.ERROR, "the restored server's list of databases "
                           "(pg_database) could not be read: no database is known to be checked", details=details)
    coverage = function_coverage(databases, runs)
    details.update(coverage.details())
    if corrupt := [line for run in runs for line in run.corrupt]:
        return CheckResult(CheckName.AMCHECK, CheckStatus.FAILED, _damage(major, runs)
                           + (f"; {coverage.ratio} checked, not checked: {coverage.said()}" if coverage.not_checked
                              else ""), corrupt, details)
    if coverage.not_checked:
        return CheckResult(CheckName.AMCHECK, CheckStatus.ERROR,
                           f"amcheck checked {coverage.ratio}; not checked: {coverage.said()}",
                           [f"database {name} not checked: {why}" for name, why in coverage.not_checked.items()],
                           details)
    if (warned := _warned(runs)) is not None:
        return CheckResult(CheckName.AMCHECK, CheckStatus.ERROR, warned,
                           [line for run in runs for line in run.warnings], details)
    return CheckResult(CheckName.AMCHECK, CheckStatus.PASSED,
                       f"PostgreSQL {major}: {details['btree_indexes']} btree indexes in {coverage.ratio} checked by "
                       "amcheck's bt_index_check with heapallindexed (every row an index should hold looked up in "
                       f"it): no corruption; heap pages not checked by amcheck (PostgreSQL {major} has no "
                       "verify_heapam)", details=details)


def _damage(major: int, runs: list[DatabaseRun]) -> str:
    damaged = [name for run in runs for name in run.damaged]
    if not damaged:  # only the server's warnings (a page failing its checksum) said so
        return f"the server reported damaged data while amcheck ran on PostgreSQL {major}"
    more = f" and {len(damaged) - 5} more" if len(damaged) > 5 else ""
    return f"amcheck found damage in {len(damaged)} btree indexes on PostgreSQL {major}: {', '.join(damaged[:5])}{more}"


def _details(major: int, runs: list[DatabaseRun]) -> dict[str, Any]:
    return {"postgres_major": major, "method": method(major), "checked": WHAT_IS_CHECKED,
            "not_checked": NOT_CHECKED.format(major=major), "heap_pages_checked": False,
            "btree_indexes": sum(run.checked for run in runs),
            "btree_indexes_catalogued": sum(run.catalogued for run in runs),
            "per_database": {run.database: {"catalogued": run.catalogued, "checked": run.checked,
                                            "amcheck_version": run.amcheck_version} for run in runs},
            "indexes_not_checkable": {f"{run.database}.{name}": why for run in runs
                                      for name, why in run.not_checkable.items()}}


def function_coverage(databases: list[Database], runs: list[DatabaseRun]) -> Coverage:
    """The databases whose every checkable btree index amcheck checked; each other one with why."""
    by_name = {run.database: run for run in runs}
    not_checked: dict[str, str] = {}
    for database in databases:
        run = by_name.get(database.name)
        if (why := database.unreachable) is not None:
            not_checked[database.name] = why
        elif run is None:
            not_checked[database.name] = "amcheck was not run in it"
        elif run.errors:
            not_checked[database.name] = "; ".join(run.errors)
        elif run.checked == 0 and not run.corrupt:
            not_checked[database.name] = "amcheck checked none of its btree indexes"
    return Coverage(tuple(d.name for d in databases),
                    tuple(d.name for d in databases if d.name not in not_checked), not_checked)


def _warned(runs: list[DatabaseRun]) -> str | None:
    """Why the server's warnings keep a clean run from passing (a collation library other than the
    source's: an index order found right there proves nothing), or None when it warned of nothing."""
    said = [SERVER_MESSAGE.match(line) for run in runs for line in run.warnings]
    texts = list(dict.fromkeys(m["text"] for m in said if m is not None))
    if not texts:
        return None
    if mismatch := next((text for text in texts if COLLATION_MISMATCH.search(text)), None):
        return (f"amcheck's findings are not proof: the server warned \"{mismatch}\": the target's collation library "
                "is not the one the database was created with; verify with a target image whose ICU/glibc matches "
                "the source's (docker.postgres_image)")
    return f"amcheck found no corruption, but the server warned: {'; '.join(texts)}"


def heap_pages_said(check: CheckResult, checksums: CheckResult | None) -> None:
    """On a major without verify_heapam, what did check the heap pages, in the amcheck check: pg_checksums'
    word on every page's checksum, or that nothing did (a cluster without data checksums)."""
    if check.name != CheckName.AMCHECK:
        return
    if checksums is None or checksums.status is CheckStatus.ERROR:
        check.details["heap_pages"] = "pg_checksums did not check them (see its check, or postgres.checksums_check)"
    elif checksums.status is CheckStatus.SKIPPED:
        check.details["heap_pages"] = "checked by nothing: the cluster has no data checksums (pg_checksums skipped)"
        if check.status is CheckStatus.PASSED:
            check.summary += "; the cluster has no data checksums, so no check verified its heap pages"
    else:
        check.details["heap_pages"] = f"every page's checksum read by pg_checksums: {checksums.status.value}"
