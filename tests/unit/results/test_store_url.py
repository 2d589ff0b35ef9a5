"""A results_url the operator got wrong: a ConfigError naming the setting and the fix, the password masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from verification.errors import ConfigError
from verification.results import ResultStore


def test_a_value_that_is_no_url_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^results_url 'foo' is not a database URL \(dialect\+driver://"):
        ResultStore("foo")


def test_a_database_kind_without_a_driver_is_named_with_the_password_masked() -> None:
    with pytest.raises(ConfigError) as raised:
        ResultStore("oracle+nosuchdriver://scott:tiger-secret@db.example/orcl")
    assert str(raised.value).startswith("results_url oracle+nosuchdriver://scott:***@db.example/orcl names a kind "
                                        "of database restoreproof has no driver for")
    assert "tiger-secret" not in str(raised.value)


def test_a_sqlite_folder_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"the folder of the SQLite file cannot be made \(Not a directory\); "
                                          "name a folder this user may write$"):
        ResultStore(f"sqlite:///{tmp_path}/file/results/results.db")


def test_a_sqlite_file_in_a_new_folder_is_made(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path}/new/results.db")
    try:
        assert (tmp_path / "new" / "results.db").is_file()
    finally:
        store.close()
