"""The CLI's progress on stderr: each step as a time-stamped line, and each running phase with its
elapsed and predicted time, on a terminal as a status line refreshed every second, else as a line
every few seconds (a log file, a scheduler's capture).

The display reads the pipeline's phase events (verification.phase_events); it never costs the run:
whatever fails in it is logged once and the run goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import Token
from dataclasses import dataclass
from datetime import datetime

from rich.console import Console
from rich.markup import escape

from verification.phase_events import (
    RESTORE_AND_CHECKS,
    Listener,
    PhaseBytes,
    PhaseEnded,
    PhaseEvent,
    PhaseStarted,
    RunPredicted,
    duration,
    listen,
    unlisten,
)

log = logging.getLogger(__name__)

# Seconds between two lines of the running phases without a terminal (the setting progress_interval).
DEFAULT_INTERVAL = 10.0


@dataclass(frozen=True)
class Running:
    database: str
    phase: str
    started: float
    predicted: float | None


def mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


def over(elapsed: float, predicted: float) -> str:
    return f"over the prediction by {duration(elapsed - predicted)}"


def live_text(running: Running, now: float) -> str:
    """On a terminal: "db1: restore and checks 1 min 12 s of ~4 min (predicted)"."""
    elapsed = now - running.started
    head = f"{running.database}: {running.phase} {duration(elapsed)}"
    if running.predicted is None:
        return f"{head} (no prediction)"
    if elapsed > running.predicted:
        return f"{head}, predicted {duration(running.predicted)}: {over(elapsed, running.predicted)}"
    return f"{head} of ~{duration(running.predicted)} (predicted)"


def plain_text(running: Running, now: float) -> str:
    """Without a terminal: "db1: restore and checks running 1 min 12 s (predicted 4 min)"."""
    elapsed = now - running.started
    return f"{running.database}: {running.phase} running {duration(elapsed)} {_against(elapsed, running.predicted)}"


def ended_text(ended: PhaseEnded, predicted: float | None) -> str:
    done = "done in" if ended.finished else "stopped after"
    return f"{ended.database}: {ended.phase} {done} {duration(ended.seconds)} {_against(ended.seconds, predicted)}"


def _against(seconds: float, predicted: float | None) -> str:
    """A line's "(predicted 4 min)", with by how much it is over, or "(no prediction)"."""
    if predicted is None:
        return "(no prediction)"
    if seconds > predicted:
        return f"(predicted {duration(predicted)}, {over(seconds, predicted)})"
    return f"(predicted {duration(predicted)})"


class PhaseBoard:
    """The phases running now, each with the prediction it is measured against: the pipeline's own
    (made once the target is up), else the run's upfront one."""

    def __init__(self) -> None:
        self.upfront: dict[str, dict[str, float]] = {}
        self.running: dict[tuple[str, str], Running] = {}
        self.moved: dict[tuple[str, str], PhaseBytes] = {}

    def predicted(self, database: str, phase: str, said: float | None, covers: tuple[str, ...] = ()) -> float | None:
        upfront = self.upfront.get(database, {})
        if said is not None or phase in upfront:
            return said if said is not None else upfront[phase]
        if covers and all(name in upfront for name in covers):
            return sum(upfront[name] for name in covers)
        return None

    def apply(self, event: PhaseEvent) -> str | None:
        """Take the event in; the line it makes on its own (a phase that ended), if any."""
        if isinstance(event, RunPredicted):
            self.upfront = {db: dict(phases) for db, phases in event.phases.items()}
        elif isinstance(event, PhaseBytes):
            self.moved[(event.database, event.phase)] = event
        elif isinstance(event, PhaseStarted):
            predicted = self.predicted(event.database, event.phase, event.predicted_seconds, event.covers)
            self.running[(event.database, event.phase)] = Running(event.database, event.phase, event.at, predicted)
        else:
            was = self.running.pop((event.database, event.phase), None)
            self.moved.pop((event.database, event.phase), None)
            return ended_text(event, was.predicted if was else self.predicted(
                event.database, event.phase, event.predicted_seconds))
        return None

    def lines(self, now: float, text: Callable[[Running, float], str]) -> list[str]:
        """Each running phase; the engine's whole restore only while none of its own steps is shown."""
        running = list(self.running.values())
        inner = {r.database for r in running if r.phase != RESTORE_AND_CHECKS}
        return [text(r, now) + self._bytes(r) for r in running
                if r.phase != RESTORE_AND_CHECKS or r.database not in inner]

    def _bytes(self, running: Running) -> str:
        said = self.moved.get((running.database, running.phase))
        if said is None:
            return ""
        return f", {said.done / 2**20:.1f} of {mib(said.total)}" if said.total else f", {mib(said.done)}"


class Progress:
    """Each step as a time-stamped line; the running phases, on a terminal, in a status line refreshed
    every second; without one, as a line every `interval` seconds. `stop` ends both (the thread joined)."""

    def __init__(self, console: Console | None = None, *, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.terminal = self.console.is_terminal
        self.interval = interval if interval is not None else (1.0 if self.terminal else DEFAULT_INTERVAL)
        self.clock = clock
        self.status = self.console.status("starting", spinner="dots")
        self.board = PhaseBoard()
        self.started = False
        self.message = "starting"
        self._lock = threading.Lock()
        self._owner = threading.get_ident()
        self._token: Token[Listener | None] | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._failed = False

    def __call__(self, message: str) -> None:
        with self._lock:
            self.message = message
            self._line(message)
            self.status.update(f"{escape(message)} ...")
            if not self.started:
                self.status.start()
                self.started = True
                self._stop.clear()
                self._ticker = threading.Thread(target=self._tick_until_stopped, name="progress", daemon=True)
                self._ticker.start()
        if self._token is None and threading.get_ident() == self._owner:
            self._token = listen(self.phase)

    def plain_every(self, seconds: float) -> None:
        """Without a terminal, a line of the running phases every `seconds` (on one, every second still)."""
        if not self.terminal:
            self.interval = seconds

    def phase(self, event: PhaseEvent) -> None:
        """The pipeline's phase events (the listener `__call__` sets up)."""
        if not self.started:
            return
        with self._lock:
            said = self.board.apply(event)
            if said is not None:
                self._line(said)
            self._refresh()

    def tick(self) -> None:
        """The running phases said now: the status line updated, or (no terminal) a line each."""
        with self._lock:
            if self.terminal:
                self._refresh()
            else:
                for line in self.board.lines(self.clock(), plain_text):
                    self._line(line)

    def stop(self) -> None:
        if self._token is not None and threading.get_ident() == self._owner:
            unlisten(self._token)
            self._token = None
        self._stop.set()
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5)
        if self.started:
            self.status.stop()
            self.started = False

    def _line(self, message: str) -> None:
        self.console.print(f"[dim]{datetime.now():%H:%M:%S}[/] {escape(message)}", highlight=False)

    def _refresh(self) -> None:
        phases = self.board.lines(self.clock(), live_text)
        self.status.update(escape(" | ".join(phases)) if phases else f"{escape(self.message)} ...")

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception as exc:  # the display must never cost the run
                if not self._failed:
                    self._failed = True
                    log.warning("progress display failed, the run goes on: %r", exc)
