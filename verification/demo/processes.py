"""Child processes a local stack starts and must stop: a broker, Airflow's components, its workers.

Each is started in a process group of its own (a Ctrl-C in the terminal reaches the parent only,
which then stops them in order) with its output in a log file of its own, and dies with its parent
(PR_SET_PDEATHSIG), so a parent killed outright does not leave it running. Stopping one sends
SIGTERM to its group and to every process descended from it (Airflow's task runners put themselves
in groups of their own), then SIGKILL to whatever is left after the grace period. Killing one (a
fault test's lost worker) SIGKILLs all of that at once, and its exit is then not taken for a failure.
`Processes` keeps them in the order started and stops them in reverse, also when starting the next
one failed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from verification.errors import RestoreproofError

PR_SET_PDEATHSIG = 1


class ProcessError(RestoreproofError):
    """A managed process did not start, or stopped when it should be running."""


def die_with_parent() -> None:
    """A `preexec_fn`: runs in the child between fork and exec; if the parent (the thread that started it) is
    killed, the child is told (SIGTERM)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _descendants(pid: int) -> list[int]:
    """Every process descended from `pid` (children first found, recursively), by /proc via psutil."""
    import psutil  # Airflow's own dependency; imported here so the broker alone does not need it

    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal(pids: Sequence[int], group: int | None, sig: signal.Signals) -> None:
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours (reaped later by Popen.wait) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@dataclass
class ManagedProcess:
    """One started process: its name, its log file and its process group."""

    name: str
    command: list[str]
    log: Path
    process: subprocess.Popen[bytes]
    # Killed on purpose (kill()): its exit is expected, not a failure of the stack.
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def check(self) -> None:
        """ProcessError naming the process, its exit code and its log's end, when it is no longer running
        (unless it was killed on purpose)."""
        if not self.killed and not self.running():
            raise ProcessError(f"{self.name} exited with code {self.process.returncode} "
                               f"(log {self.log}):\n{self.log_tail()}")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM to the process, its group and its descendants; SIGKILL to what is left after `grace` s."""
        if self.killed:  # all of it is gone already; its pid may be another process's by now
            return
        tree = _descendants(self.pid)
        deadline = time.monotonic() + grace
        if self.running():
            _signal([self.pid, *tree], self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        while time.monotonic() < deadline and any(_alive(pid) for pid in tree):
            time.sleep(0.2)
        tree += [pid for pid in _descendants(self.pid) if pid not in tree]
        _signal([self.pid, *tree], self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)

    def kill(self) -> list[int]:
        """SIGKILL the process, its group and every process descended from it at once, as a machine lost
        or a container's cgroup OOM-killed takes them: nothing of it can clean up. The pids killed.

        Frozen first (SIGSTOP, again until no new descendant shows): a stopped process cannot fork, so
        none escapes between the listing and the kill (orphans of a killed parent are no longer found
        under it)."""
        frozen: list[int] = []
        while found := [pid for pid in (self.pid, *_descendants(self.pid)) if pid not in frozen and _alive(pid)]:
            _signal(found, None, signal.SIGSTOP)
            frozen += found
        _signal(frozen, self.pid, signal.SIGKILL)
        self.killed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        return frozen


def stop_child(process: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    """SIGTERM to a child started on its own (not a ManagedProcess), SIGKILL when it outlives `grace` s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


@dataclass
class Processes:
    """Processes started in order, each logging to `<folder>/<name>.log`; stopped in reverse order.

    `with Processes(folder) as processes:` stops every one on the way out, whatever happened."""

    folder: Path
    started: list[ManagedProcess] = field(default_factory=list)

    def start(self, name: str, command: Sequence[str], env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> ManagedProcess:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / f"{name}.log"
        with log.open("ab") as out:
            try:
                process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                           cwd=cwd, process_group=0, preexec_fn=die_with_parent)
            except OSError as exc:
                raise ProcessError(f"cannot start {name} ({command[0]}): {exc}") from exc
        managed = ManagedProcess(name, list(command), log, process)
        self.started.append(managed)
        return managed

    def get(self, name: str) -> ManagedProcess:
        for managed in self.started:
            if managed.name == name:
                return managed
        raise KeyError(name)

    def check(self) -> None:
        """ProcessError for the first process that is no longer running (not counting those killed on
        purpose)."""
        for managed in self.started:
            managed.check()

    def wait_until(self, what: str, ready: Callable[[], bool], timeout: float, interval: float = 0.5) -> None:
        """Poll `ready` until it is true; ProcessError when a process exits first or after `timeout` s.

        `ready` may raise while what it probes is not up yet: that counts as not ready."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            self.check()
            try:
                if ready():
                    return
            except Exception as exc:  # not up yet: a refused connection, a missing row
                last = exc
            if time.monotonic() > deadline:
                break
            time.sleep(interval)
        logs = "\n".join(f"--- {m.name} ({m.log})\n{m.log_tail(1500)}" for m in self.started)
        raise ProcessError(f"{what} not ready after {timeout:.0f} s"
                           + (f" (last: {type(last).__name__}: {last})" if last else "") + f"\n{logs}")

    def stop(self, grace: float = 20.0) -> None:
        while self.started:
            self.started.pop().stop(grace)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
