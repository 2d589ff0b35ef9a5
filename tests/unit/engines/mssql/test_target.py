import pytest

from verification.config import MssqlSettings
from verification.engines.mssql.target import image_for, random_password
from verification.errors import TargetError


def test_the_first_image_at_least_as_new_as_the_backup():
    settings = MssqlSettings(images={869: "mssql:2017", 904: "mssql:2019", 957: "mssql:2022"})
    assert image_for(settings, 661) == "mssql:2017"   # a 2008 R2 backup restores on 2017
    assert image_for(settings, 869) == "mssql:2017"
    assert image_for(settings, 870) == "mssql:2019"
    assert image_for(settings, 957) == "mssql:2022"


def test_a_backup_newer_than_every_image_is_a_clear_error():
    with pytest.raises(TargetError, match=r"database version 998 is newer than the newest configured SQL Server "
                                          r"image \(mcr.microsoft.com/mssql/server:2022-latest, version 957\)"):
        image_for(MssqlSettings(), 998)


def test_passwords_meet_sql_server_complexity_and_differ():
    passwords = {random_password() for _ in range(50)}
    assert len(passwords) == 50
    for password in passwords:
        assert len(password) == 24
        assert any(c.isupper() for c in password) and any(c.islower() for c in password)
        assert any(c.isdigit() for c in password) and any(not c.isalnum() for c in password)
        assert "'" not in password and '"' not in password and "$" not in password
