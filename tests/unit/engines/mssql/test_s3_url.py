"""RESTORE ... FROM URL = 's3://...': the credential, the URLs, the statements, and what is refused before
anything starts (docs/sqlserver-s3-direct.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.unit.engines.mssql.test_chain import plans
from tests.unit.engines.mssql.test_secret_files import as_sql_server_runs_it
from tests.unit.sources.conftest import Bucket, s3, s3_endpoint
from verification.config import MSSQL_2019, MSSQL_2022, S3Settings, Settings, load_settings
from verification.engines.mssql import tsql
from verification.engines.mssql.engine import media_sets
from verification.engines.mssql.s3_url import (
    MASK,
    S3Location,
    Urls,
    create_credential,
    credential_files,
    location_for,
    options_refused,
    refuse,
    stripe_problems,
    url_problems,
)
from verification.errors import ConfigError, SourceError
from verification.sources.local import LocalSource
from verification.sources.s3 import S3Source

__all__ = ["s3", "s3_endpoint"]  # fixtures, used here by name

KEY, SECRET = "AKIAEXAMPLEKEY0001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCY'EXAMPLE"


def location(**changes: Any) -> S3Location:
    fields: dict[str, Any] = {"host": "s3.example.com", "port": 9000, "bucket": "backups", "prefix": "sql/main/",
                              "access_key_id": SecretStr(KEY), "secret_access_key": SecretStr(SECRET)}
    return S3Location(**{**fields, **changes})


# -- the credential and the URLs ------------------------------------------------------------------

def test_path_style_urls_and_the_credential_named_by_the_sources_folder() -> None:
    where = location()
    assert where.url("FULL/db_FULL.bak") == "s3://s3.example.com:9000/backups/sql/main/FULL/db_FULL.bak"
    # SQL Server looks a URL's credential up by the URL, then each shorter prefix: the folder covers all.
    assert where.credential_name == "s3://s3.example.com:9000/backups/sql/main"
    assert where.url("x.bak").startswith(where.credential_name + "/")
    root = location(prefix="", port=None)
    assert (root.credential_name, root.url("x.bak")) == ("s3://s3.example.com/backups", "s3://s3.example.com/backups/x.bak")
    assert root.endpoint.port == 443 and root.endpoint.host_names == ("s3.example.com",)


def test_virtual_host_style_urls_resolve_the_buckets_name_to_the_way_out_too() -> None:
    where = location(style="virtual", host="s3.eu-west-1.amazonaws.com", port=None)
    assert where.url("a/b.trn") == "s3://backups.s3.eu-west-1.amazonaws.com/sql/main/a/b.trn"
    assert where.credential_name == "s3://backups.s3.eu-west-1.amazonaws.com/sql/main"
    assert where.endpoint.host_names == ("s3.eu-west-1.amazonaws.com", "backups.s3.eu-west-1.amazonaws.com")


def test_the_credential_statement_quotes_its_name_and_reads_its_secret_from_a_file() -> None:
    where = location(prefix="odd]name/")
    made = create_credential(where, "/var/opt/mssql/restoreproof-keys")
    # The statement holds the file's path, never the keys: it stands on sqlcmd's command line in the target.
    assert KEY not in made and SECRET not in made and SECRET.replace("'", "''") not in made
    assert where.mask(made) == made
    assert credential_files(where) == {"s3-credential.secret": f"{KEY}:{SECRET}".encode("utf-16-le")}
    # What SQL Server runs from it: the name quoted as an identifier, the secret as a literal (its ' doubled).
    assert as_sql_server_runs_it(made, {f"/var/opt/mssql/restoreproof-keys/{name}": data
                                        for name, data in credential_files(where).items()}) == (
        "USE master; CREATE CREDENTIAL [s3://s3.example.com:9000/backups/odd]]name] WITH IDENTITY = "
        f"N'S3 Access Key', SECRET = N'{KEY}:wJalrXUtnFEMI/K7MDENG+bPxRfiCY''EXAMPLE';")


def test_the_keys_are_masked_as_they_are_and_as_a_literal_writes_them() -> None:
    where = location()
    echoed = f"SECRET = N'{KEY}:{SECRET.replace(chr(39), chr(39) * 2)}' near '{SECRET}'"
    assert where.mask(echoed) == f"SECRET = N'{MASK}:{MASK}' near '{MASK}'"


def test_a_key_shorter_than_the_runs_minimum_is_not_masked_in_every_word() -> None:
    # A store that takes any key (a test endpoint) may be given "a": masking it would turn every "a" into
    # the mask. The run's rule (verification.redaction.MIN_SECRET_LENGTH) applies here too.
    where = location(access_key_id=SecretStr("a"), secret_access_key=SecretStr("abc"))
    assert where.secrets == ()
    said = "Msg 3201: cannot open backup device 's3://s3.example.com:9000/backups/sql/main/a.bak'"
    assert where.mask(said) == said
    longer = location(access_key_id=SecretStr("a"), secret_access_key=SecretStr("it's"))
    assert longer.secrets == ("it''s", "it's")  # the T-SQL literal's form too, longest first
    assert longer.mask("a secret: it's, as a literal 'it''s'") == f"a secret: {MASK}, as a literal '{MASK}'"


@pytest.mark.parametrize(("changes", "name"), [({"access_key_id": SecretStr("AKIA:EXAMPLE")}, "access key id"),
                                               ({"secret_access_key": SecretStr("se:cret")}, "secret access key")])
def test_a_key_holding_a_colon_is_refused_without_showing_it(changes: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=rf"the S3 {name} .* holds a ':', which SQL Server's S3 credential") as info:
        location(**changes)
    assert "AKIA:EXAMPLE" not in str(info.value) and "se:cret" not in str(info.value)


def test_a_credential_name_longer_than_sql_server_takes_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"would be 1\d\d characters, more than SQL Server's 128"):
        location(prefix="p" * 100 + "/")


def test_an_endpoint_at_an_address_the_target_cannot_have_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"s3.endpoint_url: the target cannot reach 10.1.2.3"):
        location(host="10.1.2.3")
    assert location(host="127.0.0.1").endpoint.listen_address == "127.0.0.1"   # a loopback endpoint needs no name


# -- the statements -------------------------------------------------------------------------------

def test_a_striped_full_from_urls_with_moves_and_the_region() -> None:
    media = Urls(location(region="eu-west-1"))
    sql = tsql.restore_database("Sales", ["FULL/s_1.bak", "FULL/it's_2.bak"], [tsql.FileMove("d", "/var/x.mdf")],
                                tsql.RestoreOptions(), checksum=True, media=media)
    assert sql == ("RESTORE DATABASE [Sales] FROM URL = N's3://s3.example.com:9000/backups/sql/main/FULL/s_1.bak', "
                   "URL = N's3://s3.example.com:9000/backups/sql/main/FULL/it''s_2.bak' WITH NORECOVERY, STATS = 10, "
                   "CHECKSUM, MOVE N'd' TO N'/var/x.mdf', RESTORE_OPTIONS = N'{\"s3\": {\"region\": \"eu-west-1\"}}';")


def test_a_terminal_log_from_a_url_without_a_region() -> None:
    sql = tsql.restore_log("Sales", ["LOG/l.trn"], tsql.RestoreOptions(), checksum=False,
                           stop_at=datetime(2024, 5, 1, 3, 0, 0, 500000), media=Urls(location()))
    assert sql == ("RESTORE LOG [Sales] FROM URL = N's3://s3.example.com:9000/backups/sql/main/LOG/l.trn' WITH "
                   "NORECOVERY, STATS = 10, STOPAT = N'2024-05-01T03:00:00.500';")


def test_filelist_and_headeronly_from_urls() -> None:
    media = Urls(location(region="us-west-1"))
    assert tsql.filelist(["a.bak", "b.bak"], media) == (
        "RESTORE FILELISTONLY FROM URL = N's3://s3.example.com:9000/backups/sql/main/a.bak', "
        "URL = N's3://s3.example.com:9000/backups/sql/main/b.bak' WITH RESTORE_OPTIONS = "
        "N'{\"s3\": {\"region\": \"us-west-1\"}}';")
    assert tsql.headeronly(["a.bak"], Urls(location())) == (
        "RESTORE HEADERONLY FROM URL = N's3://s3.example.com:9000/backups/sql/main/a.bak';")
    assert tsql.filelist(["a.bak"]) == "RESTORE FILELISTONLY FROM DISK = N'/backups/a.bak';"   # unchanged on disk


# -- the plan, before anything runs ---------------------------------------------------------------

def test_every_stripe_of_a_set_is_needed(mssql_corpus: Path) -> None:
    plan = plans(mssql_corpus / "history/sql2016-stripe")["RestoreTimeStripe"]
    sets = media_sets(plan.chain.backups)
    assert stripe_problems(sets) == [] and all(len(group) == 2 for group in sets)
    first, second = sets[0]
    assert stripe_problems([[first]]) == [
        f"the backup set of {first.path} is striped over 2 files (media set {first.media_set_guid}) but the plan has "
        "1: family 2 missing; SQL Server restores a striped set only from all of its stripes at once"]
    assert "families of its media set" in stripe_problems([[first, replace(second, family=None)]])[0]


def test_urls_sql_server_cannot_be_given_are_named() -> None:
    where = location()
    assert url_problems(where, ["FULL/db.bak", "SRV$INST/db/LOG/x.trn"]) == []
    long = "x" * 230 + ".bak"
    problems = url_problems(where, [long, "FULL/a b.bak", "FULL/a?.bak"])
    assert problems[0] == f"{where.url(long)} is 276 characters long, more than the 259 SQL Server takes for a backup URL"
    assert problems[1].startswith("s3://s3.example.com:9000/backups/sql/main/FULL/a b.bak: the object's key holds")
    assert len(problems) == 3


# -- refusals, naming the setting ---------------------------------------------------------------------

HTTPS = "https://s3.example.com"


@pytest.mark.parametrize(("changes", "kind", "endpoint", "setting"), [
    ({}, "local", HTTPS, r"s3.restore_mode direct restores into a SQL Server container only"),
    ({}, "docker", "http://minio:9000", r"HTTPS only, and the endpoint http://minio:9000 \(s3.endpoint_url"),
    ({"s3": {"verify_tls": False}}, "docker", HTTPS, r"s3.verify_tls: false cannot apply to SQL Server"),
    ({"mssql": {"buffer_count": 64}}, "docker", HTTPS, r"mssql.buffer_count: .* does not take BUFFERCOUNT"),
    ({"mssql": {"max_transfer_size": 4194304}}, "auto", HTTPS, r"mssql.max_transfer_size: .* the backup's own"),
    ({"mssql": {"edition": "Express"}}, "docker", HTTPS, r"mssql.edition Express: SQL Server Express cannot restore"),
    ({"mssql": {"images": {MSSQL_2019: "mssql:2019"}}}, "docker", HTTPS,
     r"mssql.images: s3.restore_mode direct needs SQL Server 2022 or newer"),
])
def test_what_sql_servers_s3_connector_cannot_do_is_refused(changes: dict[str, Any], kind: str, endpoint: str,
                                                           setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        refuse(load_settings(None, **changes), kind, endpoint)


def test_settings_it_can_do_pass() -> None:
    refuse(load_settings(None), "docker", HTTPS)
    refuse(load_settings(None, mssql={"images": {MSSQL_2022: "mssql:2022"}}), "auto", "https://127.0.0.1:9000")
    assert options_refused(load_settings(None).mssql) is None


# -- from an S3 source, against a real endpoint ---------------------------------------------------

def test_only_a_source_in_s3_in_direct_mode_is_read_by_sql_server(s3: Bucket, tmp_path: Path) -> None:
    s3.put("sql/db.bak", b"TAPE")
    direct = Settings(s3=S3Settings(restore_mode="direct"))
    assert location_for(LocalSource(tmp_path), direct, "docker") is None
    with S3Source(s3.url("sql"), S3Settings()) as source:
        assert location_for(source, Settings(), "docker") is None   # stage is the default


def test_the_location_comes_from_the_source(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    s3.put("sql/main/db.bak", b"TAPE")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    settings = S3Settings(restore_mode="direct")   # the endpoint, keys and CA of the environment (AWS_*)
    with S3Source(s3.url("sql/main"), settings) as source:
        where = location_for(source, Settings(s3=settings), "docker")
    assert where is not None
    assert (where.host, where.port, where.bucket, where.prefix, where.style, where.region) == (
        "127.0.0.1", s3.endpoint.port, s3.name, "sql/main/", "path", "eu-central-1")
    assert where.url("db.bak") == f"s3://127.0.0.1:{s3.endpoint.port}/{s3.name}/sql/main/db.bak"
    assert where.ca_file == s3.endpoint.ca_file
    assert where.access_key_id.get_secret_value() == os.environ["AWS_ACCESS_KEY_ID"]
    assert where.secret_access_key.get_secret_value() == os.environ["AWS_SECRET_ACCESS_KEY"]
    # The settings' own keys beat the chain's; a ':' in them is refused before anything starts.
    own = settings.model_copy(update={"access_key_id": SecretStr("AKIA:X"), "secret_access_key": SecretStr(SECRET)})
    with S3Source(s3.url("sql/main"), own) as source, pytest.raises(ConfigError, match=r"holds a ':'"):
        location_for(source, Settings(s3=own), "docker")


def test_temporary_keys_and_no_keys_are_refused(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.put("sql/db.bak", b"TAPE")
    settings = S3Settings(restore_mode="direct")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-value")
    with S3Source(s3.url("sql"), settings) as source, pytest.raises(ConfigError, match=r"a session token"):
        location_for(source, Settings(s3=settings), "docker")
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    with S3Source(s3.url("sql"), settings) as source:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        with pytest.raises(SourceError, match=r"direct needs S3 keys to give SQL Server for s3://"):
            location_for(source, Settings(s3=settings), "docker")
