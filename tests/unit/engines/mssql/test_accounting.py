"""Which unread files may change a database's verdict (Chain.unread), and which cannot."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.unit.factories import T0, broken_plan, complete_plan
from verification.engines.mssql.accounting import attach_unread
from verification.engines.mssql.catalog import Catalog, Unreadable
from verification.model import RestorePlan

LOG = "SRV/demo1/LOG/SRV_demo1_LOG_1.trn"


def attached(plan: RestorePlan, kind: str, written: datetime | None, path: str = LOG) -> list[str]:
    plan.files = ["SRV/demo1/FULL/SRV_demo1_FULL_1.bak"]
    catalog = Catalog([], [Unreadable(path, "in GLACIER", kind)], [])
    attach_unread(catalog, [plan], lambda _: written)
    return [p.message for p in plan.chain.unread]


def test_a_broken_chain_names_every_unread_backup_beside_it_whatever_its_time() -> None:
    assert attached(broken_plan(), "archived", T0 - timedelta(days=400)) == [
        f"{LOG} could not be read (archived: in GLACIER) and may hold the backups its chain lacks"]


@pytest.mark.parametrize("written, said", [
    (T0 + timedelta(seconds=1), " (written 2026-11-22 01:00:01)"), (None, " (no time known)")])
def test_a_complete_chain_names_an_unread_file_newer_than_its_end_or_of_unknown_time(written, said) -> None:
    assert attached(complete_plan(), "needs-server", written) == [
        f"{LOG} could not be read (needs-server: in GLACIER) and may be newer than the chain's last backup{said}"]


def test_an_old_archived_backup_does_not_stop_a_complete_chain() -> None:
    """Lifecycle rules move old backups to an archive class: older than the chain's end, they cannot hold
    a later point, so the database is still judged (the run names them as unread)."""
    assert attached(complete_plan(), "archived", T0) == []
    assert attached(complete_plan(), "archived", T0 - timedelta(days=30)) == []


def test_a_point_in_time_reached_is_not_changed_by_newer_unread_files() -> None:
    plan = complete_plan()
    plan.stop_at = T0
    assert attached(plan, "archived", T0 + timedelta(days=1)) == []


@pytest.mark.parametrize("kind", ["corrupt", "not-a-backup", "excluded"])
def test_other_kinds_are_not_unread_backups(kind: str) -> None:
    assert attached(broken_plan(), kind, None) == []


def test_a_file_of_another_database_folder_is_not_attached() -> None:
    assert attached(broken_plan(), "archived", None, path="SRV/other/LOG/SRV_other_LOG_1.trn") == []
