"""SIGINT and SIGTERM during a run: what was being done when one came, and cleanup it cannot cut short.

A signal unwinds the run as an `Interrupted` (a KeyboardInterrupt, so every `finally` removes its
target), carrying the signal's number: the exit code and the run's record say which one it was. What
the run was doing is taken when the signal arrives, before the unwinding's own progress ("removing the
target") replaces it. Handlers can only be set in the main thread: elsewhere (a scheduler's worker
thread) nothing is installed and nothing changes.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from verification.exit_codes import ExitCode

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Why a database the run had not reached has no verdict.
NOT_STARTED = "not started: the run was interrupted"


class Interrupted(KeyboardInterrupt):
    """A run unwound by a signal; `recorded` says what was kept of it, once it has been."""

    def __init__(self, signum: int, recorded: str | None = None) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.recorded = recorded

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code_of(signum: int) -> int:
    """The exit code of a command a signal stopped (as a shell reports a process a signal ended)."""
    codes: dict[int, int] = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}
    return codes.get(signum, 128 + signum)


def signal_of(exc: KeyboardInterrupt) -> int:
    """The signal behind an interrupt: a bare KeyboardInterrupt is Python's own Ctrl-C."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _ours_to_replace(signum: int) -> bool:
    # An ignored signal stays ignored; a handler C code installed (None) could not be put back.
    return signal.getsignal(signum) not in (signal.SIG_IGN, None)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def deferred_signals(*, raise_held: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM held while the block runs (removing a target, recording the run: a second
    Ctrl-C must not leave a container or a run "running"); one that came is raised once it is done
    (unless `raise_held` is False: the run is already unwinding from the first)."""
    if not _in_main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous: dict[int, Any] = {}
    for signum in SIGNALS:
        if _ours_to_replace(signum):
            previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if held and raise_held:
            first = previous.get(held[0])
            if callable(first):  # the run's own handler: it takes where the run is, then raises
                first(held[0], None)
            raise Interrupted(held[0])


@dataclass
class Interruption:
    """The signal that stopped a run, and the database and phase it was at when the signal came."""

    signum: int
    database: str | None
    phase: str | None

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    def in_progress(self) -> str:
        """Why the database the run was at has no verdict."""
        phase = self.phase or "an unknown phase"
        if self.database and phase.startswith(f"{self.database}: "):
            phase = phase[len(self.database) + 2:]
        return f"interrupted by {self.name} during {phase}; nothing proven"

    def reason(self, database: str) -> str:
        return self.in_progress() if database == self.database else NOT_STARTED


# Where a run is: (the database it works on or None, the last thing it said).
Where = Callable[[], tuple[str | None, str | None]]
# Records an interrupted run and says what was kept of it.
Record = Callable[[Interruption], str]


class Interruptible:
    """A run's signals, for the `with` block: the first SIGINT or SIGTERM raises `Interrupted` and takes
    the run's place, later ones are only said (the unwinding removes targets: nothing may cut it short),
    and on the way out `record` keeps what was done; the `Interrupted` raised out of the block says what
    was recorded."""

    def __init__(self, where: Where, record: Record) -> None:
        self.where = where
        self.record = record
        self.interruption: Interruption | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.interruption is not None:
            # Already unwinding: a second Ctrl-C must not cut short the removal of a target or the record.
            sys.stderr.write(f"restoreproof: already stopping ({self.interruption.name}): removing this run's "
                             "targets and recording what it did (SIGKILL would leave them to `restoreproof reap`)\n")
            return
        self.interruption = Interruption(signum, *self.where())
        raise Interrupted(signum)

    def __enter__(self) -> Interruptible:
        if _in_main_thread():
            for signum in SIGNALS:
                if _ours_to_replace(signum):
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if not isinstance(exc, KeyboardInterrupt):
                return
            interruption = self.interruption or Interruption(signal_of(exc), *self.where())
            try:
                with deferred_signals(raise_held=False):
                    recorded = self.record(interruption)
            except Exception as error:  # the store gone, say: the message says so, the exit code stands
                recorded = f"the run was not recorded as interrupted ({type(error).__name__}: {error})"
            raise Interrupted(interruption.signum, recorded) from exc
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
