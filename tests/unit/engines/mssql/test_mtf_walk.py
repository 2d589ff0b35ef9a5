"""A file whose end is not whole (an append that failed or is still running, a copy cut short): the
sets before the one its end cuts are found by walking the media forward and read as any other, and
what is wrong with the rest is said once, naming the set it lies in. Files built from real backups
by the MTF specification (mtf_append.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.engines.mssql.mtf_append import append_sets, set_ranges
from tests.unit.engines.mssql.mtf_edit import StrictBytes
from verification.engines.mssql.catalog import read_file, scan
from verification.engines.mssql.mtf import (
    MtfError,
    MtfTruncated,
    MtfUnsupported,
    header_checksum,
    read_backup_headers,
    read_media,
)
from verification.sources import LocalSource

FULL, LOG = "OlaMsFilter/Simple/test_FULL_20160629_141300.bak", "OlaMsFilter/Simple/test_LOG_20160629_141310.trn"


@pytest.fixture()
def three(mssql_corpus: Path) -> bytes:
    """A full, a log and a full of one database appended to one media (positions 1 to 3)."""
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    return append_sets(full, log, full, adopt_media=True)


def _cut_inside(data: bytes, number: int) -> int:
    """A sector boundary halfway into set `number` (1-based) after which the file still holds bytes."""
    start, end = set_ranges(data)[number - 1]
    return next(at for at in range((start + end) // 2 // 512 * 512, end, 512) if any(data[at - 512:at]))


def test_the_walk_finds_the_sets_the_filemark_list_names(three: bytes) -> None:
    whole = read_backup_headers(StrictBytes("three.bak", three))
    for number in (2, 3):
        found = read_media(StrictBytes("three.bak", three[:_cut_inside(three, number)]))
        assert [h.position for h in found.headers] == list(range(1, number))
        assert [(h.set_offset, h.set_end, h.first_lsn, h.last_lsn, h.backup_type) for h in found.headers] == [
            (h.set_offset, h.set_end, h.first_lsn, h.last_lsn, h.backup_type) for h in whole[:number - 1]]


def test_a_set_cut_by_the_end_is_truncation_naming_the_set(three: bytes) -> None:
    start = set_ranges(three)[2][0]
    found = read_media(StrictBytes("three.bak", three[:_cut_inside(three, 3)]))
    assert isinstance(found.problem, MtfTruncated) and not isinstance(found.problem, MtfUnsupported)
    assert str(found.problem).endswith(
        f"the file is truncated or was never closed (in backup set 3, which begins at offset {start:#x}; "
        "the file's other whole sets are read)")
    # Whose backup was cut: its own head copy says, as the catalog reports it.
    assert found.identity is not None and (found.identity.database_name, found.identity.backup_type) == ("OlaMsFilterTest", "full")
    with pytest.raises(MtfTruncated, match=r"\(in backup set 3, "):
        read_backup_headers(StrictBytes("three.bak", three[:_cut_inside(three, 3)]))


def test_a_one_set_file_cut_short_reads_no_set_and_says_truncated(mssql_corpus: Path) -> None:
    full = (mssql_corpus / FULL).read_bytes()
    found = read_media(StrictBytes("full.bak", full[:_cut_inside(full, 1)]))
    assert found.headers == [] and isinstance(found.problem, MtfTruncated)
    assert "in backup set" not in str(found.problem)  # the only set: nothing before it to speak of


def test_damage_inside_a_later_set_is_its_checksum_not_the_end(three: bytes) -> None:
    # The closing filemark of set 2 damaged and the file cut in set 3: the walk meets the mismatch first.
    data = bytearray(three[:_cut_inside(three, 3)])
    _, end_of_two = set_ranges(three)[1]
    marks = [at for at in range(set_ranges(three)[1][0], end_of_two, 512) if data[at:at + 4] == b"SFMB"]
    data[marks[0] + 8] ^= 0x5A  # the data filemark's first-stream offset: covered by its checksum
    found = read_media(StrictBytes("three.bak", bytes(data)))
    assert [h.position for h in found.headers] == [1]
    assert type(found.problem) is MtfError
    assert f"SFMB block header checksum at offset {marks[0]:#x}" in str(found.problem)
    assert "(in backup set 2, " in str(found.problem)


def test_zeros_where_the_next_set_is_written_keep_the_sets_before(three: bytes) -> None:
    # An append into a file sized first: set 3's bytes are still zeros.
    start = set_ranges(three)[2][0]
    data = three[:start] + bytes(len(three) - start)
    found = read_media(StrictBytes("three.bak", data))
    assert [h.position for h in found.headers] == [1, 2]
    assert isinstance(found.problem, MtfUnsupported) and "still being written" in str(found.problem)
    assert "in backup set" not in str(found.problem)  # no set begins there: the end is what is said


def test_the_catalog_keeps_the_whole_sets_and_names_the_cut_one(three: bytes, tmp_path: Path) -> None:
    folder = tmp_path / "test" / "FULL"
    folder.mkdir(parents=True)
    (folder / "media.bak").write_bytes(three[:_cut_inside(three, 3)])
    source = LocalSource(tmp_path)
    read = read_file(source, "test/FULL/media.bak")
    assert [h.position for h in read.headers] == [1, 2]
    assert read.unreadable is not None and read.unreadable.kind == "corrupt"
    assert read.unreadable.identity is not None and read.unreadable.identity.database_name == "OlaMsFilterTest"
    catalog = scan(source)
    (db,) = catalog.databases
    assert [(m.header.position, m.header.backup_type) for m in db.sets] == [(1, "full"), (2, "log")]
    assert [u.kind for u in catalog.unreadable] == ["corrupt"]


def test_a_checksum_helper_is_what_the_reader_verifies(three: bytes) -> None:
    # The edit above relies on the SFMB header being covered by header_checksum.
    start = set_ranges(three)[1][0]
    mark = next(at for at in range(start, len(three), 512) if three[at:at + 4] == b"SFMB")
    assert header_checksum(three[mark:mark + 52]) == int.from_bytes(three[mark + 50:mark + 52], "little")


def test_bytes_past_a_whole_set_keep_the_set_and_say_the_end(mssql_corpus: Path) -> None:
    # A copy that wrote 100 bytes too many (or of another file): the set is whole, the end is not.
    full = (mssql_corpus / FULL).read_bytes()
    found = read_media(StrictBytes("full.bak", full + bytes(range(100))))
    assert [h.position for h in found.headers] == [1]
    assert isinstance(found.problem, MtfTruncated)
    assert str(found.problem).startswith("full.bak: end of file at offset ") and "(100 past a block boundary)" in str(
        found.problem) and "in backup set" not in str(found.problem)


def test_a_set_whose_closing_filemark_is_cut_is_whole_and_the_file_truncated(mssql_real_world: Path) -> None:
    # 4096-byte filemarks: the file cut 512 bytes into its last one. The set's blocks are all there
    # (that filemark's header too); what is missing is the end of the media.
    data = (mssql_real_world / "copy-only" / "plataformadb_4b7a2e4.bak").read_bytes()
    found = read_media(StrictBytes("copy.bak", data[:len(data) - 3584]))
    assert [(h.position, h.backup_type) for h in found.headers] == [(1, "full")]
    assert isinstance(found.problem, MtfTruncated) and "in backup set" not in str(found.problem)
