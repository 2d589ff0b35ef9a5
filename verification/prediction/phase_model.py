"""The phase model for today's engines (docs/prediction.md).

Each phase of a verification is predicted on its own: the bytes it moves, the rates that bound
it, the seconds, and the bound that applied, so a reader can redo the arithmetic. Rates come from
calibration (this deployment's measured runs), else from probes taken in the same run, else from
documented defaults; each rate says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verification.model import RECOVERY_PHASES, PhaseName
from verification.model import PhaseWork as PhaseWork  # defined with the domain types; engines state it
from verification.report_model import (
    Bound,
    CalibrationKey,
    PhasePredictionEntry,
    PredictionEntry,
    PredictionMode,
    ProbeEntry,
    Provenance,
    RateEntry,
)

__all__ = ["Bound", "PhaseWork", "Prediction", "Provenance"]

MB = 1024 * 1024


@dataclass(frozen=True)
class Rate:
    bytes_per_second: float
    provenance: Provenance
    runs: int = 0
    detail: str = ""

    def entry(self) -> RateEntry:
        return RateEntry(bytes_per_second=round(self.bytes_per_second, 1), provenance=self.provenance,
                         runs=self.runs, detail=self.detail)


@dataclass(frozen=True)
class Constant:
    seconds: float
    provenance: Provenance
    runs: int = 0
    detail: str = ""


# Documented defaults for a cold start without probes: deliberately modest figures for a server
# restoring from network storage. Every prediction that uses one says so.
DEFAULT_RATES: dict[str, Rate] = {
    Bound.SOURCE_READ: Rate(200 * MB, Provenance.DEFAULT, detail="documented default: 200 MB/s source read"),
    Bound.TARGET_WRITE: Rate(150 * MB, Provenance.DEFAULT, detail="documented default: 150 MB/s target write"),
    Bound.DECOMPRESSION: Rate(100 * MB, Provenance.DEFAULT,
                              detail="documented default: 100 MB/s of output per decompressing process"),
    Bound.REDO_RATE: Rate(16 * MB, Provenance.DEFAULT,
                          detail="documented default: 16 MB/s (redo depends on the transaction mix; learned per "
                                 "database once measured)"),
    Bound.CHECK_RATE: Rate(50 * MB, Provenance.DEFAULT, detail="documented default: 50 MB/s integrity check"),
    Bound.DOWNLOAD_RATE: Rate(100 * MB, Provenance.DEFAULT,
                              detail="documented default: 100 MB/s from object storage to the staging folder "
                                     "(learned per engine, image and host once measured)"),
}
# The per-file cost of restoring many small files (a PostgreSQL cluster has about a thousand).
DEFAULT_PER_FILE_SECONDS = 0.001
DEFAULT_CONSTANTS: dict[str, Constant] = {
    PhaseName.PROVISION: Constant(5.0, Provenance.DEFAULT, detail="documented default: 5 s to start a target"),
    PhaseName.SERVER_START: Constant(1.0, Provenance.DEFAULT, detail="documented default: 1 s to start the server"),
    PhaseName.RECOVERY_END: Constant(0.5, Provenance.DEFAULT, detail="documented default: 0.5 s to end recovery"),
    PhaseName.DATA_CHECKS: Constant(5.0, Provenance.DEFAULT, detail="documented default: 5 s of data checks "
                                    "(Great Expectations' import, about 3 s, and a small database's tables)"),
}


@dataclass
class PhasePrediction:
    phase: str
    seconds: float
    bound: Bound
    work: PhaseWork
    rates: dict[str, Rate] = field(default_factory=dict)
    constant: Constant | None = None
    inputs: str = ""
    runs: int = 0

    @property
    def calibrated(self) -> bool:
        used = [r.provenance for r in self.rates.values()] + ([self.constant.provenance] if self.constant else [])
        return bool(used) and all(p is Provenance.CALIBRATED for p in used)

    def entry(self) -> PhasePredictionEntry:
        return PhasePredictionEntry(
            bytes_read=self.work.bytes_read, bytes_written=self.work.bytes_written, compressed=self.work.compressed,
            parallel=self.work.parallel, files=self.work.files, inputs=self.inputs,
            rates={name: rate.entry() for name, rate in self.rates.items()},
            constant_seconds=round(self.constant.seconds, 3) if self.constant else None,
            constant_provenance=self.constant.provenance if self.constant else None,
            calibrated=self.calibrated, runs=self.runs)


@dataclass(frozen=True)
class Probe:
    """A rate measured in this run, before the restore, for a cold start."""

    name: str
    bytes: int | None
    seconds: float
    detail: str

    @property
    def bytes_per_second(self) -> float | None:
        return self.bytes / self.seconds if self.bytes and self.seconds > 0 else None

    def entry(self) -> ProbeEntry:
        rate = self.bytes_per_second
        return ProbeEntry(name=self.name, bytes=self.bytes, seconds=round(self.seconds, 4),
                          bytes_per_second=round(rate, 1) if rate else None, detail=self.detail)


@dataclass
class Prediction:
    phases: list[PhasePrediction]
    key: CalibrationKey
    probes: list[Probe] = field(default_factory=list)
    history_runs: int = 0

    def phase(self, name: str) -> PhasePrediction | None:
        return next((p for p in self.phases if p.phase == name), None)

    @property
    def recovery_seconds(self) -> float:
        return sum(p.seconds for p in self.phases if p.phase in RECOVERY_PHASES)

    @property
    def checks_seconds(self) -> float:
        return sum(p.seconds for p in self.phases if p.phase not in RECOVERY_PHASES)

    @property
    def mode(self) -> PredictionMode:
        """cold (no measured history behind any rate), calibrated (behind every one), or partly."""
        flags = [p.calibrated for p in self.phases if p.phase in RECOVERY_PHASES]
        if flags and all(flags):
            return PredictionMode.CALIBRATED
        return PredictionMode.PARTLY_CALIBRATED if any(flags) else PredictionMode.COLD

    @property
    def runs(self) -> int:
        """Measured runs behind the calibrated rates (the fewest, when they differ)."""
        counts = [p.runs for p in self.phases if p.phase in RECOVERY_PHASES and p.calibrated]
        return min(counts) if counts else 0

    def entry(self, measured_recovery: float | None = None) -> PredictionEntry:
        total = self.recovery_seconds
        error = None if not measured_recovery else round(100 * (total - measured_recovery) / measured_recovery, 1)
        return PredictionEntry(mode=self.mode, runs=self.runs, key=self.key, recovery_seconds=round(total, 3),
                               checks_seconds=round(self.checks_seconds, 3), error_percent=error,
                               probes=[probe.entry() for probe in self.probes])


def mb(value: float | int | None) -> str:
    return "?" if value is None else f"{value / MB:.1f} MB"


def mbps(rate: Rate) -> str:
    return f"{rate.bytes_per_second / MB:.1f} MB/s {rate.provenance}"


def link_times(work: PhaseWork, rates: dict[str, Rate]) -> dict[Bound, float]:
    """Seconds each link would need on its own; the slowest of them bounds the phase."""
    times = {}
    if work.bytes_read is not None and Bound.SOURCE_READ in rates:
        times[Bound.SOURCE_READ] = work.bytes_read / rates[Bound.SOURCE_READ].bytes_per_second
    if work.bytes_written is not None and Bound.TARGET_WRITE in rates:
        times[Bound.TARGET_WRITE] = work.bytes_written / rates[Bound.TARGET_WRITE].bytes_per_second
    if work.compressed and work.bytes_written is not None and Bound.DECOMPRESSION in rates:
        times[Bound.DECOMPRESSION] = work.bytes_written / (rates[Bound.DECOMPRESSION].bytes_per_second * work.parallel)
    return times


def slowest_link(work: PhaseWork, rates: dict[str, Rate]) -> tuple[Bound, float, str]:
    """The slowest-link rule: the bound, its seconds, and the arithmetic as text."""
    times = link_times(work, rates)
    if not times:
        raise ValueError(f"phase {work.phase}: no bytes or rates to predict from")
    bound = max(times, key=lambda b: times[b])
    parts = []
    for link, seconds in times.items():
        moved = work.bytes_read if link is Bound.SOURCE_READ else work.bytes_written
        rate = rates[link]
        times_parallel = f" x {work.parallel}" if link is Bound.DECOMPRESSION and work.parallel > 1 else ""
        parts.append(f"{mb(moved)} / ({mbps(rate)}{times_parallel}) = {seconds:.2f} s {link}")
    return bound, times[bound], "max(" + "; ".join(parts) + ")"
