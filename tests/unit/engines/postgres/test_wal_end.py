"""The end of redo proven to the record: pg_waldump's words and the rules, on real captures.

The captures (tests/fixtures/postgres/wal-end/<case>/) are a real restore's evidence from the fault tests
(tests/faults/test_redo_end.py, a small real cluster archived by pgBackRest 2.45, PostgreSQL 15): the
server's log, the reading script's output (wal-end-read.out) and, where the reader stopped inside a
segment, the tail check's (wal-end-tail.out); case.json keeps the planned WAL range and target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from tests.unit.factories import complete_plan
from verification.engines.postgres.recovery_proof import RecoveryProof, prove_recovery
from verification.engines.postgres.serverlog import parse_server_log
from verification.engines.postgres.wal import parse_lsn
from verification.engines.postgres.wal_end import (
    Geometry,
    Tail,
    WalRead,
    WalRecord,
    next_record,
    parse_record,
    parse_tail,
    parse_wal_read,
    planned_names,
    prove_to_the_record,
    quoted,
    sections,
    waldump_lsn,
)
from verification.model import RestorePlan, WalRange

MB16 = 16 * 1024 * 1024
SWITCHED_ID = 7713159328978210844  # the system identifier of the cluster of the captures made on it (wal-end/switched)
CASES = Path(__file__).parents[3] / "fixtures" / "postgres" / "wal-end"
GEOMETRY = Geometry(8192, MB16, 8)


def case_text(case: str, name: str) -> str:
    return (CASES / case / name).read_text()


@dataclass
class Reader:
    """Answers as the target answered in the captured run; records what it was asked."""

    read_text: str
    tail_text: str = ""
    asked: list[tuple[object, ...]] = field(default_factory=list)

    def read(self, segments: list[str], redo_done: int) -> WalRead:
        self.asked.append(("read", segments, redo_done))
        return parse_wal_read(self.read_text)

    def tail(self, segment: str, offset: int, resume: int, segment_size: int) -> Tail:
        self.asked.append(("tail", segment, offset, resume, segment_size))
        return parse_tail(self.tail_text)


def plan_of(case: str) -> RestorePlan:
    facts = json.loads(case_text(case, "case.json"))
    plan = complete_plan()
    first, last = facts["first"], facts["last"]
    plan.chain.wal = WalRange(1, first, last, int(last, 16) - int(first, 16) + 1, "the end of the archive")
    plan.stop_at = datetime.fromisoformat(facts["at"]) if facts.get("at") else None
    return plan


def prove(case: str, read: str | None = None, tail: str | None = None, log: str | None = None,
          plan: RestorePlan | None = None) -> tuple[RecoveryProof, Reader]:
    text = log if log is not None else case_text(case, "server.log")
    reader = Reader(read if read is not None else case_text(case, "wal-end-read.out"),
                    tail if tail is not None else (case_text(case, "wal-end-tail.out")
                                                   if (CASES / case / "wal-end-tail.out").exists() else ""))
    plan = plan or plan_of(case)
    parsed = parse_server_log(text)
    proof = prove_recovery(parsed, plan, MB16)
    return prove_to_the_record(proof, parsed, plan, MB16, reader), reader


# -- pg_waldump's lines ------------------------------------------------------------------------------

def test_a_record_line_as_pg_waldump_prints_it():
    line = ("rmgr: Transaction len (rec/tot):     34/    34, tx:        827, lsn: 0/05004420, prev 0/050043E0, "
            "desc: COMMIT 2026-11-28 09:26:46.614236 UTC")
    assert parse_record(line) == WalRecord(parse_lsn("0/5004420"), "Transaction", 34, 827,
                                           "COMMIT 2026-11-28 09:26:46.614236 UTC")
    switch = parse_record("rmgr: XLOG        len (rec/tot):     24/    24, tx:          0, lsn: 0/0400013"
                          "8, prev 0/040000D0, desc: SWITCH ")
    assert switch is not None and switch.is_switch and switch.describe() == "XLOG SWITCH at 0/4000138"
    assert parse_record("pg_waldump: error: error in WAL record at 0/50058E0: invalid") is None
    # Only the XLOG resource manager's SWITCH is one; a description merely starting so is not.
    assert not WalRecord(1, "Heap", 24, 0, "SWITCH").is_switch
    assert not WalRecord(1, "XLOG", 24, 0, "SWITCHED").is_switch
    assert WalRecord(1, "XLOG", 24, 0, "SWITCH").is_switch


def test_lsns_as_pg_waldump_prints_them():
    assert waldump_lsn(parse_lsn("0/5004420")) == "0/05004420"
    assert waldump_lsn(parse_lsn("1A/FF")) == "1A/000000FF"


# -- where the reader looks next -----------------------------------------------------------------------

@pytest.mark.parametrize(("lsn", "length", "expected"), [
    ("0/6800048", 64, "0/6800088"),      # inside a page, already aligned
    ("0/50058E0", 34, "0/5005908"),      # aligned up to 8
    ("0/5001FE0", 64, "0/5002038"),      # runs over a page: the next page's short header (24) in between
    ("0/5FFFFE0", 64, "0/6000048"),      # runs into the next segment: its long header (40) in between
    ("0/5001FC0", 64, "0/5002018"),      # ends on a page boundary: the next record is past that page's header
    ("0/5FFFFC0", 64, "0/6000028"),      # ends on a segment boundary: past the long header
    ("0/5001000", 20000, "0/5005E50"),   # spans two page boundaries (4096 + 8168 + 7736 bytes)
])
def test_the_next_record_is_past_the_page_headers_and_aligned(lsn, length, expected):
    record = WalRecord(parse_lsn(lsn), "Heap", length, 1, "INSERT")
    assert waldump_lsn(next_record(record, GEOMETRY)) == waldump_lsn(parse_lsn(expected))


def test_after_a_switch_the_reader_looks_at_the_next_segments_start():
    switch = WalRecord(parse_lsn("0/C0818D0"), "XLOG", 24, 0, "SWITCH")
    assert waldump_lsn(next_record(switch, GEOMETRY)) == "0/0D000000"
    assert waldump_lsn(next_record(WalRecord(parse_lsn("0/CFFFFE8"), "XLOG", 24, 0, "SWITCH"), GEOMETRY)) == \
        "0/0D000000"
    assert waldump_lsn(next_record(WalRecord(parse_lsn("0/C0818D0"), "XLOG", 24, 0, "SWITCH"),
                                   Geometry(8192, 2 * MB16, 8))) == "0/0E000000"


def test_the_geometry_comes_from_the_clusters_own_control_file():
    record = WalRecord(parse_lsn("0/5000FE0"), "Heap", 64, 1, "INSERT")
    small_pages = Geometry(4096, MB16, 8)
    assert waldump_lsn(next_record(record, small_pages)) == "0/05001038"
    assert waldump_lsn(next_record(WalRecord(parse_lsn("0/50058E0"), "Heap", 34, 1, ""), Geometry(8192, MB16, 4))) \
        == "0/05005904"


# -- the reading script's answer ---------------------------------------------------------------------

READ = """not a section: dropped
@@fetched 000000010000000000000004 7713155052332101659
@@fetched 000000010000000000000005 7713155052332101659
@@control
Database system identifier:           7713155052332101659
WAL block size:                       8192
Bytes per WAL segment:                16777216
Maximum data alignment:               8
@@exit 1
@@at
rmgr: Transaction len (rec/tot):     34/    34, tx:        858, lsn: 0/050058E0, prev 0/050058A0, desc: COMMIT 2026-11-28 09:26:46.618834 UTC
@@last
rmgr: Transaction len (rec/tot):     34/    34, tx:        858, lsn: 0/050058E0, prev 0/050058A0, desc: COMMIT 2026-11-28 09:26:46.618834 UTC
@@stderr
pg_waldump: error: error in WAL record at 0/50058E0: incorrect resource manager data checksum in record at 0/5005908
"""


def test_the_reading_scripts_sections():
    read = parse_wal_read(READ)
    assert read.segments == ["000000010000000000000004", "000000010000000000000005"]
    assert read.system_ids == dict.fromkeys(read.segments, 7713155052332101659)
    assert read.system_id == 7713155052332101659
    assert read.fetch_error is None and read.exit_code == 1
    assert read.geometry == Geometry(8192, MB16, 8)
    assert read.at_redo_done == read.last and read.last is not None and read.last.lsn == parse_lsn("0/50058E0")
    assert read.stderr == ("pg_waldump: error: error in WAL record at 0/50058E0: incorrect resource manager data "
                           "checksum in record at 0/5005908")


def test_a_fetch_that_failed_keeps_pgbackrests_words_and_a_partial_answer_gives_nothing_made_up():
    read = parse_wal_read("@@fetched 000000010000000000000004\n@@fetch-error archive-get of 000000010000000000000005 "
                          "exited 82:\nERROR: [082]: unable to find a valid repository\n   repo1: [FileMissingError]\n")
    assert read.segments == ["000000010000000000000004"]
    assert read.fetch_error == ("archive-get of 000000010000000000000005 exited 82: ERROR: [082]: unable to find a "
                                "valid repository repo1: [FileMissingError]")
    assert read.geometry is None and read.exit_code is None and read.last is None and read.stderr == ""
    assert read.system_ids == {"000000010000000000000004": None} and read.system_id is None
    # pg_waldump's error words over several lines, joined.
    assert parse_wal_read(READ + "second line\n").stderr.endswith("record at 0/5005908 second line")
    assert parse_wal_read(READ.replace("5 7713155052332101659", "5 x")).system_ids["000000010000000000000005"] is None
    # A control file missing a field gives no geometry; an exit status that is no number, none.
    assert parse_wal_read(READ.replace("Maximum data alignment:               8\n", "")).geometry is None
    assert parse_wal_read(READ.replace("Database system identifier:           7713155052332101659\n", "")).system_id \
        is None
    assert parse_wal_read(READ.replace("WAL block size:                       8192", "WAL block size: x")).geometry \
        is None
    assert parse_wal_read(READ.replace("@@exit 1", "@@exit")).exit_code is None
    assert parse_wal_read(READ.replace("@@exit 1", "@@exit 0")).exit_code == 0
    # The last record is the last line that is one; the record at the end of redo, the first.
    two = READ.replace("@@stderr", "rmgr: XLOG len (rec/tot): 24/ 24, tx: 0, lsn: 0/05005908, prev 0/050058E0, "
                                   "desc: SWITCH\nnot a record\n@@stderr")
    assert parse_wal_read(two).last == WalRecord(parse_lsn("0/5005908"), "XLOG", 24, 0, "SWITCH")
    at = READ.replace("@@last", "rmgr: XLOG len (rec/tot): 24/ 24, tx: 0, lsn: 0/05005908, prev 0/050058E0, "
                                "desc: SWITCH\n@@last")
    assert parse_wal_read(at).at_redo_done == parse_wal_read(READ).at_redo_done


def test_the_tail_scripts_answers():
    assert parse_tail("@@cmp 0\n@@commits\n0\n") == Tail(None, 0)
    assert parse_tail("@@cmp 1\n/w/000000010000000000000005 /dev/zero differ: byte 1, line 1\n@@commits\n97\n") \
        == Tail(0, 97)
    assert parse_tail("@@cmp 1\nf /dev/zero differ: char 4097, line 1\n") == Tail(4096, None)
    assert parse_tail("@@cmp 1\nf /dev/zero differ: byte 9, line 1\n@@commits\nmany\n") == Tail(8, None)
    assert parse_tail("@@cmp 1\nf /dev/zero differ: byte 9, line 1\n@@commits\n") == Tail(8, None)
    assert parse_tail("@@cmp 2\ncmp: f: No such file or directory\n") == Tail(
        error="cmp could not compare the segment with zeros: 2 cmp: f: No such file or directory")
    assert parse_tail("") == Tail(error="cmp could not compare the segment with zeros: no answer")
    assert parse_tail("@@cmp 1\nsomething else\nand more\n") == Tail(
        error="cmp's answer not understood: something else and more")
    assert parse_tail("@@cmp 1\n") == Tail(error="cmp's answer not understood: ")
    assert parse_tail("@@cmp 1\nno\nf /dev/zero differ: byte 9, line 1\n").error is not None  # cmp's first line


def test_the_scripts_sections_in_order_with_their_arguments():
    assert sections("before\n@@a x y\n1\n2\n@@b\n@@a\n3\n") == [
        ("a", "x y", ["1", "2"]), ("b", "", []), ("a", "", ["3"])]


def test_a_quote_is_cut_at_its_limit():
    assert quoted("  " + "x" * 300 + " ") == "x" * 300
    assert quoted("x" * 301) == "x" * 300 + " ..."


# -- which segments are read -------------------------------------------------------------------------

def range_plan(first: str, last: str, timelines: tuple[tuple[int, int], ...] = ()) -> RestorePlan:
    plan = complete_plan()
    plan.chain.wal = WalRange(int(last[:8], 16), first, last, 3, "the end of the archive", timelines)
    return plan


def names(*numbers: int, timeline: int = 1) -> list[str]:
    return [f"{timeline:08X}00000000{n:08X}" for n in numbers]


def test_the_segments_read_are_planned_restored_and_one_run_on_one_timeline():
    plan = range_plan(*names(4, 6))
    everything = set(names(3, 4, 5, 6, 7))
    assert planned_names(plan, [5, 6], everything, MB16) == names(5, 6)
    assert planned_names(plan, [6, 7], everything, MB16) == names(6)           # past the plan: not read
    assert planned_names(plan, [3, 4], everything, MB16) == names(4)           # before it: neither
    assert planned_names(plan, [5, 6], set(names(6)), MB16) == names(6)        # only what the server restored
    assert planned_names(plan, [5, 6], set(names(5)), MB16) == names(5)
    assert planned_names(plan, [5, 6], set(), MB16) == []
    assert planned_names(plan, [4, 6], everything, MB16) == names(6)           # no gap in a run
    forked = range_plan(names(4)[0], names(6, timeline=2)[0], ((1, 4), (2, 6)))
    both = everything | set(names(6, timeline=2))
    assert planned_names(forked, [5, 6], both, MB16) == names(6, timeline=2)  # pg_waldump follows no switch
    assert planned_names(forked, [4, 5], both, MB16) == names(4, 5)


# -- the rules, on real restores -----------------------------------------------------------------------

SWITCHED = ("WAL read with pg_waldump from 000000010000000000000002, 000000010000000000000003 (pgbackrest "
            "archive-get): its last record is XLOG SWITCH at 0/3010908, and redo done at 0/3010908 is that record; "
            "the WAL ends with an XLOG SWITCH: the rest of the segment is padding and the archive holds no later "
            "segment on this timeline")


def test_an_archive_ending_in_a_switch_is_proven_to_the_record():
    proof, reader = prove("switched")
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs[1:] == [SWITCHED]
    assert reader.asked == [("read", ["000000010000000000000002", "000000010000000000000003"],
                             parse_lsn("0/3010908"))]


def test_a_cluster_stopped_cleanly_ends_in_its_shutdown_switch():
    proof, reader = prove("stopped")
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs[1].startswith("WAL read with pg_waldump from 000000010000000000000004, "
                                      "000000010000000000000005 (pgbackrest archive-get): its last record is XLOG "
                                      "SWITCH at ")
    assert reader.asked[0][1] == ["000000010000000000000004", "000000010000000000000005"]


def test_a_running_clusters_archive_ends_in_a_record_that_runs_into_the_unarchived_segment():
    proof, _ = prove("running")
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs[1] == (
        "WAL read with pg_waldump from 000000010000000000000003, 000000010000000000000004 (pgbackrest archive-get): "
        "its last record is Heap INSERT off 2 flags 0x00, blkref #0: rel 1663/5/16385 blk 1592 at 0/4FFFEB0, and redo "
        "done at 0/4FFFEB0 is that record; the WAL ends where the next record continues past the end of "
        "000000010000000000000004, into a segment the archive does not hold (not archived yet)")


def test_a_record_whose_data_was_changed_fails_naming_the_segment_the_lsn_and_the_commits_lost():
    proof, reader = prove("payload")
    assert proof.proofs == [] and proof.errors == []
    assert proof.failures[1] == (
        "WAL segment 000000010000000000000003 of the archive ends early: its records stop at 0/300C328, inside the "
        "segment, after Transaction COMMIT 2026-11-28 09:57:53.661434 UTC at 0/300C300, with bytes the reader "
        "cannot decode from offset 49960 (first non-zero byte at offset 49960, LSN 0/300C328): records the server "
        "could not read; the server stopped there too (redo done at 0/300C300), so every commit after 0/300C300 is "
        "missing from the restore; pg_waldump, resuming at 0/300E000, still decodes 58 commit record(s) later in the "
        "segment, none of them replayed; the server said \"LOG: completed backup recovery with redo LSN 0/2000028 "
        "and end LSN 0/2000100; LOG: consistent recovery state reached at 0/2000100; LOG: incorrect resource "
        "manager data checksum in record at 0/300C328\"; pg_waldump said \"pg_waldump: error: error in WAL record "
        "at 0/300C300: incorrect resource manager data checksum in record at 0/300C328\"")
    # The tail is read in the segment where the reader stopped, from there; resuming on the next page.
    assert reader.asked[1] == ("tail", "000000010000000000000003", 49960, parse_lsn("0/300E000"), MB16)


def test_a_record_whose_length_was_changed_fails_the_same_way():
    proof, _ = prove("total-length")
    assert proof.proofs == []
    assert "its records stop at 0/300C328, inside the segment" in proof.failures[1]
    assert "(first non-zero byte at offset 49962, LSN 0/300C32A)" in proof.failures[1]
    assert proof.failures[1].endswith('pg_waldump said "pg_waldump: error: error in WAL record at 0/300C300: invalid '
                                      'contrecord length 2 (expected 58152) at 0/300C328"')


def test_a_segment_zeroed_after_a_commit_is_a_lost_tail_not_an_end():
    proof, _ = prove("zero-tail")
    assert proof.proofs == []
    assert ("with zeros from there (offset 49960) to the end of the segment, where a complete segment holds records "
            "up to its end or up to an XLOG SWITCH: PostgreSQL archives a segment only once it is full or switched, "
            "so this copy lost the WAL written there; the server stopped there too") in proof.failures[1]
    assert "resuming" not in proof.failures[1]  # nothing to count in zeros


def test_the_servers_log_need_not_say_a_word_about_the_bad_record():
    # The message level or language of the backup's settings may hide the server's line: the WAL still says it.
    text = "\n".join(line for line in case_text("payload", "server.log").splitlines()
                     if "incorrect resource manager data checksum" not in line)
    proof, _ = prove("payload", log=text)
    assert proof.proofs == [] and len(proof.failures) == 1
    assert proof.failures[0].startswith("WAL segment 000000010000000000000003 of the archive ends early")
    assert 'the server said "LOG: completed backup recovery' in proof.failures[0]
    silent = "\n".join(line for line in text.splitlines()
                       if "completed backup recovery" not in line and "consistent recovery" not in line)
    assert "the server's log gives no reason" in prove("payload", log=silent)[0].failures[0]


def test_a_point_in_time_is_proven_by_the_record_the_server_stopped_at():
    proof, reader = prove("pitr")
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs[1] == ("WAL read with pg_waldump from 000000010000000000000003: the record at 0/300AB98 is "
                               "Transaction COMMIT 2026-11-28 09:57:53.481396 UTC at 0/300AB98 of transaction 792, the "
                               "one the server stopped for")
    # The segment of the record, and the next one if planned (here the plan ends there).
    assert reader.asked == [("read", ["000000010000000000000003"], parse_lsn("0/300AB98"))]


@pytest.mark.parametrize(("change", "why"), [
    (("tx:        792", "tx:        793"), "is Transaction COMMIT"),      # another transaction
    (("desc: COMMIT", "desc: ABORT"), "is Transaction ABORT"),            # its abort, not its commit
    (("09:57:53.481396 UTC", "09:57:53.481397 UTC"), "is Transaction"),   # another time
    (("rmgr: Transaction", "rmgr: Heap"), "is Heap COMMIT"),              # not a transaction record
])
def test_a_stop_the_record_does_not_match_is_not_proven(change, why):
    read = case_text("pitr", "wal-end-read.out")
    proof, _ = prove("pitr", read=read.replace(*change))
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors[0].startswith('the server said "recovery stopping before commit of transaction 792, time '
                                      '2026-11-28 09:57:53.481396+00" and redo done at 0/300AB98, but the record '
                                      f"there {why}")
    assert proof.errors[0].endswith("the stop is not the record the WAL holds")


def test_a_stop_after_a_commit_and_a_stop_at_an_abort_are_matched_by_kind():
    read = case_text("pitr", "wal-end-read.out")
    log = case_text("pitr", "server.log")
    after = log.replace("recovery stopping before commit", "recovery stopping after commit")
    assert prove("pitr", log=after)[0].errors == []
    aborted = log.replace("before commit of", "before abort of")
    assert prove("pitr", read=read.replace("desc: COMMIT", "desc: ABORT"), log=aborted)[0].errors == []
    assert prove("pitr", read=read, log=aborted)[0].errors != []


def test_a_stop_at_no_record_or_a_stop_line_without_a_transaction_is_not_proven():
    read = case_text("pitr", "wal-end-read.out")
    at = read[read.index("@@at\n") + 5:read.index("@@last")]
    proof, _ = prove("pitr", read=read.replace(at, ""))
    assert proof.proofs == []
    assert proof.errors == ["redo done at 0/300AB98, but pg_waldump reading 000000010000000000000003 finds no record "
                            "there (its last: Transaction COMMIT 2026-11-28 09:57:53.661434 UTC at 0/300C300), so the server's stop \"recovery stopping "
                            "before commit of transaction 792, time 2026-11-28 09:57:53.481396+00\" is not shown in "
                            "the archive's WAL"]
    elsewhere = read.replace(at, at.replace("lsn: 0/0300AB98", "lsn: 0/0300AB99"))
    assert prove("pitr", read=elsewhere)[0].errors[0].startswith("redo done at 0/300AB98, but pg_waldump reading")
    nothing = read.replace(at, "").replace(read[read.index("@@last\n") + 7:read.index("@@stderr")], "")
    assert prove("pitr", read=nothing)[0].errors == [
        "reading 000000010000000000000003 to prove the end of redo to the record: pg_waldump decoded no record in "
        "them (exit 1: pg_waldump: error: error in WAL record at 0/300C300: incorrect resource manager data checksum "
        "in record at 0/300C328)"]
    log = case_text("pitr", "server.log").replace("before commit of transaction 792", "before the record of 792")
    proof, _ = prove("pitr", log=log)
    assert proof.errors == ['the server\'s stop line "recovery stopping before the record of 792, time 2026-11-28 '
                            '09:57:53.481396+00" names no transaction, so the record it stopped at (redo done at '
                            '0/300AB98) cannot be checked against the WAL']


# -- when the record level is not asked, or cannot judge ------------------------------------------------

def test_nothing_is_read_when_the_segment_level_could_not_judge_or_redo_ended_segments_early():
    # No end of redo in the log: the segment level's error stands alone.
    log = "\n".join(line for line in case_text("switched", "server.log").splitlines() if "redo done" not in line)
    proof, reader = prove("switched", log=log)
    assert reader.asked == [] and len(proof.errors) == 1
    # A plan without WAL.
    plan = plan_of("switched")
    plan.chain.wal = None
    assert prove("switched", plan=plan)[1].asked == []
    # Redo ended two segments before the archive's last: the segment level names that; nothing read.
    plan = plan_of("switched")
    plan.chain.wal = WalRange(1, "000000010000000000000002", "000000010000000000000005", 4, "the end of the archive")
    proof, reader = prove("switched", plan=plan)
    assert reader.asked == [] and proof.failures[0].startswith("recovery did not reach the planned end")
    # One segment short: the last two are read (the one redo ended in is), and the planned last was never
    # restored: the segment level's reasons stand, nothing is read.
    plan.chain.wal = WalRange(1, "000000010000000000000002", "000000010000000000000004", 3, "the end of the archive")
    assert prove("switched", plan=plan)[1].asked == []


def test_a_segment_level_failure_still_gets_the_record_level_reason():
    proof, reader = prove("payload")
    assert proof.failures[0].startswith("recovery ended early at segment 000000010000000000000003: the server said")
    assert len(reader.asked) == 2 and proof.failures[1].startswith("WAL segment 000000010000000000000003")


def test_a_point_whose_segment_the_server_never_restored_is_left_to_the_segment_level():
    log = case_text("pitr", "server.log").replace('restored log file "000000010000000000000003"', "restored nothing")
    proof, reader = prove("pitr", log=log)
    assert reader.asked == [] and proof.failures[0].startswith("1 planned WAL segment(s) were never restored")


@pytest.mark.parametrize(("change", "error"), [
    ((f"@@fetched 000000010000000000000003 {SWITCHED_ID}\n", "@@fetch-error archive-get of 000000010000000000000003 exited 82:\n"
      "ERROR: [082]: unable to find\n"),
     "pgbackrest archive-get failed (archive-get of 000000010000000000000003 exited 82: ERROR: [082]: unable to "
     "find), although the server restored the same segments"),
    ((f"@@fetched 000000010000000000000002 {SWITCHED_ID}\n", ""), "the target fetched 000000010000000000000003"),
    ((f"@@fetched 000000010000000000000002 {SWITCHED_ID}\n@@fetched 000000010000000000000003 {SWITCHED_ID}\n", ""),
     "the target fetched nothing"),
    (("WAL block size:                       8192\n", ""),
     "pg_controldata in the target did not give the cluster's system identifier and WAL page and segment sizes"),
    (("Bytes per WAL segment:                16777216", "Bytes per WAL segment:                67108864"),
     "the cluster's WAL segments are 67108864 bytes (pg_control), the plan named them for 16777216-byte segments "
     "(the chain's wal-segment-size rule says what told it; where that is postgres.wal_segment_size, set it to the "
     "cluster's size)"),
    (("@@exit 0", "@@exit"), "pg_waldump did not run in the target: no answer"),
    (("@@stderr", "@@stderr\npg_waldump: warning: odd"), "pg_waldump exited 0 yet said \"pg_waldump: warning: odd\""),
    (("@@exit 0\n", "@@exit 1\n"), "pg_waldump exited 1: no output"),
    (("@@exit 0\n", "@@exit 1\n"), "pg_waldump exited 1: no output"),
])
def test_an_answer_the_rules_cannot_judge_is_an_error_naming_it(change, error):
    read = case_text("switched", "wal-end-read.out").replace(*change)
    proof, _ = prove("switched", read=read)
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors == ["reading 000000010000000000000002, 000000010000000000000003 to prove the end of redo to "
                            f"the record: {error}"]


def test_a_tool_that_would_not_run_or_said_something_else_is_an_error():
    read = case_text("switched", "wal-end-read.out")
    missing = read.replace("@@exit 0\n", "@@exit 127\n").replace("@@stderr", "@@stderr\nbash: pg_waldump: not found")
    assert prove("switched", read=missing)[0].errors[0].endswith("pg_waldump exited 127: bash: pg_waldump: not found")
    opened = read.replace("@@exit 0\n", "@@exit 1\n").replace(
        "@@stderr", '@@stderr\npg_waldump: error: could not find file "000000010000000000000003": No such file')
    assert prove("switched", read=opened)[0].errors[0].endswith(
        'pg_waldump exited 1: pg_waldump: error: could not find file "000000010000000000000003": No such file')


def test_redo_that_ended_before_or_after_the_archives_last_record_is_an_error():
    log = case_text("switched", "server.log")
    early = log.replace("redo done at 0/3010908", "redo done at 0/30108A0")
    proof, _ = prove("switched", log=early)
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors == [
        "redo done at 0/30108A0, before the last record the planned archive's WAL holds (XLOG SWITCH at 0/3010908, "
        "read by pg_waldump from 000000010000000000000002, 000000010000000000000003): the records from 0/30108A0 on "
        "were not replayed, although they decode; the server said \"LOG: completed backup recovery with redo LSN "
        "0/2000028 and end LSN 0/2000100; LOG: consistent recovery state reached at 0/2000100\""]
    late = log.replace("redo done at 0/3010908", "redo done at 0/3010920")
    proof, _ = prove("switched", log=late)
    assert proof.errors == [
        "redo done at 0/3010920, after the last record the planned archive's WAL holds (XLOG SWITCH at 0/3010908, "
        "read by pg_waldump from 000000010000000000000002, 000000010000000000000003): the server replayed WAL the "
        "planned archive does not hold; the server said \"LOG: completed backup recovery with redo LSN 0/2000028 and "
        "end LSN 0/2000100; LOG: consistent recovery state reached at 0/2000100\""]


def test_a_stop_inside_a_segment_fails_even_where_the_tail_or_the_server_tell_less():
    proof, _ = prove("payload", tail="@@cmp 2\ncmp: no such file\n")
    assert ("with the bytes after it not examined (cmp could not compare the segment with zeros: 2 cmp: no such "
            "file); the server stopped there too") in proof.failures[1]
    log = case_text("payload", "server.log").replace("redo done at 0/300C300", "redo done at 0/300C2C0")
    proof, _ = prove("payload", log=log)
    assert "records the server could not read; the server's redo done at 0/300C2C0, so every commit after " \
           "0/300C300 is missing from the restore" in proof.failures[1]
    proof, _ = prove("payload", tail="@@cmp 1\nf /dev/zero differ: byte 1, line 1\n")
    assert "records the server could not read; the server stopped there too (redo done at 0/300C300), so every " \
           "commit after 0/300C300 is missing from the restore; the server said" in proof.failures[1]


# -- more of the rules' edges ----------------------------------------------------------------------------

def test_the_record_level_is_not_asked_after_an_error_or_without_a_wal_range():
    parsed = parse_server_log(case_text("switched", "server.log"))
    reader = Reader(case_text("switched", "wal-end-read.out"))
    judged = prove_to_the_record(RecoveryProof(errors=["unsure"]), parsed, plan_of("switched"), MB16, reader)
    assert judged.errors == ["unsure"] and reader.asked == []
    plan = plan_of("switched")
    plan.chain.wal = None
    assert prove_to_the_record(RecoveryProof(proofs=["p"]), parsed, plan, MB16, reader).proofs == ["p"]
    assert reader.asked == []


def test_redo_two_segments_short_reads_nothing_even_with_the_last_two_restored():
    log = case_text("switched", "server.log").replace(
        'LOG:  restored log file "000000010000000000000003" from archive',
        'LOG:  restored log file "000000010000000000000003" from archive\n2026-11-28 09:41:30.000 UTC [71] LOG:  '
        'restored log file "000000010000000000000004" from archive\n2026-11-28 09:41:30.000 UTC [71] LOG:  '
        'restored log file "000000010000000000000005" from archive', 1)
    plan = plan_of("switched")
    plan.chain.wal = WalRange(1, "000000010000000000000002", "000000010000000000000005", 4, "the end of the archive")
    proof, reader = prove("switched", log=log, plan=plan)
    assert reader.asked == [] and proof.failures[0].startswith("recovery did not reach the planned end")


def test_a_point_reads_the_next_planned_segment_too_and_not_without_its_stop_line():
    log = case_text("pitr", "server.log").replace(
        'LOG:  restored log file "000000010000000000000003" from archive',
        'LOG:  restored log file "000000010000000000000003" from archive\n2026-11-28 09:44:00.640 UTC [71] LOG:  '
        'restored log file "000000010000000000000004" from archive', 1)
    plan = plan_of("pitr")
    assert plan.chain.wal is not None
    plan.chain.wal = WalRange(1, "000000010000000000000002", "000000010000000000000004", 3, "the end of the archive")
    read = case_text("pitr", "wal-end-read.out")
    fetched = next(line for line in read.splitlines() if line.startswith("@@fetched 000000010000000000000003"))
    both = read.replace(fetched, fetched + "\n" + fetched.replace("0003 ", "0004 "))
    proof, reader = prove("pitr", read=both, log=log, plan=plan)
    assert reader.asked[0][1] == ["000000010000000000000003", "000000010000000000000004"]
    assert proof.proofs[1].startswith("WAL read with pg_waldump from 000000010000000000000003, "
                                      "000000010000000000000004: the record at 0/300AB98 is")
    no_record = both.replace(both[both.index("@@at\n") + 5:both.index("@@last")], "")
    assert prove("pitr", read=no_record, log=log, plan=plan)[0].errors[0].startswith(
        "redo done at 0/300AB98, but pg_waldump reading 000000010000000000000003, 000000010000000000000004 finds")
    silent = "\n".join(line for line in case_text("pitr", "server.log").splitlines() if "recovery stopping" not in line)
    proof, reader = prove("pitr", log=silent)
    assert reader.asked == [] and proof.failures[0].startswith("recovery to 2026-11-28T09:57:53.480643+00:00: the "
                                                               "server never said it stopped")


def test_an_archive_of_one_segment_is_read_alone_and_named():
    plan = plan_of("running")
    plan.chain.wal = WalRange(1, "000000010000000000000004", "000000010000000000000004", 1, "the end of the archive")
    read = case_text("running", "wal-end-read.out")
    one = "\n".join(line for line in read.splitlines() if not line.startswith("@@fetched 000000010000000000000003"))
    proof, reader = prove("running", read=one, plan=plan)
    assert reader.asked[0][1] == ["000000010000000000000004"]
    assert proof.proofs[1].startswith("WAL read with pg_waldump from 000000010000000000000004 (pgbackrest "
                                      "archive-get): its last record is Heap INSERT")
    assert proof.proofs[1].endswith("past the end of 000000010000000000000004, into a segment the archive does not "
                                    "hold (not archived yet)")


def test_more_answers_the_rules_cannot_judge():
    read = case_text("switched", "wal-end-read.out")
    asked = "reading 000000010000000000000002, 000000010000000000000003 to prove the end of redo to the record: "
    other = read.replace("@@fetched 000000010000000000000002", "@@fetched 000000010000000000000004")
    assert prove("switched", read=other)[0].errors == [
        asked + "the target fetched 000000010000000000000004, 000000010000000000000003"]
    nothing = read[:read.index("@@last\n") + 7] + "@@stderr\n"
    assert prove("switched", read=nothing)[0].errors == [asked + "pg_waldump decoded no record in them (exit 0)"]
    system = next(line for line in read.splitlines() if line.startswith("Database system identifier"))
    assert prove("switched", read=read.replace(system + "\n", ""))[0].errors == [
        asked + "pg_controldata in the target did not give the cluster's system identifier and WAL page and segment "
                "sizes"]
    fetched = next(line for line in read.splitlines() if line.startswith("@@fetched 000000010000000000000003"))
    assert prove("switched", read=read.replace(fetched, "@@fetched 000000010000000000000003"))[0].errors == [
        asked + "no system identifier read from the first page of 000000010000000000000003"]
    unread = read.replace(f" {SWITCHED_ID}\n@@fetched", "\n@@fetched").replace(fetched, "@@fetched "
                                                                                 "000000010000000000000003")
    assert prove("switched", read=unread)[0].errors == [
        asked + "no system identifier read from the first page of 000000010000000000000002, 000000010000000000000003"]
    # Stopped with an error after a switch in the last segment: the next record is in no segment read.
    stopped = read.replace("@@exit 0", "@@exit 1").replace(
        "@@stderr", "@@stderr\npg_waldump: error: error in WAL record at 0/3010908: odd")
    proof, reader = prove("switched", read=stopped)
    assert proof.failures == [] and proof.proofs == [] and len(reader.asked) == 1
    assert proof.errors == ["pg_waldump stopped after XLOG SWITCH at 0/3010908, whose next record at 0/4000000 is in "
                            "none of 000000010000000000000002, 000000010000000000000003: pg_waldump said "
                            "\"pg_waldump: error: error in WAL record at 0/3010908: odd\""]


def test_a_silent_server_is_said_to_give_no_reason():
    text = "\n".join(line for line in case_text("payload", "server.log").splitlines()
                     if not any(word in line for word in ("incorrect resource manager", "completed backup recovery",
                                                          "consistent recovery")))
    assert "; the server's log gives no reason; pg_waldump said \"" in prove("payload", log=text)[0].failures[0]


def test_a_segment_of_another_cluster_fails_naming_both_system_identifiers():
    # The demo's last segment replaced by the other demo cluster's, named by its own SHA-1: pg_waldump reads
    # on into it (it checks no system identifier); its first page's header names the other system.
    proof, reader = prove("foreign")
    assert proof.proofs == [] and len(reader.asked) == 1
    assert proof.failures[-1] == (
        "WAL segment(s) 00000001000000000000000D (system identifier 7713160047663816732) of the archive belong to "
        "another cluster: the restored cluster's system identifier is 7713160052182396957 (pg_control); the server "
        "said \"LOG: completed backup recovery with redo LSN 0/C000028 and end LSN 0/C080070; LOG: consistent "
        "recovery state reached at 0/C080070; LOG: WAL file is from different database system: WAL file database "
        "system identifier is 7713160047663816732, pg_control database system identifier is 7713160052182396957\"")
    # Both segments another cluster's (the restored cluster's identifier other than both): both named.
    read = case_text("foreign", "wal-end-read.out").replace("identifier:           7713160052182396957",
                                                            "identifier:           7713160052182396958")
    assert prove("foreign", read=read)[0].failures[-1].startswith(
        "WAL segment(s) 00000001000000000000000C (system identifier 7713160052182396957), 00000001000000000000000D "
        "(system identifier 7713160047663816732) of the archive belong to another cluster: the restored cluster's "
        "system identifier is 7713160052182396958 (pg_control)")
    # The server's words are not what decides: without them the segment still fails.
    text = "\n".join(line for line in case_text("foreign", "server.log").splitlines()
                     if "different database system" not in line)
    proof, _ = prove("foreign", log=text)
    assert len(proof.failures) == 2 and proof.failures[1].startswith("WAL segment(s) 00000001000000000000000D")


def test_a_last_segment_of_zeros_after_a_switch_is_named_from_its_start():
    # Its first page has no header, so no system identifier (0): not another cluster's, the WAL missing.
    proof, reader = prove("zeroed-after-switch")
    assert reader.asked[1] == ("tail", "00000001000000000000000D", 0, parse_lsn("0/D002000"), MB16)
    assert proof.failures[-1].startswith(
        "WAL segment 00000001000000000000000D of the archive ends early: its records stop at 0/D000000, inside the "
        "segment, after XLOG SWITCH at 0/C000138, with zeros from there (offset 0) to the end of the segment")


# pg_waldump 15's line for a prepared transaction's COMMIT PREPARED (real, from a 2PC workload): its xid
# is in the description, the header's tx is the committing session's (0). The server's stop names 792.
PREPARED = ("rmgr: Transaction len (rec/tot):     46/    46, tx:          0, lsn: 0/0300AB98, "
            "prev 0/0300AB60, desc: COMMIT_PREPARED 792: 2026-11-28 09:57:53.481396 UTC")


@pytest.mark.parametrize(("said", "proven"), [
    ("recovery stopping before commit of transaction 792, time 2026-11-28 09:57:53.481396+00", True),
    ("recovery stopping before commit of transaction 0, time 2026-11-28 09:57:53.481396+00", False),
    ("recovery stopping before commit of transaction 793, time 2026-11-28 09:57:53.481396+00", False),
    ("recovery stopping before abort of transaction 792, time 2026-11-28 09:57:53.481396+00", False),
])
def test_a_stop_at_a_commit_prepared_is_its_prepared_transactions(said: str, proven: bool) -> None:
    from verification.engines.postgres.recovery_proof import RecoveryProof
    from verification.engines.postgres.wal_end import WalRead, _prove_stop, parse_record

    record = parse_record(PREPARED)
    assert record is not None
    read = WalRead(segments=["000000010000000000000003"], at_redo_done=record, last=record, exit_code=0)
    proof = _prove_stop(RecoveryProof(proofs=["segment level"]), said, record.lsn, read, record)
    assert bool(proof.errors) is not proven
    if proven:
        assert proof.proofs[-1].endswith("of transaction 792, the one the server stopped for")
    else:
        assert "(transaction 792): the stop is not the record the WAL holds" in proof.errors[0]


def test_a_live_repository_s_segment_archived_after_the_plan_is_read_as_the_archive_s_end() -> None:
    # The 'running' capture (a busy cluster): the server restored 02, 03, 04 and redo ended in 04. Planned
    # before 04 was archived (production archiving while the restore runs), the plan's range is 02..03:
    # the server's newest segment on the plan's last timeline is the archive's end, read with the one before.
    plan = plan_of("running")
    plan.chain.wal = WalRange(1, "000000010000000000000002", "000000010000000000000003", 2, "the end of the archive")
    proof, reader = prove("running", plan=plan)
    assert reader.asked[0][:2] == ("read", ["000000010000000000000003", "000000010000000000000004"])
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.proofs[-1].startswith("WAL read with pg_waldump from 000000010000000000000003, "
                                       "000000010000000000000004 (pgbackrest archive-get): its last record is ")
