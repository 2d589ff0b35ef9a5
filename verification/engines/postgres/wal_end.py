"""The end of redo proven to the record: where the planned archive's WAL really ends, and why.

The server's log says where redo ended (`redo done at <LSN>`: the start of the last record it
replayed, measured on PostgreSQL 15) but not why: the archive ran out, or a record could not be
decoded. Its words about a bad record are no proof either way (a message level, a language, a
message nobody listed), so the WAL itself is read: the last segments of the planned range, fetched
from the repository by `pgbackrest archive-get` (decompressed and decrypted as the server got them),
decoded by `pg_waldump` of the server's own major version (the same reader code as the server's).

"Latest" is proven only when the server's `redo done at` is the last record pg_waldump decodes, and
the WAL ends in one of the ways a healthy archive ends (an allow-list, each seen on real clusters):

- an XLOG SWITCH record (`pg_switch_wal`, `pgbackrest check`, archive_timeout, a backup's stop, the
  clean shutdown of a server that archives, which switches first): the
  rest of the segment is padding, and the archive holds no later segment on this timeline;
- a record that continues into the next segment, which the archive does not hold yet (the segment
  filled up, was archived, and the next one is still being written): the reader ran off the end of
  the archive's last segment.

Each fetched segment must be this cluster's: the system identifier in its first page's header is
pg_control's (pg_waldump checks none, and reads on into another cluster's WAL whose prev-links happen
to match); another is "failed", naming both.

A pg_waldump over the fetched segments that ends without an error means the reader needed WAL
beyond them, nothing else. Any other ending is the reader stopping *inside* a segment the archive
holds under a complete name: PostgreSQL archives a segment only once it is full or switched (a
promotion's unfinished one goes in as `.partial`, which recovery never fetches), so a complete
segment whose records stop before its end, zeros or not after that point, has lost WAL the server
wrote: "failed", naming the segment, the LSN, and the server's and pg_waldump's words. A stop the
tools describe in a way not covered here is "error".

For a point in time the server's stop line (`recovery stopping before|after commit|abort of
transaction N, time T`) is proven against the record at `redo done at` (the record the stop line
names, measured on PostgreSQL 15): a transaction record of that transaction at that time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from verification.engines.postgres.recovery_proof import RecoveryProof, planned_segment
from verification.engines.postgres.serverlog import RecoveryLog, parse_pg_timestamp
from verification.engines.postgres.wal import Segment, format_lsn, parse_lsn, parse_segment
from verification.model import RestorePlan

# pg_waldump's line per record (PostgreSQL 15):
# rmgr: Transaction len (rec/tot):     34/    34, tx:        827, lsn: 0/05004420, prev 0/050043E0, desc: COMMIT ...
RECORD_RE = re.compile(
    r"^rmgr: (?P<rmgr>\S+) +len \(rec/tot\): +\d+/ *(?P<total>\d+), tx: +(?P<xid>\d+), "
    r"lsn: (?P<lsn>[0-9A-F]+/[0-9A-F]+), prev [0-9A-F]+/[0-9A-F]+, desc: ?(?P<desc>.*)$")
# The stop line for a transaction (xlogrecovery.c recoveryStopsBefore/After).
STOP_RE = re.compile(r"^recovery stopping (?:before|after) (?P<kind>commit|abort) of transaction (?P<xid>\d+), "
                     r"time (?P<ts>.+)$")
# pg_waldump's description of a transaction's end: "COMMIT 2026-11-28 09:26:46.614236 UTC[; ...]".
# A prepared transaction's COMMIT PREPARED / ABORT PREPARED names its own xid in the description (the
# record's header tx is the finishing session's, 0): that is the xid the server's stop line names.
TRANSACTION_DESC_RE = re.compile(r"^(?P<kind>COMMIT|ABORT)(?P<prepared>_PREPARED (?P<xid>\d+):)? "
                                 r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? UTC)")
# pg_controldata's lines (the restored cluster's own pg_control): its identity and the WAL's geometry.
CONTROL_FIELDS = {"WAL block size": "page_size", "Bytes per WAL segment": "segment_size",
                  "Maximum data alignment": "max_align", "Database system identifier": "system_id"}
CONTROL_RE = re.compile(r"^(?P<name>[^:]+):\s+(?P<value>\d+)\s*$")
CMP_DIFFER_RE = re.compile(r"differ: (?:byte|char) (?P<byte>\d+)")
SECTION_RE = re.compile(r"^@@(?P<name>[a-z-]+)(?: (?P<arg>.*))?$")
# The page header sizes (access/xlog_internal.h SizeOfXLogLongPHD, SizeOfXLogShortPHD, 64-bit).
LONG_HEADER, SHORT_HEADER = 40, 24
# How much of a tool's output a reason quotes.
QUOTE_CHARS = 300


@dataclass(frozen=True)
class WalRecord:
    lsn: int
    rmgr: str
    total_length: int
    xid: int
    description: str

    @property
    def is_switch(self) -> bool:
        return self.rmgr == "XLOG" and self.description.split(" ", 1)[0] == "SWITCH"

    def describe(self) -> str:
        return f"{self.rmgr} {self.description.strip()} at {format_lsn(self.lsn)}"


@dataclass(frozen=True)
class Geometry:
    """The cluster's WAL page size, segment size and alignment, as its pg_control records them."""

    page_size: int
    segment_size: int
    max_align: int


@dataclass
class WalRead:
    """What the target said when asked for the planned WAL: the segments fetched, pg_waldump's last
    record and the record at the server's end of redo, its exit status and error words."""

    segments: list[str] = field(default_factory=list)
    # Each fetched segment's system identifier, from its first page's long header (None: unreadable).
    system_ids: dict[str, int | None] = field(default_factory=dict)
    # The restored cluster's own (pg_control).
    system_id: int | None = None
    # 'archive-get of <segment> exited N: <output>' when a segment could not be fetched.
    fetch_error: str | None = None
    geometry: Geometry | None = None
    exit_code: int | None = None
    at_redo_done: WalRecord | None = None
    last: WalRecord | None = None
    stderr: str = ""


@dataclass
class Tail:
    """The bytes of a segment after the point where the reader stopped, and what follows."""

    # Offset in the segment of the first non-zero byte at or after the stop; None: all zeros.
    first_nonzero: int | None = None
    # Commit records pg_waldump still decodes later in the segment (resuming after the damage).
    commits_after: int | None = None
    error: str | None = None


class WalReader(Protocol):
    def read(self, segments: list[str], redo_done: int) -> WalRead: ...

    def tail(self, segment: str, offset: int, resume: int, segment_size: int) -> Tail: ...


def parse_record(line: str) -> WalRecord | None:
    match = RECORD_RE.match(line.strip())
    if match is None:
        return None
    return WalRecord(parse_lsn(match["lsn"]), match["rmgr"], int(match["total"]), int(match["xid"]),
                     match["desc"])


def waldump_lsn(lsn: int) -> str:
    """An LSN as pg_waldump prints it ('%X/%08X')."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:08X}"


def sections(text: str) -> list[tuple[str, str, list[str]]]:
    """The scripts' output as (name, argument, lines) per '@@name [argument]' heading, in order."""
    found: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        if heading := SECTION_RE.match(line):
            found.append((heading["name"], heading["arg"] or "", []))
        elif found:
            found[-1][2].append(line)
    return found


def _words(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def parse_wal_read(text: str) -> WalRead:
    """The reading script's answer (wal_read.READ)."""
    read = WalRead()
    values: dict[str, int] = {}
    for name, argument, lines in sections(text):
        if name == "fetched":
            segment, _, sysid = argument.partition(" ")
            read.segments.append(segment)
            read.system_ids[segment] = int(sysid) if sysid.isdigit() else None
        elif name == "fetch-error":
            read.fetch_error = _words([argument, *lines])
        elif name == "control":
            for line in lines:
                if (field_ := CONTROL_RE.match(line)) and field_["name"] in CONTROL_FIELDS:
                    values[CONTROL_FIELDS[field_["name"]]] = int(field_["value"])
        elif name == "exit":
            read.exit_code = int(argument) if argument.isdigit() else None
        elif name == "at":
            read.at_redo_done = next((r for r in map(parse_record, lines) if r is not None), None)
        elif name == "last":
            read.last = next((r for r in map(parse_record, reversed(lines)) if r is not None), None)
        elif name == "stderr":
            read.stderr = _words(lines)
    if len(values) == len(CONTROL_FIELDS):
        read.system_id = values.pop("system_id")
        read.geometry = Geometry(**values)
    return read


def parse_tail(text: str) -> Tail:
    """The tail script's answer (wal_read.TAIL): cmp against zeros from the stop, then the commits
    pg_waldump still decodes after the page of the stop."""
    answers = {name: (argument, lines) for name, argument, lines in sections(text)}
    if "cmp" not in answers or answers["cmp"][0] not in ("0", "1"):
        said = _words([answers["cmp"][0], *answers["cmp"][1]]) if "cmp" in answers else "no answer"
        return Tail(error=f"cmp could not compare the segment with zeros: {said}")
    tail = Tail()
    status, lines = answers["cmp"]
    if status == "1":
        differ = CMP_DIFFER_RE.search(lines[0]) if lines else None
        if differ is None:
            return Tail(error=f"cmp's answer not understood: {quoted(_words(lines))}")
        tail.first_nonzero = int(differ["byte"]) - 1  # cmp counts from 1, from where it started
    count = _words(answers["commits"][1]) if "commits" in answers else ""
    tail.commits_after = int(count) if count.isdigit() else None
    return tail


def next_record(record: WalRecord, geometry: Geometry) -> int:
    """Where the reader looks for the record after `record`: past its bytes and the page headers
    they span, aligned, and past the header of a page that begins there; after an XLOG SWITCH, the
    start of the next segment (the rest of this one is padding)."""
    page, segment = geometry.page_size, geometry.segment_size
    if record.is_switch:
        return (record.lsn // segment + 1) * segment

    def header(at: int) -> int:
        return LONG_HEADER if at % segment == 0 else SHORT_HEADER

    position, left = record.lsn, record.total_length
    while left > (room := page - position % page):
        left -= room
        position += room
        position += header(position)
    position += left
    position = -(-position // geometry.max_align) * geometry.max_align
    if position % page == 0:
        position += header(position)
    return position


def planned_names(plan: RestorePlan, numbers: list[int], restored: set[str], segment_size: int,
                  through: int | None = None) -> list[str]:
    """The planned segments of these numbers that pg_waldump can read as one run: inside the planned
    range (or on its last timeline through `through`), restored by the server (the WAL it replayed,
    nothing it never asked for), on the timeline of the last one (pg_waldump follows no timeline
    switch), without a gap."""
    wal = plan.chain.wal
    assert wal is not None
    first, last = parse_segment(wal.first, segment_size), parse_segment(wal.last, segment_size)
    planned = planned_segment(wal, first)
    end = max(last.number, through if through is not None else last.number)
    inside = [planned(n) for n in numbers if first.number <= n <= end]
    inside = [s for s in inside if s.name(segment_size) in restored]
    if not inside:
        return []
    timeline = inside[-1].timeline
    run: list[Segment] = []
    for segment in reversed(inside):
        if segment.timeline != timeline or (run and run[0].number != segment.number + 1):
            break
        run.insert(0, segment)
    return [s.name(segment_size) for s in run]


def quoted(text: str) -> str:
    text = text.strip()
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + " ..."


def _server_words(log: RecoveryLog) -> str:
    said = "; ".join(log.before_redo_done)
    return f'the server said "{quoted(said)}"' if said else "the server's log gives no reason"


def prove_to_the_record(proof: RecoveryProof, log: RecoveryLog, plan: RestorePlan, segment_size: int,
                        reader: WalReader) -> RecoveryProof:
    """Add the record-level proof to the segment-level one. Not when that one could not judge (an
    error), nor when redo ended short of the segments read here or without the stop line asked for:
    the segment level then already named what is missing."""
    wal = plan.chain.wal
    if proof.errors or wal is None or log.redo_done_lsn is None:
        return proof
    done = log.redo_done_lsn
    restored = set(log.segments_restored)
    if plan.stop_at is None:
        # The archive's last segment and the one before it: the record that crosses into it is read whole.
        # A live repository (production archiving while the restore runs) may have given the server
        # segments archived since the plan, on its last timeline: the archive's end is then the newest.
        last = parse_segment(wal.last, segment_size)
        later = [s.number for s in (parse_segment(name, segment_size) for name in restored)
                 if s.timeline == last.timeline and s.number > last.number]
        end = Segment(last.timeline, max([last.number, *later]))
        names = planned_names(plan, [end.number - 1, end.number], restored, segment_size, through=end.number)
        if end.name(segment_size) not in names or done // segment_size < end.number - 1:
            return proof
    else:
        # The segment holding the record the server stopped at, and the next one that record may run into.
        names = planned_names(plan, [done // segment_size, done // segment_size + 1], restored, segment_size)
        if log.stop_detail is None or not names or parse_segment(names[0], segment_size).number != done // segment_size:
            return proof
    read = reader.read(names, done)
    if (problem := _unreadable(read, names, segment_size)) is not None:
        proof.errors.append(problem)
        return _unproven(proof)
    assert read.geometry is not None and read.last is not None
    # Another cluster's segment under this one's name. A first page of zeros has no identifier (0, which no
    # cluster has): that is the WAL missing, judged below.
    if foreign := [f"{name} (system identifier {read.system_ids[name]})" for name in read.segments
                   if read.system_ids[name] not in (0, read.system_id)]:
        proof.failures.append(f"WAL segment(s) {', '.join(foreign)} of the archive belong to another cluster: the "
                              f"restored cluster's system identifier is {read.system_id} (pg_control); "
                              f"{_server_words(log)}")
        return _unproven(proof)
    if plan.stop_at is None:
        return _prove_latest(proof, log, done, read, read.last, reader, read.geometry)
    return _prove_stop(proof, log.stop_detail or "", done, read, read.last)


def _unproven(proof: RecoveryProof) -> RecoveryProof:
    """A segment-level proof is no proof once the record level found a reason against it."""
    proof.proofs.clear()
    return proof


def _unreadable(read: WalRead, names: list[str], segment_size: int) -> str | None:
    """Why the WAL read cannot be judged (an error: the tools, not the archive, are in question)."""
    asked = f"reading {', '.join(names)} to prove the end of redo to the record"
    if read.fetch_error is not None:
        return (f"{asked}: pgbackrest archive-get failed ({quoted(read.fetch_error)}), although the server "
                "restored the same segments")
    if read.segments != names:
        return f"{asked}: the target fetched {', '.join(read.segments) or 'nothing'}"
    if read.geometry is None:  # set with the system identifier, or neither (parse_wal_read)
        return (f"{asked}: pg_controldata in the target did not give the cluster's system identifier and WAL "
                "page and segment sizes")
    if unreadable := [name for name in names if read.system_ids[name] is None]:
        return f"{asked}: no system identifier read from the first page of {', '.join(unreadable)}"
    if read.geometry.segment_size != segment_size:
        return (f"{asked}: the cluster's WAL segments are {read.geometry.segment_size} bytes (pg_control), "
                f"the plan named them for {segment_size}-byte segments (the chain's wal-segment-size rule says "
                "what told it; where that is postgres.wal_segment_size, set it to the cluster's size)")
    if read.exit_code is None:
        return f"{asked}: pg_waldump did not run in the target: {quoted(read.stderr) or 'no answer'}"
    if read.last is None:
        return (f"{asked}: pg_waldump decoded no record in them (exit {read.exit_code}"
                + (f": {quoted(read.stderr)})" if read.stderr else ")"))
    if read.exit_code == 0 and read.stderr:
        return f"{asked}: pg_waldump exited 0 yet said \"{quoted(read.stderr)}\""
    if read.exit_code != 0 and not read.stderr.startswith("pg_waldump: error: error in WAL record at "):
        # A record it could not decode is a finding; anything else (a file it could not open, an
        # option refused, a missing program) is about the tool.
        return f"{asked}: pg_waldump exited {read.exit_code}: {quoted(read.stderr) or 'no output'}"
    return None


def _prove_latest(proof: RecoveryProof, log: RecoveryLog, done: int, read: WalRead, last: WalRecord,
                  reader: WalReader, geometry: Geometry) -> RecoveryProof:
    size = geometry.segment_size
    done_at = f"redo done at {format_lsn(done)}"
    if read.exit_code != 0:
        # The reader stopped inside a segment the archive holds as complete.
        stop = next_record(last, geometry)
        where = next((name for name in read.segments if parse_segment(name, size).number == stop // size), None)
        if where is None:
            proof.errors.append(f"pg_waldump stopped after {last.describe()}, whose next record at "
                                f"{format_lsn(stop)} is in none of {', '.join(read.segments)}: "
                                f"pg_waldump said \"{quoted(read.stderr)}\"")
            return _unproven(proof)
        tail = reader.tail(where, stop % size, _resume(stop, geometry), size)
        proof.failures.append(_stopped_inside(log, done, read, last, where, stop, tail, geometry))
        return _unproven(proof)
    read_from = f"read by pg_waldump from {', '.join(read.segments)}"
    if done < last.lsn:
        proof.errors.append(f"{done_at}, before the last record the planned archive's WAL holds ({last.describe()}, "
                            f"{read_from}): the records from {format_lsn(done)} on were not replayed, although "
                            f"they decode; {_server_words(log)}")
        return _unproven(proof)
    if done > last.lsn:
        proof.errors.append(f"{done_at}, after the last record the planned archive's WAL holds ({last.describe()}, "
                            f"{read_from}): the server replayed WAL the planned archive does not hold; "
                            f"{_server_words(log)}")
        return _unproven(proof)
    ending = ("with an XLOG SWITCH: the rest of the segment is padding and the archive holds no later segment "
              "on this timeline" if last.is_switch else
              f"where the next record continues past the end of {read.segments[-1]}, into a segment the archive "
              "does not hold (not archived yet)")
    proof.proofs.append(f"WAL read with pg_waldump from {', '.join(read.segments)} (pgbackrest archive-get): "
                        f"its last record is {last.describe()}, and {done_at} is that record; the WAL ends "
                        f"{ending}")
    return proof


def _resume(stop: int, geometry: Geometry) -> int:
    """The page after the one the reader stopped in: where pg_waldump may find records again."""
    return (stop // geometry.page_size + 1) * geometry.page_size


def _stopped_inside(log: RecoveryLog, done: int, read: WalRead, last: WalRecord, where: str, stop: int, tail: Tail,
                    geometry: Geometry) -> str:
    offset = stop % geometry.segment_size
    if tail.error is not None:
        after = f"the bytes after it not examined ({tail.error})"
    elif tail.first_nonzero is None:
        after = (f"zeros from there (offset {offset}) to the end of the segment, where a complete segment holds "
                 "records up to its end or up to an XLOG SWITCH: PostgreSQL archives a segment only once it is full "
                 "or switched, so this copy lost the WAL written there")
    else:
        nonzero = offset + tail.first_nonzero
        after = (f"bytes the reader cannot decode from offset {offset} (first non-zero byte at offset {nonzero}, "
                 f"LSN {format_lsn(stop - offset + nonzero)}): records the server could not read")
    commits = ("" if tail.commits_after is None or tail.first_nonzero is None else
               f"; pg_waldump, resuming at {format_lsn(_resume(stop, geometry))}, still decodes "
               f"{tail.commits_after} commit record(s) later in the segment, none of them replayed")
    replayed = (f"the server stopped there too (redo done at {format_lsn(done)})" if done == last.lsn else
                f"the server's redo done at {format_lsn(done)}")
    return (f"WAL segment {where} of the archive ends early: its records stop at {format_lsn(stop)}, inside the "
            f"segment, after {last.describe()}, with {after}; {replayed}, so every commit after "
            f"{format_lsn(last.lsn)} is missing from the restore{commits}; {_server_words(log)}; "
            f"pg_waldump said \"{quoted(read.stderr)}\"")


def _prove_stop(proof: RecoveryProof, said: str, done: int, read: WalRead, last: WalRecord) -> RecoveryProof:
    done_at = format_lsn(done)
    stop = STOP_RE.match(said)
    if stop is None:
        proof.errors.append(f"the server's stop line \"{said}\" names no transaction, so the record it stopped at "
                            f"(redo done at {done_at}) cannot be checked against the WAL")
        return _unproven(proof)
    record = read.at_redo_done
    if record is None or record.lsn != done:
        proof.errors.append(f"redo done at {done_at}, but pg_waldump reading {', '.join(read.segments)} finds no "
                            f"record there (its last: {last.describe()}), so the server's stop \"{said}\" is not "
                            "shown in the archive's WAL")
        return _unproven(proof)
    described = TRANSACTION_DESC_RE.match(record.description)
    xid = int(described["xid"]) if described is not None and described["xid"] else record.xid
    matches = (record.rmgr == "Transaction" and described is not None
               and described["kind"].lower() == stop["kind"] and xid == int(stop["xid"])
               and parse_pg_timestamp(described["ts"]) == parse_pg_timestamp(stop["ts"]))
    if not matches:
        proof.errors.append(f"the server said \"{said}\" and redo done at {done_at}, but the record there is "
                            f"{record.describe()} (transaction {xid}): the stop is not the record the WAL holds")
        return _unproven(proof)
    proof.proofs.append(f"WAL read with pg_waldump from {', '.join(read.segments)}: the record at {done_at} is "
                        f"{record.describe()} of transaction {xid}, the one the server stopped for")
    return proof
