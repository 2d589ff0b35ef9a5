"""How well the calibrated model predicts runs it did not learn from.

    .venv/bin/python bench/prediction.py [--scales 1 3 6] [--runs 4] [--clusters 2] [--workdir bench-work]

Makes (or reuses) a demo repository per scale, verifies each `--runs` times into one fresh results
store (real restores in Docker, as `restoreproof verify` does them), then, for every measured
database run, predicts it from all the OTHER runs (leave one out: calibrated rates, Theil-Sen and
medians, per engine, image and host) and prints, per phase and for the total recovery time, the
median absolute percentage error (MdAPE). Target: at most 15% for the transfer phase and the total.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import make_demo
from verification.model import RECOVERY_PHASES
from verification.pipeline import run_verification
from verification.prediction.calibration import Calibration
from verification.prediction.phase_model import PhaseWork
from verification.prediction.predictor import Predictor
from verification.report_model import DatabaseEntry, PhaseEntry
from verification.results import ResultStore

TARGET_PERCENT = 15.0


def work_of(phase: PhaseEntry) -> PhaseWork:
    planned = phase.prediction
    if planned is None:
        return PhaseWork(phase.name)
    return PhaseWork(phase.name, planned.bytes_read, planned.bytes_written, planned.compressed, planned.parallel,
                     planned.files)


def held_out_errors(entries: list[DatabaseEntry], min_runs: int) -> tuple[dict[str, list[float]], int]:
    """Per phase (and "total"), the absolute percentage errors of leave-one-out predictions."""
    errors: dict[str, list[float]] = {}
    for index, entry in enumerate(entries):
        others = entries[:index] + entries[index + 1:]
        if entry.prediction is None:
            continue
        predictor = Predictor(Calibration(entry.prediction.key, others, min_runs=min_runs, recent_runs=len(others)))
        total_predicted, complete = 0.0, True
        for phase in entry.phases:
            if phase.status != "measured" or not phase.seconds:
                continue
            predicted = predictor.predict_phase(entry.database, work_of(phase))
            if predicted is None:
                complete = complete and phase.name not in RECOVERY_PHASES
                continue
            if not predicted.calibrated:
                complete = complete and phase.name not in RECOVERY_PHASES
            error = abs(predicted.seconds - phase.seconds) / phase.seconds * 100
            errors.setdefault(phase.name, []).append(error)
            if phase.name in RECOVERY_PHASES:
                total_predicted += predicted.seconds
        if complete and entry.recovery_seconds:
            measured = entry.recovery_seconds
            errors.setdefault("total", []).append(abs(total_predicted - measured) / measured * 100)
    return errors, len(entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--runs", type=int, default=4, help="verifications per scale")
    parser.add_argument("--clusters", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as folder:
        settings = load_settings(report_dir=Path(folder) / "reports", state_dir=Path(folder) / "state")
        # Calibration only: probes would not change a calibrated prediction, and hashing is not measured.
        settings.prediction.probes = "never"
        settings.evidence.hash_backups = False
        started = time.monotonic()
        scale_of: dict[str, int] = {}
        for scale in args.scales:
            demo = make_demo(args.workdir / f"prediction-scale-{scale}", scale=scale, clusters=args.clusters,
                             progress=lambda message: None)
            for run in range(args.runs):
                result = run_verification(settings, demo.repository)
                scale_of[result.run.run_id] = scale
                seconds = {d.database: d.recovery_seconds for d in result.run.databases}
                print(f"scale {scale} run {run + 1}: {result.run.verdict}, recovery seconds {seconds}", flush=True)
                if result.run.verdict != "passed":
                    sys.exit(f"a verification did not pass: see {result.html_path}")
        store = ResultStore(settings.results_database_url)
        try:
            rows = store.report_entries(engine="postgres", limit=10_000)
        finally:
            store.close()
        entries = [entry for _, _, entry in rows]
        print(f"\n{'scale':<7}{'database':<10}{'written MB':>11}{'read MB':>9}{'transfer s (each run)':>40}")
        for scale in args.scales:
            for database in sorted({e.database for e in entries}):
                mine = [e for run_id, _, e in rows if scale_of.get(run_id) == scale and e.database == database]
                transfers = [p for e in mine for p in e.phases if p.name == "transfer"]
                if not transfers:
                    continue
                planned = transfers[0].prediction
                seconds = " ".join(f"{p.seconds or 0:.2f}" for p in transfers)
                written = (planned.bytes_written or 0) if planned else 0
                read = (planned.bytes_read or 0) if planned else 0
                print(f"{scale:<7}{database:<10}{written / 2**20:>11.1f}{read / 2**20:>9.1f}{seconds:>40}")
        errors, runs = held_out_errors(entries, settings.prediction.min_runs)
        print(f"\n{runs} measured database runs at scales {args.scales} in {time.monotonic() - started:.0f} s; "
              "each predicted from all the others (leave one out)\n")
        print(f"{'phase':<18}{'runs':>6}{'MdAPE %':>10}{'p90 %':>9}  target")
        failed = False
        for name in [*[p for p in errors if p != "total"], "total"]:
            values = sorted(errors.get(name, []))
            if not values:
                continue
            mdape = statistics.median(values)
            p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
            target = name in ("transfer", "total")
            ok = mdape <= TARGET_PERCENT
            failed |= target and not ok
            mark = (f"<= {TARGET_PERCENT:.0f}% {'met' if ok else 'MISSED'}") if target else ""
            print(f"{name:<18}{len(values):>6}{mdape:>10.1f}{p90:>9.1f}  {mark}")
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
