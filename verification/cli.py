"""The `restoreproof` command.

Its exit codes are the table in verification/exit_codes.py, shown at the end of every command's --help.
"""

from __future__ import annotations

import json
import platform
import signal
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import SecretStr
from rich.markup import escape

from verification import __version__, cli_output, exit_codes
from verification.atomic import write_text_atomically
from verification.cli_config import config_command
from verification.cli_output import err, out
from verification.cli_progress import Progress
from verification.config import Settings, load_settings
from verification.errors import RestoreproofError
from verification.exit_codes import ExitCode
from verification.images import inventory
from verification.interrupts import exit_code_of, raise_interrupted, signal_name, signal_of
from verification.model import (
    BackupEncryption,
    BackupSet,
    ChainStatus,
    EncryptionState,
    RestorePlan,
    Verdict,
    overall_verdict,
)
from verification.redaction import Redactor
from verification.report_model import RunReport
from verification.reports.json_report import chain_entry, dumps, schema_text
from verification.restore_points import PointChoice, PointStrategy
from verification.results.store import unreadable_json, uploads_json
from verification.settings_env import locate_config

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Prove that backups restore: restore each chain in a disposable server, time every "
                       "phase, check integrity, report a verdict with its reasons.")


@app.callback(invoke_without_command=True)
def _options(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print restoreproof's version and exit; with -v, "
                                                             "also Python's, the Docker engine's and each local "
                                                             "image's (the server and tools it holds).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="With --version: the versions of what "
                                                                  "restoreproof runs on.")] = False,
) -> None:
    """Prove that backups restore: restore each chain in a disposable server, time every phase, check
    integrity, report a verdict with its reasons."""
    if not version:
        if ctx.invoked_subcommand is None:  # options alone: a usage error, as a command missing is
            typer.echo(f"{ctx.get_usage()}\nTry 'restoreproof --help' for help.\nError: Missing command.", err=True)
            raise typer.Exit(ExitCode.ERROR)
        return
    typer.echo(f"restoreproof {__version__}")
    if verbose:
        typer.echo(f"Python {platform.python_version()} ({sys.executable})")
        for line in inventory.describe():
            typer.echo(line)
    raise typer.Exit(ExitCode.PASSED)


class EngineChoice(StrEnum):
    auto = "auto"
    postgres = "postgres"
    mssql = "mssql"


class TargetChoice(StrEnum):
    auto = "auto"
    docker = "docker"
    local = "local"
    offline = "offline"  # no restore: chain proof and the backup files' own checks (SQL Server pages)


class PagesChoice(StrEnum):
    chain = "chain"  # the planned chain's full and differential backups
    all = "all"  # every full and differential backup of each database in the source


ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML configuration file.",
                                                envvar="RESTOREPROOF_CONFIG")]
AtOpt = Annotated[str | None, typer.Option("--at", help="Restore to this point in time (ISO 8601; UTC if no "
                                                        "offset). Default: latest.")]
PointOpt = Annotated[PointStrategy, typer.Option(
    "--point", help="Without --at: which point to test per database: latest, an older full, or a random moment "
                    "in the retention window.")]
TimelineOpt = Annotated[int | None, typer.Option(
    "--timeline", min=1, help="PostgreSQL: restore the history of this timeline (recovery_target_timeline), "
    "for an archive where two timelines went on after a fork. Default: the newest timeline.")]
SeedOpt = Annotated[int | None, typer.Option(help="Seed for --point older-full/random (default: today's date, "
                                                  "so nightly runs rotate).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout; no progress output.")]
TargetOpt = Annotated[TargetChoice, typer.Option(
    help="Where to restore (offline: restore nothing, check the chain and the backup files only).")]
ReportDirOpt = Annotated[Path | None, typer.Option(help="Reports go to DIR/<run id>/. Default ./reports.")]
PagesOpt = Annotated[PagesChoice | None, typer.Option(
    "--pages", help="SQL Server: whose pages are verified offline: chain (the planned chain's full and differential "
                    "backups) or all (every full and differential backup of the database in the source; a damaged "
                    "one fails the database, the plan is unchanged). Default: the setting mssql.pages (chain).")]
EncryptOpt = Annotated[bool, typer.Option(
    "--encrypt", help="Encrypt the sample repository (pgBackRest repo1-cipher-type=aes-256-cbc) with "
                      "postgres.repo_cipher_pass (RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS), else a passphrase made "
                      "now and kept in WORKDIR/repo-cipher-pass (0600); it is verified with it. A repository made "
                      "before is reused only if made with the same encryption.")]
DatabaseOpt = Annotated[list[str] | None, typer.Option(
    "--database", "-d", help="Only this database (a stanza for PostgreSQL); repeat for several. Default: all.")]


def exit_code(verdict: Verdict) -> int:
    """Passed; failed (even beside errors: a bad backup is the news); else could not check."""
    return {Verdict.PASSED: ExitCode.PASSED, Verdict.FAILED: ExitCode.FAILED}.get(verdict, ExitCode.ERROR)


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    # Escaped: a message quoting brackets ("restoreproof[s3-demo]", "[backrest]") is not markup.
    err.print(f"[bold red]restoreproof:[/] {escape(message)}", highlight=False, markup=True)
    raise typer.Exit(code)


def parse_at(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--at {value!r} is not an ISO 8601 time (for example 2026-11-22T01:30:00Z)")
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def settings_from(config: Path | None, pages: PagesChoice | None = None) -> Settings:
    """The settings of the file, the environment, and the options given (which beat both)."""
    try:
        settings = load_settings(config, mssql={"pages": pages.value} if pages is not None else None)
    except RestoreproofError as exc:
        fail(str(exc))
    if (location := locate_config(config)).unnamed:  # it sets what is checked: never applied unsaid
        err.print(f"configuration: {escape(location.describe())}", highlight=False)
    return settings


def plan_json(plan: RestorePlan) -> dict[str, Any]:
    return {"database": plan.database, "stop_at": plan.stop_at.isoformat() if plan.stop_at else None,
            "encryption": plan.encryption, "written_by": plan.written_by,
            "needs": [{"tool": n.tool, "version": n.version, "why": n.why} for n in plan.needs],
            "chain": chain_entry(plan.chain).model_dump(mode="json")}


def _progress(enabled: bool) -> Any:
    return Progress(err) if enabled else (lambda message: None)


@app.command()
def plan(
    source: Annotated[str, typer.Argument(help="The backup repository: a folder, or s3://bucket/prefix.")],
    engine: Annotated[EngineChoice, typer.Option(help="Backup engine.")] = EngineChoice.auto,
    at: AtOpt = None,
    point: PointOpt = PointStrategy.LATEST,
    seed: SeedOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    timeline: TimelineOpt = None,
) -> None:
    """Plan each database's restore chain and check it, without restoring anything."""
    from verification.pipeline import plan_source

    settings = settings_from(config)
    try:
        chosen, opened, planned = plan_source(settings, source, engine.value, parse_at(at),
                                              PointChoice(point, seed, timeline))
    except RestoreproofError as exc:
        fail(Redactor(settings)(str(exc)))
    plans = planned.plans
    # With --json they are in the JSON too: on stderr, as a warning beside it.
    cli_output.unreadable_lines(planned.unreadable, err if as_json else out)
    uploads = opened.incomplete_uploads()
    for warning in planned.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if unlisted := getattr(opened, "uploads_unlisted", None):
        err.print(f"[yellow]warning:[/] {escape(unlisted)}", highlight=False)
    for upload in uploads:
        err.print(f"[yellow]incomplete upload:[/] {escape(upload.path)} (multipart upload {escape(upload.upload_id)}, "
                  "never completed)", highlight=False)
    if as_json:
        typer.echo(json.dumps({"source": source, "engine": chosen.name,
                               "databases": [plan_json(p) for p in plans],
                               "unreadable": unreadable_json(planned.unreadable),
                               **({"incomplete_uploads": uploads_json(uploads)} if uploads else {})}, indent=2))
    else:
        for p in plans:
            cli_output.plan_text(p, encryption_said(p.chain.backups))
    # The same rule as a run's verdict, before anything is restored: a broken chain, a known-bad
    # backup or a corrupt file is "failed" (1); a backup file that could not be read, or no
    # database at all, is "could not finish" (2).
    raise typer.Exit(plan_exit_code(plans, [str(u.kind) for u in planned.unreadable]))


def encryption_said(backups: list[BackupSet]) -> list[str]:
    """What the plan knows of its backups' encryption, once per kind of answer: what a target will need
    (the thumbprints of the certificates), what cannot be told before a target says it, and, where a
    key is all a target needs (a repository's passphrase), the cipher and how it is known."""
    groups: dict[tuple[EncryptionState, tuple[str, ...], str | None], list[BackupEncryption]] = {}
    for backup in backups:
        if (known := backup.encryption) is not None:
            groups.setdefault((known.state, known.thumbprints, known.algorithm), []).append(known)
    said = []
    for (state, thumbprints, algorithm), found in groups.items():
        if state is EncryptionState.ENCRYPTED and (thumbprints or algorithm is None):
            said.append(f"encrypted: {len(found)} backup(s); the target needs the certificate(s) "
                        f"{', '.join(thumbprints) or '(not named)'}")
        elif state is EncryptionState.ENCRYPTED:
            said.append(f"encrypted ({algorithm}): {len(found)} backup(s): {found[0].basis}")
        elif state is EncryptionState.UNKNOWN:
            said.append(f"encryption unknown offline: {len(found)} backup(s): {found[0].basis}")
        else:
            said.append(f"not encrypted: {len(found)} backup(s): {found[0].basis}")
    return said


def plan_exit_code(plans: list[RestorePlan], unreadable_kinds: list[str]) -> int:
    chains = [Verdict.FAILED if p.chain.defects
              else Verdict.ERROR if p.chain.status is ChainStatus.REFUSED or p.chain.unread
              else Verdict.FAILED if p.chain.status is not ChainStatus.COMPLETE else Verdict.PASSED for p in plans]
    return exit_code(overall_verdict([str(v) for v in chains], unreadable_kinds))


def _run_and_report(settings: Settings, source: str, *, engine: str, at: datetime | None, target: str,
                    report_dir: Path | None, as_json: bool, progress: Any = None,
                    point: PointChoice | None = None, databases: list[str] | None = None) -> NoReturn:
    from verification.pipeline import run_verification
    from verification.verdict import offline_clean

    progress = progress or _progress(not as_json)
    if isinstance(progress, Progress):
        progress.plain_every(settings.progress_interval)
    try:
        result = run_verification(settings, source, engine_name=engine, at=at, target_kind=target,
                                  report_dir=report_dir, progress=progress, point=point, databases=databases)
    except RestoreproofError as exc:
        fail(Redactor(settings)(str(exc)))
    except KeyboardInterrupt as exc:
        # Every target was removed by the pipeline's `finally` on the way here, then the run recorded.
        signum = signal_of(exc)
        recorded = getattr(exc, "recorded", None) or "no report was written"
        # Redacted as any error: what was recorded may quote the store's failure.
        fail(Redactor(settings)(f"interrupted by {signal_name(signum)}; the targets of this run were removed; "
                                f"{recorded}"), exit_code_of(signum))
    finally:
        if isinstance(progress, Progress):
            progress.stop()
    if as_json:
        typer.echo(dumps(result.report), nl=False)
    else:
        for db in result.run.databases:
            cli_output.verdict_lines(db.database, db.verdict, db.reasons)
        cli_output.unreadable_lines(result.run.unreadable)
        out.print(f"report: {result.html_path}\n        {result.json_path}", highlight=False)
    # The verdict the published report states; offline, nothing wrong found has its own code.
    clean = target == TargetChoice.offline and offline_clean(result.report)
    raise typer.Exit(ExitCode.OFFLINE_CLEAN if clean else exit_code(result.report.verdict))


@app.command()
def verify(
    source: Annotated[str, typer.Argument(help="The backup repository: a folder, or s3://bucket/prefix.")],
    engine: Annotated[EngineChoice, typer.Option(help="Backup engine.")] = EngineChoice.auto,
    at: AtOpt = None,
    point: PointOpt = PointStrategy.LATEST,
    seed: SeedOpt = None,
    target: TargetOpt = TargetChoice.auto,
    report_dir: ReportDirOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    pages: PagesOpt = None,
    timeline: TimelineOpt = None,
) -> None:
    """Restore every database's chain in a disposable target, check it, and report."""
    settings = settings_from(config, pages)
    _run_and_report(settings, source, engine=engine.value, at=parse_at(at), target=target.value,
                    report_dir=report_dir, as_json=as_json, point=PointChoice(point, seed, timeline),
                    databases=database)


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option(help="Where the sample repository goes (WORKDIR/backups).")] = Path("demo"),
    scale: Annotated[int, typer.Option(min=1, help="Data size: 1 is ~100 MB per cluster, 10 is ~1 GB.")] = 1,
    clusters: Annotated[int, typer.Option(min=1, max=16, help="Independent clusters (pgBackRest stanzas).")] = 2,
    fresh: Annotated[bool, typer.Option(help="Make new sample backups even if matching ones exist.")] = False,
    target: TargetOpt = TargetChoice.auto,
    report_dir: ReportDirOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    s3: Annotated[bool, typer.Option(
        "--s3", help="Make the sample repository in a local S3 endpoint (moto, over TLS, started and stopped "
                     "here) and verify s3://restoreproof-demo/ from there, read by pgBackRest in each target "
                     "(s3.restore_mode direct). Always fresh; notes in WORKDIR/s3.")] = False,
    encrypt: EncryptOpt = False,
    pg_version: Annotated[str, typer.Option(
        help="The sample clusters' PostgreSQL major, one an image is made for (verification/images/postgres/"
             "SUITES); its image's pgBackRest writes the backups.")] = "15",
) -> None:
    """Make sample pgBackRest backups of real PostgreSQL clusters, then verify them."""
    from verification.demo.source import make_demo

    settings = settings_from(config)
    progress = _progress(not as_json)
    if s3:
        _demo_in_s3(settings, workdir / "s3", scale, clusters, target, report_dir, as_json, progress, encrypt,
                    pg_version)
    settings, cipher_pass = _demo_encryption(settings, workdir, encrypt)
    try:
        made = make_demo(workdir, scale=scale, clusters=clusters, fresh=fresh, progress=progress,
                         build_context=settings.docker.build_context, cipher_pass=cipher_pass,
                         pg_version=pg_version)
    except RestoreproofError as exc:
        fail(str(exc))
    except KeyboardInterrupt as exc:
        fail("interrupted; the demo's source containers were removed", exit_code_of(signal_of(exc)))
    finally:
        if isinstance(progress, Progress):
            progress.stop()
    progress(f"sample repository {'reused' if made.reused else 'made'}: {made.repository} "
             f"({', '.join(made.stanzas)}{_encrypted_note(made.workdir, cipher_pass)})")
    # The same display goes on into the verification, which stops it when done.
    _run_and_report(settings, str(made.repository), engine="postgres", at=None, target=target.value,
                    report_dir=report_dir, as_json=as_json, progress=progress)


def _demo_encryption(settings: Settings, workdir: Path, encrypt: bool) -> tuple[Settings, SecretStr | None]:
    """`demo --encrypt`: the passphrase the sample repository is encrypted with (postgres.repo_cipher_pass,
    else the workdir's kept one, else a new one), and the settings that verify it with it."""
    if not encrypt:
        return settings, None
    from verification.demo.source import demo_cipher_pass

    cipher_pass = demo_cipher_pass(workdir, settings.postgres.repo_cipher_pass)
    postgres = settings.postgres.model_copy(update={"repo_cipher_pass": cipher_pass})
    return settings.model_copy(update={"postgres": postgres}), cipher_pass


def _encrypted_note(workdir: Path, cipher_pass: SecretStr | None) -> str:
    from verification.demo.source import CIPHER_PASS_FILE, DEMO_CIPHER

    return f"; encrypted, {DEMO_CIPHER}, passphrase in {workdir / CIPHER_PASS_FILE}" if cipher_pass else ""


def _demo_in_s3(settings: Settings, workdir: Path, scale: int, clusters: int, target: TargetChoice,
                report_dir: Path | None, as_json: bool, progress: Any, encrypt: bool, pg_version: str) -> NoReturn:
    """`demo --s3`: a local S3 endpoint for the whole command, stopped on the way out whatever happens
    (an error, Ctrl-C, the verdict's exit)."""
    from verification.demo.s3_endpoint import LocalS3Endpoint
    from verification.demo.source import DemoS3, make_demo

    settings, cipher_pass = _demo_encryption(settings, workdir, encrypt)
    endpoint = LocalS3Endpoint()
    try:
        try:
            endpoint.start()
            progress(f"local S3 endpoint {endpoint.url} (moto, TLS from a CA made now)")
            bucket = DemoS3.local(endpoint)
            made = make_demo(workdir, scale=scale, clusters=clusters, fresh=True, progress=progress,
                             build_context=settings.docker.build_context, s3=bucket, state_dir=settings.state_dir,
                             cipher_pass=cipher_pass, pg_version=pg_version)
        except RestoreproofError as exc:
            fail(str(exc))
        except KeyboardInterrupt as exc:
            fail("interrupted; the demo's source containers and its S3 endpoint were removed",
                 exit_code_of(signal_of(exc)))
        progress(f"sample repository made: {made.source} ({', '.join(made.stanzas)}"
                 f"{_encrypted_note(made.workdir, cipher_pass)})")
        # The endpoint as the demo reached it; pgBackRest in each target reads the bucket itself.
        settings = settings.model_copy(update={"s3": settings.s3.model_copy(update={
            "endpoint_url": bucket.endpoint_url, "region": bucket.region, "profile": None,
            "addressing_style": "path", "verify_tls": True, "ca_bundle": bucket.ca_file,
            "access_key_id": SecretStr(bucket.access_key_id), "secret_access_key": bucket.secret_access_key,
            "restore_mode": "direct"})})
        _run_and_report(settings, made.source, engine="postgres", at=None, target=target.value,
                        report_dir=report_dir, as_json=as_json, progress=progress)
    finally:
        endpoint.stop()
        if isinstance(progress, Progress):
            progress.stop()


@app.command()
def nightly(
    workdir: Annotated[Path, typer.Option(help="Where the sample repository goes (WORKDIR/backups).")] = Path("demo"),
    scale: Annotated[int, typer.Option(min=1, help="Data size: 1 is ~100 MB per cluster, 10 is ~1 GB.")] = 1,
    clusters: Annotated[int, typer.Option(min=1, max=16, help="Independent clusters (pgBackRest stanzas).")] = 2,
    airflow_home: Annotated[Path, typer.Option(help="Airflow's home (SQLite metadata database).")] = Path(".airflow"),
    pool_slots: Annotated[int, typer.Option(min=1, help="Targets at once (the Airflow pool's slots).")] = 2,
    config: ConfigOpt = None,
    encrypt: EncryptOpt = False,
) -> None:
    """Make the sample backups, then run the nightly Airflow DAG once on them, through real Airflow."""
    import time

    from verification.airflow_once import run_once
    from verification.demo.source import make_demo

    settings = settings_from(config)
    if encrypt and config is not None and settings.postgres.repo_cipher_pass is None:
        # Every task loads the configuration given, as it is: it must hold the passphrase (or the environment).
        fail(f"--encrypt with --config {config}: set postgres.repo_cipher_pass there or in "
             "RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS, the passphrase the DAG's tasks verify with")
    settings, cipher_pass = _demo_encryption(settings, workdir, encrypt)
    progress = _progress(True)
    try:
        made = make_demo(workdir, scale=scale, clusters=clusters, progress=progress,
                         build_context=settings.docker.build_context, cipher_pass=cipher_pass)
    except RestoreproofError as exc:
        fail(str(exc))
    finally:
        if isinstance(progress, Progress):
            progress.stop()
    err.print(f"sample repository {'reused' if made.reused else 'made'}: {made.repository}"
              f"{_encrypted_note(made.workdir, cipher_pass)}", highlight=False)
    err.print(f"running DAG restore_verification once through Airflow (home {airflow_home.resolve()}) ...",
              highlight=False)
    started = time.monotonic()
    # Every task of the run loads the same file `verify --config` would (the DAG's `config` param).
    if config is None:  # the sample clusters' own data checks (a configuration given is used as it is)
        import yaml

        from verification.demo.source import demo_checks

        config = made.workdir / "restoreproof-demo.yaml"
        written: dict[str, Any] = {"checks": demo_checks(made)}
        if cipher_pass is not None:  # the tasks verify the encrypted repository with it
            written["postgres"] = {"repo_cipher_pass": cipher_pass.get_secret_value()}
        # 0600 (a new private file renamed over the old): it may hold the passphrase.
        write_text_atomically(config, yaml.safe_dump(written, sort_keys=False))
        err.print(f"data checks of the sample clusters{' and the passphrase' if cipher_pass else ''}: {config}",
                  highlight=False)
    conf: dict[str, Any] = {"target": "docker", "config": str(config.resolve())}
    dag_run = run_once(made.repository, airflow_home.resolve(), pool_slots, conf)
    wall = time.monotonic() - started
    reports = sorted(settings.report_dir.glob("restore_verification-*/report.json"), key=lambda p: p.stat().st_mtime)
    out.print(f"DAG run {dag_run.run_id}: {dag_run.state} in {wall:.1f} s", highlight=False)
    if reports:
        report = RunReport.model_validate_json(reports[-1].read_bytes())
        for db in report.databases:
            out.print(f"  {db.database}: {db.verdict} ({db.recovery_seconds} s to online)", highlight=False)
        out.print(f"report: {reports[-1].with_name('report.html').resolve()}", highlight=False)
    raise typer.Exit(ExitCode.PASSED if str(dag_run.state) == "success" else ExitCode.FAILED)


@app.command()
def schema(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write it here instead of printing it.")] = None,
) -> None:
    """The JSON schema of report.json, generated from the typed report model."""
    if output is None:
        typer.echo(schema_text(), nl=False)
    else:
        output.write_text(schema_text(), encoding="utf-8")


@app.command()
def reap(
    run: Annotated[str | None, typer.Option("--run", help="Only what this run id left (removed unless it shows "
                                                          "signs of life).")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --run: remove it even if its worker looks alive "
                                                        "(its heartbeat is fresh, or its process runs).")] = False,
    config: ConfigOpt = None,
) -> None:
    """Remove what dead runs left behind: containers, volumes, processes and folders (by label), and
    record their killed databases as errors. A run whose worker may be alive is kept, saying why."""
    from verification.pipeline import end_dead_runs

    if force and run is None:
        fail("--force needs --run: only a run named on purpose is removed when it may be alive")
    settings = settings_from(config)
    found = end_dead_runs(settings, lambda _: None, only_run=run, force=force)
    report = found.sweep.reaped
    for decision in report.decisions:
        who = decision.holder.describe() if decision.holder else "no holder labels"
        out.print(f"run {escape(decision.run_id)} ({escape(who)}): {escape(decision.judgement.describe())}",
                  highlight=False)
        for thing in decision.found:
            done = "removed" if thing.split(" ", 1)[1] in decision.removed else "kept"
            out.print(f"  {done} {escape(thing)}", highlight=False)
    for run_id, lines in found.recorded.items():
        for line in lines:
            out.print(f"run {escape(run_id)}: {escape(line)}", highlight=False)
    for note in report.notes:
        out.print(escape(note), highlight=False)
    out.print(f"{report.total} leftover(s) removed, {len(report.kept)} run(s) kept", highlight=False)
    for error in report.errors + found.errors:
        err.print(f"[red]not removed:[/] {escape(error)}", highlight=False)
    named_but_kept = run is not None and any(d.run_id == run for d in report.kept)
    if named_but_kept:
        err.print(f"run {escape(run or '')} was kept: --force removes it anyway", highlight=False)
    # Something left running is restoreproof's problem to report, never a clean exit.
    raise typer.Exit(ExitCode.ERROR if report.errors or found.errors or named_but_kept else ExitCode.PASSED)


class ShippedPath(StrEnum):
    dags = "dags"
    plugins = "plugins"
    images = "images"


@app.command()
def paths(
    name: Annotated[ShippedPath | None, typer.Argument(help="Print only this one path (for scripts).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Where the files that ship with restoreproof are: the Airflow DAGs and plugin, the image build context.

    Point Airflow at them (AIRFLOW__CORE__DAGS_FOLDER=$(restoreproof paths dags)) or copy them.
    """
    from verification.airflow_files import DAGS_DIR, PLUGINS_DIR
    from verification.images import IMAGES_DIR

    settings = settings_from(config)
    found = {ShippedPath.dags: DAGS_DIR, ShippedPath.plugins: PLUGINS_DIR,
             ShippedPath.images: settings.docker.build_context or IMAGES_DIR}
    if name is not None:
        typer.echo(found[name])
    else:
        for key, path in found.items():
            typer.echo(f"{key.value:<8} {path}")
    raise typer.Exit(ExitCode.PASSED)


app.command("config")(config_command)


evidence_app = typer.Typer(no_args_is_help=True, help="The signed evidence bundle of a run: verify it, make a key.")
app.add_typer(evidence_app, name="evidence")


@evidence_app.command("verify")
def evidence_verify(
    bundle: Annotated[Path, typer.Argument(help="A run folder (REPORT_DIR/<run id>) or a .tar.gz of one.")],
    public_key: Annotated[Path | None, typer.Option(
        "--public-key", help="The signer's PEM public key (from `evidence keygen`). Default: the key the "
                             "configuration names.")] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check every file of a run folder against its signed manifest.

    Exit 0 intact and signed by the expected key, 1 anything altered/missing/added/unsigned, 2 could not verify.
    """
    from verification.evidence import load_public_key_file, load_verifier, verify_bundle

    if not bundle.exists():
        fail(f"{bundle} does not exist")
    try:
        verifier = load_public_key_file(public_key) if public_key else load_verifier(settings_from(config))
        result = verify_bundle(bundle, verifier)
    except RestoreproofError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        run = f" (run {result.run_id})" if result.run_id else ""
        out.print(f"bundle {bundle}{run}", highlight=False, markup=False)
        for finding in result.findings:
            out.print(f"  - {finding.message}", highlight=False, markup=False)
        for shared in result.shared_absent:
            out.print(f"  note: {shared} (signed) is not beside the run folder, so not checked; report.html's "
                      "charts load it (copy the report folder's assets/ along)", highlight=False, markup=False)
        if result.ok:
            out.print(f"[green]intact[/]: {result.files_checked} file(s) match the manifest, signed by "
                      f"{result.algorithm} key {result.key_id}", highlight=False)
        else:
            out.print(f"[red]NOT intact[/]: {len(result.findings)} finding(s)", highlight=False)
    raise typer.Exit(ExitCode.PASSED if result.ok else ExitCode.FAILED)


@evidence_app.command("keygen")
def evidence_keygen(
    out: Annotated[Path, typer.Option("--out", help="The private key file to write (0600); the public key "
                                                    "goes to FILE.pub.")],
) -> None:
    """Make an Ed25519 signing key for evidence bundles; prints its key id."""
    from verification.evidence import generate_key_pair

    try:
        pair = generate_key_pair(out)
    except RestoreproofError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or type(exc).__name__}")
    # stdout holds the key id alone, for scripts (KEY_ID=$(restoreproof evidence keygen ...)); the paths
    # are the ones given (--out FILE, FILE.pub), said for the person on stderr.
    err.print(f"private key: {pair.private_path} (keep it secret; set evidence.signing_key_file to it)\n"
              f"public key:  {pair.public_path} (give it to auditors: evidence verify --public-key)",
              highlight=False, markup=False)
    typer.echo(pair.key_id)
    raise typer.Exit(ExitCode.PASSED)


def _exit_codes_in_help() -> None:
    """Every command's --help ends with the table of exit codes (set here, once, rather than on each)."""
    epilog = f"Exit codes:\n\n{exit_codes.table()}"
    for group in (app, evidence_app):
        group.info.epilog = epilog
        for command in group.registered_commands:
            command.epilog = epilog


_exit_codes_in_help()


def main() -> None:
    # SIGTERM unwinds as Ctrl-C does, so every `finally` removes its target; the exit code tells them apart.
    signal.signal(signal.SIGTERM, raise_interrupted)
    try:
        app()
    except KeyboardInterrupt as exc:
        err.print(f"restoreproof: interrupted by {signal_name(signal_of(exc))}; targets of this run were removed",
                  highlight=False)
        sys.exit(exit_code_of(signal_of(exc)))
    except Exception:  # a bug or an unexpected failure: "could not run", never a verdict
        err.print_exception(max_frames=8)
        err.print("restoreproof: internal error (above); nothing was verified", highlight=False)
        sys.exit(ExitCode.ERROR)


if __name__ == "__main__":
    main()
