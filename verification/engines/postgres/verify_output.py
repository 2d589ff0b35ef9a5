"""`pgbackrest verify --output=text --verbose` (pgBackRest 2.45, console logging at INFO), every line
accounted for.

What pgBackRest 2.45 prints (src/command/verify/verify.c, read at the release/2.45 tag):
- per file that did not verify, a log line `<what> '<path>'` with <what> one of `file missing`,
  `invalid checksum`, `invalid size`, `invalid result` (the last also as `invalid result <path>: [code]
  <message>` when a job failed). A missing WAL file is logged at WARN and NOT counted as an error:
  the summary can then say `status: ok` with WAL missing, so restoreproof counts it itself;
- INFO notes: `archiveIds '…' are not in the archive.info history list`, `duplicate WAL '…' for '…'
  exists, skipping`, `backup '…' appears to be in progress, skipping`, `backup '…' manifest does not
  contain any target files to verify`, `'…' may not be recoverable - PG data … is not in the
  backup.info history, skipping`;
- the summary, twice (logged, then on stdout): `stanza: <name>`, `status: ok|error`, then
  `archiveId: <id>, total WAL checked: N, total valid WAL: M` and `backup: <label>, status:
  valid|invalid|manifest missing|in-progress, total files checked: N, total valid files: M`, each
  followed by `missing: a, checksum invalid: b, size invalid: c, other: d`; or one of `No usable
  backup.info file`, `No usable archive.info file`, `no archives or backups exist in the repo`,
  `archiveId: none found`, `backup: none found`, or a PostgreSQL history mismatch message.

pgBackRest exits 0 even when it finds invalid files, so the verdict comes from this text; a line
this parser does not know is an error, never a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verification.model import CheckResult, CheckStatus

NAME = "pgbackrest_verify"
LOG_LINE = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ )?P\d+ +(?P<level>[A-Z]+): (?P<msg>.*)$")
FILE_RESULT = re.compile(r"^(?P<what>file missing|invalid checksum|invalid size|invalid result) '(?P<file>[^']+)'$")
JOB_ERROR = re.compile(r"^invalid result (?P<file>\S+): \[(?P<code>\d+)\] (?P<message>.*)$")
BACKUP = re.compile(r"^backup: (?P<label>\S+), status: (?P<status>[^,]+), total files checked: (?P<n>\d+), "
                    r"total valid files: (?P<valid>\d+)$")
ARCHIVE = re.compile(r"^archiveId: (?P<id>\S+), total WAL checked: (?P<n>\d+), total valid WAL: (?P<valid>\d+)$")
COUNTS = re.compile(r"^(?:(?:missing|checksum invalid|size invalid|other): \d+(?:, |$))+$")
COUNT = re.compile(r"(missing|checksum invalid|size invalid|other): (\d+)")
BACKUP_STATUSES = {"valid", "invalid", "manifest missing", "in-progress"}
# Log lines that say something about the repository; each is a finding that fails the check.
FAILING_NOTES = (
    re.compile(r"^archiveIds '.*' are not in the archive\.info history list$"),
    re.compile(r"^backup '.*' manifest does not contain any target files to verify$"),
    re.compile(r"^'.*' may not be recoverable - PG data .* is not in the backup\.info history, skipping$"),
)
# Log lines that are progress or harmless notes.
BENIGN_NOTES = (
    re.compile(r"^verify command (begin|end)"),
    re.compile(r"^duplicate WAL '.*' for '.*' exists, skipping$"),
    re.compile(r"^backup '.*' appears to be in progress, skipping$"),
)
SUMMARY_FAILURES = ("No usable backup.info file", "No usable archive.info file",
                    "no archives or backups exist in the repo")


@dataclass
class _Reading:
    stanzas: set[str] = field(default_factory=set)
    statuses: list[str] = field(default_factory=list)
    backups: dict[str, str] = field(default_factory=dict)
    archives: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    subject: str = ""  # the archive id or backup the next counts line belongs to

    def fail(self, finding: str) -> None:
        if finding not in self.failures:
            self.failures.append(finding)


def _repo_path(path: str, stanza: str) -> str:
    """Paths in the messages are relative to the stanza's backup/ or archive/ folder: say which."""
    folder = "archive" if re.match(r"^\d+-\d+/", path) else "backup"
    return f"{folder}/{stanza}/{path}"


def _log_line(reading: _Reading, level: str, msg: str, stanza: str) -> None:
    if level in ("DETAIL", "DEBUG", "TRACE"):
        return
    if level in ("ERROR", "ASSERT"):
        reading.tool_errors.append(f"{level}: {msg}")
        return
    if match := FILE_RESULT.match(msg):
        # WARN for a missing WAL file, INFO for the rest: every one is a file the repository lacks or has bad.
        reading.fail(f"{match['what']}: {_repo_path(match['file'], stanza)}")
        return
    if match := JOB_ERROR.match(msg):
        reading.fail(f"invalid result: {_repo_path(match['file'], stanza)}: [{match['code']}] {match['message']}")
        return
    if level == "INFO" and msg.startswith("stanza: "):
        _summary_line(reading, msg, stanza)  # the first line of the logged summary
        return
    if level == "INFO" and any(p.match(msg) for p in FAILING_NOTES):
        reading.fail(msg)
        return
    if level == "INFO" and any(p.match(msg) for p in BENIGN_NOTES):
        if match := re.match(r"^backup '(.*)' appears to be in progress", msg):
            reading.in_progress.append(match.group(1))
        return
    reading.unknown.append(f"{level}: {msg}")


def _summary_line(reading: _Reading, line: str, stanza: str) -> None:
    if match := re.match(r"^stanza: (\S+)$", line):
        reading.stanzas.add(match.group(1))
    elif match := re.match(r"^status: (.+)$", line):
        reading.statuses.append(match.group(1))
    elif match := ARCHIVE.match(line):
        reading.archives[match["id"]] = f"{match['valid']}/{match['n']} valid"
        reading.subject = f"archive {match['id']}"
        if int(match["valid"]) < int(match["n"]):
            reading.fail(f"WAL archive {match['id']}: {match['valid']} of {match['n']} WAL files valid")
    elif match := BACKUP.match(line):
        label, status = match["label"], match["status"]
        reading.backups[label] = status
        reading.subject = f"backup {label}"
        if status not in BACKUP_STATUSES:
            reading.unknown.append(f"backup {label}: status {status!r}, which this version does not know")
        elif status == "in-progress":
            reading.in_progress.append(label)
        elif status != "valid":
            reading.fail(f"backup {label}: status {status}")
        if int(match["valid"]) < int(match["n"]):
            reading.fail(f"backup {label}: {match['valid']} of {match['n']} files valid")
    elif COUNTS.match(line):
        bad = [f"{what} {n}" for what, n in COUNT.findall(line) if int(n)]
        if bad:
            reading.fail(f"{reading.subject or 'repository'}: {', '.join(bad)}")
    elif line in ("archiveId: none found", "backup: none found"):
        pass  # said by the counts of backups below
    elif line in SUMMARY_FAILURES:
        reading.fail(f"stanza {stanza}: {line}")
    else:
        reading.unknown.append(line)


def parse_pgbackrest_verify(output: str, exit_code: int, stanza: str) -> CheckResult:
    reading = _Reading()
    for raw in output.splitlines():
        if not raw.strip():
            continue
        if match := LOG_LINE.match(raw.strip()):
            _log_line(reading, match["level"], match["msg"].strip(), stanza)
        else:
            _summary_line(reading, raw.strip(), stanza)
    details = {"backups": reading.backups, "archives": reading.archives, "exit_code": exit_code,
               "statuses": reading.statuses, "in_progress": sorted(set(reading.in_progress)),
               "unrecognised": reading.unknown}
    tail = output.strip().splitlines()[-5:]
    if "error" in reading.statuses or reading.failures:
        findings = reading.failures + [f"unrecognised: {u}" for u in reading.unknown] + reading.tool_errors
        invalid = [label for label, status in reading.backups.items() if status not in ("valid", "in-progress")]
        return CheckResult(NAME, CheckStatus.FAILED,
                           f"the repository has {len(reading.failures)} problem(s)"
                           + (f"; backups not valid: {', '.join(invalid)}" if invalid else ""),
                           findings or tail, details)
    problem = None
    if exit_code != 0 or reading.tool_errors:
        problem = f"pgbackrest verify could not run (exit {exit_code})"
    elif reading.stanzas != {stanza}:
        problem = f"pgbackrest verify reported on stanza(s) {sorted(reading.stanzas)}, not {stanza}"
    elif not reading.statuses or set(reading.statuses) != {"ok"}:
        problem = f"pgbackrest verify gave no status ok (statuses: {reading.statuses or 'none'})"
    elif reading.unknown:
        problem = f"pgbackrest verify printed {len(reading.unknown)} line(s) restoreproof does not recognise"
    elif not [s for s in reading.backups.values() if s == "valid"]:
        problem = "pgbackrest verify verified no backup"
    if problem:
        return CheckResult(NAME, CheckStatus.ERROR, problem,
                           reading.tool_errors + [f"unrecognised: {u}" for u in reading.unknown] or tail, details)
    valid = sum(1 for s in reading.backups.values() if s == "valid")
    skipped = sorted(set(reading.in_progress))
    return CheckResult(NAME, CheckStatus.PASSED,
                       f"{valid} backups and {len(reading.archives)} WAL archive(s) valid"
                       + (f"; in progress, not verified: {', '.join(skipped)}" if skipped else ""), details=details)
