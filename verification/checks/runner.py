"""Run one restored database's data checks with Great Expectations 1.x, and read them into checks.

One ephemeral GX context per database verified: a SQL data source per database of the restored
server (the URL the engine gave, which reaches the target without giving it a way out), a table or
query asset per validation with a whole-table batch definition, an ExpectationSuite and a
ValidationDefinition each, run by a Checkpoint each, one after the other; then GX's Data Docs, built
aside and copied into the evidence (`<evidence>/data-docs/index.html`). Each validation's result JSON
is evidence too.

One validation per table: the suites users wrote for it, its baseline and its freshness are one
GX suite, so that GX computes each metric they share once (on a large table each is a pass over
every row: the row count, a uniqueness window, a null count). Every expectation is still evaluated
on every row, and each one's result goes back to the suite it came from (the meta key `BATCH`).

`checks.timeout` bounds all of it: the checks run in a worker thread, and when the time is up the
engine gets what was evaluated by then, each validation that was not as an error naming the
timeout, and a `data_checks` error saying what was left. The worker then records and writes
nothing more; its last query ends at the engine's own statement timeout, or when the target goes.

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
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from verification.checks import baseline as baselines
from verification.checks import freshness
from verification.checks.profile import Table, find_table, read_tables, timestamp_columns
from verification.checks.results import Outcome, UnrecognisedResult, outcome_of
from verification.checks.suites import SQL_VALUE_COLUMN, Suite
from verification.config import Settings
from verification.engines.base import DataAccess, Evidence
from verification.model import CheckKind, CheckName, CheckResult, CheckStatus
from verification.redaction import Redactor

DOCS_FOLDER = "data-docs"
RESULTS_FOLDER = "data-checks"
# Schemas that hold the server's own catalogue, never user data.
SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "pg_toast", "sys", "guest", "cdc"})

_imported: dict[str, float] = {}
# The threads import_gx_alongside started (imports_settled waits for them).
_importing: list[threading.Thread] = []


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


def import_gx_alongside() -> None:
    """Start importing Great Expectations in a daemon thread, so the seconds it takes pass while the
    target is provisioned and restored rather than after the server is online; the data checks'
    own import then finds it done (or waits for the rest). A failed import is left to the data
    checks to report, as before."""
    if "seconds" in _imported or "great_expectations" in sys.modules:
        return

    def quietly() -> None:
        with contextlib.suppress(Exception):
            import_gx()

    thread = threading.Thread(target=quietly, name="restoreproof-import-gx", daemon=True)
    _importing.append(thread)
    thread.start()


def imports_settled(timeout: float = 300.0) -> None:
    """Wait for the import started alongside to end. Until it has, the modules it is importing
    (pandas, numpy) are in sys.modules half made, and whoever takes them from there without importing
    them sees that: plotly does, drawing the report's charts ("partially initialized module 'pandas'"),
    in a run that reaches its report first (every database refused before its target starts)."""
    for thread in _importing:
        thread.join(timeout)


# Each batch is validated first without asking for examples of unexpected values: for a uniqueness
# expectation GX fetches them with a second pass over the whole table (a window over every row), run
# even when nothing is unexpected. The counts that decide success are the same in both passes; only
# a batch where something was unexpected (failed, or within `mostly`) is validated again, with the
# examples, and that second run is what is kept and read.
FIRST_PASS: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 0}
SAMPLES: dict[str, Any] = {"result_format": "SUMMARY"}


def _has_unexpected(run: Any) -> bool:
    """Whether any expectation of the run failed or saw an unexpected value (an unknown shape counts)."""
    results = getattr(run, "results", None)
    if not isinstance(results, list):
        return True
    for result in results:
        said = getattr(result, "result", None) or {}
        if getattr(result, "success", None) is not True or not isinstance(said, dict):
            return True
        if said.get("unexpected_count"):
            return True
    return False


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
    done: bool = False  # its result is in (set by the worker, under the runner's lock)


# The meta key saying which batch (a user's suite, or a table's baseline and freshness) an
# expectation of a validation came from: its result is read back into that batch.
BATCH = "restoreproof_batch"


@dataclass
class _Validation:
    """One GX validation: every batch on one table of one database (in the order planned), or one
    query's batch. It is named after its first batch, and its result is the evidence of each."""

    batches: list[_Batch]

    @property
    def lead(self) -> _Batch:
        return self.batches[0]

    @property
    def key(self) -> str:
        return self.lead.key

    @property
    def label(self) -> str:
        return self.lead.label

    def expectations(self) -> list[dict[str, Any]]:
        return [{**expectation, "meta": {**(expectation.get("meta") or {}), BATCH: batch.key}}
                for batch in self.batches for expectation in batch.expectations]


def validations(batches: list[_Batch]) -> list[_Validation]:
    """The batches as GX validates them: those on the same table of the same database together, in
    the order the first of each was planned; a query's batch alone."""
    by_table: dict[tuple[str, str], _Validation] = {}
    found: list[_Validation] = []
    for batch in batches:
        if batch.table is None:
            found.append(_Validation([batch]))
        elif (batch.database, batch.table.qualified) in by_table:
            by_table[(batch.database, batch.table.qualified)].batches.append(batch)
        else:
            by_table[(batch.database, batch.table.qualified)] = _Validation([batch])
            found.append(by_table[(batch.database, batch.table.qualified)])
    return found


@dataclass
class _Plan:
    """What one run validates, known once the tables are read."""

    tables: list[Table]  # the tables profiled
    names: list[str]  # every table of every database, profiled or not (database.schema.table)
    notes: list[str]
    user: list[_Batch]
    unplaced: list[CheckResult]
    watched: dict[str, list[freshness.Watched]]
    missing: list[str]
    made: list[_Batch]

    @property
    def batches(self) -> list[_Batch]:
        return self.user + self.made

    @property
    def validations(self) -> list[_Validation]:
        return validations(self.batches)


class DataCheckRunner:
    """The data checks of one verified database (the `DataChecks` an engine calls)."""

    def __init__(self, settings: Settings, verified: str, suites: list[Suite],
                 previous: dict[str, baselines.TableBaseline], rpo_seconds: float,
                 basis: baselines.BaselineBasis | None = None) -> None:
        self.settings = settings
        self.checks = settings.checks
        self.verified = verified
        self.suites = suites
        self.previous = previous
        # Which point this restores, and whose baseline `previous` is (said in the check).
        self.basis = basis or baselines.BaselineBasis()
        self.rpo_seconds = rpo_seconds
        self.redact = Redactor()
        self.worker: threading.Thread | None = None
        # Shared with the worker: how far it got, and whether the time ran out (then it records and
        # writes nothing more).
        self._lock = threading.Lock()
        self._stopped = False
        self._stage = "starting"
        self._plan: _Plan | None = None
        self._docs = False

    def scrub(self, text: str) -> str:
        return self.redact(text)

    def __call__(self, access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        # The target's own secrets (a password in its URL): out of every file written and every check.
        self.redact = Redactor.of(access.secrets)
        evidence.hide(access.secrets)
        finished: list[list[CheckResult]] = []
        self.worker = threading.Thread(target=self._work, args=(access, evidence, finished), daemon=True,
                                       name=f"restoreproof-data-checks-{_name(self.verified)}")
        self.worker.start()
        self.worker.join(self.checks.timeout)
        with self._lock:
            if not finished:
                self._stopped = True
                finished.append(self._expired(access))
        for check in finished[0]:
            self.redact.in_place(check, "summary", "findings", "details")
        return finished[0]

    def _work(self, access: DataAccess, evidence: Evidence, finished: list[list[CheckResult]]) -> None:
        try:
            found = self._run(access, evidence)
        except Exception as exc:  # a bug or a tool that broke: the checks did not run, said as an error
            said = traceback.format_exc()
            found = [CheckResult("data_checks", CheckStatus.ERROR,
                                 f"the data checks could not run: {type(exc).__name__}: {self.scrub(str(exc))}",
                                 kind=CheckKind.DATA)]
            with self._lock:
                if not self._stopped:
                    evidence.write("data-checks.error.txt", self.scrub(said))
        with self._lock:
            if not self._stopped:
                finished.append(found)

    def _expired(self, access: DataAccess) -> list[CheckResult]:
        """The checks when checks.timeout ran out (under the lock): what was evaluated, each validation
        that was not as an error, and one data_checks error saying what was left."""
        limit = f"checks.timeout: {self.checks.timeout:g} s"
        plan = self._plan
        if plan is None:
            return [CheckResult("data_checks", CheckStatus.ERROR,
                                f"the data checks did not finish in time ({limit}): stopped while {self._stage}; "
                                "nothing was evaluated", kind=CheckKind.DATA)]
        left = [validation for validation in plan.validations if not validation.lead.done]
        for validation in left:
            for batch in validation.batches:
                batch.error = f"the data checks ran out of time ({limit})"
        said = (f"{len(left)} of {len(plan.validations)} validations not evaluated (stopped while {self._stage})"
                if left else "every validation was evaluated")
        return [*self._checks(plan, access), CheckResult(
            "data_checks", CheckStatus.ERROR, f"the data checks did not finish in time ({limit}): {said}"
            + ("" if self._docs else "; the Data Docs were not built"), [validation.label for validation in left],
            kind=CheckKind.DATA)]

    # -- what to validate ------------------------------------------------------------------------

    def _named(self, access: DataAccess) -> dict[str | None, list[str]]:
        """The tables the configuration names, by database: read whatever max_tables says."""
        named: dict[str | None, list[str]] = {}
        for suite in self.suites:
            if suite.batch.table is not None:
                named.setdefault(suite.batch.database or access.main_database, []).append(suite.batch.table)
        if self.checks.freshness.enabled:
            for entry in self.checks.freshness.columns.get(self.verified, []):
                named.setdefault(entry.database or access.main_database, []).append(entry.table)
        return named

    def _tables(self, access: DataAccess) -> tuple[list[Table], list[str], list[str]]:
        """The tables profiled, every table's name, and what the report says of the ones not profiled."""
        import sqlalchemy

        tables: list[Table] = []
        names: list[str] = []
        notes: list[str] = []
        limit = self.checks.baselines.max_tables
        named = self._named(access)
        for database in access.databases:
            engine = sqlalchemy.create_engine(access.url(database), poolclass=sqlalchemy.pool.NullPool)
            try:
                found, every = read_tables(engine, database, SYSTEM_SCHEMAS, limit, named.get(database, ()))
            finally:
                engine.dispose()
            tables += found
            names += every
            if len(every) > len(found):
                notes.append(f"database {database}: {len(every)} tables, {len(every) - len(found)} not checked "
                             f"(beyond checks.baselines.max_tables: {limit})")
        return tables, names, notes

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

    def _made_batches(self, tables: list[Table], watched: dict[str, list[freshness.Watched]],
                      point: datetime | None) -> list[_Batch]:
        """Per table profiled: its baseline and freshness expectations."""
        made: list[_Batch] = []
        if not (self.checks.baselines.enabled or watched):
            return made
        for number, table in enumerate(tables):
            expectations = (baselines.expectations(table, self.previous.get(table.qualified), self.checks.baselines)
                            if self.checks.baselines.enabled else [])
            mine = watched.get(table.qualified, []) if point is not None else []
            expectations += [freshness.expectation(w, point) for w in mine if point is not None]
            if expectations:
                made.append(_Batch(f"table-{number}", table.database, table, None,
                                   f"database {table.database}, table {table.in_database}", expectations,
                                   watched=mine))
        return made

    # -- running -----------------------------------------------------------------------------------

    def _run(self, access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        self._stage = "importing Great Expectations"
        gx = import_gx()
        self._stage = "reading the tables of the restored databases"
        tables, names, notes = self._tables(access)
        user, unplaced = self._user_batches(access, tables)
        watched, missing = self._watched(tables, access)
        plan = _Plan(tables, names, notes, user, unplaced, watched, missing,
                     self._made_batches(tables, watched, _reference(access)[0]))
        with self._lock:
            if self._stopped:
                return []
            self._plan = plan
        if plan.batches:
            self._validate(gx, access, evidence, plan.validations)
        return self._checks(plan, access)

    def _checks(self, plan: _Plan, access: DataAccess) -> list[CheckResult]:
        checks = [self._user_check(batch) for batch in plan.user] + plan.unplaced
        if self.checks.baselines.enabled:
            checks.append(self._baseline_check(plan.made, plan.tables, plan.names, plan.notes))
        if self.checks.freshness.enabled:
            checks.append(self._freshness_check(plan.made, plan.watched, plan.missing, access,
                                                len(plan.names) - len(plan.tables)))
        return checks

    def _validate(self, gx: Any, access: DataAccess, evidence: Evidence, planned: list[_Validation]) -> None:
        """Each validation run in turn, its result kept as it comes; then the Data Docs. GX writes
        them into a folder of its own, copied into the evidence only while the time lasts."""
        with tempfile.TemporaryDirectory(prefix="restoreproof-data-docs-") as scratch:
            context = gx.get_context(mode="ephemeral")
            context.variables.progress_bars = {"globally": False}
            context.add_data_docs_site("evidence", {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": scratch},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
            sources: dict[str, Any] = {}
            try:
                for validation in planned:
                    self._stage = f"validating {validation.label}"
                    try:
                        definition = self._definition(gx, context, sources, access, validation)
                        # A checkpoint per validation (its Data Docs built once, below), so that each
                        # result is kept as it comes and a timeout leaves the ones before it.
                        key, run = self._checkpoint(gx, context, definition, validation, FIRST_PASS)
                        if _has_unexpected(run):
                            # Something was unexpected: validated again for the values GX shows of it,
                            # and only that run is kept for the Data Docs.
                            _, run = self._checkpoint(gx, context, definition, validation, SAMPLES)
                            with contextlib.suppress(Exception):  # at worst the Data Docs show both runs
                                context.validation_results_store.remove_key(key)
                    except Exception as exc:  # this one could not be validated at all; the others still are
                        self._record(validation, evidence, None, f"Great Expectations could not validate it: "
                                                                 f"{type(exc).__name__}: {exc}")
                        continue
                    self._record(validation, evidence, run, None)
            finally:  # no pooled connection left open to the server through the integrity checks
                for source in sources.values():
                    with contextlib.suppress(Exception):
                        source.get_engine().dispose()
            self._stage = "building the Data Docs"
            context.build_data_docs(site_names=["evidence"])
            with self._lock:
                if self._stopped:
                    return
                evidence.copy_tree(Path(scratch), DOCS_FOLDER)
                if (Path(scratch) / "index.html").is_file():
                    evidence.files[f"{DOCS_FOLDER}/index.html"] = f"{evidence.folder.name}/{DOCS_FOLDER}/index.html"
                self._docs = True

    def _checkpoint(self, gx: Any, context: Any, definition: Any, validation: _Validation,
                    result_format: dict[str, Any]) -> tuple[Any, Any]:
        """One run of the validation in a checkpoint of its own (named after the pass): the key its
        result is stored under, and the result."""
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name=f"restoreproof-{_name(self.verified)}-{validation.key}"
                 + ("" if result_format is FIRST_PASS else "-samples"),
            validation_definitions=[definition], result_format=result_format))
        ((key, run),) = checkpoint.run().run_results.items()
        return key, run

    def _definition(self, gx: Any, context: Any, sources: dict[str, Any], access: DataAccess,
                    validation: _Validation) -> Any:
        """The validation's ValidationDefinition: its data source (one per database), asset, batch
        definition and suite (every expectation of its batches, each saying its batch)."""
        import sqlalchemy
        from great_expectations.core.expectation_suite import ExpectationSuite

        batch = validation.lead

        if batch.database not in sources:
            sources[batch.database] = context.data_sources.add_sql(
                f"database-{len(sources)}-{_name(batch.database)}", connection_string=access.url(batch.database))
        source = sources[batch.database]
        if batch.table is not None:
            with warnings.catch_warnings():
                # GX 1.14+ deprecates a table asset's schema_name for a schema in the data source's
                # connection configuration; the generic SQL data source (add_sql, the one that takes any
                # SQLAlchemy URL) has no such setting in the pinned 1.24 (its schema_ is always None),
                # and one restored database's tables are in several schemas. So the asset keeps naming
                # its schema and only that warning, raised by that argument, is silenced here.
                warnings.filterwarnings("ignore", message="`schema_name` is deprecated", category=DeprecationWarning)
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
        suite = context.suites.add(ExpectationSuite(batch.key, expectations=validation.expectations()))
        return context.validation_definitions.add(gx.ValidationDefinition(data=definition, suite=suite, name=batch.key))

    def _record(self, validation: _Validation, evidence: Evidence, run: Any, error: str | None) -> None:
        """One validation's result, read back into its batches and kept: unless the time ran out
        meanwhile (then nothing is)."""
        outcomes: dict[str, list[Outcome]] = {batch.key: [] for batch in validation.batches}
        errors: dict[str, str] = {}
        written = None
        if run is not None:
            written = json.dumps(run.to_json_dict(), indent=1, default=str) + "\n"
            outcomes, errors = _outcomes_by_batch(validation, run.results)
        with self._lock:
            if self._stopped:
                return
            path = evidence.write(f"{RESULTS_FOLDER}/{validation.key}.json", written) if written is not None else None
            for batch in validation.batches:
                batch.outcomes, batch.error = outcomes[batch.key], error or errors.get(batch.key)
                batch.evidence, batch.done = path or batch.evidence, True

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

    def _baseline_check(self, made: list[_Batch], tables: list[Table], names: list[str],
                        notes: list[str]) -> CheckResult:
        """Every table profiled against the last passed verification; every table's name, profiled or
        not, for the ones gone since (a table beyond max_tables is present, only not checked)."""
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
        gone, quiet = baselines.missing_tables(self.previous, names, settings)
        findings += gone
        said += quiet + [f"{name}: new since the last passed verification"
                         for name in baselines.new_tables(self.previous, [t.qualified for t in tables])]
        profiled = {t.qualified for t in tables}
        not_checked = [name for name in names if name not in profiled]
        details: dict[str, Any] = {"tables": profile, "compared": bool(self.previous), "notes": said,
                                   "row_drop_percent": settings.row_drop_percent,
                                   "schema_drift": settings.schema_drift, "baseline": self.basis.details()}
        if not_checked:
            details["not_checked"] = not_checked
        first = "" if self.previous else self.basis.first()
        if not_checked:
            first += (f"; {len(not_checked)} more tables not checked (beyond checks.baselines.max_tables: "
                      f"{settings.max_tables})")
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
                         access: DataAccess, not_checked: int = 0) -> CheckResult:
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
            paired, unpaired = freshness.pair(batch.watched, outcomes)
            for watch, outcome in paired:
                if outcome.success is None:
                    errors.append(f"{batch.label}: {outcome.describe()}: {self.scrub(outcome.error or '')}")
                else:
                    observed.append((watch, watch.name, outcome.observed))
            errors += [f"{batch.label}: {said}" for said in unpaired]
        judged = freshness.judge(observed, point, access.backup_end, self.rpo_seconds)
        if not_checked:
            judged.notes.append(f"{not_checked} tables not looked at for timestamp columns (beyond "
                                f"checks.baselines.max_tables: {self.checks.baselines.max_tables})")
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


def _outcomes_by_batch(validation: _Validation, results: Any) -> tuple[dict[str, list[Outcome]], dict[str, str]]:
    """Each result read and given back to the batch its expectation came from; and, by batch, why its
    results cannot be trusted: one not recognised (then none of that batch's is read), or fewer or
    more than it has expectations. A result that says no batch of this validation is unrecognised
    for all of them."""
    outcomes: dict[str, list[Outcome]] = {batch.key: [] for batch in validation.batches}
    errors: dict[str, str] = {}
    for item in results:
        meta = getattr(getattr(item, "expectation_config", None), "meta", None)
        key = meta.get(BATCH) if isinstance(meta, dict) else None
        try:
            outcome = outcome_of(item)
        except UnrecognisedResult as exc:
            for batch in validation.batches:  # ours, or saying no batch of this validation: all of them
                if key in (None, batch.key) or key not in outcomes:
                    errors.setdefault(batch.key, f"an output not recognised: {exc}")
                    outcomes[batch.key] = []
            continue
        if key not in outcomes:
            said = f"an output not recognised: a result for no suite of this validation ({outcome.describe()})"
            return ({batch.key: [] for batch in validation.batches},
                    {batch.key: said for batch in validation.batches})
        if key not in errors:
            outcomes[key].append(outcome)
    for batch in validation.batches:
        if batch.key not in errors and len(outcomes[batch.key]) != len(batch.expectations):
            errors[batch.key] = (f"{len(batch.expectations)} expectations, {len(outcomes[batch.key])} results: "
                                 "an output not recognised")
    return outcomes, errors


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

