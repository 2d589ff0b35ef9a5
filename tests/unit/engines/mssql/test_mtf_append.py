"""The appended-set builder (mtf_append.py) on real backups: the file it builds is whole MTF, each set
numbered and addressed for its new place, every filemark list complete, and the sets' own bytes kept.

Each expectation is checked from the bytes by this file's own block scan, not by the builder's parser.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.unit.engines.mssql.mtf_append import (
    append_sets,
    filemarks,
    media_set_guid,
    set_layouts,
    set_ranges,
    soft_filemark_size,
    truncate_after,
)
from verification.engines.mssql.mtf import header_checksum, read_backup_header

FULL = "OlaMsFilter/Simple/test_FULL_20160629_141300.bak"
LOG = "OlaMsFilter/Simple/test_LOG_20160629_141310.trn"
COPY_ONLY = ("copy-only/plataformadb_4b7a2e4.bak", "copy-only/plataformadb_792dd97.bak",
             "copy-only/plataformadb_93b98ca.bak")
KINDS = {b"TAPE", b"SSET", b"VOLB", b"SFMB", b"ESET", b"MSCI", b"MSDA", b"MSTL", b"MSLS"}
SECTOR = 512  # every block SQL Server wrote in the corpus starts on a 512-byte boundary


class _Bytes:
    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset:offset + length]


def u16(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<H", data, at)[0])


def u32(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", data, at)[0])


def u64(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", data, at)[0])


def blocks(data: bytes) -> dict[int, bytes]:
    """Every 512-byte boundary that starts with an MTF block type: offset -> type."""
    return {at: data[at:at + 4] for at in range(0, len(data), SECTOR) if data[at:at + 4] in KINDS}


def of_kind(data: bytes, kind: bytes) -> list[int]:
    return [at for at, found in blocks(data).items() if found == kind]


def media_header(data: bytes) -> int:
    return of_kind(data, b"SSET")[0]


@pytest.fixture(scope="module")
def full_and_log(mssql_corpus: Path) -> tuple[bytes, bytes]:
    return (mssql_corpus / FULL).read_bytes(), (mssql_corpus / LOG).read_bytes()


@pytest.fixture(scope="module")
def copy_only(mssql_real_world: Path) -> list[bytes]:
    return [(mssql_real_world / rel).read_bytes() for rel in COPY_ONLY]


def shifts(parts: list[bytes]) -> list[int]:
    """How far each part's set moves: from its own file to its place in the built one."""
    moved, end = [0], len(parts[0])
    for part in parts[1:]:
        moved.append(end - media_header(part))
        end += len(part) - media_header(part)
    return moved


def assert_appended(built: bytes, parts: list[bytes]) -> None:
    """`built` holds the set of each part, in order, numbered from 1, every field that depends on the
    set's place rewritten and nothing else of the set changed: no block's common header (so every
header checksum stays the one SQL Server wrote)."""
    assert len(built) == len(parts[0]) + sum(len(part) - media_header(part) for part in parts[1:])
    assert built[:media_header(parts[0])] == parts[0][:media_header(parts[0])]
    found = blocks(built)
    assert all(u16(built, at + 50) == header_checksum(built[at:at + 52]) for at in found)
    assert all(built[at:at + 52] == part[at - shift:at - shift + 52]
               for part, shift in zip(parts, shifts(parts), strict=True) for at in found
               if shift + media_header(part) <= at < shift + len(part))

    marks = of_kind(built, b"SFMB")
    assert len(marks) == 1 + 2 * len(parts)
    for index, mark in enumerate(marks):
        used = u32(built, mark + 56)
        assert list(struct.unpack_from(f"<{used}Q", built, mark + 72)) == marks[:index][::-1]
        assert not any(built[mark + 72 + 8 * used:mark + soft_filemark_size(built)])

    ssets, esets = of_kind(built, b"SSET"), of_kind(built, b"ESET")
    assert len(ssets) == len(parts) and len(esets) == 2 * len(parts)
    start = ssets[0]
    for position, (part, sset) in enumerate(zip(parts, ssets, strict=True), start=1):
        assert sset == start
        assert (u16(built, sset + 62), u64(built, sset + 80)) == (position, sset)
        first, second = esets[2 * position - 2:2 * position]
        assert (u16(built, first + 78), u16(built, second + 78)) == (position, position)
        assert (u64(built, first + 60), u64(built, second + 60)) == (0, first)
        # From the block after the SSET to the filemark before the ESETs: the set's data, as written.
        origin = media_header(part)
        shift = sset - origin
        data_from = min(at for at in blocks(part) if at > origin)
        data_to = of_kind(part, b"SFMB")[1]
        assert built[data_from + shift:data_to + shift] == part[data_from:data_to]
        assert {at + shift: kind for at, kind in blocks(part).items() if at >= origin} == {
            at: kind for at, kind in found.items() if sset <= at < sset + len(part) - origin}
        start += len(part) - origin
    assert start == len(built)


def test_the_layout_the_builder_relies_on(full_and_log: tuple[bytes, bytes], copy_only: list[bytes]) -> None:
    full, log = full_and_log
    assert [soft_filemark_size(part) for part in (full, log, *copy_only)] == [512, 512, 4096, 4096, 4096]
    assert set_ranges(full) == [(0x600, len(full))] and set_ranges(copy_only[0]) == [(0x2000, len(copy_only[0]))]
    assert filemarks(copy_only[1]) == [0x1000, 0x387000, 0x38B000]
    assert [u16(part, media_header(part) + 62) for part in (full, log, *copy_only)] == [1] * 5
    assert len({media_set_guid(part) for part in (full, log, *copy_only)}) == 5


def test_a_log_appended_to_a_full(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    built = append_sets(full, log, adopt_media=True)
    assert_appended(built, [full, log])
    assert set_ranges(built) == [(0x600, len(full)), (len(full), len(built))]
    assert filemarks(built) == of_kind(built, b"SFMB")


def test_the_set_map_of_an_appended_set_names_its_place(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    built = append_sets(full, log, adopt_media=True)
    second = set_layouts(built)[1]
    assert second.set_map is not None
    at = second.set_map
    assert built[at:at + 4] == full[52:56]  # the media family id of the media it is now on
    assert (u16(built, at + 0x0A), u64(built, at + 0x14)) == (2, second.start)
    origin, length = set_layouts(log)[0].set_map, u64(built, at - 22 + 8)
    assert origin is not None and length == u64(log, origin - 22 + 8)
    assert built[at + 0x04:at + 0x0A] == log[origin + 0x04:origin + 0x0A]
    assert built[at + 0x0C:at + 0x14] == log[origin + 0x0C:origin + 0x14]
    assert built[at + 0x1C:at + length] == log[origin + 0x1C:origin + length]


def test_three_copy_only_fulls_with_4096_byte_filemarks(copy_only: list[bytes]) -> None:
    built = append_sets(*copy_only, adopt_media=True)
    assert_appended(built, copy_only)
    assert of_kind(built, b"SFMB") == [0x1000, 0x377000, 0x37B000, 0x701000, 0x705000, 0xA8B000, 0xA8F000]


def test_a_built_file_can_be_appended_to_again(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    built = append_sets(append_sets(full, log, adopt_media=True), log, adopt_media=True)
    assert_appended(built, [full, log, log])
    assert built == append_sets(full, log, log, adopt_media=True)


def test_truncating_after_a_set_gives_the_file_as_it_was_then(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    built = append_sets(full, log, log, adopt_media=True)
    assert truncate_after(built, 1) == full
    assert truncate_after(built, 2) == append_sets(full, log, adopt_media=True)
    assert truncate_after(built, 3) == built
    with pytest.raises(ValueError, match="holds 3 sets, not 4"):
        truncate_after(built, 4)


def test_the_first_set_still_reads_as_before(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    alone = read_backup_header(_Bytes(FULL, full))
    built = read_backup_header(_Bytes(FULL, truncate_after(append_sets(full, log, adopt_media=True), 1)))
    assert built == alone


def test_another_media_set_is_refused_unless_adopted(full_and_log: tuple[bytes, bytes]) -> None:
    full, log = full_and_log
    with pytest.raises(ValueError, match=f"input 2 belongs to media set {media_set_guid(log).hex()}"):
        append_sets(full, log)


def test_another_soft_filemark_size_is_refused(full_and_log: tuple[bytes, bytes], copy_only: list[bytes]) -> None:
    with pytest.raises(ValueError, match="input 2 has soft filemark size 4096, the first input 512"):
        append_sets(full_and_log[0], copy_only[0], adopt_media=True)


def test_a_filemark_list_that_no_longer_fits_is_refused(full_and_log: tuple[bytes, bytes]) -> None:
    """A 512-byte SFMB holds 55 offsets: the media header's filemark and two per set, so 27 sets."""
    log = full_and_log[1]
    assert len(set_layouts(append_sets(log, *[log] * 26, adopt_media=True))) == 27
    with pytest.raises(ValueError, match="holds 55 filemark entries, 56 are needed"):
        append_sets(log, *[log] * 27, adopt_media=True)


def test_a_damaged_final_filemark_is_refused(full_and_log: tuple[bytes, bytes]) -> None:
    built = bytearray(append_sets(*full_and_log, adopt_media=True))
    built[-SECTOR + 72] ^= 1  # the list's newest entry no longer points at a filemark
    struct.pack_into("<H", built, len(built) - SECTOR + 50, header_checksum(bytes(built[-SECTOR:-SECTOR + 52])))
    with pytest.raises(ValueError, match="expected an MTF SFMB block at"):
        set_layouts(bytes(built))
    built[-SECTOR + 50] ^= 1
    with pytest.raises(ValueError, match="has a wrong header checksum"):
        set_layouts(bytes(built))
