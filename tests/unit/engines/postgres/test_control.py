"""The settings recovery needs at least, read from real pg_controldata output (PostgreSQL 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verification.engines.postgres.control import FLOOR_WHY, configured_values, floors, recorded, with_options
from verification.engines.postgres.settings import forced_settings

FIXTURE = Path(__file__).parents[3] / "fixtures" / "postgres" / "pg_controldata-15.out"


def test_pg_controldata_is_read_label_by_label() -> None:
    said = recorded(FIXTURE.read_text())
    assert said["max_prepared_xacts setting"] == "5"
    assert said["max_locks_per_xact setting"] == "128"
    assert said["Database cluster state"] == "shut down"
    assert said["wal_level setting"] == "replica"


def test_a_backup_that_ran_with_prepared_transactions_and_more_locks_asks_for_both() -> None:
    assert floors(FIXTURE.read_text()) == {"max_prepared_transactions": "5", "max_locks_per_transaction": "128"}


@pytest.mark.parametrize(("prepared", "locks", "wanted"), [
    ("0", "64", {}),  # PostgreSQL's defaults: nothing to ask
    ("1", "64", {"max_prepared_transactions": "1"}),
    ("0", "65", {"max_locks_per_transaction": "65"}),
    ("", "64", {}),
    ("five", "64", {}),
])
def test_only_values_above_the_defaults_are_floors(prepared: str, locks: str, wanted: dict[str, str]) -> None:
    text = f"max_prepared_xacts setting:           {prepared}\nmax_locks_per_xact setting:           {locks}\n"
    assert floors(text) == wanted


def test_an_output_without_the_settings_asks_for_nothing() -> None:
    assert floors("") == {}
    assert floors("pg_controldata: fatal: could not open file \"global/pg_control\"\n") == {}


def test_the_floors_are_on_the_command_line_with_their_reason() -> None:
    forced = forced_settings(15, {"port": "5432"}, {}, {"max_prepared_transactions": "5"})
    assert forced.values["max_prepared_transactions"] == "5"
    assert forced.why["max_prepared_transactions"] == FLOOR_WHY
    assert "-c max_prepared_transactions=5" in forced.command_line()
    assert "max_prepared_transactions" not in forced_settings(15, {"port": "5432"}, {}).values


@pytest.mark.parametrize(("configured", "wanted"), [
    ({}, {"max_prepared_transactions": "5", "max_locks_per_transaction": "128"}),  # the files unread
    ({"max_prepared_transactions": "0", "max_locks_per_transaction": "64"},
     {"max_prepared_transactions": "5", "max_locks_per_transaction": "128"}),  # Debian's layout: defaults
    ({"max_prepared_transactions": "5", "max_locks_per_transaction": "127"}, {"max_locks_per_transaction": "128"}),
    ({"max_prepared_transactions": "20", "max_locks_per_transaction": "256"}, {}),  # never lowered
])
def test_a_floor_is_only_what_the_files_do_not_give(configured: dict[str, str], wanted: dict[str, str]) -> None:
    assert floors(FIXTURE.read_text(), configured) == wanted


def test_what_postgres_printed_for_each_setting_is_read_by_name() -> None:
    said = "max_prepared_transactions=5\nmax_locks_per_transaction=\n"
    assert configured_values(said) == {"max_prepared_transactions": "5"}  # one the files could not give: none
    assert configured_values("") == {}


def test_a_server_option_at_or_above_a_floor_is_the_servers_value_and_one_below_is_refused() -> None:
    found = {"max_prepared_transactions": "5", "max_locks_per_transaction": "128"}
    assert with_options(found, {}) == (found, [])
    assert with_options(found, {"MAX_LOCKS_PER_TRANSACTION": "1024", "work_mem": "64MB"}) == (
        {"max_prepared_transactions": "5"}, [])
    assert with_options(found, {"max_locks_per_transaction": "128"}) == ({"max_prepared_transactions": "5"}, [])
    kept, [conflict] = with_options(found, {"max_prepared_transactions": "4"})
    assert kept == {"max_locks_per_transaction": "128"}
    assert conflict == ("postgres.server_options sets max_prepared_transactions = '4', below the 5 the backup's "
                        "pg_control records (recovery re-creates its prepared transactions and locks): remove it "
                        "or give at least 5")
