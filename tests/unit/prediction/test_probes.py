"""Cold-start probes on real files and a real local target: what they read, produce and say."""

import gzip
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from verification.prediction.phase_model import MB
from verification.prediction.probes import decompression_probe, source_read_probe, target_write_probe
from verification.sources import LocalSource
from verification.targets.local import LocalTarget


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
