"""What a live display needs of a run as it goes: each phase of each database as it starts and ends,
and the run's predicted total before the first restore.

The pipeline emits; whoever listens (the CLI's display) is set for the duration of a run with
`listening`. A context variable rather than one more parameter through every step: the progress
messages (`ProgressFn`) stay plain text for their many callers, and with no listener (a scheduler's
task, a test) an event costs nothing. A listener that raises never costs the run: it is logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhaseStarted:
    database: str
    phase: str
    # None where nothing predicts this phase (yet): a display may use the run's upfront figure.
    predicted_seconds: float | None = None
    at: float = field(default_factory=time.monotonic)
    # The predicted phases a step shown as one covers (server start, redo and recovery end are one
    # wait for the server), whose upfront figures add up to its own.
    covers: tuple[str, ...] = ()


@dataclass(frozen=True)
class PhaseEnded:
    database: str
    phase: str
    seconds: float
    predicted_seconds: float | None = None
    # False: an exception (an error, Ctrl-C) left the phase before it finished.
    finished: bool = True


@dataclass(frozen=True)
class RunPredicted:
    """Each database's predicted seconds, in run order (None: nothing to predict it from yet), and
    per phase where known; `basis` says what the figures rest on."""

    databases: dict[str, float | None]
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    basis: str = ""


# The phase a display shows while the engine restores and checks (its own phases are timed inside it).
RESTORE_AND_CHECKS = "restore and checks"
# The checks of the backup files that need no server (SQL Server's page checksums: hours on a large backup).
BACKUP_FILES = "backup file checks"

@dataclass(frozen=True)
class PhaseBytes:
    """How far a running phase that moves bytes has come (a download as its parts arrive)."""

    database: str
    phase: str
    done: int
    total: int | None = None


PhaseEvent = PhaseStarted | PhaseEnded | RunPredicted | PhaseBytes
Listener = Callable[[PhaseEvent], None]

_listener: ContextVar[Listener | None] = ContextVar("restoreproof_phase_listener", default=None)
# The listeners that failed, each logged once: a display broken every second must not flood the log.
_failed: set[int] = set()


def listen(listener: Listener | None) -> Token[Listener | None]:
    """`listener` told every event of this context from now on, until `unlisten` with the token."""
    return _listener.set(listener)


def unlisten(token: Token[Listener | None]) -> None:
    _listener.reset(token)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    token = listen(listener)
    try:
        yield
    finally:
        unlisten(token)


def emit(event: PhaseEvent) -> None:
    _tell(_listener.get(), event)


def _tell(listener: Listener | None, event: PhaseEvent) -> None:
    if listener is None:
        return
    try:
        listener(event)
    except Exception as exc:  # a display must never cost the verification
        if id(listener) not in _failed:
            _failed.add(id(listener))
            log.warning("progress display failed, the run goes on: %r", exc)


@contextmanager
def phase(database: str, name: str, predicted_seconds: float | None = None,
          covers: tuple[str, ...] = ()) -> Iterator[None]:
    """The phase `name` of `database`, started now and ended when the block leaves (however it leaves)."""
    started = PhaseStarted(database, name, predicted_seconds, covers=covers)
    emit(started)
    finished = False
    try:
        yield
        finished = True
    finally:
        emit(PhaseEnded(database, name, time.monotonic() - started.at, predicted_seconds, finished))


class ByteCounter:
    """The bytes a phase has moved, added from any thread (a transfer's workers, which do not share the
    run's context: the listener is the one of the thread that made the counter) and told at most every
    `every` seconds, and once more when `close`d."""

    def __init__(self, database: str, phase: str, total: int | None, every: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.database, self.phase, self.total = database, phase, total
        self.every, self.clock = every, clock
        self.done = 0
        self._listener = _listener.get()
        self._lock = threading.Lock()
        self._told = float("-inf")

    def add(self, count: int) -> None:
        # Negative where a transfer rewinds a part it retries.
        with self._lock:
            self.done += count
            if self._listener is None or self.clock() - self._told < self.every:
                return
            self._told = self.clock()
            event = PhaseBytes(self.database, self.phase, self.done, self.total)
        _tell(self._listener, event)

    def close(self) -> None:
        with self._lock:
            event = PhaseBytes(self.database, self.phase, self.done, self.total)
        _tell(self._listener, event)


def duration(seconds: float) -> str:
    """A duration as a person reads it: "45 s", "4 min 10 s", "2 h 5 min"."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def predicted_line(run: RunPredicted) -> str:
    """"predicted: db1 4 min 10 s, db2 1 min, total 5 min 10 s (from 4 earlier runs on this host)"."""
    known = {name: seconds for name, seconds in run.databases.items() if seconds is not None}
    if not known:
        return f"predicted: {run.basis}"
    parts = [f"{name} {duration(seconds)}" if seconds is not None else f"{name} no prediction yet"
             for name, seconds in run.databases.items()]
    return f"predicted: {', '.join(parts)}, total {duration(sum(known.values()))} ({run.basis})"
