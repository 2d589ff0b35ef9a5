"""Read recovery phases out of a PostgreSQL server log (log_line_prefix '%m [%p] ', log_timezone UTC).

The lines used, as PostgreSQL 15 writes them:
    ... LOG:  starting PostgreSQL 15.18 ...
    ... LOG:  redo starts at 0/8000028
    ... LOG:  redo done at 0/A000088 system usage: CPU: user: 0.00 s, system: 0.00 s, elapsed: 0.27 s
    ... LOG:  last completed transaction was at log time 2026-11-22 19:50:45.852562+00
    ... LOG:  recovery stopping before commit of transaction 745, time 2026-11-22 19:50:44.1+00
    ... LOG:  database system is ready to accept connections
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from verification.engines.postgres.wal import parse_lsn

LINE_RE = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?) (?P<tz>\S+) \[(?P<pid>\d+)\] "
    r"(?P<level>[A-Z]+\d?):\s+(?P<msg>.*)$"
)
REDO_START_RE = re.compile(r"^redo starts at (?P<lsn>[0-9A-F]+/[0-9A-F]+)")
REDO_DONE_RE = re.compile(
    r"^redo done at (?P<lsn>[0-9A-F]+/[0-9A-F]+)(?: system usage: .*elapsed: (?P<elapsed>[\d.]+) s)?"
)
# The startup process's first words on a data folder a clean shutdown left (xlog.c, StartupXLOG).
SHUT_DOWN_RE = re.compile(r"^database system was shut down at (?P<ts>.+)$")
LAST_TX_RE = re.compile(r"^last completed transaction was at log time (?P<ts>.+)$")
STOPPING_RE = re.compile(r"^recovery stopping (?P<how>before|after) .*?, time (?P<ts>.+)$")
# Answers to our own readiness polling while recovery runs, not failures.
POLLING_NOISE = ("the database system is not accepting connections", "the database system is starting up",
                 "the database system is shutting down")
# Logged at LOG level just before the FATAL they cause; they say what is actually wrong.
CONFIG_ERRORS = ("invalid value for parameter", "unrecognized configuration parameter", "syntax error in file",
                 "could not open configuration file")
# What PostgreSQL 15 logs (FATAL or PANIC; xlogrecovery.c, xlog.c) when it cannot start from the
# restored files because their WAL or data are missing or corrupt: the backups' fault. Any other
# reason a restored server does not start (a setting, a library, the target) is not shown to be.
BACKUP_FAULT_MESSAGES = (
    "could not locate required checkpoint record",
    "could not locate a valid checkpoint record",
    "could not find redo location",  # "... %X/%08X referenced by checkpoint record at %X/%08X"
    "invalid checkpoint link in backup_label file",
    "backup_label contains data inconsistent with control file",
    "incorrect checksum in control file",
    "control file contains invalid",  # "... checkpoint location", "... database cluster state"
    "WAL ends before end of online backup",
    "WAL ends before consistent recovery point",
    "requested timeline ",  # "%u is not a child of this server's history", "... is not in", "... does not contain"
    "unexpected timeline ID ",  # "%u (should be %u) in checkpoint record" and its variants
    "unexpected previous timeline ID ",
)
# PostgreSQL 14+ (FATAL) when it replayed all the WAL it could get without meeting a record after the
# target time: the archive holds no commit after that moment. Not the backups' fault: a point in time
# on a quiet database, or one the archive does not reach (see NO_RECORD_AFTER_TARGET's use).
NO_RECORD_AFTER_TARGET = "recovery ended before configured recovery target was reached"
# recovery_target = 'immediate' (xlogrecovery.c): the stop, and the LSN where consistency was reached.
CONSISTENCY_STOP = "recovery stopping after reaching consistency"
CONSISTENT_RE = re.compile(r"^consistent recovery state reached at (?P<lsn>[0-9A-F]+/[0-9A-F]+)")
RESTORED_RE = re.compile(r'^restored log file "(?P<segment>[0-9A-F]{24})" from archive')
# What PostgreSQL 15 logs (at LOG level, during archive recovery) when it stops reading WAL because
# the next record is unusable (xlogreader.c, xlogrecovery.c). Any of them before "redo done" means
# redo ended where the WAL went bad, not where the archive ends: the rest of the WAL was not replayed.
EARLY_END_MESSAGES = (
    "WAL file is from different database system",
    "invalid record length at",
    "incorrect resource manager data checksum",
    "unexpected pageaddr",
    "invalid magic number",
    "invalid info bits",
    "invalid resource manager ID",
    "record with incorrect prev-link",
    "invalid record offset at",
    "contrecord is requested by",
    "invalid contrecord length",
    "missing contrecord at",
    "there is no contrecord flag",
    "record length",  # "record length %u at %X/%X too long"
    "out-of-sequence timeline ID",
    "unexpected timeline ID",
    "could not read from WAL segment",
    "could not read from log segment",
    "invalid compressed image at",
    "could not restore image at",
    "invalid full-page write",
    'archive file "',  # 'archive file "%s" has wrong size: ...'
)
# pgBackRest's archive-get writes its own errors to stderr, which lands in the server log unprefixed.
# pgBackRest 2.45 writes e.g. 'ERROR: [042]: unable to get 00000001000000000000000D:' and then
# indented continuation lines naming the repository file and the cause.
ARCHIVE_GET_ERROR_RE = re.compile(r"^(?:\S+ \S+ )?(?:P\d+ +)?(?P<level>ERROR|WARN): (?P<msg>.*)$")
SEGMENT_NAME_RE = re.compile(r"\b[0-9A-F]{24}\b")
# The postmaster's own LOG line when a signal killed one of its processes (postmaster.c LogChildExit):
# the only words the server has for a process the kernel killed (out of memory) or that crashed. (One
# that exited with a code said why itself, in a FATAL line before.)
CHILD_KILLED_RE = re.compile(r"^.*\(PID \d+\) was terminated by signal \d+")


def parse_pg_timestamp(text: str) -> datetime:
    """'2026-11-22 19:50:45.852562+00' (or with 'UTC') -> aware datetime."""
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    return datetime.fromisoformat(text).astimezone(UTC)  # Python 3.11 reads an hour-only offset (+00)


@dataclass
class RecoveryLog:
    server_started: datetime | None = None
    redo_started: datetime | None = None
    redo_start_lsn: int | None = None
    redo_done: datetime | None = None
    redo_done_lsn: int | None = None
    redo_elapsed_seconds: float | None = None
    redo_not_required: bool = False
    # Where recovery first held a consistent database (the backup's end LSN for a restored backup).
    consistent_lsn: int | None = None
    # When the data folder's server was shut down cleanly, if the server starts from such a folder.
    shut_down_at: datetime | None = None
    ready: datetime | None = None
    last_transaction: datetime | None = None
    stopped_at: datetime | None = None
    stop_detail: str | None = None
    segments_restored: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Lines that say recovery stopped reading WAL because of bad WAL (EARLY_END_MESSAGES), verbatim.
    early_end: list[str] = field(default_factory=list)
    # pgBackRest archive-get errors and warnings (a segment it could not deliver), verbatim.
    archive_get_errors: list[str] = field(default_factory=list)
    # FATAL and PANIC lines saying the restored WAL or data are bad (BACKUP_FAULT_MESSAGES), verbatim.
    backup_faults: list[str] = field(default_factory=list)
    # What the startup process (the one that redoes) logged after fetching its last segment and before
    # "redo done": its own words on why redo ended there, whatever their language or wording.
    before_redo_done: list[str] = field(default_factory=list)

    @property
    def redo_bytes(self) -> int | None:
        if self.redo_start_lsn is None or self.redo_done_lsn is None:
            return None
        return self.redo_done_lsn - self.redo_start_lsn

    @property
    def achieved(self) -> datetime | None:
        """The newest transaction time the restored database contains."""
        return self.last_transaction or self.stopped_at


def parse_server_log(text: str) -> RecoveryLog:
    log = RecoveryLog()
    continues = False  # the previous line was a pgBackRest error that may go on, indented
    startup: str | None = None  # the pid of the process that redoes
    since_restored: list[str] = []  # its lines since it last fetched a segment
    for line in text.splitlines():
        match = LINE_RE.match(line)
        if not match:
            if archive := ARCHIVE_GET_ERROR_RE.match(line.strip()):
                log.archive_get_errors.append(f"pgBackRest archive-get {archive['level']}: {archive['msg'].strip()}")
                continues = True
            elif continues and line[:1].isspace() and line.strip():
                log.archive_get_errors[-1] += " " + line.strip()
            else:
                continues = False
            continue
        continues = False
        when = parse_pg_timestamp(f"{match['ts']} {match['tz']}") if match["tz"] == "UTC" else None
        level, msg = match["level"], match["msg"]
        failure = (level in ("FATAL", "PANIC") or (level == "ERROR" and log.ready is None)) and msg not in POLLING_NOISE
        died = level == "LOG" and log.ready is None and CHILD_KILLED_RE.match(msg) is not None
        if failure or died or (level == "LOG" and msg.startswith(CONFIG_ERRORS)):
            log.errors.append(f"{level}: {msg}")
        if level in ("FATAL", "PANIC") and msg.startswith(BACKUP_FAULT_MESSAGES):
            log.backup_faults.append(f"{level}: {msg}")
        if level in ("LOG", "WARNING") and log.redo_done is None and msg.startswith(EARLY_END_MESSAGES):
            log.early_end.append(f"{level}: {msg}")
        if startup is not None and match["pid"] == startup and log.redo_done is None:
            if RESTORED_RE.match(msg):
                since_restored = []
            elif not REDO_DONE_RE.match(msg):
                since_restored.append(f"{level}: {msg}")
        if msg.startswith("starting PostgreSQL"):
            log.server_started = when
        elif m := REDO_START_RE.match(msg):
            log.redo_started, log.redo_start_lsn = when, parse_lsn(m["lsn"])
            startup = match["pid"]
        elif m := REDO_DONE_RE.match(msg):
            log.redo_done, log.redo_done_lsn = when, parse_lsn(m["lsn"])
            log.before_redo_done = since_restored
            log.redo_elapsed_seconds = float(m["elapsed"]) if m["elapsed"] else None
        elif msg.startswith("redo is not required"):
            log.redo_not_required = True
        elif m := SHUT_DOWN_RE.match(msg):
            log.shut_down_at = parse_pg_timestamp(m["ts"])
        elif m := LAST_TX_RE.match(msg):
            log.last_transaction = parse_pg_timestamp(m["ts"])
        elif m := STOPPING_RE.match(msg):
            log.stopped_at, log.stop_detail = parse_pg_timestamp(m["ts"]), msg
        elif msg == CONSISTENCY_STOP:
            log.stop_detail = msg
        elif m := CONSISTENT_RE.match(msg):
            log.consistent_lsn = parse_lsn(m["lsn"])
        elif m := RESTORED_RE.match(msg):
            log.segments_restored.append(m["segment"])
        elif msg == "database system is ready to accept connections":
            log.ready = when
    # PostgreSQL asks again for the same segment: one reason per distinct error.
    log.archive_get_errors = list(dict.fromkeys(log.archive_get_errors))
    return log
