"""The settings recovery needs at least, read from real pg_controldata output (PostgreSQL 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verification.engines.postgres.control import FLOOR_WHY, floors, recorded
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
