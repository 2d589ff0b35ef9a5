"""Prove from the server's own log that recovery replayed the WAL the plan said it would.

A server that comes online proves little by itself: PostgreSQL ends archive recovery, promotes
and accepts connections whenever it cannot read the next WAL record, whether the archive ended or
a segment in the middle was another cluster's, zeroed, or cut short. So "restored to latest" is
claimed only when the log shows all of:

- redo ended (`redo done at <LSN>`) in or beyond the plan's last WAL segment;
- every segment of the planned range was fetched (`restored log file "<segment>" from archive`), each
  on the timeline the plan expects for it: a segment number on another timeline is other WAL (the
  abandoned branch of a fork, or a newer timeline the plan does not follow), so it proves nothing.
  The timeline changes where the plan's history file says it does, and only there;
- no line that ends recovery early was written before redo ended (another system's WAL, an
  invalid record, a bad page address or magic number, a pgBackRest archive-get error), and no
  `recovery stopping` when no target was asked.

For a point in time the same holds up to the segment where redo stopped, and the server must
say it stopped for the target (`recovery stopping before|after ...`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from verification.engines.postgres.serverlog import SEGMENT_NAME_RE, RecoveryLog
from verification.engines.postgres.wal import Segment, format_lsn, parse_segment
from verification.model import RestorePlan, WalRange

# How many missing segment names a reason spells out.
NAMES_SHOWN = 10


@dataclass
class RecoveryProof:
    proofs: list[str] = field(default_factory=list)
    # What is wrong with the backups' WAL: verdict "failed".
    failures: list[str] = field(default_factory=list)
    # What the log does not let us judge: verdict "error".
    errors: list[str] = field(default_factory=list)


def _names(segments: list[str]) -> str:
    shown = ", ".join(segments[:NAMES_SHOWN])
    return shown + (f" and {len(segments) - NAMES_SHOWN} more" if len(segments) > NAMES_SHOWN else "")


def _planned_segments(steps: tuple[tuple[int, int], ...]) -> Callable[[int], Segment]:
    """The segment the plan expects for a number: on the newest timeline that has begun by then."""
    def planned(number: int) -> Segment:
        timeline = steps[0][0]
        for later, begins in steps[1:]:
            if number >= begins:
                timeline = later
        return Segment(timeline, number)
    return planned


def planned_segment(wal: WalRange, first: Segment) -> Callable[[int], Segment]:
    """The segment a plan's WAL range expects for a number (on the timeline that supplies it)."""
    return _planned_segments(wal.timelines or ((wal.timeline, first.number),))


def _missing(segment: Segment, restored: set[Segment], segment_size: int) -> str:
    """A planned segment's name, with the same-numbered segments of other timelines restored instead."""
    instead = sorted(s.name(segment_size) for s in restored if s.number == segment.number)
    return segment.name(segment_size) + (f" (restored instead: {', '.join(instead)})" if instead else "")


def prove_recovery(log: RecoveryLog, plan: RestorePlan, segment_size: int) -> RecoveryProof:
    proof = RecoveryProof()
    wal = plan.chain.wal
    if wal is None:
        proof.errors.append("the plan has no WAL range, so the end of recovery cannot be checked against it")
        return proof
    first, last = parse_segment(wal.first, segment_size), parse_segment(wal.last, segment_size)
    restored = {parse_segment(name, segment_size) for name in log.segments_restored}
    planned = _planned_segments(wal.timelines or ((wal.timeline, first.number),))

    def name_of(number: int) -> str:
        return planned(number).name(segment_size)

    if log.redo_done_lsn is None:
        proof.errors.append("the server came online but its log does not say where redo ended "
                            "(no 'redo done at' line), so the point reached is unproven")
        return proof
    done = log.redo_done_lsn // segment_size
    done_at = f"redo done at {format_lsn(log.redo_done_lsn)} (in segment {name_of(done)})"

    for line in log.early_end:
        named = SEGMENT_NAME_RE.search(line)
        where = named.group(0) if named else name_of(done + 1 if done < last.number else done)
        proof.failures.append(f"recovery ended early at segment {where}: the server said \"{line}\"; {done_at}")
    for line in log.archive_get_errors:
        named = SEGMENT_NAME_RE.search(line)
        where = f" fetching segment {named.group(0)}" if named else ""
        proof.failures.append(f"the WAL archive could not deliver a segment{where}: {line}; {done_at}")

    if plan.stop_at is None:
        if log.stop_detail is not None:
            proof.failures.append(f"no recovery target was asked, yet the server said \"{log.stop_detail}\": "
                                  "recovery stopped before the end of the WAL")
        if done < last.number:
            proof.failures.append(
                f"recovery did not reach the planned end: {done_at}, before {wal.last}, the plan's last WAL "
                f"segment ({last.number - done} segment(s) not replayed); the writes after "
                f"{format_lsn(log.redo_done_lsn)} are missing from the restore")
        end = last.number
    else:
        if log.stop_detail is None:
            proof.failures.append(f"recovery to {plan.stop_at.isoformat()}: the server never said it stopped for "
                                  f"the target (no 'recovery stopping' line); {done_at}")
        end = min(done, last.number)

    missing = [_missing(planned(n), restored, segment_size) for n in range(first.number, end + 1)
               if planned(n) not in restored]
    if missing:
        proof.failures.append(f"{len(missing)} planned WAL segment(s) were never restored from the archive: "
                              f"{_names(missing)}")
    if proof.failures or proof.errors:
        return proof
    replayed = f"all {end - first.number + 1} planned segments {wal.first} to {name_of(end)} restored from the archive"
    if plan.stop_at is None:
        proof.proofs.append(f"server log: {done_at}, the plan's last segment is {wal.last}; {replayed}; "
                            "no line ending recovery early")
    else:
        proof.proofs.append(f"server log: \"{log.stop_detail}\"; {done_at}; {replayed}; "
                            "no line ending recovery early")
    return proof
