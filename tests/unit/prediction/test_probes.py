"""Cold-start probes on real files and a real local target: what they read, produce and say."""

import gzip
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.sources import conftest as s3_fixtures
from tests.unit.sources.conftest import Bucket
from verification.prediction.phase_model import MB
from verification.prediction.probes import decompression_probe, source_read_probe, target_write_probe
from verification.sources import LocalSource
from verification.targets.local import LocalTarget

# A real S3 endpoint (moto's server mode, its own process) for the probes of object storage.
s3_endpoint, s3 = s3_fixtures.s3_endpoint, s3_fixtures.s3


@pytest.fixture()
def source(tmp_path: Path) -> LocalSource:
    (tmp_path / "a.bin").write_bytes(os.urandom(3 * MB))
    (tmp_path / "b.bin").write_bytes(os.urandom(2 * MB))
    (tmp_path / "c.bin").write_bytes(b"")
    (tmp_path / "pages.gz").write_bytes(gzip.compress(bytes(6 * MB)))
    (tmp_path / "broken.gz").write_bytes(b"\x1f\x8b not gzip at all")
    (tmp_path / "wal.zst").write_bytes(b"zstd is not decompressed here")
    return LocalSource(tmp_path)


def test_source_read_stops_at_the_limit_and_names_what_it_read(source: LocalSource) -> None:
    probe = source_read_probe(source, ["a.bin", "b.bin", "c.bin"], 4 * MB)
    assert probe is not None and (probe.name, probe.bytes) == ("source read", 4 * MB)
    assert probe.detail == f"sequential read of 4.0 MB of a.bin, b.bin in {source.describe()}"
    everything = source_read_probe(source, ["a.bin", "b.bin", "c.bin", "pages.gz"], 100 * MB)
    assert everything is not None and everything.bytes == 5 * MB + (source.size("pages.gz"))
    assert everything.detail.startswith("sequential read of ") and "a.bin, b.bin and 1 more in" in everything.detail
    assert source_read_probe(source, ["c.bin"], MB) is None  # nothing read: no probe, not a rate of zero


def test_decompression_skips_what_it_cannot_decompress_and_bounds_its_output(source: LocalSource) -> None:
    probe = decompression_probe(source, ["a.bin", "wal.zst", "broken.gz", "pages.gz"], 2 * MB)
    assert probe is not None and (probe.name, probe.bytes) == ("decompression", 2 * MB)
    assert probe.detail == "gzip decompression of 2.0 MB of output on this host, one process"
    assert decompression_probe(source, ["a.bin", "wal.zst", "broken.gz"], MB) is None


@pytest.fixture()
def target() -> Iterator[LocalTarget]:
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-probe-"))
    folder.chmod(0o777)  # as root, commands run as the postgres OS user
    yield LocalTarget(folder, "/nonexistent", Path("/usr/bin"), folder / "state.json", 0.0)
    shutil.rmtree(folder, ignore_errors=True)


def test_target_write_is_dd_with_fsync_in_the_target_s_folder_and_leaves_nothing(target: LocalTarget) -> None:
    probe = target_write_probe(target, 2 * MB)
    assert probe is not None and (probe.name, probe.bytes) == ("target write", 2 * MB) and probe.seconds > 0
    assert probe.detail == f"dd of 2 MB with fsync into {target.work_dir} in {target.name}"
    assert not Path(target.work_dir, "restoreproof-write-probe").exists()


# ---- from object storage: reads in parallel, the same bytes as one after the other --------------------------

@pytest.fixture()
def in_s3(source: LocalSource, s3: Bucket) -> tuple[Any, LocalSource]:
    """The folder's files, and forty small gzip'd backup files beside them, in S3 and in the folder."""
    from verification.sources.s3 import S3Source

    root = Path(source.describe())
    for index in range(40):
        (root / f"base/{index:02d}.gz").parent.mkdir(exist_ok=True)
        (root / f"base/{index:02d}.gz").write_bytes(gzip.compress(bytes(MB // 2) + os.urandom(100)))
    s3.upload(root, "repo")
    return S3Source(s3.url("repo")), LocalSource(root)


def get_threads(source: Any) -> set[str]:
    seen: set[str] = set()
    source.client.meta.events.register("before-send.s3.GetObject",
                                       lambda **_: seen.add(threading.current_thread().name))
    return seen


def test_source_read_from_object_storage_reads_in_parallel_what_a_folder_reads_in_turn(in_s3) -> None:
    remote, folder = in_s3
    files = ["a.bin", "b.bin", "c.bin", *(f"base/{i:02d}.gz" for i in range(40))]
    threads = get_threads(remote)
    # 4 MB: a.bin whole and 1 MB of b.bin, two reads; everything: 42 files, s3.threads (16) at once.
    for limit, at_once in ((4 * MB, 2), (100 * MB, 16)):
        parallel, sequential = source_read_probe(remote, files, limit), source_read_probe(folder, files, limit)
        assert parallel is not None and sequential is not None
        assert (parallel.name, parallel.bytes) == ("source read", sequential.bytes)
        shown = sequential.detail.removeprefix(f"sequential read of {sequential.bytes / MB:.1f} MB of ")
        assert parallel.detail == (f"parallel read ({at_once} at once) of {parallel.bytes / MB:.1f} MB of "
                                   + shown.replace(f" in {folder.describe()}", f" in {remote.describe()}"))
    assert len(threads) > 1 and all(name.startswith("restoreproof-probe") for name in threads)
    assert remote.stats.bytes_read == 4 * MB + sequential.bytes  # exactly what was planned, nothing more


@pytest.mark.parametrize("reads", [1, 2, 3])
def test_source_read_reads_as_many_at_once_as_the_restore_it_predicts(in_s3, reads: int) -> None:
    remote, folder = in_s3
    files = [f"base/{i:02d}.gz" for i in range(40)]
    threads = get_threads(remote)
    probe = source_read_probe(remote, files, 100 * MB, reads)  # the source would serve 16 at once
    sequential = source_read_probe(folder, files, 100 * MB)
    assert probe is not None and sequential is not None and probe.bytes == sequential.bytes
    how = f"parallel read ({reads} at once)" if reads > 1 else "sequential read"
    assert probe.detail.startswith(f"{how} of {probe.bytes / MB:.1f} MB of base/00.gz, base/01.gz and 38 more in ")
    # The threads that sent its GETs: as many as the restore reads at once, never the source's 16.
    assert len(threads) == reads


def test_decompression_from_object_storage_fetches_ahead_and_times_only_the_decompression(in_s3) -> None:
    remote, folder = in_s3
    files = ["a.bin", "wal.zst", "broken.gz", *(f"base/{i:02d}.gz" for i in range(40)), "pages.gz"]
    threads = get_threads(remote)
    parallel, sequential = decompression_probe(remote, files, 5 * MB), decompression_probe(folder, files, 5 * MB)
    assert parallel is not None and sequential is not None
    assert (parallel.bytes, parallel.detail) == (sequential.bytes, sequential.detail) == (
        5 * MB, "gzip decompression of 5.0 MB of output on this host, one process")
    assert len(threads) > 1
    # 5 MB of output is ten of the small files: what was fetched ahead of the last is bounded by the threads.
    fetched = [path for path in remote.stats.bytes_by_path if path.endswith(".gz")]
    assert 11 <= len(fetched) <= 11 + 16 and "pages.gz" not in fetched
