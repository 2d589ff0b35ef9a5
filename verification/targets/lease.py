"""Who holds what a run starts, and the rules that say whether that holder is still alive.

Every process that works for a run holds a lease on it (recorded in the results store, renewed by a
heartbeat while it works) and labels everything it starts with itself: its worker (the host name,
or a configured worker name), its pid, and its process identity. The identity is the boot, the pid
namespace and the process's start time (from /proc), so a pid the kernel has since given to another
process is never taken for the holder, and a process in another namespace or on another machine is
never looked up here by a pid that means something else there.

`judge` decides from those facts alone (no I/O: the clock and the process check are given), so the
reaper, `restoreproof reap` and the start of every run apply the same rules, and the unit tests
prove them with fake clocks. The rule that never bends: what cannot be proven dead is kept.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

HOST_LABEL = "restoreproof.host"
PID_LABEL = "restoreproof.pid"
PROCESS_LABEL = "restoreproof.process"
# The same facts in a local state record (a local target's, a staged copy's, an exchange folder's).
HOLDER_KEYS = ("host", "pid", "process")

# The configured worker name (settings lease.worker) of this process, once a lease is taken; else
# the host name. One process is one worker, whatever runs it.
_worker: str | None = None


def use_worker_name(name: str | None) -> None:
    global _worker
    _worker = name or None


def worker_name() -> str:
    return _worker or socket.gethostname()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _boot_id() -> str | None:
    return _read("/proc/sys/kernel/random/boot_id")


def _pid_namespace(pid: int | str = "self") -> str | None:
    try:
        # "pid:[4026531836]" -> "4026531836"
        return os.readlink(f"/proc/{pid}/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        return None


@dataclass(frozen=True)
class ProcessStat:
    start_ticks: int
    state: str  # R, S, D, Z (a zombie: dead, not yet waited for), ...


def process_stat(pid: int | str) -> ProcessStat | None:
    """A process's start time (clock ticks since boot) and state, from /proc/PID/stat; None if none."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")": fields after the last ")".
    fields = text.rpartition(")")[2].split()
    try:
        return ProcessStat(int(fields[19]), fields[0])
    except (IndexError, ValueError):
        return None


def process_identity(pid: int | str = "self") -> str:
    """"<boot id>/<pid namespace>/<start ticks>", or "unknown" where /proc does not tell."""
    boot, namespace, stat = _boot_id(), _pid_namespace(pid), process_stat(pid)
    if boot is None or namespace is None or stat is None:
        return "unknown"
    return f"{boot}/{namespace}/{stat.start_ticks}"


@dataclass(frozen=True)
class Holder:
    """The process that started something for a run, and holds the run's lease while it works."""

    host: str
    pid: int
    process: str

    def describe(self) -> str:
        return f"worker {self.host} pid {self.pid}"

    def labels(self) -> dict[str, str]:
        return {HOST_LABEL: self.host, PID_LABEL: str(self.pid), PROCESS_LABEL: self.process}

    def record(self) -> dict[str, str | int]:
        return {"host": self.host, "pid": self.pid, "process": self.process}

    @classmethod
    def from_labels(cls, labels: dict[str, str] | None) -> Holder | None:
        """The holder Docker labels name; None for things labelled before leases (or by hand)."""
        labels = labels or {}
        try:
            return cls(labels[HOST_LABEL], int(labels[PID_LABEL]), labels[PROCESS_LABEL])
        except (KeyError, ValueError):
            return None

    @classmethod
    def from_record(cls, record: dict[str, object]) -> Holder | None:
        host, pid, process = (record.get(key) for key in HOLDER_KEYS)
        if isinstance(host, str) and isinstance(pid, int) and isinstance(process, str):
            return cls(host, pid, process)
        return None


def this_process() -> Holder:
    """This process as a holder (computed each time: a forked child is another process)."""
    return Holder(worker_name(), os.getpid(), process_identity())


# True: the holder's process runs; False: it is gone (or its pid is another process's now); None:
# it cannot be looked up from here (another machine, another pid namespace, no /proc).
ProcessCheck = Callable[[Holder], "bool | None"]


def process_alive(holder: Holder) -> bool | None:
    """Look the holder's process up in this host's /proc, when its pid means the same here."""
    if holder.process == "unknown":
        return None
    boot, _, rest = holder.process.partition("/")
    namespace = rest.partition("/")[0]
    if boot != _boot_id() or namespace != _pid_namespace():
        return None
    stat = process_stat(holder.pid)
    if stat is None or stat.state in ("Z", "X"):  # gone, or a zombie: dead, only not yet waited for
        return False
    return holder.process == f"{boot}/{namespace}/{stat.start_ticks}"


@dataclass(frozen=True)
class LeaseFacts:
    """A lease as the results store holds it."""

    lease_id: int
    run_id: str
    holder: Holder
    scope: str  # "run": the whole run in one process (the CLI); "task": one step of a scheduler's run
    acquired_at: datetime
    heartbeat_at: datetime
    lease_seconds: float
    database: str | None = None
    phase: str | None = None
    released_at: datetime | None = None
    ended: str | None = None
    generation: str | None = None

    @property
    def expires_at(self) -> datetime:
        return self.heartbeat_at + timedelta(seconds=self.lease_seconds)

    def expired(self, now: datetime) -> bool:
        return now > self.expires_at


@dataclass(frozen=True)
class RunFacts:
    """A run as the results store holds it, with every lease taken on it."""

    run_id: str
    verdict: str
    finished_at: datetime | None
    leases: tuple[LeaseFacts, ...] = ()


@dataclass(frozen=True)
class StoreUnreadable:
    """The results store could not be read: no liveness can be established from it."""

    reason: str


@dataclass(frozen=True)
class Judgement:
    dead: bool
    reason: str
    # The lease of the holder judged (when the store has it): what it was doing, and since when.
    lease: LeaseFacts | None = None
    # Positive signs of life (the holder seen running, or its heartbeat within its lease): kept even
    # when the run is named (`reap --run`), unless forced.
    live: bool = False

    def describe(self) -> str:
        return f"{'dead' if self.dead else 'kept'}: {self.reason}"


def utc_text(when: datetime) -> str:
    """A time as the reasons say it: 2026-11-25T03:00:00Z."""
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def _lease_of(run: RunFacts, holder: Holder) -> LeaseFacts | None:
    """The holder's newest lease on the run."""
    mine = [lease for lease in run.leases if lease.holder == holder]
    return max(mine, key=lambda lease: lease.acquired_at) if mine else None


def _lease_judgement(lease: LeaseFacts, now: datetime, alive: ProcessCheck) -> Judgement:
    """One lease: dead when its holder is gone, released, or silent past its lease; kept otherwise."""
    running = alive(lease.holder)
    who = lease.holder.describe()
    if running is True:
        return Judgement(False, f"{who} is running", lease, live=True)
    if running is False:
        return Judgement(True, f"{who} is gone (no process {lease.holder.pid} with its start time on this host)",
                         lease)
    if lease.released_at is not None:
        return Judgement(True, f"{who} released its lease at {utc_text(lease.released_at)} ({lease.ended or 'ended'})",
                         lease)
    if lease.expired(now):
        return Judgement(True, f"no heartbeat from {who} since {utc_text(lease.heartbeat_at)} (its lease of "
                               f"{lease.lease_seconds:.0f} s ran out at {utc_text(lease.expires_at)})", lease)
    return Judgement(False, f"{who} is not on this host; its heartbeat at {utc_text(lease.heartbeat_at)} holds its "
                            f"lease until {utc_text(lease.expires_at)}", lease, live=True)


def judge(run_id: str, holder: Holder | None, run: RunFacts | StoreUnreadable | None, now: datetime,
          alive: ProcessCheck = process_alive) -> Judgement:
    """Whether what `holder` left labelled with `run_id` may be removed (dead) or must be kept.

    In order: a holder seen running is kept, whatever else is said; with the store unreadable, or no
    row of the run in it, nothing can be established: kept. A run the store says finished is dead
    (its things should be gone). A holder on this host whose process is gone is dead. Otherwise its
    lease decides (released: dead; heartbeat older than the lease: dead; fresh: kept), and without
    a holder or a lease of it, the run's other leases do: dead only when every one of them is.
    """
    if holder is not None and alive(holder) is True:
        return Judgement(False, f"{holder.describe()} is running", live=True)
    if isinstance(run, StoreUnreadable):
        return Judgement(False, f"the results store cannot be read ({run.reason}): whether run {run_id} is alive "
                                "is unknown")
    if run is None:
        return Judgement(False, f"run {run_id} is not in this results store (another store's run, or one not "
                                "started yet): whether it is alive is unknown")
    if run.finished_at is not None:
        return Judgement(True, f"run {run_id} finished at {utc_text(run.finished_at)} ({run.verdict}), yet this is "
                               "still labelled with it")
    if holder is not None:
        lease = _lease_of(run, holder)
        if alive(holder) is False:
            return Judgement(True, f"{holder.describe()} is gone (no process {holder.pid} with its start time on "
                                   "this host)", lease)
        if lease is not None:
            return _lease_judgement(lease, now, alive)
    if not run.leases:
        return Judgement(False, f"run {run_id} holds no lease in the store (started by a restoreproof before "
                                "leases, or not yet working): whether it is alive is unknown")
    judged = [_lease_judgement(lease, now, alive) for lease in run.leases]
    living = [j for j in judged if not j.dead]
    if living:
        return Judgement(False, f"run {run_id} is alive: {living[0].reason}", living[0].lease,
                         live=living[0].live)
    newest = max(judged, key=lambda j: j.lease.heartbeat_at if j.lease else now)
    return Judgement(True, f"no lease of run {run_id} is alive: {newest.reason}", newest.lease)


@dataclass(frozen=True)
class Killed:
    """A lease whose holder died holding it: its database (when it had one) was being verified."""

    lease: LeaseFacts
    reason: str


@dataclass(frozen=True)
class RunJudgement:
    run_id: str
    # Leases whose holders died without releasing them: each one's database was killed in flight.
    killed: tuple[Killed, ...]
    # The whole run is over: it ran in one process (scope "run") and that process died. Its
    # databases without a result were never finished; the run is to be closed as killed.
    dead: bool
    reason: str


def judge_run(run: RunFacts, now: datetime, alive: ProcessCheck = process_alive) -> RunJudgement:
    """A run not finished in the store: which of its leases died held, and whether the run is over.

    A scheduler's run (task leases) is over when its scheduler publishes it: only its dead tasks
    are named here. A run held by one process is over when that process died holding it."""
    killed = []
    living = []
    for lease in run.leases:
        if lease.released_at is not None:
            continue
        judged = _lease_judgement(lease, now, alive)
        if judged.dead:
            killed.append(Killed(lease, judged.reason))
        else:
            living.append(judged)
    whole = bool(run.leases) and all(lease.scope == "run" for lease in run.leases)
    if run.finished_at is None and whole and killed and not living:
        newest = max(killed, key=lambda k: k.lease.heartbeat_at)
        return RunJudgement(run.run_id, tuple(killed), True, newest.reason)
    reason = living[0].reason if living else "no lease of it died held"
    return RunJudgement(run.run_id, tuple(killed), False, reason)


def describe_phase(lease: LeaseFacts) -> str:
    """What the holder said it was doing when last heard of."""
    if lease.phase:
        return f"while: {lease.phase}"
    return f"while verifying {lease.database}" if lease.database else "before it named a database"
