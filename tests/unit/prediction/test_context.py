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
