"""`restoreproof config` and the settings' sources through the real CLI: the file found (--config,
RESTOREPROOF_CONFIG, the user's, the system's), unknown variables warned on stderr with the nearest name,
every secret masked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from verification.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
PASSPHRASE = "Cipher-Pass-Hunter2-77"


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: its own process, so its warnings reach stderr as they would."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RESTOREPROOF_") or "SYSTEM" in k}
    environ |= {"PYTHONPATH": str(ROOT)} | env
    return subprocess.run([sys.executable, "-m", "verification.cli", *args], env=environ, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_misspelt_variable_is_warned_with_the_nearest_name_and_known_ones_are_not(tmp_path):
    done = cli("config", cwd=tmp_path, env={
        "RESTOREPROOF_RESULT_URL": "sqlite:///x.db",  # top level: pydantic-settings would ignore it silently
        "RESTOREPROOF_REPORT_DIR": str(tmp_path / "reports"),  # a setting
        "RESTOREPROOF_WORKER_HOSTNAME": "worker-2", "RESTOREPROOF_SCHEDULE": "none",  # read by the DAGs, plugin
        "RESTOREPROOF_TEST_PG_VERSIONS": "all",  # the tests' reserved prefix (CI sets it)
    })
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("restoreproof: warning: RESTOREPROOF_RESULT_URL is not a restoreproof setting: "
                           "did you mean RESTOREPROOF_RESULTS_URL?\n")
    assert "x.db" not in done.stdout and "# environment: RESTOREPROOF_REPORT_DIR\n" in done.stdout


def test_a_misspelt_variable_under_a_section_is_warned_with_its_name_then_refused(tmp_path):
    done = cli("config", cwd=tmp_path, env={"RESTOREPROOF_POSTGRES__REPO_CIPHER_PAS": PASSPHRASE})
    assert done.returncode == 2
    assert ("restoreproof: warning: RESTOREPROOF_POSTGRES__REPO_CIPHER_PAS is not a restoreproof setting: did you "
            "mean RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS?\n") in done.stderr
    assert "postgres.repo_cipher_pas: Extra inputs are not permitted" in done.stderr
    assert PASSPHRASE not in done.stdout + done.stderr and "Traceback" not in done.stderr and done.stdout == ""


def test_the_file_read_is_the_users_then_the_systems_unless_one_is_named(tmp_path):
    home, system = tmp_path / "home", tmp_path / "etc" / "config.yaml"
    env = {"XDG_CONFIG_HOME": str(home), "RESTOREPROOF_SYSTEM_CONFIG": str(system)}

    def report_dir(*args: str, **more: str) -> tuple[str, str]:
        done = runner.invoke(app, ["config", "--json", *args], env=env | more)
        assert done.exit_code == 0, done.output
        data = json.loads(done.stdout)
        return data["found_by"], data["settings"]["report_dir"]

    assert report_dir() == ("none", "reports")
    system.parent.mkdir()
    system.write_text("report_dir: /from/system\n")
    assert report_dir() == ("the system file", "/from/system")
    (home / "restoreproof").mkdir(parents=True)
    (home / "restoreproof" / "config.yaml").write_text("report_dir: /from/user\n")
    assert report_dir() == ("the user file", "/from/user")
    (tmp_path / "env.yaml").write_text("report_dir: /from/env\n")
    (tmp_path / "given.yaml").write_text("report_dir: /given\n")
    assert report_dir(RESTOREPROOF_CONFIG=str(tmp_path / "env.yaml")) == ("RESTOREPROOF_CONFIG", "/from/env")
    assert report_dir("--config", str(tmp_path / "given.yaml"),
                      RESTOREPROOF_CONFIG=str(tmp_path / "env.yaml")) == ("--config", "/given")


def test_a_missing_file_named_by_option_or_environment_is_an_error_naming_it(tmp_path):
    (tmp_path / "restoreproof").mkdir()
    (tmp_path / "restoreproof" / "config.yaml").write_text("{}\n")  # never used instead
    missing = tmp_path / "missing.yaml"
    for args, env in ((["--config", str(missing)], {}), ([], {"RESTOREPROOF_CONFIG": str(missing)})):
        done = runner.invoke(app, ["config", *args], env={"XDG_CONFIG_HOME": str(tmp_path)} | env)
        assert done.exit_code == 2
        assert done.stderr == f"restoreproof: configuration file {missing} does not exist\n" and done.stdout == ""


def test_config_prints_the_effective_settings_with_every_secret_masked(tmp_path):
    config = tmp_path / "restoreproof.yaml"
    config.write_text(yaml.safe_dump({
        "results_url": "postgresql+psycopg://restoreproof:Store-Pw-5150@db.example:5432/results",
        "evidence": {"signing": "hmac", "signing_key": "Yaml-Signing-Key-9001"},
        "postgres": {"server_options": {"application_name": PASSPHRASE}},  # a secret copied elsewhere
        "docker": {"cpus": 1.5}}))
    done = runner.invoke(app, ["config", "--config", str(config)],
                         env={"RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS": PASSPHRASE, "RESTOREPROOF_RTO__DATABASES__APP": "60"})
    assert done.exit_code == 0, done.output
    for secret in (PASSPHRASE, "Store-Pw-5150", "Yaml-Signing-Key-9001"):
        assert secret not in done.stdout + done.stderr
    header, _, body = done.stdout.partition("\n# environment: ")
    assert header == f"# configuration file: {config} (--config)"
    assert body.startswith("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS, RESTOREPROOF_RTO__DATABASES__APP\n")
    shown = yaml.safe_load(done.stdout)
    assert shown["postgres"]["repo_cipher_pass"] == "**********"
    assert shown["evidence"]["signing_key"] == "**********"
    assert shown["results_url"] == "postgresql+psycopg://restoreproof:********@db.example:5432/results"
    assert shown["postgres"]["server_options"] == {"application_name": "********"}
    assert shown["docker"]["cpus"] == 1.5 and shown["rto"]["databases"] == {"app": 60.0}


def test_a_short_url_password_is_masked_too_and_the_default_store_is_shown(tmp_path):
    done = runner.invoke(app, ["config", "--json"], env={"RESTOREPROOF_RESULTS_URL": "postgresql://u:pw@h/db",
                                                         "RESTOREPROOF_STATE_DIR": str(tmp_path)})
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["settings"]["results_url"] == "postgresql://u:********@h/db"
    done = runner.invoke(app, ["config", "--json"], env={"RESTOREPROOF_STATE_DIR": str(tmp_path)})
    data = json.loads(done.stdout)
    assert data["settings"]["results_url"] == f"sqlite:///{tmp_path / 'results.db'}"
    assert data["environment"] == ["RESTOREPROOF_STATE_DIR"] and data["file"] is None


def test_an_invalid_configuration_exits_2_naming_the_setting_without_a_traceback(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("docker:\n  memry: 1g\n")
    done = runner.invoke(app, ["config", "--config", str(config)])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr == f"restoreproof: invalid configuration in {config}:\n  docker.memry: Extra inputs are not permitted\n"


def test_a_run_names_the_user_file_it_found_on_its_own(tmp_path):
    """A file nobody named (the user's or the system's) that excludes a backup: the run must say which
    file it read, or an operator sees a backup excluded and cannot tell by what."""
    from tests.conftest import MSSQL_CORPUS

    folder = MSSQL_CORPUS / "singlerestore"
    if not folder.exists():
        import pytest

        pytest.skip(f"the SQL Server backup corpus is not at {MSSQL_CORPUS}")
    user = tmp_path / "xdg" / "restoreproof" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text('exclude: ["testlastbackup*"]\n')
    done = cli("verify", str(folder), "--target", "offline", "--report-dir", str(tmp_path / "reports"), cwd=tmp_path,
               env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path / "state"),
                    "RESTOREPROOF_SYSTEM_CONFIG": str(tmp_path / "none.yaml"),
                    "RESTOREPROOF_PREDICTION__PROBES": "never"})
    assert "excluded by the pattern 'testlastbackup*'" in done.stdout, done.stderr
    assert f"configuration: {user} (the user file)" in " ".join(done.stderr.split()), done.stderr


def test_a_password_in_the_results_url_query_is_masked(tmp_path):
    """libpq's and SQLAlchemy's other way to give the password: ?password=... (with a socket or host=)."""
    url = f"postgresql+psycopg:///results?host=db.example&password={PASSPHRASE}"
    done = cli("config", cwd=tmp_path, env={"RESTOREPROOF_RESULTS_URL": url, "XDG_CONFIG_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert PASSPHRASE not in done.stdout + done.stderr
    assert "results_url: postgresql+psycopg:///results?host=db.example&password=********" in done.stdout
