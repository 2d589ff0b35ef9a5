import socket
import threading
from types import SimpleNamespace
from urllib.parse import quote

import docker.errors
import pytest

from verification.config import MssqlSettings
from verification.engines.mssql.target import MssqlTarget, image_for, random_password
from verification.errors import TargetError


def test_the_first_image_at_least_as_new_as_the_backup() -> None:
    settings = MssqlSettings(images={869: "mssql:2017", 904: "mssql:2019", 957: "mssql:2022"})
    assert image_for(settings, 661) == "mssql:2017"   # a 2008 R2 backup restores on 2017
    assert image_for(settings, 869) == "mssql:2017"
    assert image_for(settings, 870) == "mssql:2019"
    assert image_for(settings, 957) == "mssql:2022"


def test_a_backup_newer_than_every_image_is_a_clear_error() -> None:
    with pytest.raises(TargetError, match=r"database version 998 is newer than the newest configured SQL Server "
                                          r"image \(mcr.microsoft.com/mssql/server:2022-latest, version 957\)"):
        image_for(MssqlSettings(), 998)


def test_passwords_meet_sql_server_complexity_and_differ() -> None:
    passwords = {random_password() for _ in range(50)}
    assert len(passwords) == 50
    for password in passwords:
        assert len(password) == 24
        assert any(c.isupper() for c in password) and any(c.islower() for c in password)
        assert any(c.isdigit() for c in password) and any(not c.isalnum() for c in password)
        assert "'" not in password and '"' not in password and "$" not in password


class _Container:
    id = "c0ffee" * 10
    name = "restoreproof-unit-mssql"

    def __init__(self) -> None:
        self.removed = False

    def remove(self, force: bool = False) -> None:
        self.removed = force


class _NoEngine:
    """No Docker here: a connection reaching the relay finds no engine (and is closed)."""

    def exec_create(self, *args: object, **kwargs: object) -> dict[str, str]:
        raise docker.errors.APIError("no Docker engine in unit tests")


def test_the_data_url_reaches_the_relay_and_never_prints_the_password() -> None:
    password = "Ab1#x%y+z=W_q-.eF5gH6jK7"
    container = _Container()
    target = MssqlTarget(SimpleNamespace(api=_NoEngine()), container, None, "mssql:test", password)
    try:
        url = target.data_url("Sales DB")
        assert (url.drivername, url.username, url.host, url.database) == ("mssql+pymssql", "sa", "127.0.0.1", "Sales DB")
        assert url.password == password   # what the driver gets
        assert isinstance(url.port, int) and url.port > 0
        with socket.create_connection((url.host, url.port), timeout=5):
            pass   # the relay listens at the URL's port
        assert target.data_url("other").port == url.port   # one relay per target
        printable = [str(url), repr(url), f"{url}", url.render_as_string(), repr([url])]
        assert printable[0] == f"mssql+pymssql://sa:***@127.0.0.1:{url.port}/Sales DB"
        for text in printable:
            assert password not in text and quote(password, safe=" +") not in text and "%23x%25y" not in text
        # Rendered in full (a connection string for a library that wants one), it still redacts.
        full = url.render_as_string(hide_password=False)
        assert "Ab1%23x%25y+z%3DW_q-.eF5gH6jK7" in full
        assert target.redact(full) == f"mssql+pymssql://sa:********@127.0.0.1:{url.port}/Sales DB"
        assert target.redact(f"login failed: {password}") == "login failed: ********"
    finally:
        target.close()
    assert container.removed
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", url.port), timeout=5)
    assert [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-relay")] == []


class _Archives(_Container):
    """Takes archives as Docker's put_archive does, keeping what was put where."""

    def __init__(self, placed: bool = True) -> None:
        super().__init__()
        self.placed, self.archives = placed, []  # type: ignore[var-annotated]

    def put_archive(self, path: str, data: bytes) -> bool:
        self.archives.append((path, data))
        return self.placed


def test_certificate_files_go_in_as_an_archive_readable_by_sql_servers_user_only() -> None:
    import io
    import tarfile

    container = _Archives()
    target = MssqlTarget(SimpleNamespace(api=_NoEngine()), container, None, "mssql:test", random_password())
    password = "Pvk'Pa55-word-Ø".encode("utf-16-le")
    assert target.install_keys({"0.cer": b"\x30\x82der", "0.pvk": b"pvk", "0.pwd": password}) == (
        "/var/opt/mssql/restoreproof-keys")
    ((path, data),) = container.archives
    assert path == "/var/opt/mssql"   # the data volume: gone with the target
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["restoreproof-keys", "restoreproof-keys/0.cer", "restoreproof-keys/0.pvk",
                                 "restoreproof-keys/0.pwd"]
        assert members["restoreproof-keys"].isdir() and members["restoreproof-keys"].mode == 0o750
        assert all((m.uid, m.gid) == (10001, 0) for m in members.values())   # mssql, group 0 (2019+ images)
        assert all(m.mode == 0o440 for name, m in members.items() if name != "restoreproof-keys")
        extracted = tar.extractfile("restoreproof-keys/0.pwd")
        assert extracted is not None and extracted.read() == password
    refused = MssqlTarget(SimpleNamespace(api=_NoEngine()), _Archives(placed=False), None, "mssql:test", "x")
    with pytest.raises(TargetError, match=r"could not put the key files \(0.cer\) into"):
        refused.install_keys({"0.cer": b"x"})
