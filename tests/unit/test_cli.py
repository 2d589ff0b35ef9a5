"""The `plan` command's contract: JSON shape and exit codes (0 complete, 1 broken, 2 not runnable)."""

import json

import typer
from typer.testing import CliRunner

from tests.unit.sources import conftest as s3_fixtures
from verification.cli import app

runner = CliRunner()
# A real S3 endpoint (moto's server mode, its own process) for the sources in S3 below.
s3_endpoint, s3 = s3_fixtures.s3_endpoint, s3_fixtures.s3


def test_plan_json_complete_exit_0(captured_repo):
    result = runner.invoke(app, ["plan", str(captured_repo), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (db,) = data["databases"]
    assert db["database"] == "demo1" and db["stop_at"] is None and db["encryption"] is None
    assert db["chain"]["status"] == "complete"
    assert [b["type"] for b in db["chain"]["backups"]] == ["full", "diff", "incr"]
    assert all(r["passed"] for r in db["chain"]["rules"])


def test_plan_says_a_pgbackrest_repository_is_not_encrypted_and_how_that_is_known(captured_repo):
    result = runner.invoke(app, ["plan", str(captured_repo)])
    assert result.exit_code == 0, result.output
    assert ("  not encrypted: 3 backup(s): read offline from the repository: backup/demo1/backup.info and the "
            "backup's manifest are plain text, not pgBackRest's encrypted format (repo1-cipher-type none)"
            ) in result.output


def test_an_encrypted_repository_s_backups_are_said_with_their_cipher_not_a_certificate_they_do_not_need():
    from dataclasses import replace

    from tests.unit.factories import backup
    from verification.cli import encryption_said
    from verification.model import BackupEncryption, EncryptionState

    basis = "read offline from the repository: backup/demo1/backup.info and the backup's manifest are encrypted"
    encrypted = BackupEncryption(EncryptionState.ENCRYPTED, basis, algorithm="aes-256-cbc")
    sql = BackupEncryption(EncryptionState.ENCRYPTED, "RESTORE HEADERONLY", algorithm="AES_256",
                           encryptor_type="CERTIFICATE", encryptor_thumbprint="0xA1")
    backups = [replace(backup(f"L{n}"), encryption=e) for n, e in enumerate([encrypted, encrypted, sql])]
    assert encryption_said(backups) == [f"encrypted (aes-256-cbc): 2 backup(s): {basis}",
                                        "encrypted: 1 backup(s); the target needs the certificate(s) 0xA1"]


def test_plan_broken_exit_1_names_the_segment(captured_repo):
    (victim,) = (captured_repo / "archive/demo1/15-1/0000000100000000").glob("000000010000000000000009-*")
    victim.unlink()
    result = runner.invoke(app, ["plan", str(captured_repo), "--json"])
    assert result.exit_code == 1
    problem = json.loads(result.stdout)["databases"][0]["chain"]["problems"][0]
    assert problem["code"] == "missing-wal" and problem["files"] == ["000000010000000000000009"]


def test_plan_at_point_in_time(captured_repo):
    result = runner.invoke(app, ["plan", str(captured_repo), "--json", "--at", "2026-11-22T19:50:43"])
    assert result.exit_code == 0
    db = json.loads(result.stdout)["databases"][0]
    assert db["stop_at"] == "2026-11-22T19:50:43+00:00"
    assert db["chain"]["backups"][-1]["type"] == "diff"


def test_not_a_repository_exit_2_with_a_clear_message(tmp_path):
    result = runner.invoke(app, ["plan", str(tmp_path)])
    assert result.exit_code == 2
    assert "holds no backups restoreproof recognises" in result.stderr
    assert str(tmp_path) in result.stderr


def test_bad_time_exit_2(captured_repo):
    result = runner.invoke(app, ["plan", str(captured_repo), "--at", "yesterday"])
    assert result.exit_code == 2
    assert "is not an ISO 8601 time" in result.stderr


def test_wrong_engine_for_the_source_exit_2(captured_repo):
    result = runner.invoke(app, ["plan", str(captured_repo), "--engine", "mssql"])
    assert result.exit_code == 2
    assert f"{captured_repo} holds no SQL Server backups" in result.stderr


def test_paths_prints_where_the_shipped_files_are(monkeypatch, tmp_path):
    from verification.airflow_files import DAGS_DIR, PLUGINS_DIR
    from verification.images import BUILD_CONTEXT_ENV, IMAGES_DIR

    monkeypatch.delenv(BUILD_CONTEXT_ENV, raising=False)
    result = runner.invoke(app, ["paths"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"dags     {DAGS_DIR}", f"plugins  {PLUGINS_DIR}", f"images   {IMAGES_DIR}"]
    assert runner.invoke(app, ["paths", "dags"]).stdout == f"{DAGS_DIR}\n"
    monkeypatch.setenv(BUILD_CONTEXT_ENV, str(tmp_path))
    assert runner.invoke(app, ["paths", "images"]).stdout == f"{tmp_path}\n"


def test_schema_prints_and_writes_the_schema_the_models_generate(tmp_path):
    from verification.reports.json_report import report_schema, schema_text

    printed = runner.invoke(app, ["schema"])
    assert printed.exit_code == 0 and printed.stdout == schema_text()
    assert json.loads(printed.stdout) == report_schema()
    written = runner.invoke(app, ["schema", "-o", str(tmp_path / "s.json")])
    assert written.exit_code == 0 and (tmp_path / "s.json").read_text() == schema_text()


def test_pages_is_the_setting_unless_the_option_says_otherwise_and_an_unknown_choice_is_refused(monkeypatch,
                                                                                                 tmp_path):
    from verification.cli import PagesChoice, settings_from

    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    monkeypatch.delenv("RESTOREPROOF_MSSQL__PAGES", raising=False)
    assert settings_from(None).mssql.pages == "chain"
    config = tmp_path / "rp.yaml"
    config.write_text("mssql:\n  pages: all\n  edition: Express\n")
    assert settings_from(config).mssql.pages == "all"
    # The option beats the file, and leaves the rest of its section as it is.
    chosen = settings_from(config, PagesChoice.chain).mssql
    assert (chosen.pages, chosen.edition) == ("chain", "Express")
    monkeypatch.setenv("RESTOREPROOF_MSSQL__PAGES", "all")
    assert settings_from(None).mssql.pages == "all" and settings_from(None, PagesChoice.chain).mssql.pages == "chain"
    result = runner.invoke(app, ["verify", str(tmp_path), "--pages", "some"])
    assert result.exit_code == 2
    said = " ".join(result.stderr.replace("│", " ").split())
    assert "Invalid value for '--pages': Value error, 'some' is not one of 'chain', 'all'." in said


# ---- what the configuration asks that cannot be done: refused before a run is recorded -----------------

def refused_before_the_run(args: list[str], tmp_path, monkeypatch, *said: str) -> None:
    """`verify` exits 2 naming the setting, and the results store holds no run, no report was written."""
    from verification.results import ResultStore

    store_url = f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("RESTOREPROOF_RESULTS_URL", store_url)
    result = runner.invoke(app, ["verify", *args, "--report-dir", str(tmp_path / "reports")])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())  # the console wraps long lines
    for words in said:
        assert words in message
    store = ResultStore(store_url)
    try:
        assert store.recent_runs() == []
    finally:
        store.close()
    assert not (tmp_path / "reports").exists()


def test_direct_mode_into_a_local_target_is_refused_before_the_run_starts(s3, captured_repo, tmp_path, monkeypatch):
    from tests.unit.sources.s3_helpers import upload_tree

    upload_tree(s3.client, s3.name, "repo", captured_repo)
    monkeypatch.setenv("RESTOREPROOF_S3__RESTORE_MODE", "direct")
    refused_before_the_run([s3.url("repo"), "--target", "local"], tmp_path, monkeypatch,
                           "restoreproof: s3.restore_mode direct restores into a Docker target only (pgBackRest in "
                           "it reads S3 through its one way out), not --target local: use --target docker or auto, "
                           "or s3.restore_mode stage")


def test_direct_mode_from_an_endpoint_named_by_its_address_is_refused_before_the_run_starts(s3, captured_repo,
                                                                                             tmp_path, monkeypatch):
    from tests.unit.sources.s3_helpers import upload_tree

    upload_tree(s3.client, s3.name, "repo", captured_repo)
    monkeypatch.setenv("RESTOREPROOF_S3__RESTORE_MODE", "direct")  # AWS_ENDPOINT_URL is https://127.0.0.1:PORT
    refused_before_the_run([s3.url("repo"), "--target", "docker"], tmp_path, monkeypatch,
                           "restoreproof: s3.restore_mode direct with the S3 endpoint of s3.endpoint_url (or "
                           "AWS_ENDPOINT_URL): pgBackRest checks an S3 endpoint's certificate by DNS name only: name "
                           f"the endpoint {s3.endpoint.url} by a name its certificate holds")


def test_sql_server_backups_into_a_local_target_are_refused_before_the_run_starts(mssql_copy, tmp_path,
                                                                                   monkeypatch):
    folder = mssql_copy("RestoreTimeClean")
    refused_before_the_run([str(folder), "--target", "local"], tmp_path, monkeypatch,
                           "restoreproof: SQL Server backups restore only into a SQL Server container, not --target "
                           "local (the setting target: local): use --target docker, auto or offline")



def test_demo_in_s3_without_motos_server_names_the_extra_and_starts_nothing(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "moto", None)  # as where moto is not installed
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result = runner.invoke(app, ["demo", "--s3", "--workdir", str(tmp_path / "demo"), "--clusters", "1"])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        "restoreproof: the local S3 endpoint needs moto's server mode, not installed here (missing: moto): install "
        "restoreproof with its extra s3-demo, pip install 'restoreproof[s3-demo]'")
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "demo").exists()


def test_demo_of_a_major_with_no_image_names_those_there_are_and_starts_nothing(tmp_path):
    from verification.images import IMAGES_DIR

    result = runner.invoke(app, ["demo", "--pg-version", "12", "--workdir", str(tmp_path / "demo"), "--json"])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        "restoreproof: --pg-version 12: no image for PostgreSQL 12 here; images are made for PostgreSQL 13, 15, 17, "
        f"18 ({IMAGES_DIR / 'postgres' / 'SUITES'}): choose one of these")
    assert not (tmp_path / "demo").exists()

def test_plan_exit_code_a_gap_an_unread_backup_may_fill_is_2_and_a_known_bad_backup_still_1():
    from tests.unit.factories import broken_plan
    from verification.cli import plan_exit_code
    from verification.model import Problem

    plan = broken_plan()
    assert plan_exit_code([plan], []) == 1
    plan.chain.unread.append(Problem("unread-backup", "LOG/x.trn could not be read", ("LOG/x.trn",)))
    assert plan_exit_code([plan], []) == 2
    plan.chain.defects.append(Problem("unreadable-backup", "F.bak is damaged", ("F.bak",)))
    assert plan_exit_code([plan], []) == 1


def test_plan_lists_what_a_sql_server_target_will_need_to_read_the_backups(mssql_corpus):
    result = runner.invoke(app, ["plan", str(mssql_corpus / "restoretimeclean2016")])
    assert result.exit_code == 0, result.output
    # Offline, a 2016 backup's encryption cannot be told: said so, never "not encrypted".
    assert ("  encryption unknown offline: 5 backup(s): written by SQL Server 13.0; cannot tell offline whether it is "
            "encrypted (BACKUP ... WITH ENCRYPTION or TDE)") in result.stdout
    data = json.loads(runner.invoke(app, ["plan", str(mssql_corpus / "restoretimeclean2016"), "--json"]).stdout)
    assert {b["encryption"]["state"] for b in data["databases"][0]["chain"]["backups"]} == {"unknown"}


def test_plan_timeline_reaches_the_plan_and_a_timeline_not_there_is_refused_exit_2(captured_repo):
    chosen = runner.invoke(app, ["plan", str(captured_repo), "--json", "--timeline", "1"])
    assert chosen.exit_code == 0, chosen.stderr
    chain = json.loads(chosen.stdout)["databases"][0]["chain"]
    assert (chain["timeline"], chain["timeline_choice"]) == (1, "--timeline 1")
    missing = runner.invoke(app, ["plan", str(captured_repo), "--json", "--timeline", "3"])
    assert missing.exit_code == 2
    (refusal,) = json.loads(missing.stdout)["databases"][0]["chain"]["unread"]
    assert refusal["code"] == "timeline-unknown" and "has no timeline 3" in refusal["message"]
    assert runner.invoke(app, ["plan", str(captured_repo), "--timeline", "0"]).exit_code == 2


def test_a_report_dir_that_is_a_file_is_refused_before_the_run(captured_repo, tmp_path, monkeypatch):
    """Named with the fix, exit 2, before anything is recorded or restored: no traceback at the end of a run."""
    from verification.results import ResultStore

    store_url = f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("RESTOREPROOF_RESULTS_URL", store_url)
    (tmp_path / "reports").write_text("not a folder")
    result = runner.invoke(app, ["verify", str(captured_repo), "--target", "offline",
                                 "--report-dir", str(tmp_path / "reports")])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"a part of its path, {tmp_path / 'reports'}, is a file, not a folder: name a folder restoreproof " \
           "may write (--report-dir, or report_dir in the configuration)" in message
    assert "Traceback" not in result.output
    store = ResultStore(store_url)
    try:
        assert store.recent_runs() == []
    finally:
        store.close()
    assert (tmp_path / "reports").read_text() == "not a folder"


def _commands(command: typer.core.TyperCommand | typer.core.TyperGroup,
              path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(command, typer.core.TyperGroup):  # typer's own Click: its groups are not click.Group
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


def test_every_commands_help_ends_with_the_table_of_exit_codes():
    from verification.exit_codes import MEANINGS, ExitCode

    paths = _commands(typer.main.get_command(app))
    assert {("plan",), ("verify",), ("evidence",), ("evidence", "verify"), ("evidence", "keygen"), ()} <= set(paths)
    for path in paths:
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})  # no line of it wrapped
        assert shown.exit_code == 0, shown.output
        lines = [line.strip() for line in shown.stdout.splitlines() if line.strip()]
        table = lines[lines.index("Exit codes:") + 1:]
        # One line per code, each apart (Click would otherwise run them into one paragraph).
        assert table == [f"{int(code)}  {meaning}" for code, meaning in MEANINGS.items()], path
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 130, 143]
