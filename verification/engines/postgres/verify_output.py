"""`pgbackrest verify` (console logging at INFO) of each pgBackRest version the images ship (2.33,
2.45, 2.55.1, 2.60.0: DIALECTS), every line accounted for. The version is the one the command says it
began as; any other is an error, never a verdict.

What pgBackRest 2.45 prints (run with `--output=text --verbose`), read in src/command/verify/verify.c
at the release/2.45 tag (the line numbers are that file's), and in src/common/log.c for where and how
a line is written:

- the summary (verifyProcess, 1708-1714; verifyRender, 1322-1463), printed twice by cmdVerify: logged
  at INFO (the console log, on stdout, 1735) and written to stdout by --output=text (1738-1741). It is
  `stanza: <name>`, `status: ok|error` (VERIFY_STATUS_*, 37-38), then `archiveId: <id>, total WAL
  checked: N, total valid WAL: M` and `backup: <label>, status: <status>, total files checked: N,
  total valid files: M`, each with `missing: a, checksum invalid: b, size invalid: c, other: d` under
  it when it checked any file (verifyCreateFileErrorsStr, 1285-1316), or `archiveId: none found`,
  `backup: none found`; or one of `No usable backup.info file`, `No usable archive.info file` (1491,
  1501), `no archives or backups exist in the repo` (1703), or what verifyPgHistory threw (1515):
  `archive and backup history lists do not match` (512), or check/common.c's `backup info file and
  archive info file do not match` with its `archive: id = …`, `backup : id = …` and `HINT: …` lines.
  The backup statuses are exactly `valid`, `invalid`, `manifest missing` and `in-progress` (the
  switch in verifyRender, 1404-1425); there is no other;
- INFO lines: per file that did not verify, `<what> '<path>'` with <what> `file missing`, `invalid
  checksum`, `invalid size` or `invalid result` (verifyErrorMsg, 1117-1140; verifyLogInvalidResult,
  1146-1168), and `invalid result <path>: [code] <message>` when the job itself failed (1657-1660),
  its retries indented under it; `backup '…' appears to be in progress, skipping` (440); `'…' may not
  be recoverable - PG data (id …, version …, system-id …) is not in the backup.info history,
  skipping` (466-469); `duplicate WAL '…' for '…' exists, skipping` (577); `backup '…' manifest does
  not contain any target files to verify` (1056); `archiveIds '…' are not in the archive.info
  history list` (1232); and `verify command begin|end` (command/command.c);
- one WARN line only: `file missing '<archive id>/…'` when a WAL file listed in the archive cannot be
  read (1160-1164), which pgBackRest does NOT count as an error: the summary can then say `status:
  ok`. WARN and ERROR lines go to stderr without time or process (log.c logPre/logPost, default
  log-level-stderr=warn): `WARN: …`, `ERROR: [031]: …`. pgBackRest's own settings can also warn
  (config/parse.c: `environment contains invalid option '…'`, `configuration file contains …`).
  "A backup has no WAL" and "a backup missing from backup.info" are not warnings 2.45 has (the WAL
  reconciliation is left to do, 1697; the backup.info cross-check came in a later version). A missing
  manifest is said at DETAIL only; the summary's `manifest missing` says it.

How the other versions differ (DIALECTS; each read at its release tag, 2.60.0 at the 2.60.0dev main
branch, and each checked on outputs captured from real runs: tests/fixtures/postgres/pgbackrest-<v>/):

- 2.55.1 prints what 2.45 does. verify.c adds only `--set`'s lines (`'…' is not a valid backup label
  format`, `backup set … is not valid`, 1657, 1675), and restoreproof does not pass --set. Its default
  log-level-stderr is `off` (src/build/config/config.yaml, 1092-1096, against `warn` in 2.45), so its
  WARN and ERROR lines come in the console log on stdout, with time and process: read the same.
- 2.60.0 (2.59's backup.info cross-check, commit 7f82fb663) warns, not counted as errors: `backup '…'
  found in the repository but not in backup.info` (verify.c, 1665), a folder left by an interrupted
  backup (also said in progress) or an interrupted expire (verified as any other): noted in the
  details, no finding; and `backup '…' found in backup.info but not in the repository` (1702), a
  backup that cannot be restored, which it then verifies as one with no manifest: a finding.
- 2.33 has neither `--output` nor `--verbose` for verify (an internal command then: config.yaml,
  `output` allowed for info and repo-ls only, no `verbose` at all), so neither is passed, and it
  prints its summary once, logged at INFO (cmdVerify, 1643), as `Results:` with neither stanza nor
  status (verifyRender, 1258; the stanza is the one the command began with, its status its ending),
  every count line printed under what checked a file. What later versions log at INFO it logs at
  ERROR with a code and counts as an error: the file results `[028]` (verifyLogInvalidResult,
  1125-1127; a WAL file missing stays a WARN, not counted, 1120), `[039]: invalid result …` (1573),
  `[028]` the may-not-be-recoverable, duplicate WAL and no-target-files notes (454, 579, 1014),
  `[044]: archiveIds …` (1193), and `[029]` `No usable backup.info|archive.info file` and the history
  mismatch (1410, 1420, 1434: then there is no summary). Having counted any, it ends with `ERROR:
  [122]: N fatal errors encountered, see log for details` (1647) and exits 122. What 2.45 says at
  DETAIL it says at WARN (QUIET_233): an info file or manifest it could not load and why (234: a
  main file failing its checksum, its copy then used, is kept as a note, INFO_CHECKSUM_233), a
  copy used or not matching (274, 327, 394, 412), a manifest missing (421; the summary says it), an
  archive folder empty or without WAL (783, 805), no archives or no backups (1476), and `no archives
  or backups exist in the repo` (1614), then no summary: read as one that says so. It reads a
  backup file's content through zlib, so one flipped byte in a compressed file is `invalid result
  …: [29] … zlib threw error` (counted as `other`), not `invalid checksum`.
- No version reconciles the WAL the backups need with the WAL there is ("??? Need to do the final
  reconciliation", still in 2.60.0): a segment missing between two others is the planner's to find.

pgBackRest exits 0 even when it finds invalid files, and says `status: ok` with a manifest missing,
a backup skipped as in progress, a WAL file gone or counts that do not add up (2.33 exits 122 and
lists its count of errors, but not for those either), so the verdict comes
from this text, every line of it: only `valid` backups with every file valid pass, and anything this
parser does not know is an error, never a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from verification.engines.postgres.pgbackrest_errors import is_transport, transport_cause
from verification.model import CheckKind, CheckName, CheckResult, CheckStatus
from verification.targets.base import not_started

NAME = CheckName.PGBACKREST_VERIFY
# It reads the repository's files, not the restored cluster: it can fail a database, never pass it.
KIND = CheckKind.BACKUP_FILES
LEVELS = "ASSERT|ERROR|WARN|INFO|DETAIL|DEBUG|TRACE"
# The console log (stdout): time, process, level aligned to 6 characters. Continuation lines are
# indented to where the message starts.
CONSOLE_LINE = re.compile(rf"^(?:\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ )?P\d+ +(?P<level>{LEVELS}): (?P<msg>.*)$")
# stderr (WARN and above by default): the level only.
STDERR_LINE = re.compile(rf"^(?P<level>{LEVELS}): (?P<msg>.*)$")

BEGIN = re.compile(r"^verify command begin (?P<version>\S+): (?P<options>.*)$")
END_OK = re.compile(r"^verify command end: completed successfully(?: \(\d+ms\))?$")
FILE_RESULT = re.compile(r"^(?P<what>file missing|invalid checksum|invalid size|invalid result) '(?P<file>[^']+)'$")
JOB_ERROR = re.compile(r"^invalid result (?P<file>\S+): \[(?P<code>\d+)\] (?P<message>.*)$")
# A retry under a failed job: 2.45 one line per retry; 2.47 on (common/error/retry.c errRetryMessage) one
# per error type, with its message: `on retry at Nms: …` or `on N retries from A-Bms: …`.
RETRY = re.compile(r"^\[\w+\] on (?:retry after \d+ms|retry at \d+ms: .*|\d+ retries from \d+-\d+ms: .*)$")
IN_PROGRESS = re.compile(r"^backup '(?P<label>[^']+)' appears to be in progress, skipping$")
# Notes that say the repository is not as it should be; pgBackRest counts each as an error.
FAILING_NOTES = (
    re.compile(r"^archiveIds '(?P<ids>[^']+)' are not in the archive\.info history list$"),
    re.compile(r"^duplicate WAL '(?P<segment>[0-9A-F]{24})' for '(?P<id>[^']+)' exists, skipping$"),
    re.compile(r"^backup '(?P<label>[^']+)' manifest does not contain any target files to verify$"),
    re.compile(r"^'(?P<label>[^']+)' may not be recoverable - PG data \(id \d+, version \S+, system-id \d+\) is not "
               r"in the backup\.info history, skipping$"),
)
# pgBackRest's warnings about its own settings (config/parse.c): the command may not have run with the
# settings restoreproof gave it, so its verdict cannot be taken.
CONFIG_WARNINGS = (
    re.compile(r"^environment contains invalid (?:negate |reset )?option '[^']+'$"),
    re.compile(r"^configuration file contains (?:invalid|negate|reset|command-line only) option '[^']+'$"),
    re.compile(r"^configuration file contains option '[^']+' invalid for section '[^']+'$"),
    re.compile(r"^configuration file contains stanza-only option '[^']+' in global section '[^']+'$"),
)

STANZA = re.compile(r"^stanza: (?P<name>\S+)$")
STATUS = re.compile(r"^status: (?P<status>.*)$")
ARCHIVE = re.compile(r"^archiveId: (?P<id>\S+), total WAL checked: (?P<n>\d+), total valid WAL: (?P<valid>\d+)$")
BACKUP = re.compile(r"^backup: (?P<label>\S+), status: (?P<status>[^,]+), total files checked: (?P<n>\d+), "
                    r"total valid files: (?P<valid>\d+)$")
COUNTS = re.compile(r"^(?:(?:missing|checksum invalid|size invalid|other): \d+(?:, (?=\S)|$))+$")
COUNT = re.compile(r"(missing|checksum invalid|size invalid|other): (\d+)")
BACKUP_STATUSES = ("valid", "invalid", "manifest missing", "in-progress")
# pgBackRest says "in progress" only of the newest backup folder that backup.info does not list and
# that has no main manifest (verify.c: currentBackup, verifyManifestFile): a backup being written
# now, or one killed before it finished, which a later backup resumes or removes. No restore can use
# it, so it is noted, never a finding; a listed backup always has its manifest checked.
IN_PROGRESS_NOTE = "in progress, not in backup.info (being written, or interrupted): no restore uses it, not verified"
STANZA_STATUSES = ("ok", "error")
UNUSABLE = ("No usable backup.info file", "No usable archive.info file",
            "archive and backup history lists do not match")
NOTHING = "no archives or backups exist in the repo"
MISMATCH = "backup info file and archive info file do not match"
MISMATCH_MORE = re.compile(r"^(?:(?:archive|backup) ?: id = \d+, version = \S+, system-id = \d+|"
                           r"HINT: this may be a symptom of repository corruption!)$")
# 2.33 logs at ERROR, with a code, what later versions log at INFO; and ends with this when it found any.
CODED = re.compile(r"^\[(?P<code>\d{3})\]: (?P<msg>.*)$")
FATAL = re.compile(r"^(?P<n>\d+) fatal errors encountered, see log for details$")
END_FATAL = "verify command end: aborted with exception [122]"
FATAL_EXIT = 122  # RuntimeError (build/error.yaml)
RESULTS = "Results:"
VERSION_LINE = re.compile(r"^pgBackRest (?P<version>\S+)$")
# 2.33 logs at WARN why an info file or manifest did not load (verifyInfoFile, 234), which 2.45 on logs at
# DETAIL: a main file whose checksum does not match, its copy then used. Noted, no finding: the summary
# says what it means for the backups (a copy damaged too: no usable file, or a manifest missing).
INFO_CHECKSUM_233 = re.compile(r"^invalid checksum, actual '[0-9a-f]{40}' but expected '[0-9a-f]{40}' "
                               r"<REPO:(?:BACKUP|ARCHIVE)>/\S+$")
# 2.59 on: the backup.info cross-check. A backup folder backup.info does not list is left by an
# interrupted backup or expire (verify says the first "in progress" and checks the second): noted. A
# backup backup.info lists with no folder is a backup that cannot be restored: a finding.
ORPHAN = re.compile(r"^backup '(?P<label>[^']+)' found in the repository but not in backup\.info$")
LOST = re.compile(r"^backup '(?P<label>[^']+)' found in backup\.info but not in the repository$")
# 2.33's WARN lines that 2.45 lowered to DETAIL: what the summary says anyway (the copy used, a
# manifest missing, an empty archive folder, an info file not loaded and why).
QUIET_233 = (
    re.compile(r"^(?:archive|backup)\.info\.copy does not match (?:archive|backup)\.info$"),
    re.compile(r"^backup '[^']+' manifest\.copy does not match manifest$"),
    re.compile(r"^\S+/backup\.manifest is missing or unusable, using copy$"),
    re.compile(r"^manifest missing for '[^']+' - backup may have expired$"),
    re.compile(r"^path '[^']+' does not contain any valid WAL to be processed$"),
    re.compile(r"^archive path '[^']+' is empty$"),
    re.compile(r"^no (?:archives|backups) exist in the repo$"),
    re.compile(r"^unable to open missing file '[^']+' for read$"),
)


@dataclass(frozen=True)
class Dialect:
    """What one pgBackRest version's verify prints where versions differ (the module docstring says
    where in each version's source)."""
    options: tuple[str, ...]  # verify's own options restoreproof passes: only those the version has
    copies: tuple[str, ...]  # where the summary is printed: the log and/or stdout (--output=text)
    header: re.Pattern[str]  # the summary's first line
    status_line: bool  # `status: ok|error` under the header (2.33: none; its ending says it)
    coded_findings: bool  # findings logged at ERROR with a code (2.33), not at INFO
    quiet: tuple[re.Pattern[str], ...] = ()  # WARN lines the summary says anyway
    noted: tuple[re.Pattern[str], ...] = ()  # WARN lines kept in the details, no finding
    failing: tuple[re.Pattern[str], ...] = ()  # WARN lines that are findings


_LATER = Dialect(options=("--output=text", "--verbose"), copies=("log", "stdout"), header=STANZA, status_line=True,
                 coded_findings=False)
DIALECTS: dict[str, Dialect] = {
    "2.33": Dialect(options=(), copies=("log",), header=re.compile(rf"^{RESULTS}$"), status_line=False,
                    coded_findings=True, quiet=QUIET_233, noted=(INFO_CHECKSUM_233,)),
    "2.45": _LATER,
    "2.55.1": _LATER,
    "2.60.0": replace(_LATER, noted=(ORPHAN,), failing=(LOST,)),
}
VERSIONS = ", ".join(DIALECTS)


def tool_version(output: str) -> str | None:
    """The version `pgbackrest version` printed."""
    found = VERSION_LINE.match(output.strip())
    return found["version"] if found else None


def verify_options(version: str | None) -> tuple[str, ...] | None:
    """The options of `pgbackrest verify` restoreproof passes to this version; None: a version it cannot read."""
    dialect = DIALECTS.get(version or "")
    return dialect.options if dialect is not None else None


def unknown_version(output: str, exit_code: int) -> CheckResult:
    """The check when the target's pgBackRest is not one whose verify restoreproof reads (not run)."""
    if (why := not_started("pgbackrest", output, exit_code)) is not None:
        return CheckResult(NAME, CheckStatus.ERROR, f"pgbackrest verify could not run: {why}",
                           output.strip().splitlines(), {"exit_code": exit_code}, kind=KIND)
    version = tool_version(output)
    said = f"pgBackRest {version}" if version else f"a pgBackRest that says {output.strip()[:200]!r} (exit {exit_code})"
    return CheckResult(NAME, CheckStatus.ERROR, f"pgbackrest verify not run: the target has {said}; restoreproof "
                       f"reads the verify output of pgBackRest {VERSIONS} only: use an image with one of them",
                       output.strip().splitlines(), {"exit_code": exit_code, "version": version}, kind=KIND)


@dataclass
class _Entry:
    """One log message: its first line and the lines pgBackRest indented under it."""
    level: str
    msg: str
    indent: int
    more: list[str] = field(default_factory=list)


@dataclass
class _Block:
    """One copy of the summary: from the log (an INFO message) or from --output=text (stdout)."""
    source: str
    lines: list[str]


@dataclass
class _Item:
    """An archive id or a backup in one copy of the summary."""
    checked: int
    valid: int
    status: str = ""
    counts: dict[str, int] | None = None


@dataclass
class _Summary:
    stanza: str | None = None
    status: str | None = None  # None: no status line
    archives: dict[str, _Item] = field(default_factory=dict)
    backups: dict[str, _Item] = field(default_factory=dict)
    nothing: bool = False


@dataclass
class _Reading:
    stanza: str
    dialect: Dialect
    known: bool  # the version is one in DIALECTS (else read as the newest, and never a verdict)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)      # why the output cannot be taken as it is
    unknown: list[str] = field(default_factory=list)     # lines this parser does not know
    tool_errors: list[str] = field(default_factory=list)  # pgBackRest's own ERROR/ASSERT lines
    settings: list[str] = field(default_factory=list)    # pgBackRest's warnings about its settings
    invalid_files: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)  # the copies of the summary, in order
    versions: list[str] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)
    begun: str = ""  # the options the command said it began with
    fatal: list[int] = field(default_factory=list)  # 2.33: "N fatal errors encountered"
    notes: list[str] = field(default_factory=list)  # warnings kept in the details (Dialect.noted)
    # Per backup label or archive id: files whose job failed on the way to the storage, not on the file.
    unread: dict[str, int] = field(default_factory=dict)

    def fail(self, finding: str) -> None:
        if finding not in self.failures:
            self.failures.append(finding)

    def error(self, problem: str) -> None:
        if problem not in self.errors:
            self.errors.append(problem)

    def unrecognised(self, line: str) -> None:
        if line not in self.unknown:
            self.unknown.append(line)


def _repo_path(path: str, stanza: str) -> str:
    """Paths in the messages are relative to the stanza's archive/ or backup/ folder: say which."""
    folder = "archive" if re.match(r"^\d+(?:\.\d+)?-\d+/", path) else "backup"
    return f"{folder}/{stanza}/{path}"


def _split(output: str) -> tuple[list[_Entry | _Block], list[str]]:
    """Log messages (with their indented lines) and stdout summaries, in order; and lines that are neither."""
    parts: list[_Entry | _Block] = []
    stray: list[str] = []
    current: _Entry | _Block | None = None
    for line in output.splitlines():
        if not line.strip():
            continue
        if match := CONSOLE_LINE.match(line) or STDERR_LINE.match(line):
            current = _Entry(match["level"], match["msg"], match.start("msg"))
            parts.append(current)
        elif isinstance(current, _Entry) and line.startswith(" " * current.indent):
            current.more.append(line[current.indent:])
        elif STANZA.match(line):
            current = _Block("stdout", [line])
            parts.append(current)
        elif isinstance(current, _Block):
            current.lines.append(line)
        else:
            stray.append(line.strip())
    return parts, stray


def _entry(reading: _Reading, entry: _Entry) -> None:
    level, msg, stanza = entry.level, entry.msg.strip(), reading.stanza
    extra = entry.more  # lines indented under the message; each kind says which it takes
    if level in ("DETAIL", "DEBUG", "TRACE"):
        return  # not printed at --log-level-console=info; nothing in them decides the verdict
    dialect = reading.dialect
    if level == "ERROR" and dialect.coded_findings and (coded := CODED.match(msg)):
        if (fatal := FATAL.match(coded["msg"])) and not extra:  # 2.33's ending: its count of errors
            reading.fatal.append(int(fatal["n"]))
            return
        if _finding(coded["msg"], extra):  # 2.33 logs at ERROR what later versions log at INFO
            level, msg = "INFO", coded["msg"]
    if level == "WARN" and not extra and _versions_warning(reading, msg):
        return
    if level in ("ERROR", "ASSERT"):
        reading.tool_errors.append("\n".join([f"{level}: {msg}", *(m.strip() for m in extra)]))
        return
    if level == "INFO" and dialect.header.match(msg):
        reading.blocks.append(_Block("log", [msg, *extra]))
        return
    if level == "INFO" and dialect.coded_findings and _finding(msg, extra) and msg in (*UNUSABLE, MISMATCH):
        # 2.33 logs what later versions put in the summary.
        reading.fail(f"stanza {stanza}: {'; '.join([msg, *(line.strip() for line in extra)])}")
        return
    if match := FILE_RESULT.match(msg):
        # INFO, or WARN for a WAL file gone when read (not counted by pgBackRest): a file bad or missing.
        finding = f"{match['what']}: {_repo_path(match['file'], stanza)}"
        reading.invalid_files.append(finding)
        reading.fail(finding)
        _unknown(reading, level, extra)
        return
    if level == "INFO" and (match := JOB_ERROR.match(msg)) and is_transport(match["code"]):
        # The file could not be fetched (an HTTP request to S3 denied, no route): the way to the
        # repository failed, not the file. pgBackRest counts it under its backup or archive id as
        # "other" and calls that backup invalid; the summary's judgement discounts it (see _judge_summary).
        path = _repo_path(match["file"], stanza)
        cause = transport_cause(match["code"], match["message"], "")
        reading.error(f"pgbackrest verify could not read {path}: {cause}")
        owner = match["file"].split("/", 1)[0]
        reading.unread[owner] = reading.unread.get(owner, 0) + 1
        _unknown(reading, level, [line for line in extra if not RETRY.match(line.strip())])
        return
    if level == "INFO" and (match := JOB_ERROR.match(msg)):
        finding = f"invalid result: {_repo_path(match['file'], stanza)}: [{match['code']}] {match['message']}"
        reading.invalid_files.append(finding)
        reading.fail(finding)
        _unknown(reading, level, [line for line in extra if not RETRY.match(line.strip())])
        return
    if level == "WARN" and any(p.match(msg) for p in CONFIG_WARNINGS) and not extra:
        reading.settings.append(f"pgBackRest configuration: {msg}")
        return
    if level == "INFO" and not extra:
        if match := BEGIN.match(msg):
            reading.versions.append(match["version"])
            reading.begun = match["options"]
            return
        if msg.startswith("verify command end: "):
            reading.ends.append(msg)
            return
        if match := IN_PROGRESS.match(msg):
            reading.in_progress.append(match["label"])
            return
        if any(p.match(msg) for p in FAILING_NOTES):
            reading.fail(msg)
            return
    _unknown(reading, level, [msg, *extra])


def _versions_warning(reading: _Reading, msg: str) -> bool:
    """A warning of this version's own (Dialect quiet, noted, failing; 2.33's nothing to verify), taken."""
    dialect = reading.dialect
    if any(p.match(msg) for p in dialect.quiet):
        return True
    if any(p.match(msg) for p in dialect.noted):
        reading.notes.append(msg)
        return True
    if any(p.match(msg) for p in dialect.failing):
        reading.fail(msg)
        return True
    if msg == NOTHING and not dialect.status_line:  # 2.33 says it instead of its summary
        reading.blocks.append(_Block("log", [RESULTS, NOTHING]))
        return True
    return False


def _finding(msg: str, extra: list[str]) -> bool:
    """Whether a message is one of verify's findings (2.33 logs them at ERROR, with a code)."""
    if msg == MISMATCH:
        return all(MISMATCH_MORE.match(line.strip()) for line in extra)
    return bool(FILE_RESULT.match(msg) or JOB_ERROR.match(msg) or any(p.match(msg) for p in FAILING_NOTES)
                or msg in UNUSABLE)


def _unknown(reading: _Reading, level: str, lines: list[str]) -> None:
    for line in lines:
        reading.unrecognised(f"{level}: {line.strip()}")


def _counts(line: str) -> dict[str, int]:
    return {what: int(n) for what, n in COUNT.findall(line)}


def _parse_summary(reading: _Reading, block: _Block) -> _Summary:
    """One copy of the summary, line by line; every line is known or said unrecognised."""
    lines = [line.strip() for line in block.lines]
    summary = _Summary(lines[0].removeprefix("stanza: "))  # every block begins with its header
    if not reading.dialect.status_line:  # 2.33: "Results:", its stanza the command's, its status its ending
        found = re.search(r"(?:^| )--stanza=(\S+)", reading.begun)
        summary.stanza = found.group(1) if found else None
        summary.status = "error" if reading.fatal else "ok"
    lines = lines[1:]
    if lines and reading.dialect.status_line and (match := STATUS.match(lines[0])):
        summary.status = match["status"]
        lines = lines[1:]
    subject: _Item | None = None
    mismatch: list[str] = []
    for line in lines:
        if match := ARCHIVE.match(line):
            subject = _Item(int(match["n"]), int(match["valid"]))
            if match["id"] in summary.archives:
                reading.unrecognised(f"archive {match['id']} listed twice")
            summary.archives[match["id"]] = subject
        elif match := BACKUP.match(line):
            subject = _Item(int(match["n"]), int(match["valid"]), match["status"])
            if match["label"] in summary.backups:
                reading.unrecognised(f"backup {match['label']} listed twice")
            summary.backups[match["label"]] = subject
        elif COUNTS.match(line) and subject is not None and subject.counts is None:
            subject.counts = _counts(line)
        elif line in ("archiveId: none found", "backup: none found"):
            continue  # nothing listed: said by the backups and archives found (none)
        elif line == NOTHING:
            summary.nothing = True
        elif line in UNUSABLE:
            reading.fail(f"stanza {reading.stanza}: {line}")
        elif line == MISMATCH or (mismatch and MISMATCH_MORE.match(line)):
            mismatch.append(line)
        else:
            reading.unrecognised(line)
    if mismatch:
        reading.fail(f"stanza {reading.stanza}: {'; '.join(mismatch)}")
    return summary


def _judge_summary(reading: _Reading, summary: _Summary) -> None:
    """The rules, on one copy: only `valid` passes, every file checked valid, every count zero."""
    if summary.status is None:
        reading.error("a summary without its status line")
    if summary.stanza != reading.stanza:
        reading.error(f"pgbackrest verify reported on stanza {summary.stanza}, not {reading.stanza}")
    if summary.status is not None and summary.status not in STANZA_STATUSES:
        reading.unrecognised(f"stanza status {summary.status!r}, which pgBackRest {_version(reading)} does not "
                             "print")
    for archive_id, item in summary.archives.items():
        item = _discounted(reading, archive_id, item)
        what = f"archive {archive_id}"
        if item.valid < item.checked:
            reading.fail(f"WAL archive {archive_id}: {item.valid} of {item.checked} WAL files valid")
        elif item.valid > item.checked:
            reading.fail(f"WAL archive {archive_id}: {item.valid} WAL files valid of {item.checked} checked "
                         "(the counts do not add up)")
        _judge_counts(reading, what, item)
    for label, item in summary.backups.items():
        item = _discounted(reading, label, item)
        what = f"backup {label}"
        if item.status not in BACKUP_STATUSES:
            reading.unrecognised(f"{what}: status {item.status!r}, which pgBackRest {_version(reading)} does not print")
        elif item.status == "in-progress":
            if (note := f"{what}: {IN_PROGRESS_NOTE}") not in reading.notes:
                reading.notes.append(note)  # once, though each copy of the summary says it
        elif item.status != "valid":
            reading.fail(f"{what}: status {item.status}")
        elif item.checked == 0:
            reading.fail(f"{what}: status valid but no file checked")
        if item.valid < item.checked:
            reading.fail(f"{what}: {item.valid} of {item.checked} files valid")
        elif item.valid > item.checked:
            reading.fail(f"{what}: {item.valid} files valid of {item.checked} checked (the counts do not add up)")
        _judge_counts(reading, what, item)


def _discounted(reading: _Reading, owner: str, item: _Item) -> _Item:
    """An archive id or backup as it stands once the files its storage would not give are set aside:
    pgBackRest counted each as "other" and not valid, and called a backup with one invalid. What is
    left is judged as usual; an item bad only for those files is not a finding (the check is an error)."""
    unread = reading.unread.get(owner, 0)
    if not unread:
        return item
    counts = dict(item.counts or {})
    counts["other"] = max(0, counts.get("other", 0) - unread)
    status = item.status
    if status == "invalid" and item.valid + unread >= item.checked and not any(counts.values()):
        status = "valid"
    return _Item(item.checked, min(item.checked, item.valid + unread), status,
                 counts if item.counts is not None else None)


def _judge_counts(reading: _Reading, what: str, item: _Item) -> None:
    if item.counts is None:
        if item.checked > 0:  # --verbose prints the counts of everything that checked a file
            reading.unrecognised(f"{what}: no missing/checksum/size/other counts under it")
        return
    bad = [f"{kind} {n}" for kind, n in item.counts.items() if n]
    if bad:
        reading.fail(f"{what}: {', '.join(bad)}")


def _layout(reading: _Reading, exit_code: int) -> None:
    """The frame around the summaries: the copies the version prints (2.33: one, logged; later: two,
    logged and on stdout, the same); the command begun by a version read here and ended successfully
    (2.33: or with its count of the errors it logged, exit 122)."""
    blocks, copies = reading.blocks, reading.dialect.copies
    sources = sorted(block.source for block in blocks)
    if not blocks and not reading.fatal:  # 2.33 stops before its summary on an info file it cannot use
        reading.error("pgbackrest verify printed no summary")
    elif sources != sorted(copies):
        reading.error(f"the summary was printed {len(blocks)} time(s) ({', '.join(sources)}); pgBackRest "
                      f"{_version(reading)} prints it {' and '.join(_COPIES[c] for c in copies)}")
    elif len({tuple(line.rstrip() for line in block.lines) for block in blocks}) > 1:
        reading.error("the logged summary and the one on stdout differ")
    if len(reading.versions) != 1 or not reading.known:
        said = ", ".join(reading.versions) or "none"
        reading.error(f"pgBackRest version {said}: restoreproof reads the verify output of pgBackRest {VERSIONS} "
                      "only (verify command begin)")
    if not (_ended(reading, exit_code) and len(reading.fatal) <= 1):
        reading.error(f"the command did not end successfully ({'; '.join(reading.ends) or 'no verify command end'})")
    if exit_code != 0 and not (reading.fatal and exit_code == FATAL_EXIT):
        reading.error(f"pgbackrest verify exited {exit_code}")


_COPIES = {"log": "logged", "stdout": "on stdout"}


def _ended(reading: _Reading, exit_code: int) -> bool:
    if len(reading.ends) != 1:
        return False
    if reading.fatal:  # 2.33 throws its count of errors at the end: the command ran to its end
        return reading.ends[0] == END_FATAL and exit_code == FATAL_EXIT
    return bool(END_OK.match(reading.ends[0]))


def _version(reading: _Reading) -> str:
    return reading.versions[0] if len(reading.versions) == 1 and reading.known else "(unknown)"


def parse_pgbackrest_verify(output: str, exit_code: int, stanza: str) -> CheckResult:
    if (why := not_started("pgbackrest", output, exit_code)) is not None:
        return CheckResult(NAME, CheckStatus.ERROR, f"pgbackrest verify could not run: {why}",
                           output.strip().splitlines(), {"exit_code": exit_code}, kind=KIND)
    parts, stray = _split(output)
    reading = _reading_for(stanza, parts)
    for line in stray:
        reading.unrecognised(line)
    for part in parts:
        if isinstance(part, _Entry):
            _entry(reading, part)
        else:
            reading.blocks.append(part)
    summaries = [_parse_summary(reading, block) for block in reading.blocks]
    for summary in summaries:
        _judge_summary(reading, summary)
    listed = {label for summary in summaries for label in summary.backups}
    for label in reading.in_progress:
        if label not in listed:
            reading.notes.append(f"backup {label}: {IN_PROGRESS_NOTE}")
    statuses = [s.status or "none" for s in summaries]
    if ("error" in statuses or reading.fatal) and not reading.failures and not reading.unread:
        reading.fail(f"stanza {stanza}: pgBackRest says status error and gives no reason restoreproof recognises")
    _layout(reading, exit_code)
    first = summaries[0] if summaries else _Summary()
    details: dict[str, Any] = {
        "backups": {label: item.status for label, item in first.backups.items()},
        "archives": {archive_id: f"{item.valid}/{item.checked} valid" for archive_id, item in first.archives.items()},
        "exit_code": exit_code,
        "statuses": statuses,
        "in_progress": sorted({*reading.in_progress, *(label for label, item in first.backups.items()
                                                      if item.status == "in-progress")}),
        "unrecognised": reading.unknown,
        "stanza": first.stanza,
        "version": reading.versions[0] if reading.versions else None,
        "summary_copies": len(summaries),
        "backup_files": {label: _numbers(item) for label, item in first.backups.items()},
        "archive_wal": {archive_id: _numbers(item) for archive_id, item in first.archives.items()},
        "invalid_files": reading.invalid_files,
        "warnings": reading.settings,
        "notes": reading.notes,
        "tool_errors": reading.tool_errors,
    }
    unrecognised = [f"unrecognised: {u}" for u in reading.unknown]
    if reading.failures and reading.known:  # a version not read here gives no verdict, either way
        not_valid = [label for label, item in first.backups.items() if item.status != "valid"]
        return CheckResult(NAME, CheckStatus.FAILED,
                           f"the repository has {len(reading.failures)} problem(s)"
                           + (f"; backups not valid: {', '.join(not_valid)}" if not_valid else ""),
                           reading.failures + unrecognised + reading.tool_errors + reading.settings + reading.errors,
                           details, kind=KIND)
    said = reading.failures + reading.tool_errors + unrecognised + reading.settings + reading.errors
    problem = _not_taken(reading, exit_code, statuses)
    if problem is None and (not first.backups or first.nothing):
        problem = "pgbackrest verify verified no backup"
        said = [f"stanza {stanza}: {NOTHING if first.nothing else 'backup: none found'}"]
    if problem is not None:
        return CheckResult(NAME, CheckStatus.ERROR, problem, said, details, kind=KIND)
    archives = "no WAL archive" if not first.archives else f"{len(first.archives)} WAL archive(s)"
    skipped = details["in_progress"]
    valid = len(first.backups) - len([label for label in skipped if label in first.backups])
    return CheckResult(NAME, CheckStatus.PASSED, f"{valid} backups and {archives} valid"
                       + (f"; in progress, not a backup yet, so not verified: {', '.join(skipped)}" if skipped else ""),
                       details=details, kind=KIND)


def scoped_to_staged_chain(check: CheckResult, backups: list[str], wal: tuple[str, str] | None,
                           staged: str) -> CheckResult:
    """The check as run on a staged copy holding only the planned chain (object storage, stage mode):
    pgBackRest 2.45's verify checks the backups and WAL it finds in the repository's folders, so it saw
    only the chain's backup sets and its WAL range. Its summary says so, whatever it found, and its
    details keep the scope: never read as a verdict on the whole repository."""
    covered = f"backup set{'s' if len(backups) > 1 else ''} {', '.join(backups) or '(none)'}"
    covered += f", WAL {wal[0]} to {wal[1]}" if wal is not None else ", no WAL"
    check.summary = (f"{check.summary}; in the staged chain only ({covered}: {staged}), not the whole repository: "
                     "its other backups and WAL were not staged, so not verified")
    check.details["scope"] = {"staged_chain": True, "backups": backups,
                              "wal": list(wal) if wal is not None else None, "staged": staged}
    return check


def _reading_for(stanza: str, parts: list[_Entry | _Block]) -> _Reading:
    """A reading in the dialect of the version the command said it began as (the newest when unknown)."""
    begun = [m["version"] for p in parts if isinstance(p, _Entry) and (m := BEGIN.match(p.msg.strip()))]
    dialect = DIALECTS.get(begun[0]) if len(begun) == 1 else None
    return _Reading(stanza, dialect or DIALECTS[list(DIALECTS)[-1]], dialect is not None)


def _not_taken(reading: _Reading, exit_code: int, statuses: list[str]) -> str | None:
    """Why an output with no failure in it cannot be taken (the first reason), or None."""
    if (exit_code != 0 and not reading.fatal) or reading.tool_errors:
        return f"pgbackrest verify could not run (exit {exit_code})"
    if reading.errors:
        return reading.errors[0]
    if set(statuses) != {"ok"}:
        return f"pgbackrest verify gave no status ok (statuses: {', '.join(statuses)})"
    if reading.unknown:
        return f"pgbackrest verify printed {len(reading.unknown)} line(s) restoreproof does not recognise"
    if reading.settings:
        return "pgBackRest warned about its own configuration"
    return None


def _numbers(item: _Item) -> dict[str, int]:
    return {"checked": item.checked, "valid": item.valid, **(item.counts or {})}
