import pytest

from verification.engines.postgres.wal import Segment, format_lsn, parse_lsn, parse_segment, segment_of_lsn

MB16 = 16 * 1024 * 1024


def test_lsn_round_trip_matches_postgres_notation():
    assert parse_lsn("0/A000088") == 0xA000088
    assert parse_lsn("1/0") == 1 << 32
    assert format_lsn(parse_lsn("2F/DEADBEEF")) == "2F/DEADBEEF"
    with pytest.raises(ValueError):
        parse_lsn("0-A000088")


def test_segment_names_cross_the_log_boundary():
    # Segment 0xFF of log 0 is followed by segment 0 of log 1 with 16 MiB segments.
    last = parse_segment("0000000100000000000000FF", MB16)
    following = Segment(last.timeline, last.number + 1)
    assert following.name(MB16) == "000000010000000100000000"


def test_segment_size_changes_the_numbering():
    # With 64 MiB segments a log holds 64 of them, so "...00000040" is out of range.
    with pytest.raises(ValueError, match="out of range"):
        parse_segment("000000010000000000000040", 64 * 1024 * 1024)
    assert parse_segment("00000001000000010000003F", 64 * 1024 * 1024).number == 64 + 63


def test_segment_of_lsn_is_the_file_holding_it():
    assert segment_of_lsn(parse_lsn("0/A000088"), 1, MB16).name(MB16) == "00000001000000000000000A"


def test_every_field_of_a_segment_name_is_hexadecimal_and_in_its_place():
    name = "1000000A" + "1000002B" + "000000FF"
    assert parse_segment(name, MB16) == Segment(0x1000000A, 0x1000002B * 256 + 0xFF)
    with pytest.raises(ValueError, match=r"^WAL segment 000000010000000010000001 is out of range for 16777216-byte"):
        parse_segment("000000010000000010000001", MB16)  # a segment number past the 256 of a log file
    assert parse_segment("000000010000000A00000003", 1024 * 1024 * 1024) == Segment(1, 10 * 4 + 3)
    with pytest.raises(ValueError, match=r"^not a WAL segment file name: '00000001000000000000000G'$"):
        parse_segment("00000001000000000000000G", MB16)
    with pytest.raises(ValueError, match=r"^not a PostgreSQL LSN: '0-A000088'$"):
        parse_lsn("0-A000088")
