import pytest
from typer.testing import CliRunner

from verification.cli import app
from verification.config import DockerSettings, load_settings
from verification.errors import ConfigError


def test_defaults_need_no_file(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    settings = load_settings()
    assert settings.results_database_url == f"sqlite:///{tmp_path}/restoreproof/results.db"
    assert settings.docker.postgres_image == "restoreproof/postgres:15"
    assert settings.postgres.amcheck_options == ["--heapallindexed"]


def test_file_then_environment_then_arguments(monkeypatch, tmp_path):
    config = tmp_path / "restoreproof.yaml"
    config.write_text("docker:\n  memory: 1g\n  cpus: 1.5\nresults_url: sqlite:////tmp/x.db\n"
                      "checks:\n  sql:\n    - {name: rows, query: select 1, expect: 1}\n")
    monkeypatch.setenv("RESTOREPROOF_DOCKER__MEMORY", "3g")
    settings = load_settings(config, results_url="postgresql://db/results")
    assert settings.docker.memory == "3g"          # environment beats the file
    assert settings.docker.cpus == 1.5             # file beats the default
    assert settings.results_database_url == "postgresql://db/results"  # arguments beat everything
    assert settings.checks.sql[0].expect == "1"    # numbers are compared as text


def test_invalid_values_name_the_file(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("docker:\n  cpus: -1\n")
    with pytest.raises(ConfigError, match=r"invalid configuration in .*bad\.yaml[\s\S]*cpus"):
        load_settings(config)


def test_unknown_keys_are_rejected(tmp_path):
    config = tmp_path / "typo.yaml"
    config.write_text("reprot_dir: x\n")
    with pytest.raises(ConfigError, match="reprot_dir"):
        load_settings(config)


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "none.yaml")
    (tmp_path / "broken.yaml").write_text("a: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(tmp_path / "broken.yaml")


def test_a_folder_or_binary_file_named_as_the_configuration_is_said_so(tmp_path):
    with pytest.raises(ConfigError, match=rf"^configuration file {tmp_path} is a folder: name the YAML file in it$"):
        load_settings(tmp_path)
    (tmp_path / "config.yaml").write_bytes(b"report_dir: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"config\.yaml is not UTF-8 text \(byte 12\)$"):
        load_settings(tmp_path / "config.yaml")


def test_a_configuration_folder_through_the_cli_is_a_usage_error_not_a_traceback(tmp_path):
    result = CliRunner().invoke(app, ["plan", str(tmp_path), "--config", str(tmp_path)])
    assert result.exit_code == 2
    assert f"configuration file {tmp_path} is a folder" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_secret_is_not_shown_in_the_settings_repr(monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS", "hunter2-very-secret")
    settings = load_settings()
    assert "hunter2-very-secret" not in repr(settings)
    assert "hunter2-very-secret" not in settings.model_dump_json()
    assert settings.postgres.repo_cipher_pass.get_secret_value() == "hunter2-very-secret"


@pytest.mark.parametrize("text", [
    "repo_cipher_pass: s3cr3t-pass-top-level\n",                 # misplaced: an unknown key
    "postgres:\n  repo_cipher_pass: 12345678901\n",              # a number where text is expected
    "postgres:\n  repo_cipher_password: s3cr3t-pass-typo\n",     # a misspelt key inside a section
])
def test_errors_never_echo_values(tmp_path, text):
    config = tmp_path / "secret.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    for secret in ("s3cr3t", "12345678901"):
        assert secret not in message
    assert "repo_cipher_pas" in message  # the field is named
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_file_given_is_read_for_that_call_only_never_through_the_environment(monkeypatch, tmp_path):
    import os
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    files = []
    for cpus in (1.0, 1.5):  # neither the default (2.0)
        (tmp_path / f"{cpus}.yaml").write_text(f"docker:\n  cpus: {cpus}\n")
        files.append(tmp_path / f"{cpus}.yaml")
    before = dict(os.environ)
    with ThreadPoolExecutor(max_workers=4) as pool:  # DAG tasks and API handlers load settings in threads
        found = list(pool.map(lambda file: load_settings(file).docker.cpus, files * 20))
    assert found == [1.0, 1.5] * 20
    assert dict(os.environ) == before
    assert load_settings().docker.cpus == DockerSettings().cpus  # afterwards, no file is read at all


def test_the_environment_names_a_file_when_none_is_given_and_an_empty_file_is_the_defaults(monkeypatch, tmp_path):
    named = tmp_path / "named.yaml"
    named.write_text("report_dir: /srv/reports\n")
    monkeypatch.setenv("RESTOREPROOF_CONFIG", str(named))
    assert str(load_settings().report_dir) == "/srv/reports"
    (tmp_path / "empty.yaml").write_text("")
    assert str(load_settings(tmp_path / "empty.yaml").report_dir) == "reports"
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"list\.yaml must hold a mapping at its top level$"):
        load_settings(tmp_path / "list.yaml")


def test_whose_pages_are_verified_is_the_chains_unless_every_backup_is_asked_for(monkeypatch, tmp_path):
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    assert load_settings().mssql.pages == "chain"
    config = tmp_path / "pages.yaml"
    config.write_text("mssql:\n  pages: all\n")
    assert load_settings(config).mssql.pages == "all"
    config.write_text("mssql:\n  pages: everything\n")
    with pytest.raises(ConfigError, match=r"mssql\.pages: Input should be 'chain' or 'all'"):
        load_settings(config)


def test_a_data_size_is_a_size_below_the_memory_limit():
    assert DockerSettings(memory="2g", data_size="512m").data_size_bytes == 512 * 2**20
    assert DockerSettings().data_size_bytes is None
    with pytest.raises(ValueError, match=r"data_size \(2g\) must be below memory \(2g\): the data volume is a tmpfs"):
        DockerSettings(memory="2g", data_size="2g")
    with pytest.raises(ValueError, match="not a memory size"):
        DockerSettings(data_size="lots")


def test_the_data_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_DOCKER__DATA_SIZE", "64m")
    monkeypatch.setenv("RESTOREPROOF_MSSQL__DATA_SIZE", "1g")
    settings = load_settings(None)
    assert (settings.docker.data_size_bytes, settings.mssql.data_size_bytes) == (64 * 2**20, 2**30)


def test_a_certificates_password_comes_from_the_environment_under_the_files_name(monkeypatch, tmp_path):
    config = tmp_path / "restoreproof.yaml"
    config.write_text("mssql:\n  certificates:\n    BackupCert:\n      certificate: /keys/BackupCert.cer\n"
                      "      private_key: /keys/BackupCert.pvk\n")
    # The environment spells every name in lower case; it is still the file's certificate.
    monkeypatch.setenv("RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD", "from-the-env'1")
    (name, certificate), = load_settings(config).mssql.certificates.items()
    assert name == "BackupCert" and str(certificate.certificate) == "/keys/BackupCert.cer"
    assert certificate.private_key_password is not None
    assert certificate.private_key_password.get_secret_value() == "from-the-env'1"
    assert "from-the-env" not in repr(load_settings(config))


def test_a_certificate_without_a_password_or_with_a_name_the_environment_cannot_say_is_refused(tmp_path):
    config = tmp_path / "restoreproof.yaml"
    config.write_text("mssql:\n  certificates:\n    BackupCert:\n      certificate: /k.cer\n      private_key: /k.pvk\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    assert ("mssql.certificates.BackupCert.private_key_password is not set: give the private key file's password in "
            "RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD") in str(refused.value)
    config.write_text("mssql:\n  certificates:\n    backup-cert:\n      certificate: /k.cer\n      private_key: /k.pvk\n"
                      "      private_key_password: secret-in-file\n")
    with pytest.raises(ConfigError, match="'backup-cert' is not a name of letters, digits and underscores") as named:
        load_settings(config)
    assert "secret-in-file" not in str(named.value)


def test_an_empty_passphrase_is_no_passphrase(monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS", "")
    assert load_settings().postgres.repo_cipher_pass is None  # said as missing, never tried as a wrong one


def test_secrets_come_from_files_in_the_secrets_dir(tmp_path, monkeypatch):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "restoreproof_postgres__repo_cipher_pass").write_text("Pass-From-A-File-77\n")
    (secrets / "other_service_password").write_text("not ours")  # a shared /run/secrets: left alone
    monkeypatch.setenv("RESTOREPROOF_SECRETS_DIR", str(secrets))
    settings = load_settings()
    assert settings.postgres.repo_cipher_pass.get_secret_value() == "Pass-From-A-File-77"
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS", "Pass-From-The-Env-88")  # the environment wins
    assert load_settings().postgres.repo_cipher_pass.get_secret_value() == "Pass-From-The-Env-88"
    monkeypatch.delenv("RESTOREPROOF_POSTGRES__REPO_CIPHER_PASS")
    (secrets / "restoreproof_postgres__repo_cipher_passwd").write_text("typo")  # misspelt: refused, named
    with pytest.raises(ConfigError, match=r"postgres\.repo_cipher_passwd") as raised:
        load_settings()
    assert "typo" not in str(raised.value) and "Pass-From-A-File-77" not in str(raised.value)
    monkeypatch.setenv("RESTOREPROOF_SECRETS_DIR", str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match=r"RESTOREPROOF_SECRETS_DIR names .*absent, which is not a folder"):
        load_settings()


def test_images_per_postgres_major_are_keyed_by_the_major_as_backup_info_writes_it(tmp_path):
    config = tmp_path / "restoreproof.yaml"
    config.write_text("docker:\n  postgres_images:\n    17: mine/pg17\n    '13': mine/pg13\n")
    docker = load_settings(config).docker
    assert docker.postgres_images == {"17": "mine/pg17", "13": "mine/pg13"}
    # Unset, the single image is no constraint: each backup gets its major's image.
    assert "postgres_image" not in docker.model_fields_set
