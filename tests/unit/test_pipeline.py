"""verify_database's guarantees, with an in-memory target: the target is always closed, and an
unexpected exception becomes that database's "error" verdict with the reason and a traceback."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import broken_plan, complete_plan
from tests.unit.sources import conftest as s3_fixtures
from verification.engines.base import Evidence, RestoreOutcome
from verification.errors import RestoreproofError, TargetError
from verification.model import CheckResult, CheckStatus, Verdict
from verification.pipeline import verify_database
from verification.targets.base import ExecResult

# A real S3 endpoint (moto's server mode, its own process) for the staged restores below.
s3_endpoint, s3 = s3_fixtures.s3_endpoint, s3_fixtures.s3


class MemoryTarget:
    kind = "memory"
    name = "memory-target"
    repo_path = "/repo"
    work_dir = "/work"
    provision_seconds = 0.1
    exchange = None

    def __init__(self) -> None:
        self.closed = 0

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        return ExecResult(argv, 0, "", "", 0.0)

    def write_text(self, path: str, text: str) -> None: ...

    def read_text(self, path: str) -> str:
        return ""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def close(self) -> None:
        self.closed += 1


class MemoryProvider:
    kind = "memory"

    def __init__(self) -> None:
        self.targets: list[MemoryTarget] = []

    def provision(self, run_id: str, database: str, repo_host_path: str) -> MemoryTarget:
        self.targets.append(MemoryTarget())
        return self.targets[-1]


class ExplodingEngine:
    name = "postgres"
    display_name = "a stand-in engine"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    probe_container_start = False

    def product_versions(self, tool_versions: dict[str, str]) -> dict[str, str]:
        return {}

    def tool_versions(self, target: Any) -> dict[str, str]:
        return {"tool": "1.0"}

    def phase_work(self, plan: Any) -> list[Any]:
        return []

    def detect(self, source: Any) -> bool:
        return True

    def plan(self, source: Any, at: Any) -> list[Any]:
        return []

    def check_backup_files(self, plan: Any, source: Any, evidence: Evidence) -> list[CheckResult]:
        return []

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        raise self.exc


def test_unexpected_exception_is_an_error_verdict_and_the_target_is_closed(tmp_path):
    provider = MemoryProvider()
    evidence = Evidence(tmp_path / "demo1")
    result = verify_database(ExplodingEngine(ValueError("boom")), complete_plan(), provider, "run", "/repo", evidence)
    assert result.verdict is Verdict.ERROR
    assert result.reasons == ["internal error: ValueError: boom"]
    assert provider.targets[0].closed == 1
    assert "ValueError: boom" in (tmp_path / "demo1" / "internal-error.txt").read_text()


class OverridingEngine(ExplodingEngine):
    """An engine whose restore overrode a setting of the backup (and failed to come online)."""

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        from verification.model import OverriddenSetting

        outcome = outcome or RestoreOutcome()
        outcome.overridden_settings.append(OverriddenSetting("zero_damaged_pages", "on", "off", "postgresql.conf:9",
                                                             "would hide damaged pages"))
        outcome.errors.append("the restored server did not come online")
        return outcome


def test_the_settings_the_engine_overrode_reach_the_database_result(tmp_path):
    result = verify_database(OverridingEngine(ValueError()), complete_plan(), MemoryProvider(), "run", "/repo",
                             Evidence(tmp_path / "demo1"))
    assert [(o.name, o.backup_value, o.source) for o in result.overridden_settings] == [
        ("zero_damaged_pages", "on", "postgresql.conf:9")]


def test_interrupt_propagates_after_closing_the_target(tmp_path):
    provider = MemoryProvider()
    with pytest.raises(KeyboardInterrupt):
        verify_database(ExplodingEngine(KeyboardInterrupt()), complete_plan(), provider, "run", "/repo",
                        Evidence(tmp_path / "demo1"))
    assert provider.targets[0].closed == 1


def test_a_broken_chain_provisions_nothing(tmp_path):
    provider = MemoryProvider()
    result = verify_database(ExplodingEngine(AssertionError("must not run")), broken_plan(), provider, "run",
                             "/repo", Evidence(tmp_path / "demo1"))
    assert (result.verdict, result.reasons) == (Verdict.FAILED, ["chain broken: missing 000000010000000000000003"])
    assert provider.targets == []


def test_slugs_stay_distinct_for_long_or_odd_names():
    from verification.targets.labels import slug

    long_a, long_b = "a" * 45 + "_one", "a" * 45 + "_two"
    assert slug("demo1") == "demo1"
    assert slug(long_a) != slug(long_b) and len(slug(long_a)) <= 40
    assert slug("sales/eu") != slug("sales eu")


def test_redacting_evidence_never_writes_the_secret(tmp_path, monkeypatch):
    from verification.config import load_settings
    from verification.pipeline import RedactingEvidence, Redactor

    monkeypatch.setenv("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS", "pa55-w0rd-xyz")
    redact = Redactor(load_settings())
    evidence = RedactingEvidence(tmp_path / "db", redact)
    evidence.write("restore.log", "ERROR: cipher pass pa55-w0rd-xyz rejected")
    assert (tmp_path / "db" / "restore.log").read_text() == "ERROR: cipher pass ******** rejected"
    assert redact("x pa55-w0rd-xyz y") == "x ******** y"
    # A target's own secret, known only at run time, is masked beside the configured ones.
    evidence.hide(["target-only-s3cret"])
    evidence.write("data.txt", "pa55-w0rd-xyz target-only-s3cret")
    assert (tmp_path / "db" / "data.txt").read_text() == "******** ********"


class OnlineEngine(ExplodingEngine):
    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        from tests.unit.factories import online_outcome, passed_check

        return online_outcome(passed_check())


class FailingProbes:
    """A prediction context whose probe cannot start its second container."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def predict(self, *args: Any) -> Any:
        from verification.errors import TargetError

        raise TargetError("cannot start a container from restoreproof/postgres:15: no space left on device")


def test_a_failing_prediction_costs_the_prediction_not_the_verdict(tmp_path):
    from verification.config import Settings

    provider = MemoryProvider()
    evidence = Evidence(tmp_path / "demo1")
    result = verify_database(OnlineEngine(AssertionError()), complete_plan(), provider, "run", "/repo", evidence,
                             context=FailingProbes(Settings()))  # type: ignore[arg-type]
    assert result.verdict is Verdict.PASSED, result.reasons
    assert result.prediction is None
    assert "no space left on device" in (tmp_path / "demo1" / "prediction-error.txt").read_text()
    assert provider.targets[0].closed == 1


class UnremovableTarget(MemoryTarget):
    """A target whose removal fails the way an unreachable Docker engine fails: not a TargetError."""

    def close(self) -> None:
        self.closed += 1
        raise ConnectionError("('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))")


class UnremovableProvider(MemoryProvider):
    def provision(self, run_id: str, database: str, repo_host_path: str) -> MemoryTarget:
        self.targets.append(UnremovableTarget() if not self.targets else MemoryTarget())
        return self.targets[-1]


def test_any_exception_while_removing_a_target_is_recorded_and_the_next_database_is_still_verified(tmp_path):
    provider = UnremovableProvider()
    first = verify_database(OnlineEngine(AssertionError()), complete_plan(), provider, "run", "/repo",
                            Evidence(tmp_path / "a"))
    assert first.verdict is Verdict.ERROR
    assert first.reasons == ["the target was not removed (ConnectionError: ('Connection aborted.', "
                             "FileNotFoundError(2, 'No such file or directory'))); `restoreproof reap` removes "
                             "what is left"]
    second = verify_database(OnlineEngine(AssertionError()), complete_plan(), provider, "run", "/repo",
                             Evidence(tmp_path / "b"))
    assert second.verdict is Verdict.PASSED, second.reasons
    assert [t.closed for t in provider.targets] == [1, 1]


def test_a_check_disabled_by_configuration_is_shown_as_skipped_with_its_setting(tmp_path):
    from verification.config import Settings

    settings = Settings()
    settings.evidence.hash_backups = False

    class Context:
        def __init__(self) -> None:
            self.settings = settings

        def predict(self, *args: Any) -> Any:
            return None

    result = verify_database(OnlineEngine(AssertionError()), complete_plan(), MemoryProvider(), "run", "/repo",
                             Evidence(tmp_path / "a"), context=Context())  # type: ignore[arg-type]
    assert result.verdict is Verdict.PASSED
    assert "backup_hashes skipped: not run: disabled by the setting evidence.hash_backups: false" in result.reasons


CORRUPT = CheckResult("pg_amcheck", CheckStatus.FAILED, "pg_amcheck found corruption (1 lines)",
                      ['heap table "postgres.public.t", block 3:'])


class DyingEngine(ExplodingEngine):
    """Proves the backups bad (a failure, a failed check) in the outcome it is given, then raises."""

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        assert outcome is not None, "the pipeline must hand the engine the outcome it decides on"
        outcome.failures.append("pgbackrest restore of backup X failed: [029] zlib data error")
        outcome.checks.append(CORRUPT)
        raise self.exc


@pytest.mark.parametrize(("exc", "said"), [
    (TargetError("container restoreproof-x exited"), "target: container restoreproof-x exited"),
    (RestoreproofError("pg_ctl cannot be run"), "pg_ctl cannot be run"),
    (ValueError("boom"), "internal error: ValueError: boom"),
])
def test_an_exception_after_a_proven_failure_keeps_the_failure_first(tmp_path, exc, said):
    result = verify_database(DyingEngine(exc), complete_plan(), MemoryProvider(), "run", "/repo",
                             Evidence(tmp_path / "a"))
    assert (result.verdict, result.reasons) == (Verdict.FAILED, [
        "pgbackrest restore of backup X failed: [029] zlib data error",
        'pg_amcheck failed: pg_amcheck found corruption (1 lines): heap table "postgres.public.t", block 3:', said])
    assert result.checks == [CORRUPT]


def test_a_target_not_removed_after_a_proven_failure_is_kept_after_it(tmp_path):
    result = verify_database(DyingEngine(ValueError("boom")), complete_plan(), UnremovableProvider(), "run",
                             "/repo", Evidence(tmp_path / "a"))
    assert result.verdict is Verdict.FAILED
    assert result.reasons[2:] == ["internal error: ValueError: boom",
                                  "the target was not removed (ConnectionError: ('Connection aborted.', "
                                  "FileNotFoundError(2, 'No such file or directory'))); `restoreproof reap` "
                                  "removes what is left"]


def damaged_corpus(mssql_copy: Any) -> Any:
    """RestoreTimeClean with its newest log's head zeroed: a corrupt file its trailer still attributes."""
    root = mssql_copy("RestoreTimeClean")
    newest = root / "RestoreTimeClean/RestoreTimeClean2_3.trn"
    data = bytearray(newest.read_bytes())
    data[0:4] = bytes(4)
    newest.write_bytes(bytes(data))
    return root


def test_discover_verify_one_publish_is_the_whole_run_without_a_server(mssql_copy, tmp_path):
    import json
    from datetime import UTC, datetime

    from verification.config import load_settings
    from verification.pipeline import RunRequest, discover, publish, resume, verify_one

    root = damaged_corpus(mssql_copy)
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports")
    started = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    said: list[str] = []
    discovery = discover(settings, RunRequest(str(root), "mssql"), "run1", started, progress=said.append)
    assert [p.database for p in discovery.plans] == ["RestoreTimeClean"]
    assert [(u.path, u.kind, u.database) for u in discovery.unreadable] == [
        ("RestoreTimeClean/RestoreTimeClean2_3.trn", "corrupt", "RestoreTimeClean")]
    assert said[0].startswith("corrupt: RestoreTimeClean/RestoreTimeClean2_3.trn")
    # Another process picks the run up from the store alone.
    resumed = resume(settings, "run1")
    verified = verify_one(settings, resumed, resumed.plan("RestoreTimeClean"),
                          target=(None, "no SQL Server image can be had here"))
    assert verified.entry.verdict == "failed"
    assert verified.entry.reasons[0].startswith("log backup RestoreTimeClean/RestoreTimeClean2_3.trn (LSN 25000000021000001")
    assert "not restored: no SQL Server image can be had here" in verified.entry.reasons
    published = publish(settings, "run1")
    report = json.loads(published.outputs.json_path.read_text())
    assert published.outputs.json_path == tmp_path / "reports" / "run1" / "report.json"
    assert (report["verdict"], report["summary"], report["not_verified"]) == (
        "failed", {"passed": 0, "failed": 1, "error": 0}, [])
    assert report["databases"] == [verified.entry.model_dump(mode="json")]
    assert [u["path"] for u in report["unreadable"]] == ["RestoreTimeClean/RestoreTimeClean2_3.trn"]
    assert report["target_kind"] is None and "due" not in report["host"] and "target_asked" not in report["host"]


def test_a_database_left_out_takes_its_own_unread_files_with_it(mssql_copy, tmp_path):
    from datetime import UTC, datetime

    from verification.config import load_settings
    from verification.errors import SourceError
    from verification.pipeline import RunRequest, discover

    root = damaged_corpus(mssql_copy)
    (root / "notes.txt").write_text("not a backup")
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports")
    now = datetime.now(UTC)
    left_out = discover(settings, RunRequest(str(root), "mssql", exclude=("RestoreTimeClean",)), "r1", now)
    assert left_out.plans == []
    # Its damaged log is its own to answer for; a file nobody owns stays named.
    assert [(u.path, u.kind) for u in left_out.unreadable] == [("notes.txt", "not-a-backup")]
    with pytest.raises(SourceError, match=r"has no database RestoreTimeClan \(it has: RestoreTimeClean\)$"):
        discover(settings, RunRequest(str(root), "mssql", databases=("RestoreTimeClan",)), "r2", now)


# ---- a run discovered again, a try that dies, what a selection leaves out (review findings F1-F4) --------

START = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)


def two_stanzas(repo: Path) -> Path:
    shutil.copytree(repo / "backup" / "demo1", repo / "backup" / "demo2")
    shutil.copytree(repo / "archive" / "demo1", repo / "archive" / "demo2")
    return repo


def settings_for(tmp_path: Path, **extra: Any) -> Any:
    from verification.config import load_settings

    return load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                         report_dir=tmp_path / "reports", **extra)


def record_passed(settings: Any, run_id: str, name: str, discovery: str | None = None) -> None:
    from tests.unit.factories import online_outcome, passed_check
    from verification.model import DatabaseResult, RestorePoint
    from verification.reports.json_report import database_entry
    from verification.results import ResultStore

    plan = complete_plan()
    plan.database = name
    outcome = online_outcome(passed_check())
    result = DatabaseResult(name, Verdict.PASSED, ["ok"], plan, RestorePoint("latest", START), outcome.phases,
                            outcome.checks)
    store = ResultStore(settings.results_database_url)
    try:
        store.record_database(run_id, database_entry(result), discovery)
    finally:
        store.close()


def test_a_run_discovered_again_is_due_what_the_new_discovery_found(captured_repo, tmp_path):
    from verification import pipeline

    repo = two_stanzas(captured_repo)
    settings = settings_for(tmp_path)
    first = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres", ("demo1",)), "r1", START)
    second = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres"), "r1", START)
    assert [p.database for p in second.plans] == ["demo1", "demo2"] and first.generation != second.generation
    record_passed(settings, "r1", "demo1", second.generation)  # demo2 never verified (budget, a lost worker)
    report = pipeline.publish(settings, "r1").report
    assert [n.database for n in report.not_verified] == ["demo2"] and report.verdict == "error"


def test_configuration_naming_a_database_the_source_lacks_is_warned_and_in_the_report_never_silent(
        captured_repo, tmp_path):
    from verification import pipeline

    repo = two_stanzas(captured_repo)
    suites = tmp_path / "suites"
    (suites / "demo2").mkdir(parents=True)  # demo2 is in the source, only not asked for tonight
    (suites / "demo3").mkdir()
    rows = {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}}
    settings = settings_for(tmp_path, checks={
        "expectations": {"demo1": [{"table": "t", "expect": [rows]}], "dmeo2": [{"table": "t", "expect": [rows]}]},
        "freshness": {"columns": {"demo2": [{"table": "t", "column": "at"}], "gone": [{"table": "t", "column": "at"}]}},
        "suites_dir": str(suites), "sql": [{"name": "n", "query": "select 1", "expect": 1}]})
    said: list[str] = []
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres", ("demo1",)), "r1", START,
                                  progress=said.append)
    assert [p.database for p in discovery.plans] == ["demo1"]
    warned = [
        "checks.sql is deprecated (1 checks): they run as Great Expectations unexpected-rows expectations; write "
        "them under checks.expectations",
        "checks.expectations.dmeo2 names database dmeo2, which the source does not have (it has: demo1, demo2): "
        "nothing of it is checked",
        "checks.freshness.columns.gone names database gone, which the source does not have (it has: demo1, demo2): "
        "nothing of it is checked",
        f"checks.suites_dir {suites / 'demo3'} names database demo3, which the source does not have (it has: demo1, "
        "demo2): nothing of it is checked"]
    assert [line for line in said if line.startswith("warning: ")] == [f"warning: {w}" for w in warned]
    record_passed(settings, "r1", "demo1", discovery.generation)
    published = pipeline.publish(settings, "r1")
    assert published.report.warnings == warned
    assert "warnings" not in published.report.host  # the run's own facts, not the host's
    assert json.loads(published.outputs.json_path.read_text())["warnings"] == warned
    assert "nothing of it is checked" in published.outputs.html_path.read_text()


def test_a_run_discovered_again_reports_the_files_the_new_discovery_could_not_read(captured_repo, tmp_path):
    from verification import pipeline

    settings = settings_for(tmp_path)
    pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    (captured_repo / "archive" / "demo1" / "15-1" / "0000000100000000" / "garbage-segment").write_bytes(b"x")
    second = pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    record_passed(settings, "r1", "demo1", second.generation)
    report = pipeline.publish(settings, "r1").report
    assert [(u.path, u.kind) for u in report.unreadable] == [
        ("archive/demo1/15-1/0000000100000000/garbage-segment", "corrupt")]
    assert report.verdict == "failed"


def test_nothing_verified_from_an_earlier_discovery_is_published_or_recorded(captured_repo, tmp_path):
    from verification import pipeline
    from verification.errors import StaleDiscoveryError

    settings = settings_for(tmp_path)
    first = pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    record_passed(settings, "r1", "demo1", first.generation)
    pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    # The first discovery's entry went with it; a task of it still running records nothing.
    with pytest.raises(StaleDiscoveryError, match=rf"run r1 was discovered again .*\(discovery {first.generation}, "):
        record_passed(settings, "r1", "demo1", first.generation)
    report = pipeline.publish(settings, "r1").report
    assert report.databases == [] and [n.database for n in report.not_verified] == ["demo1"]
    assert report.verdict == "error"


def test_a_try_that_dies_leaves_no_result_not_the_previous_tries(captured_repo, tmp_path, monkeypatch):
    from verification import pipeline

    settings = settings_for(tmp_path)
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    record_passed(settings, "r1", "demo1", discovery.generation)  # an earlier try of the task

    def killed(*_: object, **__: object) -> None:
        raise KeyboardInterrupt  # the worker killed mid-restore

    monkeypatch.setattr(pipeline, "verify_database", killed)
    with pytest.raises(KeyboardInterrupt):
        pipeline.verify_one(settings, discovery, discovery.plan("demo1"), target=(None, "x"))
    report = pipeline.publish(settings, "r1").report
    assert report.databases == [] and [n.database for n in report.not_verified] == ["demo1"]


def test_a_stanza_excluded_by_a_pattern_stays_named(captured_repo, tmp_path):
    from verification import pipeline

    repo = two_stanzas(captured_repo)
    settings = settings_for(tmp_path, exclude=["backup/demo2/*"])
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres"), "r1", START)
    assert [(u.path, u.kind) for u in discovery.unreadable] == [("backup/demo2", "excluded")]
    assert [p.database for p in discovery.plans] == ["demo1"]


def test_a_corrupt_file_nobody_can_be_sure_owns_stays_when_one_database_is_asked_for(mssql_copy, tmp_path):
    from verification import pipeline

    root = mssql_copy("DoubleDiffing", "RestoreTimeClean")
    flat = tmp_path / "flat"
    flat.mkdir()
    for f in [*(root / "DoubleDiffing").iterdir(), *(root / "RestoreTimeClean").iterdir()]:
        shutil.copy(f, flat / f.name)
    # doublediff's newest differential, cut so short that nothing in it says whose it is.
    (flat / "broken.bak").write_bytes((root / "DoubleDiffing" / "difftest-diff2.bak").read_bytes()[:300000])
    settings = settings_for(tmp_path)
    everything = pipeline.discover(settings, pipeline.RunRequest(str(flat), "mssql"), "all", START)
    assert [(u.path, u.kind) for u in everything.unreadable] == [("broken.bak", "corrupt")]
    only = pipeline.discover(settings, pipeline.RunRequest(str(flat), "mssql", ("doublediff",)), "one", START)
    assert [p.database for p in only.plans] == ["doublediff"]
    assert [(u.path, u.kind) for u in only.unreadable] == [("broken.bak", "corrupt")]


def test_a_run_started_before_discoveries_had_a_generation_is_still_verified(captured_repo, tmp_path):
    from verification import pipeline
    from verification.model import RunResult
    from verification.results import ResultStore

    settings = settings_for(tmp_path)
    plans = pipeline.plan_source(settings, captured_repo, "postgres")[2].plans
    store = ResultStore(settings.results_database_url)
    store.start_run(RunResult(run_id="r0", engine="postgres", source=str(captured_repo), started_at=START,
                              host={"due": ["demo1"]}), tmp_path / "reports" / "r0")
    store.record_plans("r0", plans)
    store.close()
    resumed = pipeline.resume(settings, "r0")
    assert resumed.generation is None
    entry = pipeline.verify_one(settings, resumed, resumed.plan("demo1"), target=(None, "no target here")).entry
    assert (entry.verdict, entry.reasons[-1]) == ("error", "not restored: no target here")
    assert [d.database for d in pipeline.publish(settings, "r0").report.databases] == ["demo1"]


# ---- the checks of the backup files, before any target ----------------------------------------------------


def _files_check(status: CheckStatus, summary: str, findings: list[str] | None = None) -> CheckResult:
    from verification.model import CheckKind

    return CheckResult("page_verification", status, summary, findings or [], kind=CheckKind.BACKUP_FILES)


class FilesCheckingEngine(OnlineEngine):
    """Restores and passes; its offline check of the backup files answers `found` (or raises it)."""

    def __init__(self, found: CheckResult | BaseException) -> None:
        super().__init__(AssertionError())
        self.found = found
        self.order: list[str] = []

    def check_backup_files(self, plan: Any, source: Any, evidence: Evidence) -> list[CheckResult]:
        self.order.append("files")
        if isinstance(self.found, BaseException):
            raise self.found
        return [self.found]

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        self.order.append("restore")
        return super().restore_and_check(plan, target, evidence, outcome)


DAMAGED = _files_check(CheckStatus.FAILED, "1 damaged page(s)", ["x.bak: offset 0x4000, page 1:9: checksum mismatch"])


def test_a_page_damaged_offline_fails_a_database_no_server_could_restore(tmp_path):
    engine = FilesCheckingEngine(DAMAGED)
    result = verify_database(engine, complete_plan(), None, "run", "/repo", Evidence(tmp_path / "db"),
                             source=object(), no_target="image x unavailable")  # type: ignore[arg-type]
    assert result.verdict is Verdict.FAILED
    assert result.reasons == ["page_verification failed: 1 damaged page(s): x.bak: offset 0x4000, page 1:9: "
                              "checksum mismatch", "not restored: image x unavailable"]
    assert engine.order == ["files"] and result.checks == [DAMAGED]


def test_a_clean_offline_check_without_a_server_is_an_error_that_says_what_was_checked(tmp_path):
    clean = _files_check(CheckStatus.PASSED, "no damaged page; 376 pages")
    result = verify_database(FilesCheckingEngine(clean), complete_plan(), None, "run", "/repo",
                             Evidence(tmp_path / "db"), source=object(), no_target="image x unavailable")  # type: ignore[arg-type]
    assert (result.verdict, result.reasons) == (Verdict.ERROR, [
        "not restored: image x unavailable",
        "page_verification (backup files, not a verdict on the data): no damaged page; 376 pages"])


def test_the_backup_files_are_checked_before_the_restore_and_kept_beside_its_checks(tmp_path):
    clean = _files_check(CheckStatus.PASSED, "no damaged page; 376 pages")
    engine = FilesCheckingEngine(clean)
    provider = MemoryProvider()
    result = verify_database(engine, complete_plan(), provider, "run", "/repo", Evidence(tmp_path / "db"),
                             source=object())  # type: ignore[arg-type]
    assert engine.order == ["files", "restore"]
    assert result.verdict is Verdict.PASSED, result.reasons
    assert [c.name for c in result.checks] == ["page_verification", "pg_amcheck"]
    assert "page_verification: no damaged page; 376 pages" in result.reasons


def test_a_page_damaged_offline_fails_a_database_whose_restore_passed(tmp_path):
    engine = FilesCheckingEngine(DAMAGED)
    result = verify_database(engine, complete_plan(), MemoryProvider(), "run", "/repo", Evidence(tmp_path / "db"),
                             source=object())  # type: ignore[arg-type]
    assert result.verdict is Verdict.FAILED
    assert result.reasons[0].startswith("page_verification failed: 1 damaged page(s)")


def test_a_broken_chain_keeps_what_its_backup_files_showed(tmp_path):
    engine = FilesCheckingEngine(DAMAGED)
    provider = MemoryProvider()
    result = verify_database(engine, broken_plan(), provider, "run", "/repo", Evidence(tmp_path / "db"),
                             source=object())  # type: ignore[arg-type]
    assert (result.verdict, result.reasons) == (Verdict.FAILED, [
        "chain broken: missing 000000010000000000000003",
        "page_verification failed: 1 damaged page(s): x.bak: offset 0x4000, page 1:9: checksum mismatch"])
    assert provider.targets == [] and engine.order == ["files"]


def test_a_bug_in_the_offline_check_is_an_error_with_its_traceback_and_the_restore_still_runs(tmp_path):
    engine = FilesCheckingEngine(ValueError("bad offset"))
    result = verify_database(engine, complete_plan(), MemoryProvider(), "run", "/repo", Evidence(tmp_path / "db"),
                             source=object())  # type: ignore[arg-type]
    assert engine.order == ["files", "restore"]
    assert result.verdict is Verdict.ERROR
    assert result.reasons == ["checking the backup files stopped: internal error: ValueError: bad offset"]
    assert "ValueError: bad offset" in (tmp_path / "db" / "internal-error-backup-files.txt").read_text()


def test_an_offline_run_asks_no_engine_for_a_target(tmp_path):
    from verification.pipeline import OFFLINE, OFFLINE_REASON, Discovery, choose_target

    class NoTargets(ExplodingEngine):
        def target_provider(self, kind: str, plans: Any) -> Any:
            raise AssertionError("an offline run must not ask for a target")

    discovery = Discovery("run", datetime.now(UTC), NoTargets(AssertionError()), object(), [complete_plan()], [],  # type: ignore[arg-type]
                          OFFLINE, tmp_path, None)
    assert choose_target(settings_for(tmp_path), discovery, [complete_plan()]) == (None, OFFLINE_REASON)


# ---- a source in object storage: the plan's files staged, the target reading the staged copy ---------------

STAGED = {"backup/demo1/backup.info": b"[backrest]\nx=1\n", "archive/demo1/archive.info": b"[db]\n",
          "backup/demo1/20261122-195034F/backup.manifest": b"[backup]\n" * 50,
          "backup/demo1/20261122-195034F/pg_data/base/1/1259.gz": bytes(range(256)) * 300,
          "archive/demo1/15-1/0000000100000000/000000010000000000000002-aa.gz": b"w" * 7000}


def staged_plan(s3: Any, tmp_path: Path) -> tuple[Any, Any, Any]:
    """A plan of the files in STAGED, in s3://<bucket>/repo beside a file it does not need, and a stager."""
    from verification.sources.s3 import S3Source
    from verification.sources.staging import Stager
    from verification.targets.local import leftovers_dir

    for key, body in {**STAGED, "backup/demo1/20261120-000000F/backup.manifest": b"older"}.items():
        s3.put(f"repo/{key}", body)
    source = S3Source(s3.url("repo"))
    plan = complete_plan()
    plan.files = list(STAGED)
    return plan, source, Stager(source, tmp_path / "state" / "staging", leftovers_dir(tmp_path / "state"))


class RecordingProvider(MemoryProvider):
    def provision(self, run_id: str, database: str, repo_host_path: str) -> MemoryTarget:
        self.repo = repo_host_path
        return super().provision(run_id, database, repo_host_path)


class ReadingEngine(OnlineEngine):
    """Reads the repository the target was given to mount, while it restores: what it saw is kept."""

    def __init__(self, source: Any, provider: RecordingProvider) -> None:
        super().__init__(AssertionError())
        self.source, self.provider = source, provider
        self.saw: dict[str, bytes] = {}
        self.gets_then = -1

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        root = Path(self.provider.repo)
        self.saw = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        self.gets_then = self.source.stats.requests["GetObject"]
        self.staged_copy = outcome.staged_copy if outcome is not None else "no outcome given"
        return super().restore_and_check(plan, target, evidence, outcome, data_checks)


def test_a_plan_in_object_storage_is_staged_restored_from_the_staged_copy_and_removed(s3, tmp_path):
    import hashlib

    from verification.config import load_settings
    from verification.model import PhaseName, PhaseStatus
    from verification.prediction.context import PredictionContext
    from verification.report_model import Bound, Provenance

    plan, source, stager = staged_plan(s3, tmp_path)
    provider = RecordingProvider()
    engine = ReadingEngine(source, provider)
    settings = load_settings(None, state_dir=tmp_path / "state", results_url=f"sqlite:///{tmp_path / 'r.db'}")
    context = PredictionContext(settings, "postgres")
    said: list[str] = []
    result = verify_database(engine, plan, provider, "run-s3", source.describe(), Evidence(tmp_path / "ev"),
                             said.append, context=context, source=source, stager=stager)
    assert result.verdict is Verdict.PASSED, result.reasons
    # The target read a folder holding exactly the plan's files, as the source lays them out, and the
    # engine was told so (its checks of "the repository" covered that copy).
    assert engine.saw == STAGED
    assert engine.staged_copy == f"5 objects staged from {s3.url('repo')}"
    assert Path(provider.repo).parent == tmp_path / "state" / "staging" and not Path(provider.repo).exists()
    download = result.phases[0]
    assert (download.name, download.status, download.bytes) == (
        PhaseName.DOWNLOAD, PhaseStatus.MEASURED, sum(map(len, STAGED.values())))
    assert download.details["objects"] == 5 and download.details["checked"]["checksum"] == {"CRC32": 5}
    assert result.recovery_seconds is not None and result.recovery_seconds >= (download.seconds or 0) > 0
    # Predicted from its bytes at the documented default (no measured run yet).
    assert result.prediction is not None
    predicted = result.prediction.phase(PhaseName.DOWNLOAD)
    assert predicted is not None and predicted.bound is Bound.DOWNLOAD_RATE
    assert predicted.rates["download rate"].provenance is Provenance.DEFAULT
    assert predicted.work.bytes_read == download.bytes and predicted.work.files == 5
    # The evidence hashes the bytes the restore read: the staged copy, not a second download.
    sums = (tmp_path / "ev" / "backup-files.sha256").read_text()
    assert sums == "".join(f"{hashlib.sha256(body).hexdigest()}  {path}\n" for path, body in STAGED.items())
    assert source.stats.requests["GetObject"] == engine.gets_then
    assert "demo1: removing the staged copy" in said
    assert list((tmp_path / "state" / "staging").iterdir()) == []
    assert list((tmp_path / "state" / "leftovers").iterdir()) == []


def test_an_object_rewritten_after_the_plan_is_this_databases_error_and_no_target_is_started(s3, tmp_path):
    from verification.model import PhaseName, PhaseStatus

    plan, source, stager = staged_plan(s3, tmp_path)
    s3.put("repo/backup/demo1/20261122-195034F/backup.manifest", b"[backup]\n" * 49 + b"[backuq]\n")
    provider = MemoryProvider()
    result = verify_database(OnlineEngine(AssertionError("must not run")), plan, provider, "run-s3",
                             source.describe(), Evidence(tmp_path / "ev"), source=source, stager=stager)
    url = f"{s3.url('repo')}/backup/demo1/20261122-195034F/backup.manifest"
    assert (result.verdict, result.reasons) == (Verdict.ERROR, [
        f"the backup files were not staged from {s3.url('repo')}: {url} changed since the source was listed (its "
        "ETag is no longer the one listed; GetObject with If-Match: PreconditionFailed, HTTP 412); not staged"])
    assert provider.targets == []
    assert [(p.name, p.status) for p in result.phases] == [(PhaseName.DOWNLOAD, PhaseStatus.NOT_REACHED)]
    assert result.phases[0].details["why"] == result.reasons[0] and result.recovery_seconds is None
    assert not (tmp_path / "ev" / "backup-files.sha256").exists()
    assert list((tmp_path / "state" / "staging").iterdir()) == []
    assert list((tmp_path / "state" / "leftovers").iterdir()) == []


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), ValueError("boom")])
def test_the_staged_copy_is_removed_whatever_stops_the_restore(s3, tmp_path, exc):
    plan, source, stager = staged_plan(s3, tmp_path)
    provider = MemoryProvider()
    try:
        result = verify_database(ExplodingEngine(exc), plan, provider, "run-s3", source.describe(),
                                 Evidence(tmp_path / "ev"), source=source, stager=stager)
    except KeyboardInterrupt:
        assert isinstance(exc, KeyboardInterrupt)
    else:
        assert result.verdict is Verdict.ERROR and result.reasons == ["internal error: ValueError: boom"]
    assert provider.targets[0].closed == 1
    assert list((tmp_path / "state" / "staging").iterdir()) == []
    assert list((tmp_path / "state" / "leftovers").iterdir()) == []


def test_a_folder_is_read_in_place_its_download_absent_with_why(tmp_path):
    from verification.model import PhaseName, PhaseStatus
    from verification.pipeline import READ_IN_PLACE

    result = verify_database(OnlineEngine(AssertionError()), complete_plan(), MemoryProvider(), "run", "/repo",
                             Evidence(tmp_path / "a"))
    download = result.phases[0]
    assert (download.name, download.status, download.seconds, download.details) == (
        PhaseName.DOWNLOAD, PhaseStatus.ABSENT, None, {"why": READ_IN_PLACE})
    assert result.recovery_seconds == 3.0  # provision and transfer; nothing counted for the absent download
    # Nothing restored, nothing downloaded: no phase at all.
    assert verify_database(OnlineEngine(AssertionError()), complete_plan(), None, "run", "/repo",
                           Evidence(tmp_path / "b")).phases == []


def test_how_a_restore_reads_its_source(s3, tmp_path, captured_repo):
    from verification.config import load_settings
    from verification.pipeline import open_source, stager_for
    from verification.sources.staging import Stager

    s3.put("repo/backup/demo1/backup.info", b"[backrest]\n")
    provider = MemoryProvider()
    settings = load_settings(None, state_dir=tmp_path / "state")
    assert settings.s3.restore_mode == "stage"
    from_s3 = open_source(s3.url("repo"), settings)
    stager = stager_for(settings, from_s3, provider)  # type: ignore[arg-type]
    assert isinstance(stager, Stager) and stager.source is from_s3
    assert (stager.folder, stager.leftovers) == (tmp_path / "state" / "staging", tmp_path / "state" / "leftovers")
    elsewhere = load_settings(None, state_dir=tmp_path / "state", s3={"staging_dir": tmp_path / "big-disk"})
    assert stager_for(elsewhere, from_s3, provider).folder == tmp_path / "big-disk"  # type: ignore[union-attr,arg-type]
    assert stager_for(settings, from_s3, None) is None  # nothing restored: nothing staged
    assert stager_for(settings, open_source(str(captured_repo), settings), provider) is None  # type: ignore[arg-type]
    direct = load_settings(None, state_dir=tmp_path / "state", s3={"restore_mode": "direct"})
    # Direct: the engine's targets read S3 themselves, nothing is staged.
    assert stager_for(direct, from_s3, provider) is None  # type: ignore[arg-type]


def test_an_object_whose_key_is_no_path_is_named_and_keeps_the_run_from_passing(s3, captured_repo, tmp_path):
    import json
    from datetime import UTC, datetime

    from verification.config import load_settings
    from verification.pipeline import OFFLINE, RunRequest, discover, publish

    for path in sorted(p for p in captured_repo.rglob("*") if p.is_file()):
        s3.put(f"repo/{path.relative_to(captured_repo).as_posix()}", path.read_bytes())
    s3.put("repo/backup/demo1//20261123-000000F/backup.manifest", b"[backrest]\n")  # an empty segment
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports")
    said: list[str] = []
    discovery = discover(settings, RunRequest(s3.url("repo"), "postgres", target=OFFLINE), "run1",
                         datetime(2026, 11, 25, 1, 0, tzinfo=UTC), progress=said.append)
    named = [u for u in discovery.unreadable if u.kind == "unaddressable"]
    assert [(u.path, u.database) for u in named] == [("backup/demo1//20261123-000000F/backup.manifest", None)]
    assert named[0].reason.startswith(f"{s3.url('repo')}/backup/demo1//20261123-000000F/backup.manifest: an object "
                                      "whose key is not a path")
    assert any(line.startswith("unaddressable: ") and "backup/demo1//20261123" in line for line in said)
    report = json.loads(publish(settings, "run1").outputs.json_path.read_text())
    assert [u["kind"] for u in report["unreadable"]] == ["unaddressable"]
    assert report["verdict"] == "error"


def test_a_prefix_whose_every_key_is_no_path_says_so(s3):
    from verification.errors import SourceError
    from verification.sources.s3 import S3Source

    s3.put("odd/db//a.bak", b"TAPE")
    s3.put("odd/db/./b.bak", b"TAPE")
    with pytest.raises(SourceError, match=r"holds 2 objects, none with a key that is a path \(an empty, '\.' or "
                                          r"'\.\.' segment\), e\.g\. 'odd/db/\./b\.bak': nothing can be read$"):
        S3Source(s3.url("odd"))


# ---- a run's steps in other processes: each held to the objects its discovery listed ------------------------

def discovered_in_s3(s3: Any, captured_repo: Path, tmp_path: Path) -> tuple[Any, Any, str]:
    """The captured repository in s3://<bucket>/repo, discovered as run r1; and its plan's manifest."""
    from tests.unit.sources.s3_helpers import upload_tree
    from verification import pipeline

    upload_tree(s3.client, s3.name, "repo", captured_repo)
    settings = settings_for(tmp_path)
    discovery = pipeline.discover(settings, pipeline.RunRequest(s3.url("repo"), "postgres"), "r1", START)
    (plan,) = discovery.plans
    return settings, discovery, next(p for p in plan.files if p.endswith("backup.manifest"))


def test_an_object_rewritten_between_discovery_and_a_later_step_is_that_databases_error(s3, captured_repo, tmp_path):
    from verification import pipeline

    settings, _, manifest = discovered_in_s3(s3, captured_repo, tmp_path)
    before = s3.client.head_object(Bucket=s3.name, Key=f"repo/{manifest}")
    s3.put(f"repo/{manifest}", b"[backrest]\nREWRITTEN AFTER THE PLAN\n")
    after = s3.client.head_object(Bucket=s3.name, Key=f"repo/{manifest}")
    # The verify step, in another process, lists the source again: that listing is held to discovery's.
    resumed = pipeline.resume(settings, "r1")
    url = f"{s3.url('repo')}/{manifest}"
    reason = (f"1 object(s) of the plan changed since the run's discovery listed {s3.url('repo')}, so the plan no "
              f"longer holds: {url}: size {before['ContentLength']} when planned, {after['ContentLength']} now, "
              f"ETag {before['ETag']} when planned, {after['ETag']} now")
    assert resumed.changed == {"demo1": reason}
    provider = MemoryProvider()
    verified = pipeline.verify_one(settings, resumed, resumed.plan("demo1"), target=(provider, None))
    assert (verified.result.verdict, verified.result.reasons) == (Verdict.ERROR, [reason])
    assert provider.targets == []  # no target started
    assert pipeline.publish(settings, "r1").report.verdict == "error"


def test_a_store_that_lists_no_etag_holds_the_plan_to_each_objects_last_modified(s3, captured_repo, tmp_path):
    import time

    from tests.unit.sources.s3_helpers import LeavingOut, upload_tree
    from verification import pipeline
    from verification.config import S3Settings

    upload_tree(s3.client, s3.name, "repo", captured_repo)
    with LeavingOut(s3.endpoint, elements={"ETag"}) as store:
        settings = settings_for(tmp_path).model_copy(update={"s3": S3Settings(endpoint_url=store.url)})
        discovery = pipeline.discover(settings, pipeline.RunRequest(s3.url("repo"), "postgres"), "r1", START)
        (plan,) = discovery.plans
        manifest = next(p for p in plan.files if p.endswith("backup.manifest"))
        assert pipeline.resume(settings, "r1").changed == {}  # nothing changed: nothing said
        before = s3.client.head_object(Bucket=s3.name, Key=f"repo/{manifest}")
        body = s3.client.get_object(Bucket=s3.name, Key=f"repo/{manifest}")["Body"].read()
        time.sleep(1.1)  # a later second: the same bytes written again, only its LastModified tells
        s3.put(f"repo/{manifest}", body)
        after = s3.client.head_object(Bucket=s3.name, Key=f"repo/{manifest}")
        resumed = pipeline.resume(settings, "r1")
    when = [moment.replace(microsecond=0).isoformat() for moment in (before["LastModified"], after["LastModified"])]
    assert resumed.changed == {"demo1": (
        f"1 object(s) of the plan changed since the run's discovery listed {s3.url('repo')}, so the plan no longer "
        f"holds: {s3.url('repo')}/{manifest}: LastModified {when[0]} when planned, {when[1]} now")}


def test_an_object_deleted_between_discovery_and_a_later_step_is_named(s3, captured_repo, tmp_path):
    from verification import pipeline

    settings, _, manifest = discovered_in_s3(s3, captured_repo, tmp_path)
    s3.client.delete_object(Bucket=s3.name, Key=f"repo/{manifest}")
    assert pipeline.resume(settings, "r1").changed["demo1"].endswith(
        f"{s3.url('repo')}/{manifest}: gone since discovery listed it")


def test_objects_unchanged_since_discovery_and_a_folder_change_nothing(s3, captured_repo, tmp_path):
    from verification import pipeline
    from verification.results import ResultStore
    from verification.results.store import PLANNED_OBJECTS

    settings, discovery, _ = discovered_in_s3(s3, captured_repo, tmp_path)
    resumed = pipeline.resume(settings, "r1")
    assert resumed.changed == {}
    store = ResultStore(settings.results_database_url)
    try:
        run = store.run("r1")
    finally:
        store.close()
    assert run is not None and set(run.host[PLANNED_OBJECTS]) == set(discovery.plans[0].files)
    assert PLANNED_OBJECTS not in pipeline.publish(settings, "r1").report.host
    # A folder: read in place, nothing recorded to hold it to.
    folder = tmp_path / "folder"
    local = settings_for(folder)
    pipeline.discover(local, pipeline.RunRequest(str(captured_repo), "postgres"), "r2", START)
    store = ResultStore(local.results_database_url)
    try:
        run = store.run("r2")
    finally:
        store.close()
    assert run is not None and PLANNED_OBJECTS not in run.host
    assert pipeline.resume(local, "r2").changed == {}


def archive(s3: Any, key: str, storage_class: str = "GLACIER") -> None:
    """What a lifecycle rule does: the same object, moved to another storage class."""
    s3.client.copy_object(Bucket=s3.name, Key=key, CopySource={"Bucket": s3.name, "Key": key},
                          StorageClass=storage_class, MetadataDirective="REPLACE")


def test_a_plan_needing_archived_objects_is_that_databases_error_naming_each(s3, captured_repo, tmp_path):
    from tests.unit.sources.s3_helpers import upload_tree
    from verification import pipeline

    upload_tree(s3.client, s3.name, "repo", captured_repo)
    full = "backup/demo1/20261122-195034F/backup.manifest"
    wal = "archive/demo1/15-1/0000000100000000/00000001000000000000000A-c4b65d719ef729e2c4c3666bec099d54cee8997d.gz"
    older = "archive/demo1/15-1/0000000100000000/000000010000000000000001-e204611d182094ef4e50f4969e30e979ca1e5cc2.gz"
    instant = "archive/demo1/15-1/0000000100000000/000000010000000000000009-820a2a53285fc5cf7a978d4c92550ffc01d46fd3.gz"
    archive(s3, f"repo/{full}")
    archive(s3, f"repo/{wal}", "DEEP_ARCHIVE")
    archive(s3, f"repo/{older}")  # no plan needs it
    archive(s3, f"repo/{instant}", "GLACIER_IR")  # read as any object
    settings = settings_for(tmp_path)
    said: list[str] = []
    discovery = pipeline.discover(settings, pipeline.RunRequest(s3.url("repo"), "postgres"), "r1", START,
                                  progress=said.append)
    (plan,) = discovery.plans
    assert plan.chain.status == "complete" and {full, wal, instant} <= set(plan.files) and older not in plan.files
    # The archived manifest could not be loaded: its rule is not passed, and nothing calls it damaged.
    manifests = next(r for r in plan.chain.rules if r.rule == "manifests-load")
    assert not manifests.passed and manifests.detail.startswith("2 of 3 manifests load")
    assert f"; not read: {s3.url('repo')}/{full} is in the archive storage class GLACIER" in manifests.detail

    def why(path: str, storage_class: str) -> str:
        return (f"{s3.url('repo')}/{path} is in the archive storage class {storage_class} and has not been restored: "
                "it cannot be read until it is restored (S3 RestoreObject, e.g. `aws s3api restore-object`) and the "
                "restore has completed")

    # Each named once with its class, as the run's unread files: with the database whose plan needs it.
    assert [(u.path, u.kind, u.database, u.reason) for u in discovery.unreadable] == [
        (older, "archived", None, why(older, "GLACIER")), (wal, "archived", "demo1", why(wal, "DEEP_ARCHIVE")),
        (full, "archived", "demo1", why(full, "GLACIER"))]
    assert f"archived: {full}: {why(full, 'GLACIER')}" in said
    reason = (f"not restored: 2 object(s) the plan needs cannot be read now, being in an archive storage class: "
              f"{why(full, 'GLACIER')}; {why(wal, 'DEEP_ARCHIVE')}")
    provider = MemoryProvider()
    verified = pipeline.verify_one(settings, discovery, plan, target=(provider, None))
    # "error", never "failed" (nothing says the backups are bad) nor "passed"; nothing started.
    assert (verified.result.verdict, verified.result.reasons) == (Verdict.ERROR, [reason])
    assert provider.targets == []
    # A later step in another process lists the source again and finds the same.
    resumed = pipeline.resume(settings, "r1")
    again = pipeline.verify_one(settings, resumed, resumed.plan("demo1"), target=(MemoryProvider(), None))
    assert (again.result.verdict, again.result.reasons) == (Verdict.ERROR, [reason])
    report = pipeline.publish(settings, "r1").report
    assert report.verdict == "error" and [d.verdict for d in report.databases] == ["error"]
    assert [(u.path, str(u.kind)) for u in report.unreadable] == [(older, "archived"), (wal, "archived"),
                                                                   (full, "archived")]


def test_a_plan_named_with_its_first_archived_objects_and_a_count(s3, tmp_path):
    from verification import pipeline
    from verification.sources.s3 import S3Source

    for index in range(7):
        s3.put(f"repo/wal/{index}", b"w", StorageClass="GLACIER")
    s3.put("repo/wal/readable", b"w")
    source = S3Source(s3.url("repo"))
    plan = complete_plan()
    plan.files = ["wal/readable", *(f"wal/{index}" for index in range(7))]
    reason = pipeline.archived_in_plan(source, plan)
    assert reason is not None and reason.startswith("not restored: 7 object(s) the plan needs cannot be read now")
    assert [f"{s3.url('repo')}/wal/{index} is in" in reason for index in range(7)] == [True] * 5 + [False] * 2
    assert reason.endswith("; and 2 more")
    plan.files = ["wal/readable"]
    assert pipeline.archived_in_plan(source, plan) is None


class RewritingEngine(OnlineEngine):
    """A restore during which one of the plan's objects is rewritten (a backup run, an expiry)."""

    def __init__(self, s3: Any, key: str) -> None:
        super().__init__(AssertionError())
        self.s3, self.key = s3, key

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        self.s3.put(self.key, b"rewritten while the target read it")
        return super().restore_and_check(plan, target, evidence, outcome, data_checks)


class ArchivingEngine(OnlineEngine):
    """A restore during which a lifecycle rule moves one of the plan's objects to an archive class: the
    same bytes and ETag, which the tool in the target then cannot read ("access denied")."""

    def __init__(self, s3: Any, key: str) -> None:
        super().__init__(AssertionError())
        self.s3, self.key = s3, key

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        from tests.unit.factories import online_outcome

        archive(self.s3, self.key, "DEEP_ARCHIVE")
        # What the tool in the target makes of an object it may no longer read: a check that fails.
        return online_outcome(CheckResult("pg_amcheck", CheckStatus.FAILED, "AccessDenied reading the repository"))


def test_direct_mode_says_an_object_archived_during_the_restore_is_an_error_not_a_failure(s3, tmp_path):
    plan, source, _ = staged_plan(s3, tmp_path)
    key = "repo/backup/demo1/20261122-195034F/backup.manifest"
    url = f"{s3.url('repo')}/backup/demo1/20261122-195034F/backup.manifest"
    provider = MemoryProvider()
    result = verify_database(ArchivingEngine(s3, key), plan, provider, "run-s3", source.describe(),
                             Evidence(tmp_path / "ev"), source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and len(provider.targets) == 1
    assert result.reasons[0] == (f"during the restore, 1 object(s) of {s3.url('repo')} changed since the source was "
                                 f"listed: {url}: moved to storage class DEEP_ARCHIVE since the plan (archived objects "
                                 "cannot be read until restored)")
    assert all(reason.startswith("not taken as a verdict (failed): ") for reason in result.reasons[1:])
    # Archived before the restore: no target is started.
    provider = MemoryProvider()
    result = verify_database(OnlineEngine(AssertionError("must not run")), plan, provider, "run-s3",
                             source.describe(), Evidence(tmp_path / "ev2"), source=source,
                             watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and provider.targets == []
    assert result.reasons == [f"not restored: 1 object(s) of {s3.url('repo')} changed since the source was listed: "
                              f"{url}: moved to storage class DEEP_ARCHIVE since the plan (archived objects cannot be "
                              "read until restored)"]


def test_direct_mode_holds_the_objects_to_the_listing_before_and_after_the_restore(s3, tmp_path):
    plan, source, _ = staged_plan(s3, tmp_path)
    key = "repo/backup/demo1/20261122-195034F/backup.manifest"
    url = f"{s3.url('repo')}/backup/demo1/20261122-195034F/backup.manifest"
    # Unchanged: the target reads S3 itself and the verdict is the restore's.
    provider = MemoryProvider()
    result = verify_database(OnlineEngine(AssertionError()), plan, provider, "run-s3", source.describe(),
                             Evidence(tmp_path / "ev0"), source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.PASSED, result.reasons
    # Rewritten while the target read it: whatever the restore found is not taken.
    provider = MemoryProvider()
    result = verify_database(RewritingEngine(s3, key), plan, provider, "run-s3", source.describe(),
                             Evidence(tmp_path / "ev1"), source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and len(provider.targets) == 1
    assert result.reasons[0].startswith(f"during the restore, 1 object(s) of {s3.url('repo')} changed since the "
                                        f"source was listed: {url}: size 450 bytes when listed")
    assert result.reasons[1].startswith("not taken as a verdict (passed): ")
    # Rewritten before: no target is started.
    provider = MemoryProvider()
    result = verify_database(OnlineEngine(AssertionError("must not run")), plan, provider, "run-s3",
                             source.describe(), Evidence(tmp_path / "ev2"), source=source,
                             watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and provider.targets == []
    assert result.reasons[0].startswith(f"not restored: 1 object(s) of {s3.url('repo')} changed since the source "
                                        f"was listed: {url}: size 450 bytes when listed")


# ---- the start of a run: what dead runs left, and their killed databases ----------------------------

def three_stanzas(repo: Path) -> Path:
    two_stanzas(repo)
    shutil.copytree(repo / "backup" / "demo1", repo / "backup" / "demo3")
    shutil.copytree(repo / "archive" / "demo1", repo / "archive" / "demo3")
    return repo


def take_lease(settings: Any, run_id: str, holder: Any, *, scope: str = "run", database: str | None = None,
               phase: str | None = None, generation: str | None = None) -> int:
    from verification.results import ResultStore

    store = ResultStore(settings.results_database_url)
    try:
        lease = store.take_lease(run_id, host=holder.host, pid=holder.pid, process=holder.process, scope=scope,
                                 lease_seconds=settings.lease.seconds, database=database, generation=generation)
        store.renew_lease(lease, database=database, phase=phase)
        return lease
    finally:
        store.close()


def test_a_run_whose_worker_was_killed_is_closed_with_its_database_error_and_nothing_recorded_lost(
        captured_repo, tmp_path):
    from tests.unit.factories import dead_holder, leftover_record
    from verification import pipeline
    from verification.results import ResultStore
    from verification.targets.lease import this_process

    repo = three_stanzas(captured_repo)
    settings = settings_for(tmp_path)
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres"), "killed", START)
    record_passed(settings, "killed", "demo1", discovery.generation)
    gone = dead_holder()
    take_lease(settings, "killed", gone, database="demo2", phase="demo2: restoring 20261122-010000F",
               generation=discovery.generation)
    # What it left, and beside it: a live run's target (this process) and another store's run's.
    left = leftover_record(tmp_path, "killed", gone)
    pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres", ("demo1",)), "alive", START)
    take_lease(settings, "alive", this_process(), database="demo1")
    live = leftover_record(tmp_path, "alive", this_process(), "demo1")
    foreign = leftover_record(tmp_path, "another-stores-run", gone)

    said: list[str] = []
    found = pipeline.end_dead_runs(settings, said.append, use_docker=False)

    assert not left.exists() and live.exists() and foreign.exists()
    decisions = {d.run_id: d.judgement for d in found.sweep.reaped.decisions}
    assert decisions["killed"].dead and decisions["killed"].reason == (
        f"{gone.describe()} is gone (no process {gone.pid} with its start time on this host)")
    assert not decisions["alive"].dead and decisions["alive"].reason == f"{this_process().describe()} is running"
    assert not decisions["another-stores-run"].dead
    assert "not in this results store" in decisions["another-stores-run"].reason
    store = ResultStore(settings.results_database_url)
    try:
        run, entries = store.run_with_reports("killed")
        leases = store.leases(["killed"])
        alive_run = store.run("alive")
    finally:
        store.close()
    assert run.finished_at is not None and run.verdict == "error"
    assert alive_run is not None and alive_run.finished_at is None  # the live run is not closed
    verdicts = {e.database: (str(e.verdict), e.reasons) for e in entries}
    assert verdicts["demo1"] == ("passed", ["ok"])  # recorded before the kill: kept as it was
    (killed_reason,) = verdicts["demo2"][1]
    assert verdicts["demo2"][0] == "error"
    assert killed_reason.startswith(f"restoreproof was killed while verifying it: {gone.describe()} is gone")
    assert "while: demo2: restoring 20261122-010000F" in killed_reason
    assert verdicts["demo3"][0] == "error" and verdicts["demo3"][1][0].startswith(
        "not verified: the run was killed before it started this database")
    assert [(lease.released_at is not None, (lease.ended or "").split(":")[0]) for lease in leases] == [
        (True, "killed")]
    # The killed run's report is published from the store, in its own folder.
    report = json.loads((tmp_path / "reports" / "killed" / "report.json").read_text())
    assert report["verdict"] == "error"
    assert [(d["database"], d["verdict"]) for d in report["databases"]] == [
        ("demo1", "passed"), ("demo2", "error"), ("demo3", "error")]
    assert any(line.startswith("run killed (killed: ") and "demo2: error, killed" in line for line in said), said
    # Once closed, nothing more is done with it; and the next run takes its killed databases first.
    assert pipeline.end_dead_runs(settings, use_docker=False).recorded == {}
    following = pipeline.discover(settings, pipeline.RunRequest(str(repo), "postgres"), "next", START)
    assert [p.database for p in following.plans] == ["demo2", "demo3", "demo1"]


def test_a_killed_worker_on_another_host_is_judged_by_its_heartbeat(captured_repo, tmp_path):
    from verification import pipeline
    from verification.results import ResultStore
    from verification.targets.lease import Holder

    settings = settings_for(tmp_path, lease={"seconds": 10})
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(captured_repo), "postgres"), "r1", START)
    elsewhere = Holder("worker-b", 4242, "another-boot/4026531836/777")
    lease = take_lease(settings, "r1", elsewhere, database="demo1", phase="demo1: restoring",
                       generation=discovery.generation)
    assert pipeline.end_dead_runs(settings, use_docker=False).recorded == {}  # its lease still runs
    store = ResultStore(settings.results_database_url)
    try:
        from sqlalchemy import update

        from verification.results.store import RunLeaseRow

        with store.engine.begin() as connection:  # ten minutes without a heartbeat
            connection.execute(update(RunLeaseRow).where(RunLeaseRow.id == lease).values(
                heartbeat_at=store.now() - timedelta(minutes=10)))
    finally:
        store.close()
    found = pipeline.end_dead_runs(settings, use_docker=False)
    (line, _closed) = found.recorded["r1"]
    assert line.startswith("demo1: error, killed (no heartbeat from worker worker-b pid 4242 since ")


def test_a_run_started_here_holds_a_lease_while_it_works_and_releases_it(captured_repo, tmp_path):
    from verification import pipeline
    from verification.results import ResultStore

    settings = settings_for(tmp_path)
    said: list[str] = []
    pipeline.run_verification(settings, captured_repo, engine_name="postgres", target_kind="offline",
                              run_id="r1", progress=said.append)
    store = ResultStore(settings.results_database_url)
    try:
        (lease,) = store.leases(["r1"])
    finally:
        store.close()
    assert (lease.scope, lease.pid, lease.ended) == ("run", os.getpid(), "released")
    assert lease.released_at is not None


def test_a_sweep_that_fails_at_a_runs_start_is_said_and_the_run_goes_on(captured_repo, tmp_path, monkeypatch):
    from verification import pipeline

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the engine answered oddly")

    monkeypatch.setattr(pipeline, "sweep", broken)
    said: list[str] = []
    result = pipeline.run_verification(settings_for(tmp_path), captured_repo, engine_name="postgres",
                                       target_kind="offline", progress=said.append)
    assert [d.database for d in result.run.databases] == ["demo1"]
    assert "warning: what dead runs left was not looked at (RuntimeError: the engine answered oddly); " \
           "`restoreproof reap` does it on demand" in said


class WatchedSource:
    """A folder whose reads are noted, and can be held until `release` is set."""

    def __init__(self, root: Path, release: Any = None) -> None:
        from verification.sources import LocalSource

        self.inner = LocalSource(root)
        self.release = release
        self.reads: list[str] = []

    def describe(self) -> str:
        return self.inner.describe()

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        self.reads.append(path)
        if self.release is not None:
            assert self.release.wait(10), "the test never released the read"
        return self.inner.read_bytes(path, offset, length)


def _backup_files(root: Path) -> dict[str, bytes]:
    files = {f"backup/demo1/F/pg_data/base/1/{n}.gz": bytes([n]) * (1000 + n) for n in range(5)}
    files["archive/demo1/15-1/0000000100000000/000000010000000000000003-abc.gz"] = b"wal" * 500
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(body)
    return files


class HashWatchingEngine(OnlineEngine):
    """Its restore finishes only once the source has been read: the hashing went on while it ran."""

    def __init__(self, source: WatchedSource) -> None:
        super().__init__(AssertionError())
        self.source = source
        self.reads_during_restore = 0

    def restore_and_check(self, plan: Any, target: Any, evidence: Evidence,
                          outcome: RestoreOutcome | None = None, data_checks: Any = None) -> RestoreOutcome:
        import time

        deadline = time.monotonic() + 10
        while not self.source.reads and time.monotonic() < deadline:
            time.sleep(0.01)
        self.reads_during_restore = len(self.source.reads)
        return super().restore_and_check(plan, target, evidence, outcome, data_checks)


def test_the_backup_files_are_hashed_alongside_the_restore_every_byte_read_by_restoreproof(tmp_path):
    import hashlib

    files = _backup_files(tmp_path / "repo")
    source = WatchedSource(tmp_path / "repo")
    engine = HashWatchingEngine(source)
    plan = complete_plan()
    plan.files = sorted(files)
    progress: list[str] = []
    result = verify_database(engine, plan, MemoryProvider(), "run", "/repo", Evidence(tmp_path / "ev"),
                             progress.append, source=source)  # type: ignore[arg-type]
    assert result.verdict is Verdict.PASSED, result.reasons
    assert engine.reads_during_restore > 0  # read while the restore ran, not after it
    sums = (tmp_path / "ev" / "backup-files.sha256").read_text()
    assert sums == "".join(f"{hashlib.sha256(files[path]).hexdigest()}  {path}\n" for path in sorted(files))
    assert "demo1: hashing the 6 backup files, alongside the restore" in progress
    assert result.wall_seconds is not None and result.wall_seconds > 0


def test_an_interrupted_verification_stops_hashing_and_writes_no_hashes(tmp_path):
    import threading

    files = _backup_files(tmp_path / "repo")
    release = threading.Event()
    source = WatchedSource(tmp_path / "repo", release)
    plan = complete_plan()
    plan.files = sorted(files)
    provider = MemoryProvider()

    class InterruptedEngine(HashWatchingEngine):
        def restore_and_check(self, *args: Any, **kwargs: Any) -> RestoreOutcome:
            super().restore_and_check(*args, **kwargs)  # once the first file is being read
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        verify_database(InterruptedEngine(source), plan, provider, "run", "/repo",
                        Evidence(tmp_path / "ev"), source=source)  # type: ignore[arg-type]
    assert provider.targets[0].closed == 1
    release.set()  # the read under way ends; nothing after it is started
    import time

    time.sleep(0.3)
    assert source.reads == [plan.files[0]]
    assert not (tmp_path / "ev" / "backup-files.sha256").exists()


def test_a_file_that_cannot_be_hashed_alongside_makes_the_evidence_say_so_never_the_verdict(tmp_path):
    files = _backup_files(tmp_path / "repo")
    plan = complete_plan()
    plan.files = [*sorted(files), "backup/demo1/F/pg_data/base/1/gone.gz"]
    source = WatchedSource(tmp_path / "repo")
    result = verify_database(OnlineEngine(AssertionError()), plan, MemoryProvider(), "run", "/repo",
                             Evidence(tmp_path / "ev"), source=source)  # type: ignore[arg-type]
    assert result.verdict is Verdict.PASSED, result.reasons
    said = (tmp_path / "ev" / "backup-files.error.txt").read_text()
    assert "backup/demo1/F/pg_data/base/1/gone.gz" in said
    assert not (tmp_path / "ev" / "backup-files.sha256").exists()


# --- which baseline a verification is held to (issue 29, classes 2 and 3) -----------------------------------

def test_data_checks_are_held_to_the_same_databases_baseline_of_the_same_point(tmp_path: Path) -> None:
    from tests.unit.results.test_store import AT, SHOP_S, _record_runs, _verified
    from verification.checks.runner import DataCheckRunner
    from verification.config import Settings
    from verification.model import DatabaseIdentity
    from verification.pipeline import data_checks_for, planned_point
    from verification.results import ResultStore
    from verification.results.identity import Match

    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    _record_runs(store, [("/s", _verified("shop", "passed", 4004, identity=SHOP_S)),
                         ("/s", _verified("shop", "passed", 1001, target=AT, identity=SHOP_S))])
    settings = Settings(state_dir=tmp_path)

    def held(identity: DatabaseIdentity, point: str) -> tuple[int | None, str | None, Match | None]:
        runner = data_checks_for(settings, store, identity, point)
        assert isinstance(runner, DataCheckRunner)
        table = runner.previous.get("postgres.public.t")
        assert runner.basis.point == point
        return (table.rows if table else None), runner.basis.run_id, runner.basis.matched

    assert held(SHOP_S, "latest") == (4004, "r000", Match.IDENTITY)
    assert held(SHOP_S, AT) == (1001, "r001", Match.IDENTITY)
    assert held(SHOP_S, "2026-11-21T00:00:00+00:00") == (None, None, None)  # records its own
    assert held(DatabaseIdentity("/t", "shop", SHOP_S.system_id), "latest") == (None, None, None)
    settings.checks.enabled = False
    assert data_checks_for(settings, store, SHOP_S, "latest") is None
    store.close()
    plan = complete_plan()
    assert planned_point(plan) == "latest"
    plan.stop_at = datetime(2026, 11, 20, tzinfo=UTC)
    assert planned_point(plan) == AT


@pytest.mark.parametrize(("target", "named"), [("auto", True), ("docker", True), ("local", False), ("offline", False)])
def test_a_plan_names_what_a_docker_target_cannot_read_only_when_the_target_is_dockers(captured_repo, tmp_path,
                                                                                     target, named):
    from verification.config import load_settings
    from verification.pipeline import plan_source

    if os.geteuid() != 0:
        pytest.skip("needs root to give files other owners")
    settings = load_settings(None, state_dir=tmp_path / "state").model_copy(update={"target": target})
    info = captured_repo / "backup" / "demo1" / "backup.info"
    os.chown(info, 4321, 4322)
    info.chmod(0o600)
    unread = plan_source(settings, captured_repo, "postgres")[2].unreadable
    assert [u.path for u in unread if u.kind == "permission"] == (["backup/demo1/backup.info"] if named else [])
