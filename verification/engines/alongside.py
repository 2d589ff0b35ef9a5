"""Steps run beside each other, each still timed on its own.

A verification need not run its steps strictly one after the other: what does not depend on the
restored server (the repository's verification, the hashing of the backup files) runs alongside
the restore, and the data checks alongside pg_amcheck. Each such step is timed from its own start
to its own end (`Alongside`), so every phase keeps its own duration; `Spans` records when each
phase ran (monotonic seconds) and marks, in each phase's `details["alongside"]`, the phases it
shared the target's time with. A phase measured alongside another ran while it competed for the
same CPUs and disks: its seconds are what it took so, not what it would take alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from verification.model import PhaseStatus, PhaseTiming

T = TypeVar("T")

# Phases that shared less than this (seconds) are not said to have run alongside each other: a
# thread started just as another step ends is no competition.
MIN_SHARED_SECONDS = 0.05


class Alongside(Generic[T]):
    """`work` run in a daemon thread from now on, timed from its own start to its own end; `result()`
    waits for it and raises what it raised. A daemon thread: an interrupted verification does not
    wait for it (its target is removed, which ends whatever it ran there)."""

    def __init__(self, name: str, work: Callable[[], T]) -> None:
        self.name = name
        self._work = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self.started = time.monotonic()
        self.finished: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"restoreproof-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to the caller by result(), never lost in the thread
            self._error = exc
        finally:
            self.finished = time.monotonic()

    @property
    def seconds(self) -> float | None:
        return None if self.finished is None else self.finished - self.started

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        """Until it is done, whatever it did (`result()` says what)."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set whenever no error was


class Spans:
    """When each phase ran (monotonic seconds, one or more spans each), to say which ran alongside which."""

    def __init__(self) -> None:
        self._spans: dict[str, list[tuple[float, float]]] = {}

    def add(self, name: str, started: float, finished: float) -> None:
        if finished > started:
            self._spans.setdefault(name, []).append((started, finished))

    def shared(self, a: str, b: str) -> float:
        """Seconds during which phases `a` and `b` both ran."""
        return sum(max(0.0, min(end_a, end_b) - max(start_a, start_b))
                   for start_a, end_a in self._spans.get(a, []) for start_b, end_b in self._spans.get(b, []))

    def alongside(self, name: str) -> list[str]:
        return sorted(other for other in self._spans if other != name
                      and self.shared(name, other) >= MIN_SHARED_SECONDS)

    def mark(self, phases: Iterable[PhaseTiming]) -> None:
        """Each measured phase that ran alongside others names them in `details["alongside"]`."""
        for phase in phases:
            if phase.status is PhaseStatus.MEASURED and (others := self.alongside(phase.name)):
                phase.details["alongside"] = others
