"""Parse what SQL Server prints: restore messages, error-log restore steps (trace flags 3004 and
3605), recovery's message 3421, sqlcmd result sets, DBCC CHECKDB TABLERESULTS, and errors.

Every pattern here matches text SQL Server really writes (docs: SQL Server reference, sections 2-5;
the unit tests hold the captured lines). Nothing is guessed: text that matches no pattern is kept
as it is and never counted as success.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

# -- restore messages ---------------------------------------------------------------------------

PROCESSED_FILE_RE = re.compile(r"^Processed (?P<pages>\d+) pages for database '(?P<db>.*)', file '(?P<file>.*)' "
                               r"on file (?P<n>\d+)\.$")
PROCESSED_TOTAL_RE = re.compile(r"^(?P<what>RESTORE (?:DATABASE|LOG)(?: \w+)?) successfully processed "
                                r"(?P<pages>\d+) pages in (?P<seconds>[\d.]+) seconds \((?P<rate>[\d.]+) MB/sec\)\.$")
PERCENT_RE = re.compile(r"^(?P<percent>\d+) percent processed\.$")
PAGE_BYTES = 8192


@dataclass
class RestoreStatement:
    """What one RESTORE statement reported on success."""

    statement: str = ""
    pages: int | None = None
    seconds: float | None = None
    mb_per_second: float | None = None
    files: dict[str, int] = field(default_factory=dict)  # logical file -> pages
    percents: list[int] = field(default_factory=list)

    @property
    def bytes(self) -> int | None:
        return None if self.pages is None else self.pages * PAGE_BYTES


def parse_restore_messages(text: str) -> list[RestoreStatement]:
    statements: list[RestoreStatement] = []
    current = RestoreStatement()
    for line in (raw.strip() for raw in text.splitlines()):
        if m := PERCENT_RE.match(line):
            current.percents.append(int(m["percent"]))
        elif m := PROCESSED_FILE_RE.match(line):
            current.files[m["file"]] = int(m["pages"])
        elif m := PROCESSED_TOTAL_RE.match(line):
            current.statement, current.pages = m["what"], int(m["pages"])
            current.seconds, current.mb_per_second = float(m["seconds"]), float(m["rate"])
            statements.append(current)
            current = RestoreStatement()
    return statements


# -- error log: restore steps (TF 3004, 3605) and recovery (3421) --------------------------------

ERRORLOG_RE = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?P<source>\S+)\s+(?P<msg>.*?)\s*$")
ZEROING_RE = re.compile(r"^Zeroing (?P<file>.+?) from page \d+ to \d+")
ZEROED_RE = re.compile(r"^Zeroing completed on (?P<file>.+?)(?: \(elapsed = (?P<ms>\d+) ms\))?$")
RECOVERY_RE = re.compile(
    r"Recovery completed for database (?P<db>.+?) \(database ID \d+\) in (?P<seconds>\d+) second\(s\) "
    r"\(analysis (?P<analysis>\d+) ms, redo (?P<redo>\d+) ms, undo (?P<undo>\d+) ms")


def parse_errorlog_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass
class ZeroedFile:
    file: str
    started: datetime | None = None
    finished: datetime | None = None
    elapsed_ms: int | None = None

    @property
    def seconds(self) -> float | None:
        if self.elapsed_ms is not None:
            return self.elapsed_ms / 1000
        if self.started and self.finished:
            return (self.finished - self.started).total_seconds()
        return None


@dataclass
class RestoreSteps:
    """Restore steps for one database, as the error log shows them."""

    events: dict[str, datetime] = field(default_factory=dict)  # step -> first time seen
    zeroed: dict[str, ZeroedFile] = field(default_factory=dict)
    recovery_seconds: int | None = None
    analysis_ms: int | None = None
    redo_ms: int | None = None
    undo_ms: int | None = None

    def between(self, start: str, end: str) -> float | None:
        if start in self.events and end in self.events:
            return (self.events[end] - self.events[start]).total_seconds()
        return None


STEP_PATTERNS = {
    "planning_begins": re.compile(r"^Restore: Planning begins"),
    "planning_complete": re.compile(r"^Restore: Planning complete"),
    "preparing_containers": re.compile(r"^Restore: PreparingContainers"),
    "containers_ready": re.compile(r"^Restore: Containers are ready"),
    "restoring_backup_set": re.compile(r"^Restore: Restoring backup set"),
    "transferring_data": re.compile(r"^Restore: Transferring data to "),
    "waiting_for_log_zero": re.compile(r"^Restore: Waiting for log zero on "),
    "log_zero_complete": re.compile(r"^Restore: LogZero complete"),
    "data_transfer_complete": re.compile(r"^Restore: Data transfer complete on "),
    "backup_set_restored": re.compile(r"^Restore: Backup set restored"),
}


def parse_restore_steps(errorlog: str, database: str | None = None) -> RestoreSteps:
    steps = RestoreSteps()
    for line in errorlog.splitlines():
        match = ERRORLOG_RE.match(line.strip())
        if not match:
            continue
        when, msg = parse_errorlog_time(match["ts"]), match["msg"]
        if m := ZEROING_RE.match(msg):
            steps.zeroed.setdefault(m["file"], ZeroedFile(m["file"])).started = when
        elif m := ZEROED_RE.match(msg):
            entry = steps.zeroed.setdefault(m["file"], ZeroedFile(m["file"]))
            entry.finished = when
            entry.elapsed_ms = int(m["ms"]) if m["ms"] else None
        elif m := RECOVERY_RE.search(msg):
            if database is None or m["db"] == database:
                steps.recovery_seconds = int(m["seconds"])
                steps.analysis_ms, steps.redo_ms, steps.undo_ms = int(m["analysis"]), int(m["redo"]), int(m["undo"])
        else:
            for step, pattern in STEP_PATTERNS.items():
                if pattern.match(msg):
                    steps.events.setdefault(step, when)
                    break
    return steps


# -- sqlcmd result sets -------------------------------------------------------------------------

SEPARATOR = "\x1f"  # sqlcmd -s: a character no name or path contains


def _is_rule(line: str, columns: int, separator: str) -> bool:
    parts = line.split(separator)
    return len(parts) == columns and all(part and set(part) <= {"-"} for part in parts)


def parse_result_sets(text: str, separator: str = SEPARATOR) -> list[list[dict[str, str | None]]]:
    """`sqlcmd -W -s <sep>` output -> result sets of rows keyed by column name (NULL -> None).

    A result set is a header line, a line of dashes under each column, then rows up to a blank
    line or sqlcmd's "(N rows affected)".
    """
    sets: list[list[dict[str, str | None]]] = []
    lines = text.splitlines()
    i = 0
    while i + 1 < len(lines):
        columns = lines[i].split(separator)
        if not lines[i].strip() or not _is_rule(lines[i + 1], len(columns), separator):
            i += 1
            continue
        rows: list[dict[str, str | None]] = []
        i += 2
        while i < len(lines) and lines[i].strip() and not lines[i].startswith("("):
            values = lines[i].split(separator)
            rows.append({c: (None if v == "NULL" else v) for c, v in zip(columns, values, strict=False)})
            i += 1
        sets.append(rows)
    return sets


# -- DBCC CHECKDB --------------------------------------------------------------------------------

CHECKDB_SUMMARY_RE = re.compile(r"CHECKDB found (?P<alloc>\d+) allocation errors and (?P<consistency>\d+) "
                                r"consistency errors in database '(?P<db>.*)'")


@dataclass
class CheckdbFinding:
    error: int
    level: int
    message: str
    object_id: str | None = None
    page: str | None = None


def parse_checkdb_rows(rows: list[dict[str, str | None]]) -> list[CheckdbFinding]:
    """TABLERESULTS rows (WITH NO_INFOMSGS: a clean run returns none)."""
    findings = []
    for row in rows:
        findings.append(CheckdbFinding(
            error=int(row.get("Error") or 0), level=int(row.get("Level") or 0), message=row.get("MessageText") or "",
            object_id=row.get("ObjectId"),
            page=f"({row.get('File')}:{row.get('Page')})" if row.get("Page") not in (None, "0") else None))
    return findings


# -- errors --------------------------------------------------------------------------------------

SQL_ERROR_RE = re.compile(r"^Msg (?P<number>\d+), Level (?P<level>\d+), State (?P<state>\d+)")


@dataclass(frozen=True)
class SqlError:
    number: int
    level: int
    message: str

    @property
    def plain(self) -> str:
        """What it means for the backups, in plain words, with SQL Server's own message beside it."""
        meaning = (url_meaning(self) or certificate_meaning(self)
                   or ERROR_MEANINGS.get(self.number, "SQL Server reported an error"))
        return f"{meaning} (SQL Server error {self.number}: {self.message})"


# Numbers from the reference (section 2); 3169, 3279 and the point-in-time messages 4322-4343 from
# SQL Server's message catalog (Microsoft Docs, "Database engine events and errors 4000 to 4999",
# MicrosoftDocs/sql-docs docs/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999.md).
ERROR_MEANINGS = {
    4305: "the log chain is broken: this log backup starts after the point the restore has reached",
    4326: "the log chain is out of order: this log backup ends before the point the restore has reached",
    4312: "the log chain has a gap: a log backup between the data backup and this log is missing",
    3201: "the target could not open the backup file (the mount, permissions or path inside the target)",
    3241: "the backup media is damaged or incomplete (a family of the media set may be missing)",
    3183: "a page in the backup is damaged",
    824: "a page failed its checksum: the data is corrupt",
    3169: ("the backup was written by a newer SQL Server than the restore target: configure an image at least as "
           "new (mssql.images)"),
    3279: "the backup media set is protected by a password that was not given or is wrong",
    3013: "the RESTORE statement terminated abnormally",
    3132: ("restoreproof did not name every family of a striped media set: SQL Server needs all of them in one "
           "RESTORE"),
    4322: "the point in time is not in this log backup: its records all precede the point, so the restore cannot "
          "stop there",
    4327: "the log backup holds bulk-logged changes: SQL Server cannot stop inside it at a point in time and rolled "
          "forward to its end",
    4341: "the log backup holds bulk-logged changes: it cannot be used to stop at a point in time",
    4335: ("the point in time is earlier than what was already restored: restoreproof applied a backup that goes "
           "beyond it"),
    4338: ("the point in time is before the start of this log backup: restoreproof applied a backup that goes beyond "
           "it"),
    4343: ("the restore went past the point in time to the end of this backup set: restoreproof applied a backup "
           "that goes beyond it"),
}
# Encrypted backups and TDE (docs/sqlserver-encryption.md): the texts from Microsoft Docs, "Database engine
# events and errors" 15000 to 15999 and 31000 to 41399 (MicrosoftDocs/sql-docs, docs/relational-databases/
# errors-events/includes/database-engine-events-and-errors-15000-15999.md and -31000-41399.md); 33111 as
# SQL Server prints it, seen in captures: "Cannot find server certificate with thumbprint '0x1928...'.".
# None is about the backups: each is a certificate not given, or given wrongly (verdict "error").
ERROR_MEANINGS.update({
    15465: "the certificate's private key password is wrong (mssql.certificates.<name>.private_key_password)",
    15466: ("the certificate's private key could not be decrypted: the password given for it is wrong "
            "(mssql.certificates.<name>.private_key_password), or the key file is damaged"),
    15474: ("the private key file does not belong to the certificate (mssql.certificates: a certificate and "
            "another's key)"),
    15208: ("SQL Server could not read the certificate or private key file given to the target, or does not take "
            "its format"),
    15297: "the certificate or private key file given to the target is not valid",
    15507: ("a key the restore needs could not be used: the certificate in the target has no private key, or the "
            "key is damaged"),
    15581: "the target has no master key in master to protect the certificate's private key",
    15578: "the target already has a master key in master",
    15232: "the target already holds a certificate of this name, or this certificate under another name",
    4860: "the certificate's password file is not in the target",
    4861: "SQL Server could not open the certificate's password file in the target",
})
CERTIFICATE_NOT_FOUND_RE = re.compile(r"^Cannot find server (?P<kind>certificate|asymmetric key) with thumbprint "
                                      r"'(?P<thumbprint>[^']*)'")


def certificate_meaning(error: SqlError) -> str | None:
    """What message 33111 means, naming the thumbprint the backup needs; None for any other error."""
    if error.number != 33111:
        return None
    match = CERTIFICATE_NOT_FOUND_RE.match(error.message)
    kind, needed = (match["kind"], match["thumbprint"]) if match else ("certificate", "(not named)")
    if kind != "certificate":
        return (f"the backup is encrypted with an asymmetric key (thumbprint {needed}) the target does not hold: "
                "restoreproof gives targets certificates only (mssql.certificates), not EKM asymmetric keys")
    return (f"the backup is encrypted (BACKUP ... WITH ENCRYPTION or TDE) and the target holds no certificate with "
            f"thumbprint {needed}: configure that certificate and its private key in mssql.certificates")


def certificate_needed(text: str) -> str | None:
    """The thumbprint SQL Server's message 33111 names in `text`, or None."""
    for error in parse_sql_errors(text):
        if error.number == 33111 and (match := CERTIFICATE_NOT_FOUND_RE.match(error.message)):
            return match["thumbprint"]
    return None


# Errors that mean the backups are not restorable (verdict "failed"); others mean restoreproof's
# own setup failed (verdict "error"). 3013 ("terminating abnormally") follows every RESTORE
# failure, so it decides nothing by itself. Not here on purpose: 3169 (the backup is newer than the
# target's SQL Server: restoreproof chose too old an image) and 3201 (the OS could not open the
# backup device: the mount, permissions or path in the target), which say nothing about the backup.
# The point-in-time messages split the same way: 4322 (the chain's log ends before the point), 4327 and
# 4341 (bulk-logged changes forbid stopping inside a log) are the backups'; 4335, 4338 and 4343 say a
# backup restored whole already went beyond the point, which is restoreproof's choice of logs (a
# log that held records past its start time), not a defect of the backups.
BACKUP_FAULTS = {4305, 4326, 4312, 3241, 3183, 824, 3279, 4322, 4327, 4341}


# -- RESTORE FROM URL = 's3://...' ----------------------------------------------------------------
# SQL Server's S3 connector says every failure to reach an object as message 3201 (or 3203 while
# reading) with an operating-system error: a Windows error, or a WinHTTP one (12xxx). None of them is
# about the backup's content: they stay restoreproof's or the object store's ("error"). What each
# means is in docs/sqlserver-s3-direct.md, with its sources.

URL_OPEN_RE = re.compile(r"^Cannot open backup device '(?P<device>s3://.*)'\. Operating system error (?P<os>\d+)\b")
URL_READ_RE = re.compile(r'^Read on "(?P<device>s3://.*)" failed: (?P<os>\d+)\b')
S3_OS_ERRORS = {
    50: ("SQL Server's S3 connector refused to open the object: no credential matches its URL, the URL is "
         "malformed, or the bucket does not exist"),
    5: ("the object store denied access to the object: the keys lack read permission (s3:ListBucket, "
        "s3:GetObject), the secret key does not match the access key, or the clocks differ by more than 15 minutes"),
    2: "the backup object is not in the bucket (deleted or renamed since it was listed)",
    3: "the backup object's path is not in the bucket (deleted or renamed since it was listed)",
    12002: "the S3 endpoint did not answer in time",
    12007: "the S3 endpoint's host name does not resolve inside the target",
    12029: "SQL Server could not connect to the S3 endpoint (the target's way out to it, or the endpoint, is down)",
    12030: "the connection to the S3 endpoint broke off",
    12175: ("SQL Server does not trust the S3 endpoint's TLS certificate: its CA is not in "
            "/var/opt/mssql/security/ca-certificates when SQL Server starts, or it does not name the host"),
}


def url_meaning(error: SqlError) -> str | None:
    """What a 3201 or 3203 on an s3:// device means, by its operating-system error; None for any other error."""
    pattern = {3201: URL_OPEN_RE, 3203: URL_READ_RE}.get(error.number)
    match = pattern.match(error.message) if pattern is not None else None
    if match is None:
        return None
    code = int(match["os"])
    known = S3_OS_ERRORS.get(code)
    if known is not None:
        return f"{known}: {match['device']}"
    verb = "open" if error.number == 3201 else "read"
    return f"SQL Server could not {verb} the backup object {match['device']} (operating system error {code})"


def parse_sql_errors(text: str) -> list[SqlError]:
    errors: list[SqlError] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if m := SQL_ERROR_RE.match(line.strip()):
            message = lines[i + 1].strip() if i + 1 < len(lines) else ""
            errors.append(SqlError(int(m["number"]), int(m["level"]), message))
    return errors


# Message 4322 has severity 10: the RESTORE LOG succeeds (exit 0) and sqlcmd prints it as a plain line, the
# way it prints "Processed N pages" (also severity 10); with an error header if messages are raised to one.
STOPAT_NOT_REACHED = ("This backup set contains records that were logged before the designated point in time. "
                      "The database is being left in the restoring state so that more roll forward can be performed.")
STOPAT_NOT_REACHED_START = STOPAT_NOT_REACHED.split(". ")[0] + "."


def stopat_not_reached(text: str) -> SqlError | None:
    """SQL Server's message when a RESTORE LOG ... STOPAT ended before the point (4322), or None.

    Matched on the first sentence, so that a server that words the second one differently is still heard.
    """
    for error in parse_sql_errors(text):
        if error.number == 4322:
            return error
    for line in text.splitlines():
        if line.strip().startswith(STOPAT_NOT_REACHED_START):
            return SqlError(4322, 10, line.strip())
    return None
