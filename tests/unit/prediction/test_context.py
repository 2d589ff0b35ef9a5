"""The prediction around one verification: when probes run, which, and a cold prediction's shape."""

import gzip
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.sources import conftest as s3_fixtures
from tests.unit.sources.conftest import Bucket
from verification.config import Settings
from verification.engines.postgres.chain import plan
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.repository import discover
from verification.prediction.context import PredictionContext
from verification.sources import LocalSource
from verification.targets.local import LocalTarget

MB16 = 16 * 1024 * 1024
# A real S3 endpoint (moto's server mode, its own process) for a prediction of a restore from S3.
s3_endpoint, s3 = s3_fixtures.s3_endpoint, s3_fixtures.s3


@pytest.fixture()
def target() -> Iterator[LocalTarget]:
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-context-"))
    folder.chmod(0o777)  # as root, commands run as the postgres OS user
    yield LocalTarget(folder, "/nonexistent", Path("/usr/bin"), folder / "state.json", 0.0)
    shutil.rmtree(folder, ignore_errors=True)


class History:
    """Only what the decision reads of a calibration: how many earlier runs it has."""

    def __init__(self, runs: int) -> None:
        self.runs = runs


@pytest.mark.parametrize(("mode", "runs", "wanted"), [
    ("always", 50, True), ("never", 0, False), ("auto", 0, True), ("auto", 2, True), ("auto", 3, False)])
def test_probes_run_while_history_is_short_or_when_asked(mode: str, runs: int, wanted: bool) -> None:
    settings = Settings()
    settings.prediction.probes = mode  # type: ignore[assignment]
    assert settings.prediction.min_runs == 3
    assert PredictionContext(settings, "postgres").wants_probes(History(runs)) is wanted  # type: ignore[arg-type]


def test_a_cold_prediction_probes_the_source_and_the_target_and_covers_every_phase(
        captured_repo: Path, target: LocalTarget) -> None:
    full = captured_repo / "backup" / "demo1" / "20261122-195034F" / "pg_data"
    full.mkdir()
    (full / "1.gz").write_bytes(gzip.compress(bytes(4 * 1024 * 1024)))
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    latest = plan(source, stanza, None, MB16)
    latest.files = ["backup/demo1/20261122-195034F/pg_data/1.gz", "archive/demo1/archive.info"]
    settings = Settings()
    settings.prediction.probe_megabytes = 2
    engine = PostgresEngine(settings)
    prediction = PredictionContext(settings, "postgres").predict(engine, latest, target, source, None, "r1", "/repo")
    assert [p.name for p in prediction.probes] == ["source read", "decompression", "target write"]
    assert [p.phase for p in prediction.phases] == [
        "provision", "transfer", "server_start", "redo", "recovery_end", "integrity_check", "data_checks"]
    assert prediction.history_runs == 0


@pytest.mark.parametrize("process_max", [1, 3])
def test_the_source_read_probe_reads_s3_as_many_at_once_as_pgbackrest_will(
        captured_repo: Path, target: LocalTarget, s3: Bucket, process_max: int) -> None:
    """Direct mode: pgBackRest in the target reads S3 with its process-max, not with restoreproof's
    s3.threads; the probe that predicts its transfer reads as it will."""
    from verification.sources.s3 import S3Source

    full = captured_repo / "backup" / "demo1" / "20261122-195034F" / "pg_data"
    full.mkdir()
    for index in range(8):
        (full / f"{index}.gz").write_bytes(gzip.compress(bytes(MB16 // 16)))
    s3.upload(captured_repo, "repo")
    source = S3Source(s3.url("repo"))
    assert source.parallel_reads == 16
    (stanza,) = discover(source, MB16)
    latest = plan(source, stanza, None, MB16)
    latest.files = [f"backup/demo1/20261122-195034F/pg_data/{index}.gz" for index in range(8)]
    settings = Settings()
    settings.prediction.probe_megabytes = 8
    settings.postgres.restore_process_max = process_max
    readers: set[str] = set()
    source.client.meta.events.register("before-send.s3.GetObject",
                                       lambda **_: readers.add(threading.current_thread().name))
    probes = PredictionContext(settings, "postgres").run_probes(PostgresEngine(settings), latest, target, source,
                                                                None, "r1", "/repo")
    read = next(p for p in probes if p.name == "source read")
    how = f"parallel read ({process_max} at once)" if process_max > 1 else "sequential read"
    assert read.detail.startswith(f"{how} of ") and read.bytes == sum(source.size(f) for f in latest.files)
    # Every GET was the source-read probe's (the files are small: the decompression probe reads them from
    # what the source kept), sent by as many threads as pgBackRest will run processes, not s3.threads.
    assert len(readers) == process_max


# --- identity and kind of point (issue 29, classes 3 and 8) --------------------------------------------------

from datetime import UTC, datetime, timedelta  # noqa: E402

from tests.unit.factories import history_entry  # noqa: E402
from verification.model import DatabaseIdentity, SystemIdentifier  # noqa: E402
from verification.prediction.context import HistoryEntry, same_kind, series_kind  # noqa: E402
from verification.report_model import DatabaseEntry, SeriesKind  # noqa: E402

T0 = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
KEY = {"engine": "postgres", "image": "i", "host": "h"}
A = DatabaseIdentity("/repo/a", "demo1", SystemIdentifier("1", "backup.info"))
B = DatabaseIdentity("/repo/b", "demo1", SystemIdentifier("2", "backup.info"))


def _entry(identity: DatabaseIdentity | None, seconds: float, target: str = "latest") -> DatabaseEntry:
    made = history_entry("demo1", KEY, [{"name": "transfer", "status": "measured", "seconds": seconds,
                                         "prediction": {"bytes_read": 1000, "bytes_written": 1000}}])
    return made.model_copy(update={"identity": identity, "recovery_seconds": seconds,
                                   "restore_point": made.restore_point.model_copy(update={"target": target})})


def _context(rows: list[tuple[str, DatabaseEntry]]) -> PredictionContext:
    history = [HistoryEntry(f"r{i}", T0 + timedelta(days=i), entry, source) for i, (source, entry) in enumerate(rows)]
    return PredictionContext(Settings(), "postgres", list(reversed(history)), host="h")


def test_drift_is_drawn_through_the_same_databases_runs_of_the_same_kind_only() -> None:
    at = "2026-10-30T00:00:00+00:00"
    rows = [("/repo/a", _entry(None, 100.0)),             # before identities: /repo/a's by its source and name
            *[("/repo/a", _entry(A, 100.0 + d)) for d in range(1, 5)],
            *[("/repo/b", _entry(B, 9000.0)) for _ in range(3)],  # another cluster under the same name
            ("/repo/a", _entry(A, 5.0, at))]              # a point in time: trended apart
    context = _context(rows)
    now = _entry(A, 105.0)
    drift = context.drift(now, "this", T0 + timedelta(days=10), T0 + timedelta(days=10))
    assert [p.recovery_seconds for p in drift.series] == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    assert drift.series_kind is SeriesKind.LATEST and drift.trend is not None
    assert drift.notes == ["1 runs to an earlier point in time left out: latest and point-in-time runs are trended apart",
                           "1 runs of the series recorded before restoreproof kept database identities (source, "
                           "name, system id): matched by its run's source and its name"]
    pit = context.drift(_entry(A, 6.0, at), "this", T0 + timedelta(days=10), T0 + timedelta(days=10))
    assert [p.recovery_seconds for p in pit.series] == [5.0, 6.0] and pit.series_kind is SeriesKind.POINT_IN_TIME
    assert pit.trend is None and pit.alerts == []
    assert pit.notes[0] == "5 runs to the latest point left out: latest and point-in-time runs are trended apart"
    # An entry with no identity (made outside a run) is drawn by its name, as before identities.
    unnamed = context.drift(_entry(None, 1.0), "this", T0 + timedelta(days=10), T0 + timedelta(days=10))
    assert len(unnamed.series) == 9


def test_series_kind_and_same_kind() -> None:
    assert series_kind(_entry(A, 1.0)) is SeriesKind.LATEST
    assert series_kind(_entry(A, 1.0, "2026-10-30T00:00:00+00:00")) is SeriesKind.POINT_IN_TIME
    kept, notes = same_kind([HistoryEntry("r", T0, _entry(A, 1.0), "/repo/a")], _entry(A, 2.0), A)
    assert [h.run_id for h in kept] == ["r"] and notes == []


def test_per_database_calibration_leaves_out_another_database_of_the_same_name(target: LocalTarget) -> None:
    from verification.prediction.calibration import calibration_key

    key = calibration_key("postgres", target.describe(), "h").model_dump()

    def entry(identity: DatabaseIdentity | None, seconds: float) -> DatabaseEntry:
        made = _entry(identity, seconds)
        assert made.prediction is not None
        prediction = made.prediction.model_copy(update={"key": made.prediction.key.model_validate(key)})
        return made.model_copy(update={"prediction": prediction})

    rows = [*[("/repo/a", entry(A, 10.0)) for _ in range(3)], *[("/repo/b", entry(B, 99.0)) for _ in range(3)],
            ("/repo/a", entry(None, 10.0))]
    context = _context(rows)
    assert context.calibration(target).runs == 7
    mine, theirs = context.calibration(target, A), context.calibration(target, B)
    assert (mine.runs, theirs.runs) == (4, 3)  # A's own and /repo/a's older run by name; B's own
    assert mine.constant("transfer", "demo1") == (10.0, 4) and theirs.constant("transfer", "demo1") == (99.0, 3)
    # Through the run's identities, as predict() asks for it.
    context.identities["demo1"] = B
    assert context.calibration(target, context.identities.get("demo1")).runs == 3
