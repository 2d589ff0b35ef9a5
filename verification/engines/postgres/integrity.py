"""Turn the outputs of PostgreSQL's and pgBackRest's integrity tools into check results.

Each parser takes the tool's full output and exit code, and keeps the tool's own words for
every finding. A check passes only on positive evidence (exit code 0 *and* the summary the tool
prints on success); anything else is a failure or an error, never a pass by default.
"""

from __future__ import annotations

import re

from verification.model import CheckName, CheckResult, CheckStatus
from verification.targets.base import not_started

AMCHECK_PROGRESS = re.compile(
    r"^pg_amcheck: (including database|in database \".*\": using amcheck|checking (heap table|btree index))"
)


# What pg_amcheck (PostgreSQL 14 and later) checks, as restoreproof runs it (--all, postgres.amcheck_options).
PG_AMCHECK_CHECKED = ("verify_heapam on every table and its TOAST table (heap pages, tuples, TOAST links) and "
                      "bt_index_check on every btree index (heapallindexed with postgres.amcheck_options' "
                      "--heapallindexed, the default)")


def did_not_run(name: str, output: str, exit_code: int) -> CheckResult | None:
    """The check as an error when its program never started (missing from the target image, say)."""
    why = not_started(name, output, exit_code)
    if why is None:
        return None
    return CheckResult(name, CheckStatus.ERROR, f"{name} could not run: {why}", output.strip().splitlines(),
                       {"exit_code": exit_code})


def parse_pg_amcheck(output: str, exit_code: int) -> CheckResult:
    if (absent := did_not_run(CheckName.PG_AMCHECK, output, exit_code)) is not None:
        return absent
    lines = output.splitlines()
    heaps = sum(1 for line in lines if line.startswith('pg_amcheck: checking heap table'))
    indexes = sum(1 for line in lines if line.startswith('pg_amcheck: checking btree index'))
    databases = [m.group(1) for line in lines if (m := re.match(r'^pg_amcheck: including database "(.*)"', line))]
    findings = [line for line in lines if line.strip() and not AMCHECK_PROGRESS.match(line)]
    details = {"heap_tables": heaps, "btree_indexes": indexes, "databases": databases, "exit_code": exit_code}
    if exit_code == 0 and not findings and heaps > 0:
        return CheckResult(CheckName.PG_AMCHECK, CheckStatus.PASSED,
                           f"{heaps} tables and {indexes} indexes in {len(databases)} databases: no corruption",
                           details=details)
    if exit_code == 0 and heaps == 0:
        return CheckResult(CheckName.PG_AMCHECK, CheckStatus.ERROR, "pg_amcheck checked no table", findings, details)
    if (mismatch := _collation_mismatch(lines)) is not None:
        # Indexes on text sorted by another collation library than the target's: an order amcheck
        # finds wrong (or right) there is no proof about the backup either way.
        return CheckResult(CheckName.PG_AMCHECK, CheckStatus.ERROR,
                           f"pg_amcheck's findings are not proof: the server warned \"{mismatch}\": the target's "
                           "collation library is not the one the database was created with; verify with a target "
                           "image whose ICU/glibc matches the source's (docker.postgres_image)", findings, details)
    if exit_code == 0 and not _reports_on_the_data(lines):
        # pg_amcheck found nothing, but the server said something restoreproof does not know to be harmless.
        return CheckResult(CheckName.PG_AMCHECK, CheckStatus.ERROR, "pg_amcheck found no corruption, but the server "
                           f"warned: {_server_said(lines)}", findings, details)
    # Exit 2 means corruption was found; 1 means pg_amcheck itself could not run.
    corruption = exit_code == 2 or _reports_on_the_data(lines)
    status = CheckStatus.FAILED if corruption else CheckStatus.ERROR
    summary = (f"pg_amcheck found corruption ({len(findings)} lines)" if corruption
               else f"pg_amcheck could not run (exit {exit_code})")
    return CheckResult(CheckName.PG_AMCHECK, status, summary, findings, details)


# A server message libpq passes on as it is (pg_amcheck --verbose adds its SQLSTATE): WARNING, NOTICE
# and the lines that go on from one. Only data-corrupted and index-corrupted (class XX) speak of the data.
SERVER_LINE = re.compile(r"^(?P<level>WARNING|NOTICE|INFO|DETAIL|HINT|LOCATION|CONTEXT):  "
                         r"(?:(?P<state>[0-9A-Z]{5}): )?(?P<text>.*)$")
DATA_STATES = frozenset({"XX001", "XX002"})
COLLATION_MISMATCH = re.compile(r'database ".*" has (a collation version mismatch|no actual collation version)|'
                                r'collation ".*" has (version mismatch|no actual collation version)')


def _reports_on_the_data(lines: list[str]) -> bool:
    """Whether a line reports on the checked data: one that is not progress, nor pg_amcheck's own
    message (every one begins 'pg_amcheck: ': error, detail, hint, getopt's complaint), nor a line that
    goes on from such a message (the server's DETAIL and HINT of a refused connection, libpq's
    indented hint), nor a server notice or warning about anything but corrupted data."""
    own = False
    for line in lines:
        server = SERVER_LINE.match(line)
        if line.startswith("pg_amcheck: "):
            own = not AMCHECK_PROGRESS.match(line)
        elif server is not None:
            if server["level"] == "WARNING" and server["state"] in DATA_STATES:
                return True
        elif line.strip() and not own:
            return True
    return False


def _collation_mismatch(lines: list[str]) -> str | None:
    """The server's warning that a database's collation library version differs from the target's."""
    for line in lines:
        if (server := SERVER_LINE.match(line)) and server["level"] == "WARNING" and COLLATION_MISMATCH.search(line):
            return server["text"]
    return None


def _server_said(lines: list[str]) -> str:
    said = [m["text"] for line in lines if (m := SERVER_LINE.match(line)) and m["level"] in ("WARNING", "NOTICE")]
    return "; ".join(dict.fromkeys(said)) or "(nothing restoreproof could read)"


CHECKSUMS_NUMBER = re.compile(r"^(Files scanned|Blocks scanned|Bad checksums|Data checksum version):\s+(\d+)")


def parse_pg_checksums(output: str, exit_code: int) -> CheckResult:
    if (absent := did_not_run(CheckName.PG_CHECKSUMS, output, exit_code)) is not None:
        return absent
    numbers = {m.group(1): int(m.group(2)) for line in output.splitlines()
               if (m := CHECKSUMS_NUMBER.match(line.strip()))}
    findings = [line for line in output.splitlines() if line.startswith("pg_checksums: error:")]
    details = {"files_scanned": numbers.get("Files scanned"), "blocks_scanned": numbers.get("Blocks scanned"),
               "bad_checksums": numbers.get("Bad checksums"), "exit_code": exit_code}
    if any("data checksums are not enabled" in line for line in findings):
        return CheckResult(CheckName.PG_CHECKSUMS, CheckStatus.SKIPPED,
                           "the cluster was initialised without data checksums", findings, details, required=False)
    if exit_code == 0 and numbers.get("Bad checksums") == 0 and "Checksum operation completed" in output:
        return CheckResult(CheckName.PG_CHECKSUMS, CheckStatus.PASSED,
                           f"{numbers.get('Blocks scanned')} blocks in {numbers.get('Files scanned')} files: "
                           "0 bad checksums", details=details)
    if numbers.get("Bad checksums"):
        return CheckResult(CheckName.PG_CHECKSUMS, CheckStatus.FAILED,
                           f"{numbers['Bad checksums']} bad checksums", findings, details)
    failed = any("checksum verification failed" in line for line in findings)
    return CheckResult(CheckName.PG_CHECKSUMS, CheckStatus.FAILED if failed else CheckStatus.ERROR,
                       f"pg_checksums {'found bad pages' if failed else 'could not run'} (exit {exit_code})",
                       findings or output.strip().splitlines()[-5:], details)
