"""One file holding several backup sets (BACKUP ... WITH NOINIT), through the whole SQL Server pipeline:
catalog, chain, page verification. No such file is in either corpus: each is built in the test from real
single-set backups by tests/unit/engines/mssql/mtf_append.py (its sets as SQL Server wrote them, only
their position fields rewritten)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.engines.mssql.mtf_append import append_sets
from verification.cli import app
from verification.engines.base import Evidence
from verification.engines.mssql.catalog import scan, shares_file
from verification.engines.mssql.chain import plan
from verification.engines.mssql.page_check import read_and_judge
from verification.engines.mssql.pages import SetScan, locate_data_streams, scan_pages
from verification.model import BackupType, ChainStatus, CheckStatus
from verification.sources import LocalSource
from verification.sources.base import SourceFile

RTC = "RestoreTimeClean"
# The lab database's full, its differential and the differential's three logs, in the order taken.
CHAIN = ("RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn", "RestoreTimeClean2_2.trn",
         "RestoreTimeClean2_3.trn")
COPY_ONLY = ("plataformadb_4b7a2e4.bak", "plataformadb_792dd97.bak", "plataformadb_93b98ca.bak")


def appended(folder: Path, names: tuple[str, ...], into: Path, name: str = "appended.bak") -> Path:
    into.mkdir(parents=True, exist_ok=True)
    (into / name).write_bytes(append_sets(*((folder / n).read_bytes() for n in names), adopt_media=True))
    return into


@pytest.fixture
def one_file(mssql_corpus: Path, tmp_path: Path) -> Path:
    return appended(mssql_corpus / RTC, CHAIN, tmp_path / "source")


def test_every_set_of_the_file_is_catalogued_and_the_chain_planned_by_position(one_file: Path) -> None:
    catalog = scan(LocalSource(one_file))
    assert catalog.unreadable == []
    (db,) = catalog.databases
    assert [(m.header.backup_type, m.header.position, m.files) for m in db.sets] == [
        ("full", 1, ["appended.bak"]), ("diff", 2, ["appended.bak"]), ("log", 3, ["appended.bak"]),
        ("log", 4, ["appended.bak"]), ("log", 5, ["appended.bak"])]
    # Each set is exactly its own range of the file, one after another.
    ranges = [(m.header.set_offset, m.header.set_end) for m in db.sets]
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(ranges))
    assert ranges[-1][1] == (one_file / "appended.bak").stat().st_size
    planned = plan(db, RTC, None)
    assert planned.chain.status is ChainStatus.COMPLETE, planned.chain.problems
    assert [(b.path, b.position, b.type) for b in planned.chain.backups] == [
        ("appended.bak", 1, BackupType.FULL), ("appended.bak", 2, BackupType.DIFF),
        ("appended.bak", 3, BackupType.LOG), ("appended.bak", 4, BackupType.LOG), ("appended.bak", 5, BackupType.LOG)]
    # The file once among the plan's files; each set's size its own bytes, adding up to the file.
    assert planned.files == ["appended.bak"]
    assert sum(b.size_bytes or 0 for b in planned.chain.backups) == (one_file / "appended.bak").stat().st_size
    assert [b.size_bytes for b in planned.chain.backups[1:]] == [end - start for start, end in ranges[1:]]


def test_the_same_chain_as_from_the_separate_files(one_file: Path, mssql_corpus: Path) -> None:
    (db,) = scan(LocalSource(one_file)).databases
    (separate,) = scan(LocalSource(mssql_corpus / RTC)).databases
    lsns = [(b.first_lsn, b.last_lsn, b.type) for b in plan(db, RTC, None).chain.backups]
    assert lsns == [(b.first_lsn, b.last_lsn, b.type) for b in plan(separate, RTC, None).chain.backups]


def test_the_pages_of_set_two_are_its_own_and_only_its_own(one_file: Path, mssql_corpus: Path) -> None:
    (db,) = scan(LocalSource(one_file)).databases
    full, diff = (m.header for m in db.sets[:2])
    reader = SourceFile(LocalSource(one_file), "appended.bak")
    streams = locate_data_streams(reader, diff.set_offset)
    assert streams and all(diff.set_offset <= s.offset and s.offset + s.pages * 8192 <= diff.set_end
                           for s in streams)
    assert locate_data_streams(reader, full.set_offset) == locate_data_streams(reader) != streams
    set_two = SetScan()
    set_two.add(SourceFile(LocalSource(one_file), "appended.bak"), None, diff.set_offset, "appended.bak (set 2)")
    (scanned,) = set_two.results()
    original = scan_pages(SourceFile(LocalSource(mssql_corpus / RTC), "RestoreTimeClean2.bak"))
    assert scanned.path == "appended.bak (set 2)" and scanned.findings == ()
    assert (scanned.pages, scanned.checksummed, scanned.by_type) == (original.pages, original.checksummed,
                                                                    original.by_type)
    first = scan_pages(SourceFile(LocalSource(mssql_corpus / RTC), "RestoreTimeClean.bak"))
    assert scanned.pages != first.pages  # not the first set's pages read again
    assert full.position == 1


def test_the_page_check_names_each_set_of_the_file(one_file: Path, tmp_path: Path) -> None:
    (db,) = scan(LocalSource(one_file)).databases
    planned = plan(db, RTC, None)
    check, found = read_and_judge(planned, LocalSource(one_file), Evidence(tmp_path / "evidence"))
    assert check.status is CheckStatus.PASSED, check.summary
    per_file = check.details["per_file"]
    assert list(per_file) == ["appended.bak (set 1)", "appended.bak (set 2)"]
    assert [v["findings"] for v in per_file.values()] == [0, 0]
    assert found.boot is not None and found.boot.path == "appended.bak (set 2)"


def test_a_damaged_page_in_set_two_is_found_in_set_two_only(one_file: Path, tmp_path: Path) -> None:
    (db,) = scan(LocalSource(one_file)).databases
    reader = SourceFile(LocalSource(one_file), "appended.bak")
    (stream, *_) = locate_data_streams(reader, db.sets[1].header.set_offset)
    data = bytearray((one_file / "appended.bak").read_bytes())
    data[stream.offset + 8192 * 9 + 500] ^= 0x5A  # a byte in the body of the set's tenth page
    (one_file / "appended.bak").write_bytes(bytes(data))
    check, found = read_and_judge(plan(db, RTC, None), LocalSource(one_file), Evidence(tmp_path / "evidence"))
    assert check.status is CheckStatus.FAILED
    assert {f.path for f in found.findings} == {"appended.bak (set 2)"}
    assert all(f.offset >= db.sets[1].header.set_offset for f in found.findings)


# -- how a person is told which set of the file is meant ---------------------------------------------------

def test_the_chain_messages_name_each_set_of_the_file_and_the_fields_keep_the_path(one_file: Path) -> None:
    (db,) = scan(LocalSource(one_file)).databases
    assert [m.describe() for m in db.sets[:2]] == ["full backup of RestoreTimeClean (appended.bak (set 1))",
                                                   "diff backup of RestoreTimeClean (appended.bak (set 2))"]
    planned = plan(db, RTC, None)
    rules = {r.rule: r.detail for r in planned.chain.rules}
    assert rules["full-available"] == ("full appended.bak (set 1) (LastLSN 25000000013200001, 1 family), the newest "
                                       "complete one")
    assert rules["differential-base"].startswith("differential appended.bak (set 2): DifferentialBaseGUID ")
    assert planned.history is not None
    assert [p.name for p in planned.history.points] == ["full appended.bak (set 1)", "diff appended.bak (set 2)",
                                                        *(f"log appended.bak (set {n})" for n in (3, 4, 5))]
    assert [b.name for b in planned.chain.backups] == [f"appended.bak (set {n})" for n in range(1, 6)]
    # The report's structured fields are unchanged: a path is a path, the position its own field.
    assert {(b.label, b.path) for b in planned.chain.backups} == {("appended.bak", "appended.bak")}
    assert planned.files == ["appended.bak"]


def test_a_gap_between_two_sets_of_one_file_names_both_sets(mssql_corpus: Path, tmp_path: Path) -> None:
    """The differential's second log left out: set 3 (that log) does not continue set 2 (the differential)."""
    root = appended(mssql_corpus / RTC, (CHAIN[0], CHAIN[1], CHAIN[3]), tmp_path / "source")
    (db,) = scan(LocalSource(root)).databases
    planned = plan(db, RTC, None)
    assert planned.chain.status is ChainStatus.BROKEN
    (gap,) = planned.chain.problems
    assert gap.code == "log-gap"
    assert gap.message.startswith("log chain broken between appended.bak (set 2) and appended.bak (set 3): The log "
                                  "in this backup set begins at LSN 25000000020000001")
    assert gap.files == ("appended.bak", "appended.bak")


def test_files_of_one_set_beside_the_file_of_several_keep_their_bare_names(mssql_corpus: Path,
                                                                          tmp_path: Path) -> None:
    root = appended(mssql_corpus / RTC, CHAIN[:2], tmp_path / "source")
    for name in CHAIN[2:]:
        (root / name).write_bytes((mssql_corpus / RTC / name).read_bytes())
    (db,) = scan(LocalSource(root)).databases
    assert [(m.header.position, shares_file(m.header), m.names) for m in db.sets] == [
        (1, True, ["appended.bak (set 1)"]), (2, True, ["appended.bak (set 2)"]),
        *((1, False, [name]) for name in CHAIN[2:])]
    planned = plan(db, RTC, None)
    assert planned.chain.status is ChainStatus.COMPLETE, planned.chain.problems
    assert [b.name for b in planned.chain.backups] == ["appended.bak (set 1)", "appended.bak (set 2)", *CHAIN[2:]]


def test_the_console_plan_names_each_set_and_its_json_keeps_paths(one_file: Path) -> None:
    said = CliRunner().invoke(app, ["plan", str(one_file), "--engine", "mssql"])
    assert said.exit_code == 0, said.output
    rows = [line for line in said.stdout.splitlines() if line.startswith(("  full ", "  diff ", "  log "))]
    assert rows[:2] == [
        "  full  appended.bak (set 1)  2017-06-01 12:59:12 .. 12:59:12  LSN 25000000006200170..25000000013200001  "
        "family 1/1",
        "  diff  appended.bak (set 2)  2017-06-01 13:14:13 .. 13:14:13  LSN 25000000017300038..25000000019000001  "
        "family 1/1"]
    assert [row[8:].split("  ")[0] for row in rows[2:]] == [f"appended.bak (set {n})" for n in (3, 4, 5)]
    data = json.loads(CliRunner().invoke(app, ["plan", str(one_file), "--engine", "mssql", "--json"]).stdout)
    backups = data["databases"][0]["chain"]["backups"]
    assert [(b["label"], b["path"], b["position"]) for b in backups] == [("appended.bak", "appended.bak", n)
                                                                         for n in range(1, 6)]


def test_a_file_of_one_set_is_named_by_its_path_alone(mssql_corpus: Path, mssql_real_world: Path) -> None:
    """The lab's files, and the real COPY_ONLY fulls whose 4096-byte soft filemark blocks end the file in
    zero padding after the set's last filemark: each file holds one set, named as ever."""
    for folder in (mssql_corpus / RTC, mssql_real_world / "copy-only"):
        catalog = scan(LocalSource(folder))
        sets = [m for db in catalog.databases for m in db.sets]
        assert sets and all(not shares_file(m.header) and m.names == m.files for m in sets), folder
        for db in catalog.databases:
            planned = plan(db, db.database, None)
            assert [b.name for b in planned.chain.backups] == [b.path for b in planned.chain.backups]
            assert not any("(set " in r.detail for r in planned.chain.rules)


# -- the three COPY_ONLY fulls from outside the lab (4096-byte soft filemark blocks) ---------------------

def test_every_checksummed_page_of_the_real_copy_only_fulls_is_verified(mssql_real_world: Path) -> None:
    from verification.engines.mssql.pages import PAGE, decode_header

    source = LocalSource(mssql_real_world / "copy-only")
    for name in COPY_ONLY:
        reader = SourceFile(source, name)
        scanned = scan_pages(reader)
        raw = b"".join(reader.read(s.offset, s.pages * PAGE) for s in locate_data_streams(reader))
        headers = [decode_header(raw[at:at + PAGE]) for at in range(0, len(raw), PAGE)]
        stamped = sum(1 for h in headers if h.header_version == 1 and h.has_checksum)
        assert scanned.findings == () and scanned.checksummed == stamped > 300, name
        assert scanned.pages == len(headers) and scanned.placed > 0


def test_copy_only_fulls_appended_to_one_file_are_each_read_and_planned_by_position(
        mssql_real_world: Path, tmp_path: Path) -> None:
    """Three copy-only fulls of one database (LocalDB renamed its instance between them) in one file:
    one database; the newest is planned at its own position, and each set's pages are its own."""
    root = appended(mssql_real_world / "copy-only", COPY_ONLY, tmp_path / "source")
    catalog = scan(LocalSource(root))
    (db,) = catalog.databases
    assert catalog.unreadable == [] and len(db.sets) == 3
    assert {(m.header.position, m.header.is_copy_only, m.header.layout_proven, m.header.recovery_model)
            for m in db.sets} == {(1, True, True, "SIMPLE"), (2, True, True, "SIMPLE"), (3, True, True, "SIMPLE")}
    planned = plan(db, db.database, None)
    newest = max(db.sets, key=lambda m: m.header.last_lsn).header
    (full,) = planned.chain.backups
    assert (full.path, full.position, full.copy_only) == ("appended.bak", newest.position, True)
    check, _ = read_and_judge(planned, LocalSource(root), Evidence(tmp_path / "evidence"))
    assert check.status is CheckStatus.PASSED, check.summary
    (counts,) = check.details["per_file"].values()
    original = scan_pages(SourceFile(LocalSource(mssql_real_world / "copy-only"), COPY_ONLY[newest.position - 1]))
    assert (counts["pages"], counts["checksums_verified"]) == (original.pages, original.checksummed)


def test_a_differential_on_a_full_of_the_same_file_that_is_copy_only_is_refused(one_file: Path) -> None:
    """The full at position 1 marked copy-only (as the real COPY_ONLY fulls are): the differential at
    position 2, taken on it, is never restored on it; the full alone and its logs are."""
    import dataclasses

    (db,) = scan(LocalSource(one_file)).databases
    first = db.sets[0]
    first.families[1] = dataclasses.replace(first.header, is_copy_only=True)
    planned = plan(db, RTC, None)
    assert [(b.position, b.type) for b in planned.chain.backups][:1] == [(1, BackupType.FULL)]
    assert 2 not in [b.position for b in planned.chain.backups]
    assert any("copy-only" in r.detail and not r.passed for r in planned.chain.rules if r.rule == "differential-base")
    # Which set of the file each message means: the copy-only full is set 1, its differential set 2.
    refused = next(r.detail for r in planned.chain.rules if r.rule == "differential-base" and not r.passed)
    assert refused.startswith("differential appended.bak (set 2) refused: it names full appended.bak (set 1) as its "
                              "base (DifferentialBaseGUID ")


def test_a_set_in_a_layout_not_known_is_not_read_and_not_damage(one_file: Path) -> None:
    """Set 2 of a file whose media header states a soft filemark block size no SQL Server writes: its pages
    are not read, an error naming the layout, never a damaged backup."""
    import struct

    from verification.engines.mssql.page_check import read_pages

    data = bytearray((one_file / "appended.bak").read_bytes())
    struct.pack_into("<H", data, 64, 200)  # TAPE soft filemark block size, in sectors (past its checksum)
    (one_file / "appended.bak").write_bytes(bytes(data))
    found = read_pages(LocalSource(one_file), ["appended.bak (set 2)"],
                       where={"appended.bak (set 2)": ("appended.bak", 2)})
    assert found.damaged == [] and found.scans == []
    (said,) = found.unreadable
    assert said.startswith("appended.bak (set 2): ") and "TAPE soft filemark block size" in said
    assert "not proof of damage" in said


def test_a_flipped_byte_in_a_checksummed_page_of_a_4096_byte_media_is_found(mssql_real_world: Path,
                                                                               tmp_path: Path) -> None:
    from verification.engines.mssql.pages import PAGE, decode_header

    name = COPY_ONLY[1]
    data = bytearray((mssql_real_world / "copy-only" / name).read_bytes())
    (tmp_path / name).write_bytes(data)
    reader = SourceFile(LocalSource(tmp_path), name)
    page = next(s.offset + n * PAGE for s in locate_data_streams(reader) for n in range(s.pages)
                if (h := decode_header(bytes(data[s.offset + n * PAGE:s.offset + (n + 1) * PAGE]))).has_checksum
                and h.header_version == 1 and h.page_type == 1)
    data[page + 4000] ^= 0x10  # in the page's body: its header still names it, its checksum no longer fits
    (tmp_path / name).write_bytes(data)
    (finding,) = scan_pages(SourceFile(LocalSource(tmp_path), name)).findings
    assert (finding.path, finding.offset) == (name, page)
    assert finding.stored_checksum != finding.computed_checksum


# -- reads: each set's data found from where the catalogue placed it, not by reading the headers again ------

class CountingSource(LocalSource):
    """A local source that counts the byte-range reads (what each costs a request on object storage)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads = 0
        self.bytes = 0

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        data = super().read_bytes(path, offset, length)
        self.reads += 1
        self.bytes += len(data)
        return data


def _page_checked(folder: Path, sets: int, into: Path, monkeypatch: pytest.MonkeyPatch,
                  forget_offsets: bool = False) -> tuple[int, int, int]:
    """Page-check every set of a file of `sets` data sets (the full and the differential, again and again):
    (header reads, range reads, bytes read by them) during the check alone."""
    import dataclasses

    from verification.engines.mssql import page_check

    root = appended(folder, ("RestoreTimeClean.bak", "RestoreTimeClean2.bak") * (sets // 2), into)
    (db,) = scan(LocalSource(root)).databases
    planned = plan(db, RTC, None)
    if forget_offsets:  # a plan made without them: the file's headers are read instead, once
        chain = dataclasses.replace(planned.chain, backups=[dataclasses.replace(b, set_offset=None)
                                                            for b in planned.chain.backups])
        planned = dataclasses.replace(planned, chain=chain, data_backups=[dataclasses.replace(b, set_offset=None)
                                                                          for b in planned.data_backups])
    headers = []
    real = page_check.read_backup_headers
    monkeypatch.setattr(page_check, "read_backup_headers", lambda reader: (headers.append(reader.name), real(reader))[1])
    counting = CountingSource(root)
    check, found = read_and_judge(planned, counting, Evidence(into / "evidence"), "all")
    assert check.status is CheckStatus.PASSED, check.summary
    assert len(found.scans) == sets and {s.path for s in found.scans} == {f"appended.bak (set {n})"
                                                                          for n in range(1, sets + 1)}
    return len(headers), counting.reads, counting.bytes


def test_page_checking_every_set_of_a_file_reads_its_headers_never_again(mssql_corpus: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The catalogue placed every set (BackupSet.set_offset): the check reads no header, and what it reads
    # grows with the sets, not with their square (reading every set's headers once per set did).
    two = _page_checked(mssql_corpus / RTC, 2, tmp_path / "two", monkeypatch)
    six = _page_checked(mssql_corpus / RTC, 6, tmp_path / "six", monkeypatch)
    assert two[0] == six[0] == 0
    # Measured: 53 reads (133 kB) for 2 sets, 135 (266 kB) for 6; reading every set's headers again for
    # each set made that 61 (226 kB) and 247 (1.25 MB).
    assert six[1] <= 3 * two[1] and six[2] <= 3 * two[2], (two, six)


def test_a_plan_without_set_offsets_reads_the_file_s_headers_once(mssql_corpus: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    headers, _, _ = _page_checked(mssql_corpus / RTC, 6, tmp_path / "six", monkeypatch, forget_offsets=True)
    assert headers == 1


def test_a_set_no_longer_where_the_catalogue_placed_it_is_an_error_not_damage(one_file: Path) -> None:
    # The file changed between the catalogue and the page check (rewritten WITH INIT, say): no proof of damage.
    from verification.engines.mssql.page_check import SetStarts, read_pages

    (db,) = scan(LocalSource(one_file)).databases
    moved = db.sets[1].header.set_offset + 512
    found = read_pages(LocalSource(one_file), ["appended.bak (set 2)"], where={"appended.bak (set 2)": ("appended.bak", 2)},
                       starts=SetStarts(LocalSource(one_file), {("appended.bak", 2): moved}))
    assert found.damaged == [] and found.scans == []
    assert found.unreadable == [f"appended.bak (set 2): appended.bak: no backup set begins at offset {moved:#x} any "
                                "more: the file changed since it was planned"]


def test_a_full_with_its_logs_appended_is_page_checked_as_the_full(mssql_corpus: Path, tmp_path: Path) -> None:
    # The full is the file's only data set, and is still named with its set, as the chain names it: the
    # file holds its logs too. Only the full's pages are read (the logs are no data backup).
    root = appended(mssql_corpus / RTC, ("RestoreTimeClean.bak", "RestoreTimeClean_1.trn"), tmp_path / "source")
    (db,) = scan(LocalSource(root)).databases
    check, found = read_and_judge(plan(db, RTC, None), LocalSource(root), Evidence(tmp_path / "evidence"))
    assert check.status is CheckStatus.PASSED, check.summary
    assert [s.path for s in found.scans] == ["appended.bak (set 1)"] and found.scans[0].pages == 168


def test_the_whole_sets_of_a_file_cut_in_its_last_set_are_planned_and_page_checked(one_file: Path,
                                                                                   tmp_path: Path) -> None:
    # An append that did not finish: the last log is cut halfway. The full, the differential and two
    # logs before it are read by walking the media, planned and their pages checked; the cut set is
    # named corrupt, with its own head's identity.
    from tests.unit.engines.mssql.mtf_append import set_ranges

    data = (one_file / "appended.bak").read_bytes()
    start, end = set_ranges(data)[-1]
    # Cut where the last sector kept holds data: one of zeros is what a copy in progress leaves.
    cut = next(at for at in range((start + end) // 2 // 512 * 512, end, 512) if any(data[at - 512:at]))
    (one_file / "appended.bak").write_bytes(data[:cut])
    catalog = scan(LocalSource(one_file))
    (db,) = catalog.databases
    assert [m.header.position for m in db.sets] == [1, 2, 3, 4]
    (cut,) = catalog.unreadable
    assert cut.kind == "corrupt" and "(in backup set 5, " in cut.reason
    assert cut.identity is not None and cut.identity.backup_type == "log"
    planned = plan(db, RTC, None)
    assert planned.chain.status is ChainStatus.COMPLETE and [b.position for b in planned.chain.backups] == [1, 2, 3, 4]
    check, _ = read_and_judge(planned, LocalSource(one_file), Evidence(tmp_path / "evidence"))
    assert check.status is CheckStatus.PASSED, check.summary
    assert list(check.details["per_file"]) == ["appended.bak (set 1)", "appended.bak (set 2)"]
