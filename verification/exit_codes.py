"""What each exit code of `restoreproof` means: one table, shown in every command's --help and the README.

A scheduler acts on the code alone, so each outcome a team must treat differently has its own: a pass
(an auditor's signature), a failure (bad backups: page someone), "could not check" (fix restoreproof's
setting, permission or tool: the backups are not judged), an offline check that found nothing wrong
(nothing was restored, so it is not a pass), and an interrupt.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    PASSED = 0
    FAILED = 1
    ERROR = 2
    OFFLINE_CLEAN = 3
    INTERRUPTED = 130  # SIGINT (Ctrl-C), as shells report 128 + 2
    TERMINATED = 143  # SIGTERM (a scheduler stopping the run), 128 + 15


MEANINGS: dict[ExitCode, str] = {
    ExitCode.PASSED: "passed: every database restored and proven (plan: every chain complete, every file read)",
    ExitCode.FAILED: "failed: proof of bad backups (a broken chain, a damaged or missing file, a check naming "
                     "damage); page someone",
    ExitCode.ERROR: "error: restoreproof could not check (usage, setting, permission, tool, unreadable file, "
                    "no target); the message names the cause and the fix",
    ExitCode.OFFLINE_CLEAN: "offline checks found nothing wrong (--target offline): nothing was restored, "
                            "so this is not a pass",
    ExitCode.INTERRUPTED: "interrupted (SIGINT): the run is recorded as interrupted, its targets removed",
    ExitCode.TERMINATED: "terminated (SIGTERM): the run is recorded as interrupted, its targets removed",
}


def table() -> str:
    """The table as --help shows it (one line per code; Click keeps lines that begin with a code apart)."""
    return "\n\n".join(f"{int(code):>3}  {meaning}" for code, meaning in MEANINGS.items())
