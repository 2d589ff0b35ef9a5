"""Leases on runs, and the sweep that removes what dead workers left.

Every process that works for a run holds a `LeaseKeeper`: a lease row in the results store naming
the process (worker, pid, process identity), renewed by a daemon thread every few seconds with what
the process is doing, released when it is done. Everything the process starts carries the same
holder in its labels (targets/labels.py) or state record.

`sweep` looks at what every run left (labelled containers and volumes, local state records) and at
the leases not released, and judges each with the rules of targets/lease.py against the store's
facts: only what is proven dead is removed; the rest is kept with the reason. The pipeline then
records the killed databases and closes the dead runs (pipeline.end_dead_runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType

from sqlalchemy import make_url

from verification.config import Settings
from verification.redaction import Redactor
from verification.results import ResultStore
from verification.results.migrations import masked
from verification.results.store import RunLeaseRow, RunRow
from verification.targets.lease import (
    Holder,
    Judgement,
    Killed,
    LeaseFacts,
    ProcessCheck,
    RunFacts,
    RunJudgement,
    StoreUnreadable,
    judge,
    judge_run,
    process_alive,
    this_process,
    use_worker_name,
    utc_text,
)
from verification.targets.reaper import ReapReport, reap_dead

ProgressFn = Callable[[str], None]
# Progress messages are many; the heartbeat writes what the holder is doing at most this often.
MIN_WRITE_SECONDS = 0.25
PHASE_CHARACTERS = 500


class _Unchanged:
    pass


UNCHANGED = _Unchanged()


class LeaseKeeper:
    """A lease on a run for as long as this process works for it (a context manager)."""

    def __init__(self, settings: Settings, run_id: str, scope: str, *, database: str | None = None,
                 generation: str | None = None, progress: ProgressFn | None = None) -> None:
        self.settings = settings
        self.run_id = run_id
        self.scope = scope
        self.database = database
        self.generation = generation
        self.phase: str | None = None
        self.lease_id: int | None = None
        self.holder: Holder | None = None
        self._progress = progress
        self._redact = Redactor(settings)
        self._store: ResultStore | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failing_since: float | None = None
        self._warned = False

    def __enter__(self) -> LeaseKeeper:
        use_worker_name(self.settings.lease.worker)
        self.holder = this_process()
        self._store = ResultStore(self.settings.results_database_url, self.settings.results_retry)
        try:
            self.lease_id = self._store.take_lease(
                self.run_id, host=self.holder.host, pid=self.holder.pid, process=self.holder.process,
                scope=self.scope, lease_seconds=self.settings.lease.seconds, database=self.database,
                generation=self.generation)
        except BaseException:
            self._store.close()
            raise
        self._thread = threading.Thread(target=self._beat_until_stopped, name=f"restoreproof-lease-{self.run_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        ended = "released" if exc is None else f"ended by {kind.__name__ if kind else 'an exception'}: {exc}"
        try:
            if self._store is not None and self.lease_id is not None:
                self._store.release_lease(self.lease_id, self._redact(ended)[:PHASE_CHARACTERS])
        except Exception as error:  # the work is done either way; an open lease is judged when it runs out
            self._say(f"the lease on run {self.run_id} was not released ({type(error).__name__}: {error}); it "
                      f"runs out after {self.settings.lease.seconds:.0f} s")
        finally:
            if self._store is not None:
                self._store.close()

    def doing(self, phase: str | None, *, database: str | _Unchanged | None = UNCHANGED,
              generation: str | None = None) -> None:
        """What the holder does now (and the database, when given: None for none), written by the
        heartbeat thread at once (never by the caller: a slow store must not slow the work)."""
        with self._lock:
            if phase is not None:
                self.phase = self._redact(phase)[:PHASE_CHARACTERS]
            if not isinstance(database, _Unchanged):
                self.database = database
            if generation is not None:
                self.generation = generation
        self._wake.set()

    def tracking(self, progress: ProgressFn) -> ProgressFn:
        """`progress`, with each message also kept as what the holder is doing."""
        def track(message: str) -> None:
            self.doing(message)
            progress(message)

        return track

    def _say(self, message: str) -> None:
        if self._progress is not None:
            self._progress(self._redact(message))

    def _beat_until_stopped(self) -> None:
        interval = self.settings.lease.interval
        while True:
            self._wake.wait(interval)
            if self._stopping:
                return
            self._wake.clear()
            self._beat()
            time.sleep(MIN_WRITE_SECONDS)  # several messages in a burst make one write

    def _beat(self) -> None:
        assert self._store is not None and self.lease_id is not None
        with self._lock:
            database, phase, generation = self.database, self.phase, self.generation
        try:
            self._store.renew_lease(self.lease_id, database=database, phase=phase, generation=generation)
            self._failing_since = None
        except Exception as exc:  # the work goes on; other hosts judge by the lease, so it is said
            now = time.monotonic()
            self._failing_since = self._failing_since or now
            if not self._warned and now - self._failing_since >= self.settings.lease.interval:
                self._warned = True
                self._say(f"warning: the lease on run {self.run_id} could not be renewed ({type(exc).__name__}: "
                          f"{exc}); after {self.settings.lease.seconds:.0f} s without one, other hosts may take this "
                          "worker for dead and remove its targets")


def lease_facts(row: RunLeaseRow) -> LeaseFacts:
    return LeaseFacts(lease_id=row.id, run_id=row.run_id, holder=Holder(row.host, row.pid, row.process),
                      scope=row.scope, acquired_at=row.acquired_at, heartbeat_at=row.heartbeat_at,
                      lease_seconds=row.lease_seconds, database=row.database, phase=row.phase,
                      released_at=row.released_at, ended=row.ended, generation=row.generation)


def run_facts(store: ResultStore, run_ids: Iterable[str]) -> dict[str, RunFacts | None]:
    """Each run as the store has it (None: no row), with all its leases."""
    wanted = sorted(set(run_ids))
    rows = store.runs(wanted)
    leases: dict[str, list[LeaseFacts]] = {}
    for row in store.leases(wanted):
        leases.setdefault(row.run_id, []).append(lease_facts(row))
    return {run_id: (RunFacts(run_id, rows[run_id].verdict, rows[run_id].finished_at, tuple(leases.get(run_id, ())))
                     if run_id in rows else None) for run_id in wanted}


@dataclass
class Sweep:
    store: str  # the results store judged against, as it can be shown (password masked)
    reaped: ReapReport
    # Runs not finished whose leases were judged (killed leases, and whether the whole run is over).
    runs: list[RunJudgement] = field(default_factory=list)
    rows: dict[str, RunRow] = field(default_factory=dict)
    error: str | None = None


def sweep(settings: Settings, *, keep_runs: frozenset[str] = frozenset(), only_run: str | None = None,
          force: bool = False, use_docker: bool = True, alive: ProcessCheck = process_alive) -> Sweep:
    """Judge every run's leftovers and open leases against the store; remove what is dead."""
    shown = masked(make_url(settings.results_database_url))
    try:
        store = ResultStore(settings.results_database_url, settings.results_retry)
    except Exception as exc:  # nothing can be established: everything is kept (a live holder here too)
        unreadable = StoreUnreadable(f"{shown}: {type(exc).__name__}: {exc}")
        now = datetime.now(UTC)
        reaped = reap_dead(settings.state_dir, lambda run_id, holder: judge(run_id, holder, unreadable, now, alive),
                           use_docker=use_docker, only_run=only_run, keep_runs=keep_runs, force=force)
        return Sweep(shown, reaped, error=unreadable.reason)
    try:
        now = store.now()
        known: dict[str, RunFacts | None] = {}

        def judged(run_id: str, holder: Holder | None) -> Judgement:
            if run_id not in known:
                known.update(run_facts(store, [run_id]))
            return judge(run_id, holder, known[run_id], now, alive)

        reaped = reap_dead(settings.state_dir, judged, use_docker=use_docker, only_run=only_run,
                           keep_runs=keep_runs, force=force)
        open_runs = {row.run_id for row in store.leases(open_only=True)} - keep_runs
        if only_run is not None:
            open_runs &= {only_run}
        facts = run_facts(store, open_runs)
        result = Sweep(shown, reaped, rows=store.runs(open_runs))
        for run_id in sorted(open_runs):
            run = facts[run_id] or RunFacts(run_id, "running", None, tuple(
                lease_facts(row) for row in store.leases([run_id])))
            result.runs.append(judge_run(run, now, alive))
        return result
    finally:
        store.close()


def _open_task_leases(settings: Settings, run_id: str, database: str) -> tuple[datetime, list[RunLeaseRow]]:
    """The store's time and the leases of one database's task not yet released."""
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        return store.now(), [row for row in store.leases([run_id], open_only=True) if row.database == database]
    finally:
        store.close()


def open_task_databases(settings: Settings, run_id: str) -> list[str]:
    """The databases of a run whose task leases are not released (a task at work, or one killed at it)."""
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        return sorted({row.database for row in store.leases([run_id], open_only=True)
                       if row.scope == "task" and row.database is not None})
    finally:
        store.close()


def live_task(settings: Settings, run_id: str, database: str, alive: ProcessCheck = process_alive) -> str | None:
    """Why one database's task still shows signs of life (a lease of it not released whose holder is
    seen running, or whose heartbeat is within its lease); None when none does. A scheduler may run a
    task's teardown while the task still works (a timeout it could not enforce, a zombie task): its
    target is then kept until the lease says the holder is dead."""
    now, rows = _open_task_leases(settings, run_id, database)
    for row in rows:
        lease = lease_facts(row)
        judged = judge(run_id, lease.holder, RunFacts(run_id, "running", None, (lease,)), now, alive)
        if not judged.dead:
            return judged.reason
    return None


def ended_task_leases(settings: Settings, run_id: str, database: str,
                      alive: ProcessCheck = process_alive) -> list[Killed]:
    """The leases of one database's task still open once the scheduler says the task is over (its
    teardown, or the run's publication, runs): each names a worker that died at work, unless it is
    seen still running."""
    now, rows = _open_task_leases(settings, run_id, database)
    killed = []
    for row in rows:
        lease = lease_facts(row)
        if alive(lease.holder) is True:
            continue
        judged = judge(run_id, lease.holder, RunFacts(run_id, "running", None, (lease,)), now, alive)
        reason = judged.reason if judged.dead else (
            f"its task is over (the scheduler ended it) but {lease.holder.describe()} never released its "
            f"lease (last heartbeat at {utc_text(lease.heartbeat_at)})")
        killed.append(Killed(lease, reason))
    return killed
