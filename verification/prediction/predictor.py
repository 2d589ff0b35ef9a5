"""Predict every phase of one verification from calibration, probes and defaults."""

from __future__ import annotations

from verification.model import PhaseName
from verification.prediction.calibration import Calibration
from verification.prediction.phase_model import (
    DEFAULT_CONSTANTS,
    DEFAULT_PER_FILE_SECONDS,
    DEFAULT_RATES,
    Bound,
    Constant,
    PhasePrediction,
    PhaseWork,
    Prediction,
    Probe,
    Provenance,
    Rate,
    mb,
    mbps,
    slowest_link,
)

# Phases whose seconds follow the bytes they move through a chain of links.
LINK_PHASES = (PhaseName.ZEROING, PhaseName.TRANSFER, PhaseName.LOG_RESTORE)
# Phases with their own single rate: (bound, per database?).
# The download of a staged copy is the system's throughput from object storage, whatever the database.
RATE_PHASES: dict[str, tuple[Bound, bool]] = {PhaseName.REDO: (Bound.REDO_RATE, True),
                                              PhaseName.INTEGRITY_CHECK: (Bound.CHECK_RATE, False),
                                              PhaseName.DOWNLOAD: (Bound.DOWNLOAD_RATE, False)}
# Phases that take a constant time: per database?
CONSTANT_PHASES: dict[str, bool] = {PhaseName.PROVISION: False, PhaseName.SERVER_START: False,
                                    PhaseName.RECOVERY_END: True, PhaseName.DATA_CHECKS: True,
                                    PhaseName.REPOSITORY_VERIFY: True}
PROBE_RATES = {"source read": Bound.SOURCE_READ, "target write": Bound.TARGET_WRITE,
               "decompression": Bound.DECOMPRESSION}


class Predictor:
    def __init__(self, calibration: Calibration, probes: list[Probe] | None = None) -> None:
        self.calibration = calibration
        self.probes = list(probes or [])

    # cold rates -------------------------------------------------------------------------------

    def cold_rates(self) -> dict[str, Rate]:
        """Link rates for a cold start: probes of this run where taken, else the documented defaults."""
        rates: dict[str, Rate] = dict(DEFAULT_RATES)
        for probe in self.probes:
            bound = PROBE_RATES.get(probe.name)
            rate = probe.bytes_per_second
            if bound is not None and rate:
                rates[bound] = Rate(rate, Provenance.PROBE, detail=f"probe: {probe.detail}")
        return rates

    def cold_constant(self, phase: str) -> Constant | None:
        if phase == PhaseName.PROVISION:
            probe = next((p for p in self.probes if p.name in ("container start", "target start")), None)
            if probe is not None:
                return Constant(probe.seconds, Provenance.PROBE, detail=f"probe: {probe.detail}")
        return DEFAULT_CONSTANTS.get(phase)

    # per phase ----------------------------------------------------------------------------------

    def predict(self, database: str, works: list[PhaseWork]) -> Prediction:
        phases = [p for p in (self.predict_phase(database, w) for w in works) if p is not None]
        return Prediction(phases, self.calibration.key, self.probes, self.calibration.runs)

    def predict_phase(self, database: str, work: PhaseWork) -> PhasePrediction | None:
        if work.phase in LINK_PHASES:
            return self._links(database, work)
        if work.phase in RATE_PHASES:
            return self._rate(database, work)
        if work.phase in CONSTANT_PHASES:
            return self._constant(database, work)
        return None

    def _constant(self, database: str, work: PhaseWork) -> PhasePrediction | None:
        per_database = CONSTANT_PHASES[work.phase]
        learned = self.calibration.constant(work.phase, database if per_database else None)
        whose = f" of {database}" if per_database else ""
        if learned is not None:
            seconds, runs = learned
            constant = Constant(seconds, Provenance.CALIBRATED, runs, f"median of {runs} measured runs{whose}")
        else:
            cold = self.cold_constant(work.phase)
            if cold is None:
                return None
            constant, runs = cold, 0
        return PhasePrediction(work.phase, constant.seconds, Bound.CONSTANT, work, {}, constant,
                               f"{constant.seconds:.2f} s: {constant.detail}", runs)

    def _rate(self, database: str, work: PhaseWork) -> PhasePrediction | None:
        bound, per_database = RATE_PHASES[work.phase]
        moved = work.bytes_written if work.bytes_written is not None else work.bytes_read
        if moved is None:
            return None
        by = "written" if work.bytes_written is not None else "read"
        fit = self.calibration.line(work.phase, by, database if per_database else None)
        whose = f" of {database}" if per_database else ""
        if fit is not None and fit.slope > 0:
            rate = Rate(1 / fit.slope, Provenance.CALIBRATED, fit.points, f"{fit.method} over {fit.points} runs{whose}")
            constant = Constant(fit.intercept, Provenance.CALIBRATED, fit.points, "fixed part of the same fit")
            seconds = fit.at(moved)
            inputs = f"{fit.intercept:.2f} s + {mb(moved)} / {mbps(rate)} = {seconds:.2f} s"
            return PhasePrediction(work.phase, seconds, bound, work, {str(bound): rate}, constant, inputs, fit.points)
        if fit is not None:  # the phase takes the same time whatever it moves
            constant = Constant(fit.intercept, Provenance.CALIBRATED, fit.points, f"{fit.method}{whose}")
            return PhasePrediction(work.phase, fit.intercept, Bound.CONSTANT, work, {}, constant,
                                   f"{fit.intercept:.2f} s, independent of size over {fit.points} runs", fit.points)
        rate = DEFAULT_RATES[bound]
        seconds = moved / rate.bytes_per_second
        return PhasePrediction(work.phase, seconds, bound, work, {str(bound): rate}, None,
                               f"{mb(moved)} / {mbps(rate)} = {seconds:.2f} s", 0)

    def _links(self, database: str, work: PhaseWork) -> PhasePrediction | None:
        if work.bytes_read is None and work.bytes_written is None:
            return None
        cold = self.cold_rates()
        # The links' rates (probes or defaults) name the bound; this deployment's history then gives
        # the effective rate through that link, and the fixed cost around it (tool start, fsyncs).
        bound, cold_seconds, arithmetic = slowest_link(work, cold)
        by = "read" if bound is Bound.SOURCE_READ else "written"
        fit = self.calibration.line(work.phase, by)
        if fit is not None and fit.slope > 0:
            moved = work.bytes_read if by == "read" else work.bytes_written
            assert moved is not None
            rate = Rate(1 / fit.slope, Provenance.CALIBRATED, fit.points,
                        f"effective {bound} rate, {fit.method} over {fit.points} runs")
            constant = Constant(fit.intercept, Provenance.CALIBRATED, fit.points, "fixed part of the same fit")
            seconds = fit.at(moved)
            inputs = (f"{fit.intercept:.2f} s + {mb(moved)} / {mbps(rate)} = {seconds:.2f} s "
                      f"(bound named by the link rates: {arithmetic})")
            return PhasePrediction(work.phase, seconds, bound, work, {str(bound): rate}, constant, inputs, fit.points)
        used = {str(link): cold[link] for link in (Bound.SOURCE_READ, Bound.TARGET_WRITE, Bound.DECOMPRESSION)
                if link in cold and (link is not Bound.DECOMPRESSION or work.compressed)}
        per_file_cost = None
        if work.files:
            per_file = work.files * DEFAULT_PER_FILE_SECONDS
            per_file_cost = Constant(per_file, Provenance.DEFAULT, detail=f"documented default: "
                                f"{DEFAULT_PER_FILE_SECONDS * 1000:.0f} ms per file x {work.files} files")
            arithmetic = f"{per_file:.2f} s for {work.files} files + {arithmetic}"
            cold_seconds += per_file
        return PhasePrediction(work.phase, cold_seconds, bound, work, used, per_file_cost, arithmetic, 0)

