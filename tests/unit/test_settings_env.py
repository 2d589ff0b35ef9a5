"""RESTOREPROOF_* variables: the settings' names, the reserved ones, the nearest name to a misspelt one;
where the configuration file is found. Through the real CLI: tests/unit/test_cli_config.py."""

import re
from pathlib import Path

import pytest

from verification.config import Settings, load_settings
from verification.settings_env import (
    NOT_SETTINGS,
    RESERVED_TEST_PREFIX,
    is_reserved,
    is_setting,
    locate_config,
    setting_paths,
    unknown_variables,
)

ROOT = Path(__file__).resolve().parents[2]
PATHS = setting_paths(Settings)
# The tests of misspelt names, which spell them on purpose.
MISSPELT_ON_PURPOSE = {"test_settings_env.py", "test_cli_config.py", "test_config.py"}


def test_names_are_the_settings_nested_with_double_underscores_in_any_case():
    for name in ("RESTOREPROOF_RESULTS_URL", "RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS", "restoreproof_docker__memory",
                 "RESTOREPROOF_DOCKER", "RESTOREPROOF_RTO__DATABASES__APP",
                 "RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD"):
        assert is_setting(name, PATHS), name
    for name in ("RESTOREPROOF_POSTGRES__REPO_CIPHER_PAS", "RESTOREPROOF_POSTGRES_REPO_CIPHER_PASS",
                 "RESTOREPROOF_DOCKER__MEMORY__X", "RESTOREPROOF_RTO__DATABASES", "RESTOREPROOF_FOO"):
        assert is_setting(name, PATHS) == (name == "RESTOREPROOF_RTO__DATABASES"), name


def test_each_unknown_variable_is_named_with_the_nearest_known_name_and_never_its_value():
    environ = {"RESTOREPROOF_RESULT_URL": "postgresql://u:hunter2@h/db", "RESTOREPROOF_CONFG": "x.yaml",
               "RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASWORD": "pw", "RESTOREPROOF_FOO": "1",
               "RESTOREPROOF_REPORT_DIR": "r", "RESTOREPROOF_WORKER_HOSTNAME": "w", "RESTOREPROOF_TEST_ANYTHING": "1",
               "PATH": "/bin"}
    assert unknown_variables(Settings, environ) == [
        "RESTOREPROOF_CONFG is not a restoreproof setting: did you mean RESTOREPROOF_CONFIG?",
        "RESTOREPROOF_FOO is not a restoreproof setting: no setting has a similar name",
        "RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASWORD is not a restoreproof setting: did you "
        "mean RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD?",
        "RESTOREPROOF_RESULT_URL is not a restoreproof setting: did you mean RESTOREPROOF_RESULTS_URL?"]


def _names_in_the_repository() -> set[str]:
    found: set[str] = set()
    for folder in ("verification", "dags", "plugins", "tests", "bench", "docker", "docs", ".ci", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".sh", ".yaml", ".yml", ".md", ".toml", "") \
                    and "__pycache__" not in path.parts and path.name not in MISSPELT_ON_PURPOSE:
                found.update(re.findall(r"RESTOREPROOF_[A-Z0-9_]*[A-Z0-9]", path.read_text(errors="replace")))
    for file in ("Makefile", "README.md", "pyproject.toml"):
        found.update(re.findall(r"RESTOREPROOF_[A-Z0-9_]*[A-Z0-9]", (ROOT / file).read_text()))
    return found


def test_every_restoreproof_variable_the_repository_uses_is_a_setting_or_reserved():
    """CI and the compose files set some of these: none may be warned about."""
    names = _names_in_the_repository()
    assert {"RESTOREPROOF_SCHEDULE", "RESTOREPROOF_GOLDEN", "RESTOREPROOF_TEST_PG_VERSIONS"} <= names
    # A stem ("RESTOREPROOF_MSSQL__CERTIFICATES__<NAME>__...") is found as far as it goes: a section; and
    # the reserved prefix as its own name.
    unknown = sorted(n for n in names - {RESERVED_TEST_PREFIX.rstrip("_")} if not (is_setting(n, PATHS) or is_reserved(n)))
    assert unknown == [], "a new RESTOREPROOF_* variable: a setting, NOT_SETTINGS, or RESTOREPROOF_TEST_*"
    assert not [n for n in NOT_SETTINGS if is_setting(n, PATHS)]


def test_the_file_is_the_one_given_then_the_environments_then_the_users_then_the_systems(monkeypatch, tmp_path):
    user = tmp_path / "home" / "restoreproof" / "config.yaml"
    system = tmp_path / "etc" / "config.yaml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RESTOREPROOF_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    assert locate_config(None).path is None and load_settings().report_dir == Path("reports")
    system.parent.mkdir(parents=True)
    system.write_text("report_dir: /from/system\n")
    assert locate_config(None).found_by == "the system file" and load_settings().report_dir == Path("/from/system")
    user.parent.mkdir(parents=True)
    user.write_text("report_dir: /from/user\n")
    assert locate_config(None).found_by == "the user file" and load_settings().report_dir == Path("/from/user")
    named = tmp_path / "named.yaml"
    named.write_text("report_dir: /from/env\n")
    monkeypatch.setenv("RESTOREPROOF_CONFIG", str(named))
    assert load_settings().report_dir == Path("/from/env")
    given = tmp_path / "given.yaml"
    given.write_text("report_dir: /given\n")
    assert load_settings(given).report_dir == Path("/given")


def test_the_user_file_defaults_to_the_home_folders_config(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    from verification.settings_env import user_config_file

    assert user_config_file() == tmp_path / ".config" / "restoreproof" / "config.yaml"


@pytest.mark.parametrize("how", ["given", "environment"])
def test_a_file_named_explicitly_that_is_missing_is_an_error_naming_it(monkeypatch, tmp_path, how):
    from verification.errors import ConfigError

    (tmp_path / "home" / "restoreproof").mkdir(parents=True)
    (tmp_path / "home" / "restoreproof" / "config.yaml").write_text("{}\n")  # never a fall-back for it
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    missing = tmp_path / "missing.yaml"
    if how == "environment":
        monkeypatch.setenv("RESTOREPROOF_CONFIG", str(missing))
    with pytest.raises(ConfigError, match=f"configuration file {re.escape(str(missing))} does not exist"):
        load_settings(missing if how == "given" else None)
