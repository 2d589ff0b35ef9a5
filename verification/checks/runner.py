"""Run one restored database's data checks with Great Expectations 1.x, and read them into checks.

One ephemeral GX context per database verified: a SQL data source per database of the restored
server (the URL the engine gave, which reaches the target without giving it a way out), a table or
query asset per batch with a whole-table batch definition, an ExpectationSuite per batch, a
ValidationDefinition each, and one Checkpoint that validates them all and builds the Data Docs
into the evidence (`<evidence>/data-docs/index.html`). Each validation's result JSON is evidence too.

What comes back as checks (kind `data`: they can fail a database, and prove nothing about its
pages, so never stand in for the integrity check):
- `data:<suite>` per user suite (`sql:<name>` for a deprecated SQL check);
- `data_baseline`: the automatic baselines of every table (`baseline`);
- `data_freshness`: the newest rows against the restore point (`freshness`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verification.checks import baseline as baselines
from verification.checks import freshness
from verification.checks.profile import Table, find_table, read_tables, timestamp_columns
from verification.checks.results import Outcome, UnrecognisedResult, outcome_of
from verification.checks.suites import SQL_VALUE_COLUMN, Suite
from verification.config import Settings
from verification.engines.base import DataAccess, Evidence
from verification.model import CheckKind, CheckName, CheckResult, CheckStatus

DOCS_FOLDER = "data-docs"
RESULTS_FOLDER = "data-checks"
# Schemas that hold the server's own catalogue, never user data.
SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "pg_toast", "sys", "guest", "cdc"})

_imported: dict[str, float] = {}


def import_gx() -> Any:
    """Great Expectations, imported once per process (it takes seconds), without its usage
    statistics (no network from here) or progress bars (they would fill the logs)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    started = time.perf_counter()
    import great_expectations as gx

    _imported.setdefault("seconds", time.perf_counter() - started)
    return gx


def import_seconds() -> float | None:
    return _imported.get("seconds")


@dataclass
class _Batch:
    """One validation: a suite on one table or query of one database."""

    key: str
    database: str
    table: Table | None
    query: str | None
    label: str  # how findings name it: "database shop, table public.orders"
    expectations: list[dict[str, Any]]
    suite: Suite | None = None
    watched: list[freshness.Watched] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None
    evidence: str | None = None


class DataCheckRunner:
    """The data checks of one verified database (the `DataChecks` an engine calls)."""

    def __init__(self, settings: Settings, verified: str, suites: list[Suite],
                 previous: dict[str, baselines.TableBaseline], rpo_seconds: float) -> None:
        self.settings = settings
        self.checks = settings.checks
        self.verified = verified
        self.suites = suites
        self.previous = previous
        self.rpo_seconds = rpo_seconds
        self.secrets: tuple[str, ...] = ()

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "********")
        return text

    def __call__(self, access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        self.secrets = access.secrets
        try:
            return self._run(access, evidence)
        except Exception as exc:  # a bug or a tool that broke: the checks did not run, said as an error
            evidence.write("data-checks.error.txt", self.scrub(traceback.format_exc()))
            return [CheckResult("data_checks", CheckStatus.ERROR,
                                f"the data checks could not run: {type(exc).__name__}: {self.scrub(str(exc))}",
                                kind=CheckKind.DATA)]

    # -- what to validate ------------------------------------------------------------------------

    def _tables(self, access: DataAccess, engines: dict[str, Any]) -> tuple[list[Table], list[str]]:
        tables: list[Table] = []
        notes: list[str] = []
        limit = self.checks.baselines.max_tables
        for database in access.databases:
            found, count = read_tables(engines[database], database, SYSTEM_SCHEMAS, limit)
            tables += found
            if count > limit:
                notes.append(f"database {database}: {count} tables, the first {limit} profiled "
                             "(checks.baselines.max_tables)")
        return tables, notes

    def _watched(self, tables: list[Table], access: DataAccess) -> tuple[dict[str, list[freshness.Watched]], list[str]]:
        """The timestamp columns to read, by table; and configured ones that do not exist (findings)."""
        settings = self.checks.freshness
        by_table: dict[str, list[freshness.Watched]] = {}
        missing: list[str] = []
        if not settings.enabled:
            return by_table, missing
        for entry in settings.columns.get(self.verified, []):
            database = entry.database or access.main_database
            table = find_table(tables, database, entry.table)
            column = next((c for c in table.columns if c.name == entry.column), None) if table else None
            if table is None or column is None:
                missing.append(f"freshness column {entry.table}.{entry.column} (database {database}) does not "
                               "exist in the restored data")
                continue
            by_table.setdefault(table.qualified, []).append(freshness.Watched(
                table, column, entry.max_age_seconds or self.rpo_seconds, configured=True))
        if settings.auto:
            for table in tables:
                taken = {w.column.name for w in by_table.get(table.qualified, [])}
                by_table.setdefault(table.qualified, []).extend(
                    freshness.Watched(table, column, self.rpo_seconds, configured=False)
                    for column in timestamp_columns(table, settings.name_patterns) if column.name not in taken)
        return {key: value for key, value in by_table.items() if value}, missing

    def _user_batches(self, access: DataAccess, tables: list[Table]) -> tuple[list[_Batch], list[CheckResult]]:
        batches, unplaced = [], []
        for number, suite in enumerate(self.suites):
            database = suite.batch.database or access.main_database
            if database is None or database not in access.databases:
                why = (f"it names database {database}, which the restored server does not hold "
                       f"(it holds {', '.join(access.databases) or 'none'})" if database else
                       "the restored server holds several databases: say which with database:")
                unplaced.append(CheckResult(suite.check, CheckStatus.ERROR, f"not run: {why}",
                                            details={"origin": suite.origin}, required=suite.required,
                                            kind=CheckKind.DATA))
                continue
            if suite.batch.table is not None:
                table = find_table(tables, database, suite.batch.table)
                if table is None:
                    unplaced.append(CheckResult(suite.check, CheckStatus.FAILED,
                                                f"table {suite.batch.table} does not exist in database {database}",
                                                [f"database {database}: table {suite.batch.table} is missing"],
                                                details={"origin": suite.origin}, required=suite.required,
                                                kind=CheckKind.DATA))
                    continue
                batches.append(_Batch(f"user-{number}", database, table, None,
                                      f"database {database}, table {table.in_database}", suite.expectations, suite))
            else:
                batches.append(_Batch(f"user-{number}", database, None, suite.batch.query,
                                      f"database {database}, query {suite.label}", suite.expectations, suite))
        return batches, unplaced

    # -- running -----------------------------------------------------------------------------------

    def _run(self, access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        import sqlalchemy

        gx = import_gx()
        engines = {database: sqlalchemy.create_engine(access.url(database), poolclass=sqlalchemy.pool.NullPool)
                   for database in access.databases}
        try:
            tables, notes = self._tables(access, engines)
        finally:
            for engine in engines.values():
                engine.dispose()
        user, unplaced = self._user_batches(access, tables)
        watched, missing = self._watched(tables, access)
        point, _ = _reference(access)
        made: list[_Batch] = []
        if self.checks.baselines.enabled or watched:
            for number, table in enumerate(tables):
                expectations = (baselines.expectations(table, self.previous.get(table.qualified),
                                                       self.checks.baselines)
                                if self.checks.baselines.enabled else [])
                mine = watched.get(table.qualified, []) if point is not None else []
                expectations += [freshness.expectation(w, point) for w in mine if point is not None]
                if expectations:
                    made.append(_Batch(f"table-{number}", table.database, table, None,
                                       f"database {table.database}, table {table.in_database}", expectations,
                                       watched=mine))
        batches = user + made
        if batches:
            self._validate(gx, access, evidence, batches)
        checks = [self._user_check(batch) for batch in user] + unplaced
        if self.checks.baselines.enabled:
            checks.append(self._baseline_check(made, tables, notes))
        if self.checks.freshness.enabled:
            checks.append(self._freshness_check(made, watched, missing, access))
        return checks

    def _validate(self, gx: Any, access: DataAccess, evidence: Evidence, batches: list[_Batch]) -> None:
        from great_expectations.checkpoint.actions import UpdateDataDocsAction
        from great_expectations.core.expectation_suite import ExpectationSuite

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = {"globally": False}
        docs = (evidence.folder / DOCS_FOLDER).resolve()  # GX wants an absolute folder; reports may be relative
        context.add_data_docs_site("evidence", {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
        import sqlalchemy

        sources = {}
        for number, database in enumerate(sorted({batch.database for batch in batches})):
            sources[database] = context.data_sources.add_sql(f"database-{number}-{_name(database)}",
                                                             connection_string=access.url(database))
        definitions = []
        for batch in batches:
            source = sources[batch.database]
            if batch.table is not None:
                asset = source.add_table_asset(batch.key, table_name=batch.table.name, schema_name=batch.table.schema)
            else:
                query = batch.query or ""
                if batch.suite is not None and batch.suite.expected_value is not None:
                    # A deprecated SQL check: its single value as text, in the server's own dialect.
                    dialect = sqlalchemy.create_engine(access.url(batch.database)).dialect
                    select = sqlalchemy.select(sqlalchemy.cast(sqlalchemy.text(f"({query})"), sqlalchemy.String)
                                               .label(SQL_VALUE_COLUMN))
                    query = str(select.compile(dialect=dialect))
                asset = source.add_query_asset(batch.key, query=query)
            definition = asset.add_batch_definition_whole_table(f"{batch.key}-whole")
            suite = context.suites.add(ExpectationSuite(batch.key, expectations=[dict(e) for e in batch.expectations]))
            definitions.append(context.validation_definitions.add(
                gx.ValidationDefinition(data=definition, suite=suite, name=batch.key)))
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name=f"restoreproof-{_name(self.verified)}", validation_definitions=definitions,
            actions=[UpdateDataDocsAction(name="data-docs", site_names=["evidence"])],
            result_format={"result_format": "SUMMARY"}))
        try:
            result = checkpoint.run()
        finally:  # no pooled connection left open to the server through the integrity checks
            for source in sources.values():
                with contextlib.suppress(Exception):
                    source.get_engine().dispose()
        by_suite = {getattr(run, "suite_name", None): run for run in result.run_results.values()}
        for batch in batches:
            run = by_suite.get(batch.key)
            if run is None:
                batch.error = "Great Expectations returned no result for it"
                continue
            batch.evidence = evidence.write(f"{RESULTS_FOLDER}/{batch.key}.json",
                                            json.dumps(run.to_json_dict(), indent=1, default=str) + "\n")
            try:
                batch.outcomes = [outcome_of(item) for item in run.results]
            except UnrecognisedResult as exc:
                batch.error = f"an output not recognised: {exc}"
                continue
            if len(batch.outcomes) != len(batch.expectations):
                batch.error = (f"{len(batch.expectations)} expectations, {len(batch.outcomes)} results: "
                               "an output not recognised")
        index = docs / "index.html"
        if index.is_file():
            evidence.files[f"{DOCS_FOLDER}/index.html"] = f"{evidence.folder.name}/{DOCS_FOLDER}/index.html"
            evidence.scrub_tree(DOCS_FOLDER)

    # -- reading back --------------------------------------------------------------------------

    def _finding(self, batch: _Batch, outcome: Outcome) -> str:
        return f"{batch.label}: {outcome.describe()} failed, observed {outcome.observed!r}"

    def _user_check(self, batch: _Batch) -> CheckResult:
        suite = batch.suite
        assert suite is not None
        details: dict[str, Any] = {"origin": suite.origin, "database": batch.database,
                                   "expectations": [o.to_json() for o in batch.outcomes]}
        if batch.table is not None:
            details["table"] = batch.table.in_database
        else:
            details["query"] = batch.query

        def result(status: CheckStatus, summary: str, findings: list[str] | None = None) -> CheckResult:
            return CheckResult(suite.check, status, summary, findings or [], details, batch.evidence,
                               suite.required, CheckKind.DATA)

        if batch.error:
            return result(CheckStatus.ERROR, f"{batch.label}: not evaluated: {self.scrub(batch.error)}")
        raised = [o for o in batch.outcomes if o.success is None]
        if raised:
            return result(CheckStatus.ERROR, f"{batch.label}: {len(raised)} of {len(batch.outcomes)} expectations "
                          "could not be evaluated", [f"{batch.label}: {o.describe()}: {self.scrub(o.error or '')}"
                                                     for o in raised])
        # GX holds a column expectation met on zero rows: for a suite someone wrote, nothing was checked.
        empty = [o for o in batch.outcomes if o.success and o.rows == 0]
        if empty:
            return result(CheckStatus.ERROR, f"{batch.label}: {len(empty)} expectations looked at no rows, so "
                          "they checked nothing", [f"{batch.label}: {o.describe()}: no rows" for o in empty])
        failed = [o for o in batch.outcomes if o.success is False]
        if suite.expected_value is not None:  # a deprecated SQL check says its value the old way
            details["expect"] = suite.expected_value
            details["value"] = _sql_value(suite.expected_value, batch.outcomes)
        if failed:
            return result(CheckStatus.FAILED, f"{len(failed)} of {len(batch.outcomes)} expectations failed on "
                          f"{batch.label}", [self._finding(batch, o) for o in failed])
        if not batch.outcomes:
            return result(CheckStatus.ERROR, f"{batch.label}: no expectation was evaluated")
        observed = "; ".join(f"{o.type}: {o.observed!r}" for o in batch.outcomes if o.observed is not None)
        return result(CheckStatus.PASSED, f"{len(batch.outcomes)} expectations met on {batch.label}"
                      + (f" (observed {observed})" if observed else ""))

    def _baseline_check(self, made: list[_Batch], tables: list[Table], notes: list[str]) -> CheckResult:
        settings = self.checks.baselines
        findings: list[str] = []
        said: list[str] = list(notes)
        errors: list[str] = []
        profile: dict[str, Any] = {}
        for batch in made:
            assert batch.table is not None
            name = batch.table.qualified
            if batch.error:
                errors.append(f"{batch.label}: {batch.error}")
                continue
            rows: int | None = None
            said_before = len(errors)
            for outcome in batch.outcomes:
                role = outcome.meta.get(baselines.ROLE)
                if role not in ("rows", "schema", "key"):
                    continue
                if outcome.success is None:
                    errors.append(f"{batch.label}: {outcome.describe()}: {self.scrub(outcome.error or '')}")
                elif role == "rows":
                    rows = outcome.observed if isinstance(outcome.observed, int) else None
                    before = self.previous.get(name)
                    if outcome.success is False:
                        findings.append(f"{name}: {outcome.observed} rows, {before.rows if before else '?'} in the "
                                        f"last passed verification: more than {settings.row_drop_percent:g}% "
                                        "fewer")
                    elif before is not None and rows is not None and rows != before.rows:
                        said.append(f"{name}: {rows} rows ({rows - before.rows:+d} since the last passed verification)")
                elif outcome.success is False and role == "schema":
                    before = self.previous.get(name)
                    now = {c.name for c in batch.table.columns}
                    was = set(before.columns) if before else set()
                    drift = (f"{name}: columns changed since the last passed verification: added "
                             f"{sorted(now - was) or 'none'}, removed {sorted(was - now) or 'none'}")
                    (findings if settings.schema_drift == "fail" else said).append(drift)
                elif outcome.success is False:
                    findings.append(self._finding(batch, outcome))
            if rows is None and len(errors) == said_before:  # not when its row count raised (said above)
                errors.append(f"{batch.label}: no row count came back")
            profile[name] = {"rows": rows, "columns": [c.name for c in batch.table.columns]}
        gone, quiet = baselines.missing_tables(self.previous, [t.qualified for t in tables],
                                               not any("profiled" in n for n in notes), settings)
        findings += gone
        said += quiet + [f"{name}: new since the last passed verification"
                         for name in baselines.new_tables(self.previous, [t.qualified for t in tables])]
        details: dict[str, Any] = {"tables": profile, "compared": bool(self.previous), "notes": said,
                                   "row_drop_percent": settings.row_drop_percent,
                                   "schema_drift": settings.schema_drift}
        first = "" if self.previous else " (the first baseline: recorded for the next verification)"
        if errors:
            return CheckResult(CheckName.DATA_BASELINE, CheckStatus.ERROR,
                               f"{len(errors)} baseline expectations could not be evaluated", errors, details,
                               kind=CheckKind.DATA)
        if findings:
            return CheckResult(CheckName.DATA_BASELINE, CheckStatus.FAILED,
                               f"{len(findings)} tables differ from the last passed verification", findings, details,
                               kind=CheckKind.DATA)
        return CheckResult(CheckName.DATA_BASELINE, CheckStatus.PASSED,
                           f"{len(profile)} tables: row counts, keys{' and columns' if self.previous else ''} as "
                           f"expected{first}", details=details, kind=CheckKind.DATA)

    def _freshness_check(self, made: list[_Batch], watched: dict[str, list[freshness.Watched]], missing: list[str],
                         access: DataAccess) -> CheckResult:
        point, reference = _reference(access)
        if point is None:
            return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.SKIPPED,
                               "not judged: neither the server nor the backup said which point was restored",
                               required=False, kind=CheckKind.DATA)
        if not watched and not missing:
            return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.SKIPPED,
                               "no table has a timestamp column that says when its rows were written "
                               "(name one in checks.freshness.columns)", required=False, kind=CheckKind.DATA)
        observed: list[tuple[freshness.Watched, str, Any]] = []
        errors: list[str] = []
        for batch in made:
            if not batch.watched:
                continue
            if batch.error:
                errors.append(f"{batch.label}: {batch.error}")
                continue
            outcomes = [o for o in batch.outcomes if o.meta.get(baselines.ROLE) in (freshness.CONFIGURED,
                                                                                    freshness.AUTOMATIC)]
            for watch, outcome in zip(batch.watched, outcomes, strict=False):
                if outcome.success is None:
                    errors.append(f"{batch.label}: {outcome.describe()}: {self.scrub(outcome.error or '')}")
                else:
                    observed.append((watch, f"{watch.table.qualified}.{watch.column.name}", outcome.observed))
            if len(outcomes) != len(batch.watched):
                errors.append(f"{batch.label}: {len(batch.watched)} columns watched, {len(outcomes)} results")
        judged = freshness.judge(observed, point, access.backup_end, self.rpo_seconds)
        details: dict[str, Any] = {
            "restore_point": point.isoformat(), "restore_point_from": reference, "rpo_seconds": self.rpo_seconds,
            "backup_end": access.backup_end.isoformat() if access.backup_end else None,
            "newest": judged.said, "notes": judged.notes,
            "data_point": judged.data_point.isoformat() if judged.data_point else None,
            "data_rpo_seconds": judged.data_rpo_seconds,
            "naive_timestamps_read_as": "UTC"}
        findings = missing + judged.findings
        if not errors and not findings and judged.data_point is None:
            return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.SKIPPED,
                               "not judged: no timestamp column holds a value", details=details, required=False,
                               kind=CheckKind.DATA)
        if errors:
            return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.ERROR,
                               f"{len(errors)} freshness expectations could not be evaluated", errors, details,
                               kind=CheckKind.DATA)
        if findings:
            return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.FAILED, findings[0], findings, details,
                               kind=CheckKind.DATA)
        freshest = next((line for line in judged.said if judged.data_point and judged.data_point.isoformat() in line),
                        judged.said[0] if judged.said else "no timestamps")
        return CheckResult(CheckName.DATA_FRESHNESS, CheckStatus.PASSED, freshest, details=details, kind=CheckKind.DATA)


def _reference(access: DataAccess) -> tuple[datetime | None, str]:
    """The point freshness is measured against: the last transaction the server replayed, or, where
    it replayed none after the backup (nothing was written since), the end of the newest backup,
    the point the restored data is consistent at."""
    if access.restore_point is not None:
        return access.restore_point, "the restored server's last replayed transaction"
    if access.backup_end is not None:
        return access.backup_end, "the end of the newest backup (the server replayed no transaction after it)"
    return None, "unknown"


def _sql_value(expected: str, outcomes: list[Outcome]) -> str | None:
    """A deprecated SQL check's value: the one expected when no row was unexpected, else the value
    the in-set expectation saw (None: the query gave NULL)."""
    judged = next((o for o in outcomes if o.type == "unexpected_rows_expectation"), None)
    if judged is not None and judged.success:
        return expected
    shown = next((o for o in outcomes if o.type == "expect_column_values_to_be_in_set"), None)
    sample = shown.sample if shown is not None else []
    return str(sample[0]) if sample else None


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text)[:60] or "x"

