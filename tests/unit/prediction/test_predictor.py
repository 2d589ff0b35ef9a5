"""The restore-time model: the classic paper's example, the slowest-link rule, compressed inputs,
calibration (convergence, outliers), and how a prediction states where its rates came from."""

from __future__ import annotations

import random

import pytest

from tests.unit.factories import history_entry
from verification.prediction.calibration import Calibration
from verification.prediction.classic import classic_load_terms, classic_load_time, mb_per_second_to_gb_per_hour
from verification.prediction.estimators import theil_sen
from verification.prediction.phase_model import MB, Bound, PhaseWork, Probe, Provenance, Rate, slowest_link
from verification.prediction.predictor import Predictor
from verification.report_model import CalibrationKey, DatabaseEntry

PAPER = dict(db_used=27.3, log_used=0.85, db_allocated=50, log_allocated=2, source_rate=16.5,
             data_volume_rate=10.6, log_volume_rate=7.5, data_reinit_rate=22.9, log_reinit_rate=16.7)
KEY = {"engine": "postgres", "image": "sha256:abc", "host": "h1"}
TYPED_KEY = CalibrationKey(**KEY)


def test_paper_worked_example_is_3_749_hours() -> None:
    assert classic_load_time(**PAPER) == pytest.approx(3.749, abs=0.0005)
    # Each restore term is volume-bound in the paper's example: the tapes (16.5 GB/h) are faster.
    bounds = [t.bound for t in classic_load_terms(**PAPER)]
    assert bounds == ["data volume", "log volume", "re-init", "re-init"]


def test_classic_model_takes_the_source_when_it_is_slower() -> None:
    slow_source = {**PAPER, "source_rate": 5.0}
    terms = classic_load_terms(**slow_source)
    assert [t.bound for t in terms[:2]] == ["source", "source"]
    assert classic_load_time(**slow_source) == pytest.approx(27.3 / 5 + 0.85 / 5 + 22.7 / 22.9 + 1.15 / 16.7)


def test_classic_model_rejects_impossible_inputs() -> None:
    with pytest.raises(ValueError, match="allocated"):
        classic_load_time(**{**PAPER, "db_allocated": 20})
    with pytest.raises(ValueError, match="source_rate"):
        classic_load_time(**{**PAPER, "source_rate": 0})


def test_units_convert_mb_per_second_to_gb_per_hour() -> None:
    assert mb_per_second_to_gb_per_hour(10) == pytest.approx(36.0)


def rates(read: float, write: float, decompress: float) -> dict[str, Rate]:
    return {Bound.SOURCE_READ: Rate(read * MB, Provenance.PROBE), Bound.TARGET_WRITE: Rate(write * MB, Provenance.PROBE),
            Bound.DECOMPRESSION: Rate(decompress * MB, Provenance.DEFAULT)}


def test_slowest_link_names_the_bound() -> None:
    work = PhaseWork("transfer", 1000 * MB, 1000 * MB)
    assert slowest_link(work, rates(500, 100, 50))[:2] == (Bound.TARGET_WRITE, pytest.approx(10.0))
    assert slowest_link(work, rates(50, 100, 50))[:2] == (Bound.SOURCE_READ, pytest.approx(20.0))


def test_compressed_backup_reads_fewer_bytes_than_it_writes() -> None:
    # 250 MB read expand to 1000 MB: a slow source no longer bounds, the write does.
    compressed = PhaseWork("transfer", 250 * MB, 1000 * MB, compressed=True, parallel=2)
    bound, seconds, arithmetic = slowest_link(compressed, rates(50, 100, 400))
    assert (bound, seconds) == (Bound.TARGET_WRITE, pytest.approx(10.0))
    assert "250.0 MB / (50.0 MB/s probe) = 5.00 s source read" in arithmetic
    # With slow decompression (40 MB/s per process, 2 processes) decompression bounds instead.
    bound, seconds, _ = slowest_link(compressed, rates(50, 100, 40))
    assert (bound, seconds) == (Bound.DECOMPRESSION, pytest.approx(12.5))
    # Uncompressed, the same bytes from the slow source take 20 s: read-bound.
    plain = PhaseWork("transfer", 1000 * MB, 1000 * MB)
    assert slowest_link(plain, rates(50, 100, 40))[:2] == (Bound.SOURCE_READ, pytest.approx(20.0))


def entry(database: str, size: int, seconds: float, phase: str = "transfer") -> DatabaseEntry:
    return history_entry(database, KEY, [{"name": phase, "status": "measured", "seconds": seconds,
                                          "prediction": {"bytes_read": size // 4, "bytes_written": size}}])


def synthetic_history(n: int, rate: float, constant: float, noise: float, seed: int = 1) -> list[DatabaseEntry]:
    rng = random.Random(seed)
    runs = []
    for i in range(n):
        size = (100 + 100 * (i % 5)) * MB
        runs.append(entry("db1", size, (constant + size / (rate * MB)) * (1 + rng.uniform(-noise, noise))))
    return runs


def test_calibration_converges_on_the_true_rate() -> None:
    calibration = Calibration(TYPED_KEY, synthetic_history(20, rate=80, constant=0.6, noise=0.03), min_runs=3,
                              recent_runs=20)
    predictor = Predictor(calibration)
    predicted = predictor.predict_phase("db1", PhaseWork("transfer", 250 * MB, 1000 * MB))
    assert predicted is not None and predicted.calibrated and predicted.runs == 20
    assert predicted.seconds == pytest.approx(0.6 + 1000 / 80, rel=0.03)
    rate = predicted.rates[str(predicted.bound)]
    assert rate.provenance is Provenance.CALIBRATED and rate.bytes_per_second / MB == pytest.approx(80, rel=0.05)


def test_calibration_ignores_outliers() -> None:
    history = synthetic_history(15, rate=80, constant=0.6, noise=0.02)
    # Four wild runs (a noisy neighbour, a cold cache): ten times slower.
    for wild in (1, 4, 7, 9):
        phase = history[wild].phases[0]
        assert phase.seconds is not None
        phase.seconds *= 10
    predictor = Predictor(Calibration(TYPED_KEY, history, min_runs=3))
    predicted = predictor.predict_phase("db1", PhaseWork("transfer", 100 * MB, 400 * MB))
    assert predicted is not None
    assert predicted.seconds == pytest.approx(0.6 + 400 / 80, rel=0.06)


def test_theil_sen_with_one_size_is_a_rate_through_the_origin() -> None:
    line = theil_sen([(100.0, 2.0), (100.0, 2.2), (101.0, 1.9)])
    assert line is not None and line.method == "median rate (one size)" and line.intercept == 0
    assert line.at(100) == pytest.approx(2.0, rel=0.02)


def test_other_hosts_and_images_do_not_calibrate_this_one() -> None:
    history = synthetic_history(10, rate=80, constant=0.6, noise=0.0)
    for item in history:
        assert item.prediction is not None
        item.prediction.key = CalibrationKey(**{**KEY, "host": "another"})
    calibration = Calibration(TYPED_KEY, history)
    assert calibration.runs == 0
    predicted = Predictor(calibration).predict_phase("db1", PhaseWork("transfer", 100 * MB, 400 * MB))
    assert predicted is not None and not predicted.calibrated and predicted.runs == 0


def test_cold_prediction_uses_probes_and_says_so() -> None:
    probes = [Probe("source read", 64 * MB, 0.2, "read"), Probe("target write", 64 * MB, 1.0, "dd"),
              Probe("container start", None, 1.4, "started")]
    predictor = Predictor(Calibration(TYPED_KEY, []), probes)
    prediction = predictor.predict("db1", [PhaseWork("provision"), PhaseWork("transfer", 100 * MB, 640 * MB),
                                           PhaseWork("server_start"), PhaseWork("recovery_end")])
    transfer = prediction.phase("transfer")
    assert transfer is not None and transfer.bound is Bound.TARGET_WRITE
    assert transfer.seconds == pytest.approx(10.0)
    assert transfer.rates["target write"].provenance is Provenance.PROBE
    assert transfer.rates["source read"].bytes_per_second == pytest.approx(320 * MB)
    provision = prediction.phase("provision")
    assert provision is not None and provision.seconds == pytest.approx(1.4)
    assert provision.constant is not None and provision.constant.provenance is Provenance.PROBE
    server_start = prediction.phase("server_start")
    assert server_start is not None and server_start.constant is not None
    assert server_start.constant.provenance is Provenance.DEFAULT
    assert prediction.mode == "cold" and prediction.runs == 0
    assert prediction.entry().probes[0].bytes_per_second == pytest.approx(320 * MB)


def test_prediction_is_calibrated_only_when_every_recovery_phase_is() -> None:
    history = [history_entry("db1", KEY, [
        {"name": "provision", "status": "measured", "seconds": 1.0 + i / 100},
        {"name": "transfer", "status": "measured", "seconds": 2.0 + i / 100,
         "prediction": {"bytes_read": 50 * MB, "bytes_written": 200 * MB}}]) for i in range(5)]
    predictor = Predictor(Calibration(TYPED_KEY, history))
    both = predictor.predict("db1", [PhaseWork("provision"), PhaseWork("transfer", 50 * MB, 200 * MB)])
    assert both.mode == "calibrated" and both.runs == 5
    partly = predictor.predict("db1", [PhaseWork("provision"), PhaseWork("transfer", 50 * MB, 200 * MB),
                                       PhaseWork("server_start")])
    assert partly.mode == "partly calibrated"


def test_redo_rate_is_learned_per_database() -> None:
    fast = [entry("fast", 64 * MB, 0.5, "redo") for _ in range(4)]
    slow = [entry("slow", 64 * MB, 4.0, "redo") for _ in range(4)]
    predictor = Predictor(Calibration(TYPED_KEY, fast + slow))
    for database, seconds in (("fast", 0.5), ("slow", 4.0)):
        predicted = predictor.predict_phase(database, PhaseWork("redo", 128 * MB, 128 * MB))
        assert predicted is not None and predicted.bound is Bound.REDO_RATE
        assert predicted.seconds == pytest.approx(2 * seconds)
        assert "of " + database in predicted.rates["redo rate"].detail


def test_theil_sen_slope_comes_from_runs_of_different_sizes() -> None:
    # Two databases of almost equal size at two scales, with run-to-run jitter: pairs within a
    # scale carry no slope information and must not outvote the pairs across scales.
    rng = random.Random(7)
    points = [(size + rng.uniform(0, 0.5), 1.0 + 0.01 * size + rng.uniform(-0.3, 0.3))
              for size in (100.0, 600.0) for _ in range(8)]
    line = theil_sen(points)
    assert line is not None and line.method == "Theil-Sen"
    assert line.slope == pytest.approx(0.01, rel=0.1)
    assert line.at(350) == pytest.approx(4.5, rel=0.05)


def test_the_download_rate_is_learned_from_measured_downloads_whatever_the_database() -> None:
    """Staging from object storage is the system's throughput link (restore-time-model.md): one rate per
    engine, image and host, learned from every database's measured downloads, counted in the recovery."""
    history = [entry(db, size * MB, 0.3 + size / 40, "download")
               for db, size in (("a", 100), ("b", 300), ("a", 200), ("c", 400))]
    predictor = Predictor(Calibration(TYPED_KEY, history))
    work = PhaseWork("download", 500 * MB, 500 * MB, parallel=16, files=1200)
    predicted = predictor.predict_phase("never-seen", work)
    assert predicted is not None and predicted.bound is Bound.DOWNLOAD_RATE
    assert predicted.calibrated and predicted.runs == 4
    assert predicted.seconds == pytest.approx(0.3 + 500 / 40)
    rate = predicted.rates["download rate"]
    assert rate.provenance is Provenance.CALIBRATED and rate.bytes_per_second == pytest.approx(40 * MB)
    assert predicted.inputs == "0.30 s + 500.0 MB / 40.0 MB/s calibrated = 12.80 s"
    cold = Predictor(Calibration(TYPED_KEY, [])).predict_phase("db", PhaseWork("download", 250 * MB, 250 * MB))
    assert cold is not None and cold.seconds == pytest.approx(2.5) and not cold.calibrated
    assert cold.rates["download rate"].provenance is Provenance.DEFAULT
    both = predictor.predict("db", [work, PhaseWork("provision")])
    assert both.recovery_seconds == pytest.approx(0.3 + 500 / 40 + 5.0)  # provision's documented default
