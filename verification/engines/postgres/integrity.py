"""Turn the outputs of PostgreSQL's and pgBackRest's integrity tools into check results.

Each parser takes the tool's full output and exit code, and keeps the tool's own words for
every finding. A check passes only on positive evidence (exit code 0 *and* the summary the tool
prints on success); anything else is a failure or an error, never a pass by default.
"""

from __future__ import annotations

import re

from verification.model import CheckResult, CheckStatus

AMCHECK_PROGRESS = re.compile(
    r"^pg_amcheck: (including database|in database \".*\": using amcheck|checking (heap table|btree index))"
)


def parse_pg_amcheck(output: str, exit_code: int) -> CheckResult:
    lines = output.splitlines()
    heaps = sum(1 for line in lines if line.startswith('pg_amcheck: checking heap table'))
    indexes = sum(1 for line in lines if line.startswith('pg_amcheck: checking btree index'))
    databases = [m.group(1) for line in lines if (m := re.match(r'^pg_amcheck: including database "(.*)"', line))]
    findings = [line for line in lines if line.strip() and not AMCHECK_PROGRESS.match(line)]
    details = {"heap_tables": heaps, "btree_indexes": indexes, "databases": databases, "exit_code": exit_code}
    if exit_code == 0 and not findings and heaps > 0:
        return CheckResult("pg_amcheck", CheckStatus.PASSED,
                           f"{heaps} tables and {indexes} indexes in {len(databases)} databases: no corruption",
                           details=details)
    if exit_code == 0 and heaps == 0:
        return CheckResult("pg_amcheck", CheckStatus.ERROR, "pg_amcheck checked no table", findings, details)
    # Exit 2 means corruption was found; 1 means pg_amcheck itself could not run.
    corruption = exit_code == 2 or any(not line.startswith("pg_amcheck: error:") for line in findings)
    status = CheckStatus.FAILED if corruption else CheckStatus.ERROR
    summary = (f"pg_amcheck found corruption ({len(findings)} lines)" if corruption
               else f"pg_amcheck could not run (exit {exit_code})")
    return CheckResult("pg_amcheck", status, summary, findings, details)


CHECKSUMS_NUMBER = re.compile(r"^(Files scanned|Blocks scanned|Bad checksums|Data checksum version):\s+(\d+)")


def parse_pg_checksums(output: str, exit_code: int) -> CheckResult:
    numbers = {m.group(1): int(m.group(2)) for line in output.splitlines()
               if (m := CHECKSUMS_NUMBER.match(line.strip()))}
    findings = [line for line in output.splitlines() if line.startswith("pg_checksums: error:")]
    details = {"files_scanned": numbers.get("Files scanned"), "blocks_scanned": numbers.get("Blocks scanned"),
               "bad_checksums": numbers.get("Bad checksums"), "exit_code": exit_code}
    if any("data checksums are not enabled" in line for line in findings):
        return CheckResult("pg_checksums", CheckStatus.SKIPPED,
                           "the cluster was initialised without data checksums", findings, details, required=False)
    if exit_code == 0 and numbers.get("Bad checksums") == 0 and "Checksum operation completed" in output:
        return CheckResult("pg_checksums", CheckStatus.PASSED,
                           f"{numbers.get('Blocks scanned')} blocks in {numbers.get('Files scanned')} files: "
                           "0 bad checksums", details=details)
    if numbers.get("Bad checksums"):
        return CheckResult("pg_checksums", CheckStatus.FAILED,
                           f"{numbers['Bad checksums']} bad checksums", findings, details)
    failed = any("checksum verification failed" in line for line in findings)
    return CheckResult("pg_checksums", CheckStatus.FAILED if failed else CheckStatus.ERROR,
                       f"pg_checksums {'found bad pages' if failed else 'could not run'} (exit {exit_code})",
                       findings or output.strip().splitlines()[-5:], details)


VERIFY_FILE = re.compile(
    r"INFO: (?P<what>invalid checksum|invalid size|missing|invalid result \w+)[^']*'(?P<file>[^']+)'")
VERIFY_STATUS = re.compile(r"^\s*status: (\w+)\s*$")
VERIFY_BACKUP = re.compile(r"backup: (?P<label>\S+), status: (?P<status>\w+), total files checked: (?P<n>\d+)")
VERIFY_ARCHIVE = re.compile(r"archiveId: (?P<id>\S+), total WAL checked: (?P<n>\d+), total valid WAL: (?P<valid>\d+)")


def parse_pgbackrest_verify(output: str, exit_code: int, stanza: str) -> CheckResult:
    """`pgbackrest verify --output=text --verbose` with INFO console logging.

    pgBackRest 2.45 exits 0 even when it finds invalid files, so the verdict comes from the text.
    """
    statuses = [m.group(1) for line in output.splitlines() if (m := VERIFY_STATUS.match(line))]
    files = list(dict.fromkeys(f"{m['what']}: {m['file']}" for m in VERIFY_FILE.finditer(output)))
    backups = {m["label"]: m["status"] for m in VERIFY_BACKUP.finditer(output)}
    archives = {m["id"]: f"{m['valid']}/{m['n']} valid" for m in VERIFY_ARCHIVE.finditer(output)}
    details = {"backups": backups, "archives": archives, "exit_code": exit_code}
    invalid_backups = [label for label, status in backups.items() if status != "valid"]
    # Paths in the messages are relative to the stanza's backup/ or archive/ folder; say which.
    findings = [_repo_path(f, stanza) for f in files] + [f"backup {label}: status {backups[label]}"
                                                          for label in invalid_backups]
    # The summary is printed twice (console log and --output=text); every copy must say ok.
    if exit_code == 0 and statuses and set(statuses) == {"ok"} and not files and not invalid_backups and backups:
        return CheckResult("pgbackrest_verify", CheckStatus.PASSED,
                           f"{len(backups)} backups and {len(archives)} WAL archive(s) valid", details=details)
    if "error" in statuses or files or invalid_backups:
        return CheckResult("pgbackrest_verify", CheckStatus.FAILED,
                           f"repository has invalid files in {len(invalid_backups)} backup(s)"
                           + (f": {', '.join(invalid_backups)}" if invalid_backups else ""),
                           findings or output.strip().splitlines()[-5:], details)
    return CheckResult("pgbackrest_verify", CheckStatus.ERROR, f"pgbackrest verify did not report (exit {exit_code})",
                       output.strip().splitlines()[-5:], details)


def _repo_path(finding: str, stanza: str) -> str:
    what, _, path = finding.partition(": ")
    folder = "archive" if re.match(r"^\d+-\d+/", path) else "backup"
    return f"{what}: {folder}/{stanza}/{path}"
