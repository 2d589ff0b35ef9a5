"""Rates learned from this deployment's measured runs (the results store), per engine, image and host.

Each history entry is a database's report.json entry from an earlier run. Its phases carry what
was measured (`seconds`) and what the plan said they would move (`prediction.bytes_read`,
`prediction.bytes_written`): learning seconds against the same byte counts the model predicts from
keeps calibration and prediction consistent. Only runs on the same engine, image and host count:
a rate measured on another machine says nothing about this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verification.model import PhaseStatus
from verification.prediction.estimators import LineFit, robust_constant, theil_sen
from verification.report_model import CalibrationKey, DatabaseEntry


def calibration_key(engine: str, target: dict[str, Any], host: str) -> CalibrationKey:
    image = target.get("image_id") or target.get("image") or f"{target.get('kind', '?')}:{target.get('bin_dir', '')}"
    return CalibrationKey(engine=engine, image=str(image), host=host)


@dataclass(frozen=True)
class Sample:
    database: str
    seconds: float
    bytes_read: int | None
    bytes_written: int | None


class Calibration:
    """Robust per-phase figures from the history of one calibration key."""

    def __init__(self, key: CalibrationKey, entries: Sequence[DatabaseEntry], *, min_runs: int = 3,
                 recent_runs: int = 20) -> None:
        self.key = key
        self.min_runs = min_runs
        self.recent_runs = recent_runs
        # Newest first, as the store returns them.
        self.entries = [e for e in entries if e.prediction is not None and e.prediction.key == key]

    @property
    def runs(self) -> int:
        return len(self.entries)

    def samples(self, phase: str, database: str | None = None) -> list[Sample]:
        found = []
        for entry in self.entries:
            if database is not None and entry.database != database:
                continue
            for item in entry.phases:
                if item.name != phase or item.status is not PhaseStatus.MEASURED or item.seconds is None:
                    continue
                planned = item.prediction
                found.append(Sample(entry.database, item.seconds, planned.bytes_read if planned else None,
                                    planned.bytes_written if planned else None))
            if len(found) >= self.recent_runs:
                break
        return found

    def constant(self, phase: str, database: str | None = None) -> tuple[float, int] | None:
        """The median measured seconds, and the runs behind it; None below `min_runs`."""
        values = [s.seconds for s in self.samples(phase, database)]
        if len(values) < self.min_runs:
            return None
        value = robust_constant(values)
        return (value, len(values)) if value is not None else None

    def line(self, phase: str, by: str, database: str | None = None) -> LineFit | None:
        """seconds against the planned bytes (`by`: "read" or "written"); None below `min_runs`."""
        points = []
        for sample in self.samples(phase, database):
            x = sample.bytes_read if by == "read" else sample.bytes_written
            if x is not None:
                points.append((float(x), sample.seconds))
        if len(points) < self.min_runs:
            return None
        return theil_sen(points)
