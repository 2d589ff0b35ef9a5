"""The end of recovery proven from real PostgreSQL 15 server logs: clean, and with bad WAL.

The faulty logs were captured from real restores of the demo repository with its last segment
replaced by another cluster's segment, by zeros, and by a truncated file (tests/faults).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from tests.conftest import fixture_text
from tests.unit.factories import complete_plan
from verification.engines.postgres.recovery_proof import prove_recovery
from verification.engines.postgres.serverlog import parse_server_log
from verification.model import RestorePlan, WalRange

MB16 = 16 * 1024 * 1024


def plan_for(first: str, last: str, stop_at: datetime | None = None) -> RestorePlan:
    plan = complete_plan()
    segments = int(last, 16) - int(first, 16) + 1
    plan.chain.wal = WalRange(1, first, last, segments, "the end of the archive")
    plan.stop_at = stop_at
    return plan


def prove(log_name: str, plan: RestorePlan):  # type: ignore[no-untyped-def]
    return prove_recovery(parse_server_log(fixture_text(log_name)), plan, MB16)


def test_a_clean_latest_recovery_is_proven_from_the_log():
    proof = prove("server-recovery-latest.log", plan_for("000000010000000000000008", "00000001000000000000000A"))
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs == [
        "server log: redo done at 0/A000088 (in segment 00000001000000000000000A), the plan's last segment is "
        "00000001000000000000000A; all 3 planned segments 000000010000000000000008 to 00000001000000000000000A "
        "restored from the archive; no line ending recovery early"]


def test_a_segment_of_another_system_fails_quoting_the_server_and_naming_the_segment():
    proof = prove("server-recovery-foreign-segment.log",
                  plan_for("00000001000000000000000C", "00000001000000000000000D"))
    assert proof.proofs == []
    assert proof.failures[0].startswith(
        'recovery ended early at segment 00000001000000000000000D: the server said "LOG: WAL file is from different '
        'database system: WAL file database system identifier is 7711524847910051867, pg_control database system '
        'identifier is 7711524848091865115"; redo done at 0/C000100 (in segment 00000001000000000000000C)')
    assert proof.failures[1].startswith("recovery did not reach the planned end: redo done at 0/C000100 (in segment "
                                        "00000001000000000000000C), before 00000001000000000000000D")


def test_a_zeroed_segment_fails_with_the_servers_words():
    proof = prove("server-recovery-zeroed-segment.log", plan_for("00000001000000000000000C", "00000001000000000000000D"))
    assert proof.failures[0].startswith('recovery ended early at segment 00000001000000000000000D: the server said '
                                        '"LOG: invalid magic number 0000 in log segment 00000001000000000000000D, '
                                        'offset 0"')


def test_a_segment_the_archive_could_not_deliver_fails_naming_it_and_the_archive_error():
    proof = prove("server-recovery-truncated-segment.log",
                  plan_for("00000001000000000000000C", "00000001000000000000000D"))
    assert proof.failures == [
        "the WAL archive could not deliver a segment fetching segment 00000001000000000000000D: pgBackRest "
        "archive-get ERROR: [042]: unable to get 00000001000000000000000D: repo1: 15-1/0000000100000000/"
        "00000001000000000000000D-83c6cdd74f7f84324f15a60ad1c40eefe227010f.gz [FormatError] unexpected eof in "
        "compressed data; redo done at 0/C000100 (in segment 00000001000000000000000C)",
        "recovery did not reach the planned end: redo done at 0/C000100 (in segment 00000001000000000000000C), "
        "before 00000001000000000000000D, the plan's last WAL segment (1 segment(s) not replayed); the writes after "
        "0/C000100 are missing from the restore",
        "1 planned WAL segment(s) were never restored from the archive: 00000001000000000000000D"]


def test_redo_one_segment_short_of_the_plan_fails_even_without_any_error_line():
    proof = prove("server-recovery-latest.log", plan_for("000000010000000000000008", "00000001000000000000000B"))
    assert proof.proofs == []
    assert proof.failures[0].startswith("recovery did not reach the planned end: redo done at 0/A000088 (in segment "
                                        "00000001000000000000000A), before 00000001000000000000000B")
    assert proof.failures[1] == ("1 planned WAL segment(s) were never restored from the archive: "
                                 "00000001000000000000000B")


def test_a_segment_of_the_range_that_was_never_restored_is_named():
    text = fixture_text("server-recovery-latest.log").replace(
        'LOG:  restored log file "000000010000000000000009" from archive', "LOG:  something else")
    proof = prove_recovery(parse_server_log(text), plan_for("000000010000000000000008", "00000001000000000000000A"),
                           MB16)
    assert proof.failures == ["1 planned WAL segment(s) were never restored from the archive: "
                              "000000010000000000000009"]


def test_recovery_stopping_when_no_target_was_asked_fails():
    text = fixture_text("server-recovery-latest.log").replace(
        "LOG:  consistent recovery state reached at 0/8000100",
        "LOG:  recovery stopping before commit of transaction 745, time 2026-11-22 19:50:44.1+00")
    proof = prove_recovery(parse_server_log(text), plan_for("000000010000000000000008", "00000001000000000000000A"),
                           MB16)
    assert proof.failures == ['no recovery target was asked, yet the server said "recovery stopping before commit of '
                              'transaction 745, time 2026-11-22 19:50:44.1+00": recovery stopped before the end of '
                              'the WAL']


def test_a_point_in_time_recovery_is_proven_by_the_servers_stop_line():
    at = datetime.fromisoformat("2026-11-22T20:02:09.200000+00:00")
    proof = prove("server-recovery-pitr.log", plan_for("000000010000000000000009", "00000001000000000000000C", at))
    assert proof.failures == [] and proof.errors == []
    assert proof.proofs[0].startswith('server log: "recovery stopping before commit of transaction 2740, time '
                                      '2026-11-22 20:02:10.037546+00"; redo done at 0/AD52810 (in segment '
                                      '00000001000000000000000A); all 2 planned segments 000000010000000000000009 '
                                      'to 00000001000000000000000A restored')
    assert proof.proofs[0].endswith("restored from the archive; no line ending recovery early")


def test_a_point_in_time_recovery_without_the_stop_line_is_not_proven():
    at = datetime.fromisoformat("2026-11-22T20:02:09.200000+00:00")
    text = "\n".join(line for line in fixture_text("server-recovery-pitr.log").splitlines()
                     if "recovery stopping" not in line)
    proof = prove_recovery(parse_server_log(text), plan_for("000000010000000000000009", "00000001000000000000000C",
                                                            at), MB16)
    assert proof.proofs == []
    assert proof.failures[0].startswith("recovery to 2026-11-22T20:02:09.200000+00:00: the server never said it "
                                        "stopped for the target")


def test_a_log_without_the_end_of_redo_or_a_plan_without_wal_is_an_error_not_a_pass():
    text = "\n".join(line for line in fixture_text("server-recovery-latest.log").splitlines()
                     if "redo done at" not in line)
    proof = prove_recovery(parse_server_log(text), plan_for("000000010000000000000008", "00000001000000000000000A"),
                           MB16)
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors == ["the server came online but its log does not say where redo ended (no 'redo done at' "
                            "line), so the point reached is unproven"]
    plan = plan_for("000000010000000000000008", "00000001000000000000000A")
    plan.chain.wal = None
    assert prove("server-recovery-latest.log", plan).errors == [
        "the plan has no WAL range, so the end of recovery cannot be checked against it"]


def _latest(before_redo_done: str = "", replace: tuple[str, str] = ("", "")) -> str:
    text = fixture_text("server-recovery-latest.log").replace(*replace)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "LOG:  redo done at" in line)
    return "\n".join([*lines[:at], *before_redo_done.splitlines(), *lines[at:]]) + "\n"


LATEST = ("000000010000000000000008", "00000001000000000000000A")


DONE_IN_A = "redo done at 0/A000088 (in segment 00000001000000000000000A)"


@pytest.mark.parametrize(("line", "failure"), [
    # The segment a server line names is the one reported...
    ("2026-11-22 19:51:08.600 UTC [70] LOG:  invalid magic number 0000 in log segment 000000010000000000000009, "
     "offset 0",
     'recovery ended early at segment 000000010000000000000009: the server said "LOG: invalid magic number 0000 in '
     f'log segment 000000010000000000000009, offset 0"; {DONE_IN_A}'),
    # ...and an early end that names none, in the last planned segment, names that segment.
    ("2026-11-22 19:51:08.600 UTC [70] LOG:  invalid record length at 0/A0000A0: wanted 24, got 0",
     'recovery ended early at segment 00000001000000000000000A: the server said "LOG: invalid record length at '
     f'0/A0000A0: wanted 24, got 0"; {DONE_IN_A}'),
    # An archive error naming no segment is still a failure.
    ("ERROR: [103]: unable to find a valid repository",
     "the WAL archive could not deliver a segment: pgBackRest archive-get ERROR: [103]: unable to find a valid "
     f"repository; {DONE_IN_A}"),
])
def test_a_line_ending_recovery_early_is_quoted_with_its_segment(line: str, failure: str) -> None:
    proof = prove_recovery(parse_server_log(_latest(line)), plan_for(*LATEST), MB16)
    assert proof.failures == [failure]


def test_a_segment_restored_from_another_timeline_does_not_prove_the_planned_one():
    # The plan follows timeline 1 to A; the server replayed A from timeline 2 (another branch of WAL
    # with the same segment number): A of timeline 1 was never replayed.
    text = _latest(replace=('restored log file "00000001000000000000000A"', 'restored log file "00000002000000000000000A"'))
    proof = prove_recovery(parse_server_log(text), plan_for(*LATEST), MB16)
    assert (proof.proofs, proof.errors) == ([], [])
    assert proof.failures == ["1 planned WAL segment(s) were never restored from the archive: "
                              "00000001000000000000000A (restored instead: 00000002000000000000000A)"]


def test_every_other_timeline_restored_instead_is_named_in_order():
    text = _latest(replace=('restored log file "00000001000000000000000A"', 'restored log file "00000002000000000000000A"'))
    text = text.replace('restored log file "00000002000000000000000A"', 'restored log file "00000003000000000000000A"', 1)
    proof = prove_recovery(parse_server_log(text), plan_for(*LATEST), MB16)
    assert proof.failures == ["1 planned WAL segment(s) were never restored from the archive: "
                              "00000001000000000000000A (restored instead: 00000002000000000000000A, "
                              "00000003000000000000000A)"]


def test_and_vice_versa_timeline_one_does_not_stand_in_for_the_timeline_the_plan_switched_to():
    # The plan switches to timeline 2 at segment A (its history file); the server replayed timeline 1's A.
    plan = plan_for(*LATEST)
    assert plan.chain.wal is not None
    plan.chain.wal = replace(plan.chain.wal, timeline=2, last="00000002000000000000000A", timelines=((1, 0), (2, 0xA)))
    proof = prove("server-recovery-latest.log", plan)
    assert proof.failures == ["1 planned WAL segment(s) were never restored from the archive: "
                              "00000002000000000000000A (restored instead: 00000001000000000000000A)"]


SWITCH = ("000000010000000000000002", "000000020000000000000008")


def switch_plan(timelines: tuple[tuple[int, int], ...]) -> RestorePlan:
    """The plan of the real timeline-switch restore: timeline 1 from the backup's segment 2, then
    timeline 2 from segment 6, where its history file (fixture .history: 1, 0/6000000) left timeline 1."""
    plan = complete_plan()
    plan.chain.wal = WalRange(2, *SWITCH, 7, "the end of the archive, across timelines 1 -> 2", timelines)
    return plan


def test_a_switch_of_timeline_in_the_middle_is_proven_where_the_history_file_puts_it():
    # A real PostgreSQL 15.18 restore (scripts/capture-postgres-timeline-recovery.sh).
    assert fixture_text("server-recovery-timeline-switch.history") == "1\t0/6000000\tno recovery target specified\n"
    proof = prove("server-recovery-timeline-switch.log", switch_plan(((1, 0), (2, 6))))
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.proofs == [
        "server log: redo done at 0/80000D8 (in segment 000000020000000000000008), the plan's last segment is "
        "000000020000000000000008; all 7 planned segments 000000010000000000000002 to 000000020000000000000008 "
        "restored from the archive; no line ending recovery early"]


@pytest.mark.parametrize(("timelines", "missing"), [
    # A plan that puts the switch one segment later or earlier than the server did is not proven.
    (((1, 0), (2, 7)), "000000010000000000000006 (restored instead: 000000020000000000000006)"),
    (((1, 0), (2, 5)), "000000020000000000000005 (restored instead: 000000010000000000000005)"),
    # Nor one that never switches (the backup's timeline only, or timeline 2 throughout).
    (((1, 0),), "000000010000000000000006 (restored instead: 000000020000000000000006), "
                "000000010000000000000007 (restored instead: 000000020000000000000007), "
                "000000010000000000000008 (restored instead: 000000020000000000000008)"),
])
def test_the_switch_must_be_where_the_plan_says(timelines: tuple[tuple[int, int], ...], missing: str) -> None:
    proof = prove("server-recovery-timeline-switch.log", switch_plan(timelines))
    assert proof.proofs == []
    count = missing.count("restored instead")
    assert proof.failures[-1] == f"{count} planned WAL segment(s) were never restored from the archive: {missing}"


def test_a_plan_without_timelines_is_on_its_own_timeline_throughout():
    plan = switch_plan(())
    proof = prove("server-recovery-timeline-switch.log", plan)
    assert proof.failures[-1] == (
        "4 planned WAL segment(s) were never restored from the archive: "
        "000000020000000000000002 (restored instead: 000000010000000000000002), "
        "000000020000000000000003 (restored instead: 000000010000000000000003), "
        "000000020000000000000004 (restored instead: 000000010000000000000004), "
        "000000020000000000000005 (restored instead: 000000010000000000000005)")


def test_at_most_ten_missing_segments_are_spelled_out():
    eleven = prove("server-recovery-latest.log", plan_for("000000010000000000000008", "000000010000000000000015"))
    assert eleven.failures[1] == (
        "11 planned WAL segment(s) were never restored from the archive: " + ", ".join(
            f"0000000100000000000000{n:02X}" for n in range(0x0B, 0x15)) + " and 1 more")
    ten = prove("server-recovery-latest.log", plan_for("000000010000000000000008", "000000010000000000000014"))
    assert ten.failures[1].endswith("00000001000000000000000B, 00000001000000000000000C, 00000001000000000000000D, "
                                    "00000001000000000000000E, 00000001000000000000000F, 000000010000000000000010, "
                                    "000000010000000000000011, 000000010000000000000012, 000000010000000000000013, "
                                    "000000010000000000000014")
