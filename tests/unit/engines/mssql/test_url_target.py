"""The SQL Server target that reads S3 itself, without Docker: the CA it trusts, what it masks, and how a
container is wired (no backup mount, the CA mounted where SQL Server reads it at start, one way out to the
endpoint), with Docker's calls stood in for."""

from __future__ import annotations

import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from verification.config import MssqlSettings
from verification.engines.mssql import target as target_module
from verification.engines.mssql.s3_url import CA_DIR, S3Location
from verification.engines.mssql.target import MssqlTargetProvider
from verification.engines.mssql.url_target import CA_FOLDER, CA_NAME, S3UrlTarget, trust_ca
from verification.errors import TargetError
from verification.targets.base import ExecResult
from verification.targets.exchange import EXCHANGE_PATH

KEY, SECRET = "AKIAWIRINGKEY00001", "wiring/secret+key"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"


def location(tmp_path: Path, **changes: Any) -> S3Location:
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    fields: dict[str, Any] = {"host": "minio.internal", "port": 9000, "bucket": "backups", "prefix": "sql/",
                              "access_key_id": SecretStr(KEY), "secret_access_key": SecretStr(SECRET), "ca_file": ca}
    return S3Location(**{**fields, **changes})


def test_the_endpoints_ca_is_copied_and_mounted_where_sql_server_reads_it_at_start(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    mounts = trust_ca(location(tmp_path), private)
    assert mounts == {str(private / CA_FOLDER): "/var/opt/mssql/security/ca-certificates"}
    copy = private / CA_FOLDER / CA_NAME
    assert copy.read_text() == PEM
    # SQL Server runs as mssql in the container: it reads both, and writes neither (the mount is read-only too).
    assert stat.S_IMODE(copy.stat().st_mode) == 0o644 and stat.S_IMODE(copy.parent.stat().st_mode) == 0o755
    assert trust_ca(location(tmp_path, ca_file=None), tmp_path / "none") == {}   # a public CA: nothing to add
    with pytest.raises(OSError):
        trust_ca(location(tmp_path, ca_file=tmp_path / "missing.pem"), tmp_path / "again")


class Inner:
    """A SQL Server target's surface, quoting back whatever it is given."""

    kind, name, work_dir, exchange, provision_seconds = "docker-mssql", "c1", "/var/opt/mssql", ("/run/x", "/tmp/x"), 3.5
    secrets = ("sa-password-value",)

    def __init__(self) -> None:
        self.closed = False

    def sql(self, statement: str, timeout: float) -> ExecResult:
        return ExecResult(["sqlcmd", "-Q", statement], 1, f"near '{statement}'", f"{KEY}", 0.1)

    def redact(self, text: str) -> str:
        return text.replace("sa-password-value", "********")

    def errorlog(self) -> str:
        return f"sa-password-value {KEY}:{SECRET}"

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "container": self.name}

    def close(self) -> None:
        self.closed = True


def test_the_wrapper_masks_the_keys_in_everything_it_reads_back(tmp_path: Path) -> None:
    inner = Inner()
    wrapped = S3UrlTarget(inner, location(tmp_path))
    result = wrapped.sql(f"SECRET = N'{KEY}:{SECRET}'", 60)
    assert (result.stdout, result.stderr) == ("near 'SECRET = N'********:********''", "********")
    assert result.argv == ["sqlcmd", "-Q", "SECRET = N'********:********'"]
    assert wrapped.errorlog() == "******** ********:********"
    assert wrapped.secrets == ("sa-password-value", KEY, SECRET)   # each set longest first
    assert (wrapped.kind, wrapped.name, wrapped.provision_seconds, wrapped.exchange) == (
        "docker-mssql", "c1", 3.5, ("/run/x", "/tmp/x"))
    assert wrapped.describe() == {"kind": "docker-mssql", "container": "c1",
                                  "repository": "s3://minio.internal:9000/backups/sql"}
    assert wrapped.repo_path == "s3://minio.internal:9000/backups/sql"
    # What the inner target lacks (here, a way to the server for the data checks), the wrapper lacks too.
    assert not hasattr(wrapped, "data_url")
    wrapped.close()
    assert inner.closed


# -- the container's wiring, with Docker stood in for ------------------------------------------------

class FakeClient:
    def __init__(self) -> None:
        self.images = SimpleNamespace(get=lambda image: image)


class FakeTarget:
    def __init__(self, exchange: Any) -> None:
        self.container = SimpleNamespace(id="c0ffee", name="restoreproof-r1-sales")
        self.exchange_folder = exchange
        self.provision_seconds = 10.0
        self.egress: Any = None
        self.closed = False
        self.kind, self.name = "docker-mssql", "restoreproof-r1-sales"

    def close(self) -> None:
        self.closed = True


def wired(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail_egress: bool = False) -> tuple[Any, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def start_disposable(client: Any, image: str, name: str, tags: dict[str, str], **kwargs: Any) -> FakeTarget:
        seen.update(kwargs, image=image, name=name)
        seen["target"] = FakeTarget(kwargs["exchange"])
        return seen["target"]

    class Link:
        def __init__(self, client: Any, container: Any, endpoint: Any, folder: tuple[str, str]) -> None:
            seen["link"] = (container, endpoint, folder)

        def start(self) -> Link:
            if fail_egress:
                raise TargetError("container restoreproof-r1-sales has no socat, the forwarder to its endpoint")
            return self

    monkeypatch.setattr(target_module, "docker_client", FakeClient)
    monkeypatch.setattr(target_module, "start_disposable", start_disposable)
    monkeypatch.setattr("verification.targets.egress.EgressLink", Link)
    where = location(tmp_path)
    provider = MssqlTargetProvider(MssqlSettings(), 957, state_dir=tmp_path / "state", s3=where)
    return provider, seen


def test_a_target_reading_s3_has_no_backup_mount_the_ca_and_one_way_out(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    provider, seen = wired(monkeypatch, tmp_path)
    made = provider.provision("r1", "Sales", "s3://backups/sql")
    assert isinstance(made, S3UrlTarget) and made.inner is seen["target"]
    assert seen["repo"] is None   # nothing mounted: SQL Server reads the objects where they are
    exchange = seen["exchange"]
    assert seen["read_only"] == {str(exchange.root / CA_FOLDER): CA_DIR}
    assert (exchange.root / CA_FOLDER / CA_NAME).read_text() == PEM
    container, endpoint, folder = seen["link"]
    assert container is seen["target"].container
    assert (endpoint.host, endpoint.port, endpoint.host_names) == ("minio.internal", 9000, ("minio.internal",))
    assert folder == (EXCHANGE_PATH, str(exchange.shared))
    assert seen["target"].egress is not None and made.provision_seconds >= 10.0
    assert seen["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    exchange.remove()   # what the real target's close() does


def test_a_way_out_that_cannot_be_made_removes_the_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    provider, seen = wired(monkeypatch, tmp_path, fail_egress=True)
    with pytest.raises(TargetError, match="has no socat"):
        provider.provision("r1", "Sales", "s3://backups/sql")
    assert seen["target"].closed
    seen["exchange"].remove()


def test_reading_s3_needs_a_state_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(target_module, "docker_client", FakeClient)
    with pytest.raises(TargetError, match="needs a state folder"):
        MssqlTargetProvider(MssqlSettings(), 957, s3=location(tmp_path))
