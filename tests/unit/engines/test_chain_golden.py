"""Every chain rule, problem and defect, word for word, for the scenarios that decide verdicts.

The plans are made from real backups (the SQL Server corpus, copied and damaged where a scenario
needs it; the captured pgBackRest repository) and compared, in full, with reviewed expectations in
tests/fixtures/golden/. A rule that flips, a message that loses the LSN it must name, a backup
taken or skipped differently: each changes the comparison. To accept an intended change, run
`RESTOREPROOF_GOLDEN=write .venv/bin/pytest tests/unit/engines/test_chain_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TESTS
from tests.unit.engines.mssql.mtf_edit import Backup
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan as mssql_plan
from verification.engines.postgres.chain import plan as pg_plan
from verification.engines.postgres.repository import discover
from verification.model import RestorePlan
from verification.sources import LocalSource

GOLDEN = TESTS / "fixtures" / "golden"
RTC = "RestoreTimeClean"
MB16 = 16 * 1024 * 1024


def summary(result: RestorePlan) -> dict[str, Any]:
    chain = result.chain

    def problems(items: list[Any]) -> list[list[Any]]:
        return [[p.code, p.message, list(p.files), p.expected_lsn, p.found_lsn] for p in items]

    return {
        "engine": result.engine, "database": result.database, "status": str(chain.status),
        "stop_at": str(result.stop_at),
        "target": result.target_backup.label if result.target_backup else None,
        "backups": [[b.type, b.label, b.first_lsn or b.start_wal, b.last_lsn or b.stop_wal, b.family,
                     str(b.start), str(b.finish)] for b in chain.backups],
        "wal": None if chain.wal is None else [chain.wal.timeline, chain.wal.first, chain.wal.last,
                                               chain.wal.segments, chain.wal.bound],
        "problems": problems(chain.problems), "defects": problems(chain.defects),
        "rules": [[r.rule, r.passed, r.detail] for r in chain.rules],
        "files": list(result.files),
        "extra": [{"checkpoint_lsn": b.checkpoint_lsn, "database_backup_lsn": b.database_backup_lsn,
                   "database_version": b.database_version, "has_checksums": b.has_checksums,
                   "media_set_guid": b.media_set_guid, "server": b.server, "software_version": b.software_version}
                  for b in chain.backups if result.engine == "mssql"],
        "history": None if result.history is None else [result.history.basis, len(result.history.points),
                                                         [p.name for p in result.history.points][:3]],
    }


def check(name: str, found: list[dict[str, Any]]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if os.environ.get("RESTOREPROOF_GOLDEN") == "write":
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text)


# -- SQL Server ------------------------------------------------------------------------------------

def _damage(root: Path, relative: str, how: str) -> None:
    path = root / relative
    copy = path.with_name(f"{path.stem}-copy{path.suffix}")
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[:20000])
    elif how == "copy":  # the same backup twice: one is restored, the other said
        copy.write_bytes(path.read_bytes())
    elif how == "restamp":  # another backup set ending at the same LSN (its start one second later)
        backup = Backup(path.read_bytes())
        start = int.from_bytes(backup.data[backup.chunk(0, b"SCIN") + 0x4D:][:5], "big")
        backup.in_both_copies(b"SCIN", 0x4D, ">IB", (start + 1) >> 8, (start + 1) & 0xFF)
        copy.write_bytes(bytes(backup.data))
    elif how == "finish-two-minutes-later":  # a slow log backup: its BackupFinishDate 2 min after its start
        backup = Backup(path.read_bytes())
        start = int.from_bytes(backup.data[backup.chunk(0, b"SCIN") + 0x4D:][:5], "big")
        later = start + (2 << 6)  # MTF date: the minutes sit above the 6 bits of the seconds
        backup.in_both_copies(b"SCIN", 0x52, ">IB", later >> 8, later & 0xFF)
        path.write_bytes(bytes(backup.data))
    elif how == "diff-ends-at-its-full":  # a differential whose LastLSN is its full's: no newer
        backup = Backup(path.read_bytes())
        for field in (0x20, 0x34, 0x2A):  # FirstLSN <= CheckpointLSN <= LastLSN, as every backup has them
            backup.in_both_copies(b"SCIN", field, "<IIH", 25, 132, 1)  # RestoreTimeClean.bak's LastLSN
        path.write_bytes(bytes(backup.data))
    elif how == "log-ends-where-the-diff-ends":  # LastLSN set to RestoreTimeClean2.bak's
        backup = Backup(path.read_bytes())
        backup.in_both_copies(b"SCIN", 0x2A, "<IIH", 25, 190, 1)
        path.write_bytes(bytes(backup.data))
    elif how == "second-family-missing":  # a set striped over two files, the second one gone
        backup = Backup(path.read_bytes())
        backup.put(backup.streams(b"RAID")[0] + 22 + 20, "<H", 2)
        path.write_bytes(bytes(backup.data))
    else:
        raise AssertionError(how)


MSSQL_SCENARIOS: dict[str, tuple[str, list[tuple[str, str]], datetime | None]] = {
    "rtc-latest": ("RestoreTimeClean", [], None),
    "rtc-at-second-log": ("RestoreTimeClean", [], datetime(2017, 6, 1, 13, 22, tzinfo=UTC)),
    "rtc-at-end-of-diff": ("RestoreTimeClean", [], datetime(2017, 6, 1, 13, 14, 13, tzinfo=UTC)),
    "rtc-beyond-last-log": ("RestoreTimeClean", [], datetime(2017, 6, 2, tzinfo=UTC)),
    "rtc-before-any-full": ("RestoreTimeClean", [], datetime(2017, 1, 1, tzinfo=UTC)),
    "rtc-gap": ("RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "delete")], None),
    "rtc-no-diff": ("RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2.bak", "delete")], None),
    "stripe-latest": ("history/sql2016-stripe", [], None),
    "stripe-log-family-missing": ("history/sql2016-stripe",
                                  [("history/sql2016-stripe/Stripe2/restoretime_22a.trn", "delete")], None),
    "stripe-newest-full-family-missing": ("history/sql2016-stripe",
                                          [("history/sql2016-stripe/Stripe2/restoretime2a.bak", "delete")], None),
    "stripe-only-full-incomplete": ("history/sql2016-stripe",
                                    [("history/sql2016-stripe/Stripe2/restoretime1.bak", "delete"),
                                     ("history/sql2016-stripe/Stripe2/restoretime2a.bak", "delete")], None),
    "rtc-at-before-the-diff": ("RestoreTimeClean", [], datetime(2017, 6, 1, 13, 5, tzinfo=UTC)),
    "rtc-at-the-end-of-a-log": ("RestoreTimeClean", [], datetime(2017, 6, 1, 13, 24, 13, tzinfo=UTC)),
    "rtc-diff-missing-a-family-logs-go-past-it": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2.bak", "second-family-missing")], None),
    "rtc-diff-missing-a-family-nothing-reaches-it": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2.bak", "second-family-missing"),
                             *((f"RestoreTimeClean/RestoreTimeClean2_{n}.trn", "delete") for n in (1, 2, 3))], None),
    "rtc-diff-missing-a-family-nothing-reaches-it-at-its-finish": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2.bak", "second-family-missing"),
                             *((f"RestoreTimeClean/RestoreTimeClean2_{n}.trn", "delete") for n in (1, 2, 3))],
        datetime(2017, 6, 1, 13, 14, 13, tzinfo=UTC)),
    "rtc-diff-missing-a-family-a-log-reaches-exactly-its-end": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2.bak", "second-family-missing"),
                             ("RestoreTimeClean/RestoreTimeClean2_1.trn", "log-ends-where-the-diff-ends"),
                             *((f"RestoreTimeClean/RestoreTimeClean2_{n}.trn", "delete") for n in (2, 3))], None),
    "rtc-no-full": ("RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean.bak", "delete")], None),
    "rtc-a-log-copied": ("RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "copy")], None),
    "rtc-two-logs-ending-at-one-lsn": ("RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "restamp"),
                                                            ("RestoreTimeClean/RestoreTimeClean2_3.trn", "restamp")],
                                       None),
    "stripe-an-incomplete-copy-of-the-full": ("history/sql2016-stripe",
                                              [("history/sql2016-stripe/Stripe1/restoretime2.bak", "restamp")], None),
    "rtc-diff-no-newer-than-its-full": ("RestoreTimeClean",
                                        [("RestoreTimeClean/RestoreTimeClean2.bak", "diff-ends-at-its-full")], None),
    "stripe-newest-full-incomplete-at-its-finish": (
        "history/sql2016-stripe", [("history/sql2016-stripe/Stripe2/restoretime2a.bak", "delete")],
        datetime(2017, 5, 22, 14, 58, 56, tzinfo=UTC)),
    "stripe-newest-full-incomplete-after-the-target": (
        "history/sql2016-stripe", [("history/sql2016-stripe/Stripe2/restoretime2a.bak", "delete")],
        datetime(2017, 5, 22, 14, 55, tzinfo=UTC)),
    # RestoreTimeClean2_2.trn started 13:24:13 and, restamped, finished 13:26:13: its records end near
    # its start, so a target inside its backup window is reached by the next log, not by it.
    "rtc-target-while-a-log-was-written": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "finish-two-minutes-later")],
        datetime(2017, 6, 1, 13, 25, tzinfo=UTC)),
    "rtc-target-at-the-finish-of-a-slow-log": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "finish-two-minutes-later")],
        datetime(2017, 6, 1, 13, 26, 13, tzinfo=UTC)),
    "rtc-target-at-the-start-of-a-slow-log": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_2.trn", "finish-two-minutes-later")],
        datetime(2017, 6, 1, 13, 24, 13, tzinfo=UTC)),
    "rtc-target-while-the-last-log-was-written": (
        "RestoreTimeClean", [("RestoreTimeClean/RestoreTimeClean2_3.trn", "finish-two-minutes-later")],
        datetime(2017, 6, 1, 13, 30, tzinfo=UTC)),
    "ola-complex": ("OlaMsFilter/complex", [], None),
    "ola-complex-wrong-base": ("OlaMsFilter/complex",
                               [("OlaMsFilter/complex/Full/test_FULL_20160629_142200.bak", "delete")], None),
    "ola-simple": ("OlaMsFilter/Simple", [], None),
    "double-diffing": ("DoubleDiffing", [], None),
    "stopat-2008": ("sql2008-backups/StopAt", [], None),
    "simple-recovery": ("sql2008-backups/SimpleRecovery", [], None),
}


@pytest.mark.parametrize("name", sorted(MSSQL_SCENARIOS))
def test_sql_server_chains_word_for_word(name: str, mssql_copy: Callable[..., Path]) -> None:
    folder, damage, at = MSSQL_SCENARIOS[name]
    root = mssql_copy(folder)
    for relative, how in damage:
        _damage(root, relative, how)
    catalog = scan(LocalSource(root))
    found = [summary(mssql_plan(db, catalog.display_name(db), at)) for db in catalog.databases]
    check(f"mssql-{name}", found)


# The header facts no corpus file carries (copy-only, damaged) or that take a restore to make (a recovery
# fork) set on the catalog read from the real files, as a header saying so would.

NEW_FORK = "03020100-0504-0706-0809-0a0b0c0d0e0f"
END_OF_STOPAT_2 = 19000000019300001


def _set(db: Any, names: tuple[str, ...], **facts: Any) -> None:
    import dataclasses

    for media in db.sets:
        for number, header in media.families.items():
            if header.path.endswith(names):
                media.families[number] = dataclasses.replace(header, **facts)


def _fork(names: tuple[str, ...], point: int, first: int | None = None, parent: str | None = None) -> Callable[..., None]:
    def edit(db: Any) -> None:
        old = parent or db.sets[0].header.recovery_fork_guid
        extra = {"first_lsn": first} if first is not None else {}
        _set(db, names, recovery_fork_guid=NEW_FORK, parent_fork_guid=old, fork_point_lsn=point, **extra)
    return edit


def _all_not_damaged(db: Any) -> None:
    _set(db, ("",), is_damaged=False)


def _newest_diff_striped(db: Any) -> None:
    newest = max((m for m in db.sets if m.header.backup_type == "diff"), key=lambda m: m.header.last_lsn)
    newest.family_count = 2


def _copy_only_beside(name: str) -> Callable[..., None]:
    """A copy-only log backup of the same range beside the regular one (another media set)."""
    def edit(db: Any) -> None:
        import dataclasses

        media = next(m for m in db.sets if m.files[0].endswith(name))
        twin = dataclasses.replace(media, media_set_guid="c0c0c0c0-0000-0000-0000-000000000000", families={
            n: dataclasses.replace(h, path=h.path.replace(".trn", "_copyonly.trn"), is_copy_only=True,
                                   media_set_guid="c0c0c0c0-0000-0000-0000-000000000000")
            for n, h in media.families.items()}, copy_headers=[])
        db.sets.insert(db.sets.index(media), twin)
    return edit


def _diffs_on_the_older_full(db: Any, copy_only: bool = True) -> None:
    """The newest full is copy-only, so the differentials after it are on the older full (or, not
    copy-only, a header that says they are: said, not used)."""
    older, newest = sorted((m for m in db.sets if m.header.backup_type == "full"), key=lambda m: m.header.last_lsn)
    _set(db, (newest.files[0],), is_copy_only=copy_only)
    _set(db, (older.files[0],), is_copy_only=False)
    for media in db.sets:
        if media.header.backup_type == "diff" and media.header.last_lsn > newest.header.last_lsn:
            _set(db, (media.files[0],), database_backup_lsn=older.header.checkpoint_lsn,
                 differential_base_guid=older.header.backup_set_guid)


def _wrong_base_without_guids(db: Any) -> None:
    db.sets[:] = [m for m in db.sets if not m.files[0].endswith("test_FULL_20160629_142200.bak")]
    _set(db, ("",), backup_set_guid=None, differential_base_guid=None)


def _followed_then_another_fork(db: Any) -> None:
    _fork(("StopAt_21.trn",), END_OF_STOPAT_2)(db)
    _set(db, ("StopAt_23.trn",), recovery_fork_guid="0d0d0d0d-0000-0000-0000-000000000000")


SIMPLE = "sql2008-backups/SimpleRecovery"
STOPAT = "sql2008-backups/StopAt"
MSSQL_HEADER_SCENARIOS: dict[str, tuple[str, datetime | None, Callable[..., None]]] = {
    "damaged-full": (RTC, None, lambda db: _set(db, ("RestoreTimeClean.bak",), is_damaged=True)),
    "damaged-log-and-diff": (RTC, None, lambda db: _set(db, ("RestoreTimeClean2.bak", "RestoreTimeClean2_2.trn"),
                                                       is_damaged=True)),
    "not-damaged": (RTC, None, _all_not_damaged),
    "copy-only-newest-full": ("OlaMsFilter/complex", None,
                              lambda db: _set(db, ("test_FULL_20160629_142200.bak",), is_copy_only=True)),
    "copy-only-log-needed": (RTC, None, lambda db: _set(db, ("RestoreTimeClean2_2.trn",), is_copy_only=True)),
    "fork-followed": (STOPAT, None, _fork(("StopAt_21.trn", "StopAt_23.trn"), END_OF_STOPAT_2)),
    "fork-abandoned-branch": (STOPAT, None, _fork(("StopAt_23.trn",), END_OF_STOPAT_2, first=END_OF_STOPAT_2)),
    "fork-unreachable": (STOPAT, None, _fork(("StopAt_21.trn", "StopAt_23.trn"), 19000000010000001)),
    "fork-other-parent": (STOPAT, None, _fork(("StopAt_21.trn", "StopAt_23.trn"), END_OF_STOPAT_2,
                                              parent="ffffffff-0000-0000-0000-000000000000")),
    "simple-rounded": (SIMPLE, datetime(2018, 4, 6, 10, 38, tzinfo=UTC), lambda db: None),
    "simple-at-a-backups-end": (SIMPLE, datetime(2018, 4, 6, 10, 35, 32, tzinfo=UTC), lambda db: None),
    "simple-newer-diff-striped": (SIMPLE, None, _newest_diff_striped),
    "simple-one-second-after": (SIMPLE, datetime(2018, 4, 6, 10, 35, 33, tzinfo=UTC), lambda db: None),
    "copy-only-log-beside-a-regular-one": (RTC, None, _copy_only_beside("RestoreTimeClean2_2.trn")),
    "copy-only-full-diffs-on-the-older-full": ("OlaMsFilter/complex", None, _diffs_on_the_older_full),
    "wrong-base-without-guids": ("OlaMsFilter/complex", None, _wrong_base_without_guids),
    "diffs-on-the-older-full": ("OlaMsFilter/complex", None, lambda db: _diffs_on_the_older_full(db, False)),
    "fork-followed-then-another": (STOPAT, None, _followed_then_another_fork),
    "fork-abandoned-branch-other-parent": (STOPAT, None, _fork(("StopAt_23.trn",), END_OF_STOPAT_2,
                                                               first=END_OF_STOPAT_2,
                                                               parent="ffffffff-0000-0000-0000-000000000000")),
    "fork-at-the-full": (STOPAT, None, _fork(("StopAt_23.trn",), 19000000016100001, first=19000000016100001)),
    "fork-gap": (STOPAT, None, lambda db: _set(db, ("StopAt_2.trn",), recovery_fork_guid=NEW_FORK)),
}


@pytest.mark.parametrize("name", sorted(MSSQL_HEADER_SCENARIOS))
def test_sql_server_chains_by_header_facts_word_for_word(name: str, mssql_corpus: Path) -> None:
    folder, at, edit = MSSQL_HEADER_SCENARIOS[name]
    catalog = scan(LocalSource(mssql_corpus / folder))
    found = []
    for db in catalog.databases:
        edit(db)
        found.append(summary(mssql_plan(db, catalog.display_name(db), at)))
    check(f"mssql-header-{name}", found)


# -- PostgreSQL ------------------------------------------------------------------------------------

def _pg(repo: Path, at: datetime | None) -> list[dict[str, Any]]:
    source = LocalSource(repo)
    return [summary(pg_plan(source, stanza, at, MB16)) for stanza in discover(source, MB16)]


def _segments(repo: Path) -> Path:
    return repo / "archive" / "demo1" / "15-1" / "0000000100000000"


def _drop_segment(repo: Path, name: str) -> None:
    next(_segments(repo).glob(f"{name}-*")).unlink()


def _flag_error(repo: Path, label: str) -> None:
    for info in (repo / "backup" / "demo1").glob("backup.info*"):
        text = info.read_text()
        head, _, rest = text.partition(f"{label}=")
        info.write_text(head + f"{label}=" + rest.replace('"backup-error":false', '"backup-error":true', 1))


def _offline(repo: Path, label: str) -> None:
    for key in ("archive-start", "archive-stop", "lsn-start", "lsn-stop"):
        _edit_entry(repo, label, f'"backup-{key}":"', f'"backup-{key}":null,"was-{key}":"')
    _edit_entry(repo, label, '"option-online":true', '"option-online":false')


def _edit_entry(repo: Path, label: str, old: str, new: str) -> None:
    for info in (repo / "backup" / "demo1").glob("backup.info*"):
        lines = info.read_text().splitlines()
        info.write_text("\n".join(line.replace(old, new, 1) if line.startswith(f"{label}=") else line
                                  for line in lines) + "\n")


def _history(repo: Path, text: str) -> None:
    """Timeline 2, its history file archived a minute after timeline 1's segments (given up at the fork)."""
    history = _segments(repo).parent / "00000002.history"
    history.write_text(text)
    later = max(p.stat().st_mtime for p in _segments(repo).iterdir()) + 60
    os.utime(history, (later, later))
    (_segments(repo) / f"000000020000000000000009-{'0' * 40}.gz").write_bytes(b"")


def _forget(repo: Path, *labels: str) -> None:
    """Remove backups' entries from backup.info (both copies), leaving their folders."""
    for info in (repo / "backup" / "demo1").glob("backup.info*"):
        lines = info.read_text().splitlines()
        info.write_text("\n".join(line for line in lines if not line.startswith(tuple(f"{x}=" for x in labels)))
                        + "\n")


def _flip_manifest_byte(repo: Path, label: str) -> None:
    manifest = repo / "backup" / "demo1" / label / "backup.manifest"
    data = bytearray(manifest.read_bytes())
    data[data.index(b"pg_data/PG_VERSION")] ^= 0x01  # a file's name changed: the checksum no longer matches
    manifest.write_bytes(bytes(data))


def _archive_segment(repo: Path, name: str) -> None:
    (_segments(repo) / f"{name}-{'0' * 40}.gz").write_bytes(b"")


FULL, DIFF, INCR = "20261122-195034F", "20261122-195034F_20261122-195039D", "20261122-195034F_20261122-195042I"


PG_SCENARIOS: dict[str, tuple[Callable[[Path], None], datetime | None]] = {
    "at-the-end-of-the-diff": (lambda repo: None, datetime(2026, 11, 22, 19, 50, 42, tzinfo=UTC)),
    "incr-in-error-finishing-at-the-target": (lambda repo: _flag_error(repo, INCR),
                                              datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC)),
    "incr-in-error-after-the-target": (lambda repo: _flag_error(repo, INCR),
                                       datetime(2026, 11, 22, 19, 50, 43, tzinfo=UTC)),
    "every-backup-in-error": (lambda repo: [_flag_error(repo, label) for label in (FULL, DIFF, INCR)], None),
    "full-and-diff-in-error": (lambda repo: [_flag_error(repo, label) for label in (FULL, DIFF)], None),
    "full-and-diff-gone-from-backup-info": (lambda repo: _forget(repo, FULL, DIFF), None),
    "chain-starting-with-an-incr": (lambda repo: _edit_entry(repo, FULL, '"backup-type":"full"',
                                                             '"backup-type":"incr"'), None),
    "archive-ends-at-the-stop-segment": (lambda repo: [_drop_segment(repo, "000000010000000000000009"),
                                                       _drop_segment(repo, "00000001000000000000000A")], None),
    "archive-ends-at-the-stop-segment-after-every-backup": (
        lambda repo: [_drop_segment(repo, "000000010000000000000009"),
                      _drop_segment(repo, "00000001000000000000000A")], datetime(2026, 11, 22, 19, 50, 46, tzinfo=UTC)),
    "archive-without-the-backups-own-wal": (
        lambda repo: [_drop_segment(repo, name) for name in ("000000010000000000000008", "000000010000000000000009",
                                                             "00000001000000000000000A")], None),
    "archive-without-the-backups-own-wal-after-every-backup": (
        lambda repo: [_drop_segment(repo, name) for name in ("000000010000000000000008", "000000010000000000000009",
                                                             "00000001000000000000000A")],
        datetime(2026, 11, 22, 19, 50, 46, tzinfo=UTC)),
    "at-the-start-of-the-diff": (lambda repo: None, datetime(2026, 11, 22, 19, 50, 39, tzinfo=UTC)),
    "next-backup-starting-in-the-stop-segment": (
        lambda repo: _edit_entry(repo, DIFF, '"backup-archive-start":"000000010000000000000006"',
                                 '"backup-archive-start":"000000010000000000000004"'),
        datetime(2026, 11, 22, 19, 50, 38, tzinfo=UTC)),
    "full-missing-two-of-its-own-segments": (
        lambda repo: [_edit_entry(repo, FULL, '"backup-archive-stop":"000000010000000000000004"',
                                  '"backup-archive-stop":"000000010000000000000005"'),
                      _drop_segment(repo, "000000010000000000000004"), _drop_segment(repo, "000000010000000000000005")],
        datetime(2026, 11, 22, 19, 50, 38, tzinfo=UTC)),
    "archive-folder-gone": (lambda repo: __import__("shutil").rmtree(_segments(repo).parent), None),
    "archive-emptied": (lambda repo: [p.unlink() for p in _segments(repo).glob("*")], None),
    "no-start-lsn": (lambda repo: _edit_entry(repo, INCR, '"backup-lsn-start"', '"backup-lsn-begin"'), None),
    "ten-segments-missing": (lambda repo: [_archive_segment(repo, "000000010000000000000014"),
                                           _drop_segment(repo, "000000010000000000000009")], None),
    "eleven-segments-missing": (lambda repo: [_archive_segment(repo, "000000010000000000000014"),
                                              _drop_segment(repo, "000000010000000000000009"),
                                              _drop_segment(repo, "00000001000000000000000A")], None),
    "latest": (lambda repo: None, None),
    "at-between-diff-and-incr": (lambda repo: None, datetime(2026, 11, 22, 19, 50, 41, tzinfo=UTC)),
    "at-before-any-backup": (lambda repo: None, datetime(2026, 11, 22, 19, 0, tzinfo=UTC)),
    "missing-start-segment": (lambda repo: _drop_segment(repo, "000000010000000000000008"), None),
    "missing-last-segment-of-diff-range": (lambda repo: _drop_segment(repo, "000000010000000000000007"),
                                           datetime(2026, 11, 22, 19, 50, 41, tzinfo=UTC)),
    "manifest-damaged": (lambda repo: _flip_manifest_byte(repo, DIFF), None),
    "manifest-of-another-backup": (lambda repo: __import__("shutil").copy(
        repo / "backup" / "demo1" / DIFF / "backup.manifest", repo / "backup" / "demo1" / INCR / "backup.manifest"),
        None),
    "missing-manifest": (lambda repo: [p.unlink() for p in (repo / "backup" / "demo1").glob(
        "*I/backup.manifest*")], None),
    "newest-in-error": (lambda repo: _flag_error(repo, "20261122-195034F_20261122-195042I"), None),
    "timeline-2-descends-in-the-middle-of-a-segment": (
        lambda repo: _history(repo, "1\t0/9000100\tno recovery target specified\n"), None),
    # Timeline 2 began exactly where the backup began: the backup holds timeline 1's changes after
    # that point, which timeline 2 never had, so it does not lead there.
    "timeline-2-leaves-at-the-backup-start": (
        lambda repo: _history(repo, "1\t0/8000028\tno recovery target specified\n"), None),
    "timeline-2-descends": (lambda repo: _history(repo, "1\t0/9000000\tno recovery target specified\n"), None),
    "timeline-2-before-backup": (lambda repo: _history(repo, "1\t0/1000000\tno recovery target specified\n"), None),
    "diff-in-error-under-the-incr": (lambda repo: _flag_error(repo, "20261122-195034F_20261122-195039D"), None),
    "diff-and-incr-in-error": (lambda repo: [_flag_error(repo, "20261122-195034F_20261122-195039D"),
                                             _flag_error(repo, "20261122-195034F_20261122-195042I")], None),
    "chain-not-starting-with-a-full": (lambda repo: _edit_entry(repo, "20261122-195034F", '"backup-type":"full"',
                                                                '"backup-type":"diff"'), None),
    "no-wal-range": (lambda repo: _edit_entry(repo, "20261122-195034F_20261122-195042I",
                                              '"backup-archive-start"', '"backup-archive-begin"'), None),
    # pgBackRest's record of a backup taken with the server stopped (--no-online, read from a real one).
    "offline-newest": (lambda repo: _offline(repo, INCR), None),
    "offline-newest-at-after-it": (lambda repo: _offline(repo, INCR), datetime(2026, 11, 22, 19, 51, tzinfo=UTC)),
    "offline-newest-at-its-end": (lambda repo: _offline(repo, INCR), datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC)),
    "offline-diff-at-after-it-before-the-incr": (
        lambda repo: _offline(repo, DIFF), datetime(2026, 11, 22, 19, 50, 43, tzinfo=UTC)),
    "timeline-2-of-another-lineage": (lambda repo: _history(repo, "3\t0/9000000\tno recovery target specified\n"),
                                      None),
    "at-after-every-backup": (lambda repo: None, datetime(2026, 11, 23, tzinfo=UTC)),
    "timeline-2-without-history": (lambda repo: (_segments(repo) / f"000000020000000000000009-{'0' * 40}.gz")
                                   .write_bytes(b""), None),
}


@pytest.mark.parametrize("name", sorted(PG_SCENARIOS))
def test_postgres_chains_word_for_word(name: str, captured_repo: Path) -> None:
    damage, at = PG_SCENARIOS[name]
    damage(captured_repo)
    check(f"postgres-{name}", _pg(captured_repo, at))
