"""The interface of a disposable target: somewhere to restore into and run the engine's tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass
class ExecResult:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    # The time the command was given (`timeout` inside the target), when it ran under one.
    budget: float | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def output(self) -> str:
        return self.stdout + (("\n" if self.stdout and not self.stdout.endswith("\n") else "") + self.stderr
                              if self.stderr else "")

    @property
    def timed_out(self) -> bool:
        # `timeout` exits 124 when it stopped the command, 137 when it had to kill it; 137 is also any
        # SIGKILL from elsewhere (the kernel's OOM killer): a timeout only once the budget was spent.
        if self.exit_code == 124:
            return True
        return self.exit_code == 137 and (self.budget is None or self.seconds >= self.budget)

    @property
    def killed(self) -> bool:
        """Killed by SIGKILL (exit 137) before its budget ran out: by the kernel (out of memory) or a person."""
        return self.exit_code == 137 and not self.timed_out


# What strerror(ENOSPC) says, in every tool's message about a full disk (pgBackRest, PostgreSQL, coreutils).
NO_SPACE = "No space left on device"


@runtime_checkable
class ResourceLimited(Protocol):
    """A target with limits of its own (memory, a data volume's size) that can say when it ran out of
    them: then whatever the restore or a check met is not a verdict on the backups."""

    def exhausted(self) -> list[str]:
        """Each resource the target ran out of, said with its limit and the tools' words ([] if none)."""
        ...


class Target(Protocol):
    """A throw-away machine (container or local folder) with the engine's binaries on PATH."""

    kind: str
    name: str
    repo_path: str  # the repository, as the target's commands see it (read-only)
    work_dir: str   # a writable folder, private to this target
    provision_seconds: float
    # (as the target's commands see it, as this process sees it): a folder both see and nothing
    # else reaches (a restored server's socket goes there); None when the target has none.
    exchange: tuple[str, str] | None

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        """Run a command as the database's OS user; never raises on a non-zero exit."""
        ...

    def write_text(self, path: str, text: str) -> None: ...

    def read_text(self, path: str) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None:
        """Remove everything the target made: processes, containers, volumes, folders."""
        ...


class TargetProvider(Protocol):
    kind: str

    def provision(self, run_id: str, database: str, repo_host_path: str) -> Target: ...


# How long `timeout` waits after its TERM before it KILLs the command.
KILL_AFTER = 10


def timeout_argv(argv: list[str], seconds: float) -> list[str]:
    """Bound a command inside the target itself, so a hung tool cannot outlive its budget."""
    return ["timeout", f"--kill-after={KILL_AFTER}", f"{max(1, int(seconds))}", *argv]


# What `timeout` (and a shell) exit with when the command never started: found but not executable,
# not found. No integrity tool uses them for a finding (pg_amcheck 0-2, pg_checksums 0-1), so they
# are a missing or broken program in the target, never a word about the data.
NOT_STARTED = {126: "is not executable", 127: "was not found"}


def not_started(program: str, output: str, exit_code: int) -> str | None:
    """Why `program` never ran in the target, in its runner's words, or None if it ran."""
    if exit_code not in NOT_STARTED:
        return None
    said = output.strip().splitlines()[-1] if output.strip() else "(nothing said)"
    return f"{program} {NOT_STARTED[exit_code]} in the target (exit {exit_code}: {said})"
