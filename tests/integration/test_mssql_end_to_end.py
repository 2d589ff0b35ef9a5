"""SQL Server end to end: real backups restored in a real SQL Server container.

Runs wherever the image can be had (`docker pull mcr.microsoft.com/mssql/server:2022-latest`, or
any image configured in mssql.images); on this project's machines no registry is reachable, so
these tests skip and say so. See README, "SQL Server".
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import docker.errors
import pytest

from tests.integration.conftest import leftovers
from verification.pipeline import run_verification
from verification.reports.json_report import report_data

pytestmark = [pytest.mark.integration, pytest.mark.mssql]


@pytest.fixture(scope="module")
def sql_server_image() -> str:
    from verification.config import load_settings
    from verification.targets.docker import docker_client

    image = load_settings().mssql.images[max(load_settings().mssql.images)]
    client = docker_client()
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            # Never pulled by the tests: the machines they run on reach no image registry (asking would
            # send a lookup out of the machine); a SQL Server image is loaded beforehand where one exists.
            pytest.skip(f"SQL Server image {image} is not present here (load it with `docker load`; the tests "
                        "pull nothing)")
    finally:
        client.close()
    return image


def test_latest_chain_restores_and_checkdb_passes(sql_server_image, mssql_corpus, settings):
    result = run_verification(settings, mssql_corpus / "RestoreTimeClean", engine_name="mssql")
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    phases = {p["name"]: p for p in db["phases"]}
    assert phases["transfer"]["bytes"] > 0 and phases["log_restore"]["seconds"] is not None
    # The pages were verified offline before the restore, and that check is kept beside CHECKDB's.
    assert {c["name"]: c["status"] for c in db["checks"]} == {"page_verification": "passed", "dbcc_checkdb": "passed"}
    assert leftovers(result.run.run_id) == []


def test_striped_set_and_point_in_time(sql_server_image, mssql_corpus, settings):
    at = datetime(2020, 5, 12, 13, 31, 0, tzinfo=UTC)
    result = run_verification(settings, mssql_corpus / "sql2008-backups/StopAt", engine_name="mssql", at=at)
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    assert db["chain"]["backups"][-1]["path"].endswith("StopAt_21.trn")
    stripe = run_verification(settings, mssql_corpus / "history/sql2016-stripe", engine_name="mssql")
    assert [d["verdict"] for d in report_data(stripe.report)["databases"]] == ["passed"]
    (pages,) = [c for c in report_data(stripe.report)["databases"][0]["checks"] if c["name"] == "page_verification"]
    assert pages["status"] == "passed" and len(pages["details"]["per_file"]) == 2  # both stripes read


# -- encrypted backups: made at test time by a real SQL Server, restored with their certificate --------

KEY_PASSWORD = "Pvk'Pa55-word-e2e-7"
SQLCMD = "if [ -x /opt/mssql-tools18/bin/sqlcmd ]; then s=/opt/mssql-tools18/bin/sqlcmd; x=-C; " \
         "else s=/opt/mssql-tools/bin/sqlcmd; x=; fi; exec \"$s\" $x -S localhost -U sa -b -Q \"$QUERY\""


@pytest.fixture
def encrypted_backup(sql_server_image: str, tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A database backed up WITH ENCRYPTION (AES_256, a server certificate) by a SQL Server container of its
    own, and that certificate as BACKUP CERTIFICATE writes it: (backup folder, key folder, its thumbprint)."""
    from verification.engines.mssql.target import random_password
    from verification.targets.docker import docker_client
    from verification.targets.labels import labels

    client = docker_client()
    sa = random_password()
    container = client.containers.run(sql_server_image, detach=True, labels=labels("e2e-encrypted-source", "source"),
                                      environment={"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": sa})

    def sql(query: str) -> str:
        code, output = container.exec_run(["bash", "-c", SQLCMD], environment={"SQLCMDPASSWORD": sa, "QUERY": query})
        assert code == 0, output.decode(errors="replace")
        return str(output.decode(errors="replace"))

    try:
        deadline = time.monotonic() + 300
        while container.exec_run(["bash", "-c", SQLCMD], environment={"SQLCMDPASSWORD": sa,
                                                                        "QUERY": "SELECT 1"})[0] != 0:
            assert time.monotonic() < deadline, container.logs()[-2000:]
            time.sleep(2)
        assert container.exec_run(["mkdir", "-p", "/var/opt/mssql/data/out"])[0] == 0   # as SQL Server's own user
        sql("CREATE DATABASE Vault;")
        sql("USE Vault; CREATE TABLE t (id int PRIMARY KEY, v nvarchar(50)); INSERT t VALUES (1, N'secret row');")
        sql("USE master; CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'Source#Master-Key-1'; "
            "CREATE CERTIFICATE BackupCert WITH SUBJECT = N'restoreproof e2e';")
        sql("BACKUP DATABASE Vault TO DISK = N'/var/opt/mssql/data/out/Vault.bak' WITH FORMAT, CHECKSUM, ENCRYPTION "
            "(ALGORITHM = AES_256, SERVER CERTIFICATE = BackupCert);")
        sql("BACKUP CERTIFICATE BackupCert TO FILE = N'/var/opt/mssql/data/out/BackupCert.cer' WITH PRIVATE KEY "
            f"(FILE = N'/var/opt/mssql/data/out/BackupCert.pvk', ENCRYPTION BY PASSWORD = N'{KEY_PASSWORD.replace(chr(39), chr(39) * 2)}');")
        thumbprint = sql("SET NOCOUNT ON; SELECT CONVERT(varchar(130), thumbprint, 1) FROM sys.certificates "
                         "WHERE name = N'BackupCert';").split()[-1]
        stream, _ = container.get_archive("/var/opt/mssql/data/out")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            tar.extractall(tmp_path, filter="data")
        backups, keys = tmp_path / "backups", tmp_path / "keys"
        backups.mkdir()
        keys.mkdir()
        (tmp_path / "out" / "Vault.bak").rename(backups / "Vault.bak")
        for name in ("BackupCert.cer", "BackupCert.pvk"):
            (tmp_path / "out" / name).rename(keys / name)
        yield backups, keys, thumbprint
    finally:
        container.remove(force=True, v=True)
        client.close()


def test_an_encrypted_backup_restores_with_its_certificate_and_the_password_is_nowhere(encrypted_backup, tmp_path,
                                                                                       monkeypatch):
    from verification.config import load_settings
    from verification.errors import ConfigError

    backups, keys, thumbprint = encrypted_backup
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD", KEY_PASSWORD)
    settings = load_settings(report_dir=tmp_path / "reports", mssql={"certificates": {"BackupCert": {
        "certificate": str(keys / "BackupCert.cer"), "private_key": str(keys / "BackupCert.pvk")}}})
    result = run_verification(settings, backups, engine_name="mssql")
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    (backup,) = db["chain"]["backups"]
    assert backup["encryption"]["state"] == "encrypted"
    assert backup["encryption"]["encryptor_thumbprint"] == thumbprint
    assert backup["encryption"]["algorithm"].lower() == "aes_256"
    (pages,) = [c for c in db["checks"] if c["name"] == "page_verification"]
    assert pages["status"] == "skipped" and "not verifiable offline" in pages["summary"]
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "reports").rglob("*") if p.is_file())
    assert KEY_PASSWORD not in written and KEY_PASSWORD.replace("'", "''") not in written
    assert leftovers(result.run.run_id) == []
    # Without the certificate: an error naming the thumbprint the backup needs, never "failed".
    monkeypatch.delenv("RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__PRIVATE_KEY_PASSWORD")
    bare = run_verification(load_settings(report_dir=tmp_path / "reports"), backups, engine_name="mssql")
    (db,) = report_data(bare.report)["databases"]
    assert db["verdict"] == "error" and thumbprint in " ".join(db["reasons"])
    assert leftovers(bare.run.run_id) == []
    with pytest.raises(ConfigError, match="private_key_password is not set"):
        load_settings(mssql={"certificates": {"BackupCert": {"certificate": str(keys / "BackupCert.cer"),
                                                              "private_key": str(keys / "BackupCert.pvk")}}})
