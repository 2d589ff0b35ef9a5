"""Which unread files may change a database's verdict (Chain.unread), and which cannot."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from tests.unit.factories import T0, broken_plan, complete_plan
from verification.engines.mssql.accounting import account, attach_unread
from verification.engines.mssql.catalog import Catalog, Unreadable
from verification.model import POINT_ROUNDED_RULE, RestorePlan, RuleCheck

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
    assert attached(complete_plan(), "archived", T0 - timedelta(hours=14, seconds=1)) == []
    assert attached(complete_plan(), "archived", T0 - timedelta(days=30)) == []


def test_a_file_written_within_a_time_zone_of_the_chains_end_may_be_newer() -> None:
    """The chain's times are the server's local time; a file's time is UTC: east of UTC, a log written
    after the end reads as hours before it."""
    (said,) = attached(complete_plan(), "archived", T0 - timedelta(hours=13))
    assert said.endswith("may be newer than the chain's last backup (written 2026-11-21 12:00:00)")


def test_a_point_in_time_reached_is_not_changed_by_newer_unread_files() -> None:
    plan = complete_plan()
    plan.stop_at = T0
    assert attached(plan, "archived", T0 + timedelta(days=1)) == []
    assert attached(plan, "archived", None) == []


def test_a_point_rounded_down_may_be_reached_better_by_an_unread_backup_before_it() -> None:
    """SIMPLE recovery: the plan stops at the newest backup before the point; an unread backup written
    between that backup and the point may be a later one."""
    plan = complete_plan()
    plan.stop_at = T0 + timedelta(days=1)
    plan.chain.rules.append(RuleCheck(POINT_ROUNDED_RULE, True, "rounded down to the full backup's end"))
    assert len(attached(plan, "archived", T0 + timedelta(hours=5))) == 1
    plan.chain.unread.clear()
    assert attached(plan, "archived", T0 + timedelta(days=2)) == []  # written after the point


def test_a_file_this_user_may_not_read_keeps_the_database_beside_it_from_being_judged() -> None:
    (said,) = attached(complete_plan(), "permission", None)
    assert said.startswith(f"{LOG} could not be read (permission: ")
    assert said.endswith("may be newer than the chain's last backup (no time known)")


@pytest.mark.parametrize("kind", ["corrupt", "not-a-backup", "excluded"])
def test_other_kinds_are_not_unread_backups(kind: str) -> None:
    assert attached(broken_plan(), kind, None) == []


def test_a_file_of_another_database_folder_is_not_attached_to_a_complete_chain() -> None:
    assert attached(complete_plan(), "archived", None, path="SRV/other/LOG/SRV_other_LOG_1.trn") == []


def test_a_file_no_database_can_be_placed_by_may_fill_any_broken_chain() -> None:
    """Logs in a folder of their own: the gap of a broken chain may be in them."""
    (said,) = attached(broken_plan(), "needs-server", None, path="logs/x.trn")
    assert said.startswith("logs/x.trn could not be read (needs-server")


def test_a_file_in_another_databases_ola_folder_is_not_attached_to_a_broken_chain() -> None:
    """Ola Hallengren's <server>/<db>/LOG folder names its database: no other chain's gap is in it."""
    assert attached(broken_plan(), "needs-server", None, path="SRV/other/LOG/SRV_other_LOG_1.trn") == []


def test_a_layout_the_reader_does_not_know_is_unsupported_never_corrupt(mssql_copy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real log backup whose TAPE block states a soft filemark block size no SQL Server writes (past
    the 52 bytes the header checksum covers): no proof of damage, so "unsupported", which keeps the
    database beside it from passing, as a file nobody read does."""
    import struct

    from verification.engines.mssql.catalog import read_file, scan
    from verification.engines.mssql.chain import plan as chain_plan
    from verification.model import BLOCKING_UNREADABLE, UNREAD_KINDS, UnreadableKind
    from verification.sources import LocalSource

    root = mssql_copy("sql2008-backups/StopAt")
    victim = root / "sql2008-backups/StopAt/StopAt_23.trn"
    data = bytearray(victim.read_bytes())
    struct.pack_into("<H", data, 64, 200)  # MTF's soft filemark block size, in sectors: 100 KiB
    victim.write_bytes(bytes(data))
    source = LocalSource(root)
    read = read_file(source, "sql2008-backups/StopAt/StopAt_23.trn")
    assert read.headers == [] and read.unreadable is not None and read.unreadable.kind == "unsupported"
    assert "TAPE soft filemark block size" in read.unreadable.reason and "not proof of damage" in read.unreadable.reason
    assert UnreadableKind.UNSUPPORTED in BLOCKING_UNREADABLE and UnreadableKind.UNSUPPORTED in UNREAD_KINDS
    catalog = scan(source)
    (db,) = catalog.databases
    planned = chain_plan(db, db.database, None)
    planned.files = [f for m in db.sets for f in m.files]
    orphans, files = account(catalog, {id(db): planned})
    attach_unread(catalog, [planned], lambda _: None)
    # Its closing copy names its database and LSNs: placed by them, not by its folder, and newer than
    # every log read, so the database is not judged.
    assert orphans == [] and [f.database for f in files] == ["StopAt"]
    (said,) = [p.message for p in planned.chain.unread]
    assert re.match(r"log backup sql2008-backups/StopAt/StopAt_23\.trn \(LSN \d+ to \d+, finished [-\d: ]+\) "
                    r"could not be read \(unsupported: .*\) and is newer than the chain's last backup$", said), said


def test_a_database_whose_only_backup_is_unsupported_is_named_and_error(mssql_copy) -> None:  # type: ignore[no-untyped-def]
    """The only backup of a database in a layout the reader does not know: its closing copy still names
    the database, which gets an entry of its own, "error" (nothing proves its backups bad), never
    failed and never left out of the report."""
    import struct

    from verification.engines.mssql.catalog import scan
    from verification.model import Verdict
    from verification.sources import LocalSource
    from verification.verdict import decide

    root = mssql_copy("sql2008-backups/StopAt")
    for other in (root / "sql2008-backups/StopAt").iterdir():
        if other.name != "StopAt_23.trn":
            other.unlink()
    victim = root / "sql2008-backups/StopAt/StopAt_23.trn"
    data = bytearray(victim.read_bytes())
    struct.pack_into("<H", data, 64, 200)  # a soft filemark block size no SQL Server writes
    victim.write_bytes(bytes(data))
    catalog = scan(LocalSource(root))
    assert catalog.databases == [] and [u.kind for u in catalog.unreadable] == ["unsupported"]
    (plan,), files = account(catalog, {})
    assert plan.database == "StopAt" and [f.database for f in files] == ["StopAt"]
    verdict, reasons = decide(plan, None)
    assert verdict is Verdict.ERROR
    assert any(r.startswith("not judged: log backup sql2008-backups/StopAt/StopAt_23.trn (LSN ") and
               "(unsupported: " in r for r in reasons), reasons
    assert plan.chain.defects == []


def test_a_backup_of_a_type_not_read_is_placed_by_the_name_its_copies_give(mssql_copy) -> None:  # type: ignore[no-untyped-def]
    """A set whose configuration names a backup type the reader does not read (F, as a file backup's
    header says): unsupported, and still placed with its database by the name and LSNs both its
    configuration copies give, so the report names the database and does not judge it."""
    from verification.engines.mssql.catalog import read_file, scan
    from verification.engines.mssql.chain import plan as chain_plan
    from verification.sources import LocalSource

    root = mssql_copy("sql2008-backups/StopAt")
    victim = root / "sql2008-backups/StopAt/StopAt_23.trn"
    data = bytearray(victim.read_bytes())
    at = [m.start() for m in re.finditer(b"SCIN", data)]
    assert len(at) == 2  # the head copy and the closing copy
    for i in at:
        data[i + 0x57] = ord("F")
    victim.write_bytes(bytes(data))
    source = LocalSource(root)
    read = read_file(source, "sql2008-backups/StopAt/StopAt_23.trn")
    assert read.unreadable is not None and read.unreadable.kind == "unsupported"
    assert "SCIN backup type" in read.unreadable.reason and "'F'" in read.unreadable.reason
    identity = read.unreadable.identity
    assert identity is not None and (identity.database_name, identity.backup_type) == ("StopAt", "type 'F'")
    catalog = scan(source)
    (db,) = catalog.databases
    planned = chain_plan(db, db.database, None)
    orphans, files = account(catalog, {id(db): planned})
    assert orphans == [] and [f.database for f in files] == ["StopAt"]
    (said,) = [p.message for p in planned.chain.unread]
    assert said.startswith("type 'F' backup sql2008-backups/StopAt/StopAt_23.trn (LSN ")


def _plans(root):  # type: ignore[no-untyped-def]
    from verification.engines.mssql.accounting import account, attach_unread
    from verification.engines.mssql.catalog import scan
    from verification.engines.mssql.chain import plan as chain_plan
    from verification.sources import LocalSource

    catalog = scan(LocalSource(root))
    plans = {}
    for db in catalog.databases:
        planned = chain_plan(db, db.database, None)
        planned.files = [f for m in db.sets for f in m.files]
        plans[id(db)] = planned
    extra, _ = account(catalog, plans)
    attach_unread(catalog, [*plans.values(), *extra], lambda _: None)
    return {p.database: p for p in [*plans.values(), *extra]}


def test_a_newer_unsupported_localdb_backup_keeps_its_database_unjudged(tmp_path, mssql_real_world):  # type: ignore[no-untyped-def]
    # LocalDB names its instance anew at each start (catalog.server_identity): the newest backup,
    # in a layout not read (type 'F'), names the same database under another instance name.
    import re
    import shutil

    folder = tmp_path / "plataformadb"
    folder.mkdir()
    src = mssql_real_world / "copy-only"
    for name in ("plataformadb_4b7a2e4.bak", "plataformadb_93b98ca.bak"):
        shutil.copy(src / name, folder / name)
    data = bytearray((src / "plataformadb_792dd97.bak").read_bytes())
    for at in [m.start() for m in re.finditer(b"SCIN", data)]:
        data[at + 0x57] = ord("F")
    (folder / "plataformadb_792dd97.bak").write_bytes(bytes(data))
    plans = _plans(tmp_path)
    assert plans["plataformadb"].chain.unread, "judged (may pass) though a newer backup of it was not read"


def test_a_newer_set_cut_in_its_head_keeps_its_database_unjudged(tmp_path, mssql_corpus):  # type: ignore[no-untyped-def]
    # full, log, newer full appended WITH NOINIT; the file ends 1 KiB into set 3 (after a zero sector):
    # the identity given to the cut is set 2's closing copy, so the cut is taken for "not newer".
    from tests.unit.engines.mssql.mtf_append import append_sets, set_ranges

    simple = mssql_corpus / "OlaMsFilter/Simple"
    full1, log, full2 = ((simple / n).read_bytes() for n in (
        "test_FULL_20160629_141300.bak", "test_LOG_20160629_141310.trn", "test_FULL_20160629_141320.bak"))
    three = append_sets(full1, log, full2, adopt_media=True)
    start = set_ranges(three)[2][0]
    (tmp_path / "test" / "FULL").mkdir(parents=True)
    (tmp_path / "test/FULL/media.bak").write_bytes(three[:start + 1024])
    plan = _plans(tmp_path)["OlaMsFilterTest"]
    assert plan.chain.unread or plan.chain.defects, "judged (may pass) though set 3, newer, was cut"
