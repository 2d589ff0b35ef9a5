"""Probes for a cold start: rates measured in the same run, before the restore.

- source read: a read of the chain's own backup files, as the restore will read them: as many at once
  as the restore it predicts reads (the transfer phase's `parallel`: pgBackRest's process-max, one
  for SQL Server), whatever the source serves; not s3.threads, which is restoreproof's own
  parallelism: pgBackRest in the target reading S3 with process-max 2 was predicted 5.8 s from a
  probe of 16 reads at once and took 37.3 s;
- decompression: the first compressed backup files decompressed on this host (one process; from
  object storage, the files are fetched ahead in parallel and only the decompression is timed);
- target write: a sequential write, flushed to disk, in the target's data folder;
- container start: a second target of the same image started and removed.
Each is reported as a probe, never as a measurement of the restore itself.
"""

from __future__ import annotations

import bz2
import re
import time
import zlib
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from verification.prediction.phase_model import MB, Probe
from verification.sources.base import Source
from verification.targets.base import Target

if TYPE_CHECKING:
    from verification.targets.docker import DockerTargetProvider

CHUNK = 4 * MB
DD_SECONDS_RE = re.compile(r"(?P<bytes>\d+) bytes .* copied, (?P<seconds>[\d.]+) s")


# At most this much of object storage fetched ahead of the decompression probe (besides one file).
AHEAD_BYTES = 256 * MB


def parallel_reads(source: Source) -> int:
    """How many reads the source serves at once to advantage (object storage's s3.threads; 1 for a folder)."""
    return max(1, int(getattr(source, "parallel_reads", 1) or 1))


def _chunks(source: Source, files: list[str], limit: int) -> list[tuple[str, int, int]]:
    """(path, offset, length) of the first `limit` bytes of `files`, in order, in 4 MiB chunks: the sizes
    are the source's own (a listing's, for object storage), so nothing is read to know them."""
    chunks: list[tuple[str, int, int]] = []
    planned = 0
    for path in files:
        size, offset = source.size(path), 0
        while offset < size and planned < limit:
            length = min(CHUNK, size - offset, limit - planned)
            chunks.append((path, offset, length))
            offset += length
            planned += length
        if planned >= limit:
            break
    return chunks


def source_read_probe(source: Source, files: list[str], limit: int, reads: int | None = None) -> Probe | None:
    """Read up to `limit` bytes of `files` in order, in 4 MiB chunks, `reads` chunks at once: as many as
    the restore it predicts reads at once (without it, the source's own `parallel_reads`)."""
    threads = max(1, reads) if reads is not None else parallel_reads(source)
    if threads > 1:
        return _parallel_source_read(source, files, limit, threads)
    read, started = 0, time.perf_counter()
    names = []
    for path in files:
        size = source.size(path)
        offset = 0
        while offset < size and read < limit:
            data = source.read_bytes(path, offset, min(CHUNK, limit - read))
            if not data:
                break
            offset += len(data)
            read += len(data)
        if offset:
            names.append(path)
        if read >= limit:
            break
    seconds = time.perf_counter() - started
    if read == 0:
        return None
    return Probe("source read", read, seconds, f"sequential read of {read / MB:.1f} MB of {_shown(names)} in "
                                               f"{source.describe()}")


def _parallel_source_read(source: Source, files: list[str], limit: int, threads: int) -> Probe | None:
    chunks = _chunks(source, files, limit)
    if not chunks:
        return None
    workers = min(threads, len(chunks))
    started = time.perf_counter()
    with ThreadPoolExecutor(workers, thread_name_prefix="restoreproof-probe") as pool:
        read = sum(pool.map(lambda chunk: len(source.read_bytes(*chunk)), chunks))
    seconds = time.perf_counter() - started
    if read == 0:
        return None
    names = list(dict.fromkeys(path for path, _, _ in chunks))
    how = f"parallel read ({workers} at once)" if workers > 1 else "sequential read"
    return Probe("source read", read, seconds, f"{how} of {read / MB:.1f} MB of {_shown(names)} in "
                                               f"{source.describe()}")


def _shown(names: list[str]) -> str:
    return ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")


def _read_ahead(source: Source, paths: list[str], threads: int) -> Generator[bytes, None, None]:
    """The first 64 MiB of each file, in order; with several threads, fetched ahead (at most `threads`
    files and AHEAD_BYTES in flight). Stopping early cancels what has not started."""
    def fetch(path: str) -> bytes:
        return source.read_bytes(path, 0, min(source.size(path), 64 * MB))

    if threads <= 1:
        yield from (fetch(path) for path in paths)
        return
    pool = ThreadPoolExecutor(threads, thread_name_prefix="restoreproof-probe")
    pending: list[tuple[Future[bytes], int]] = []
    queued, ahead = 0, 0
    try:
        for _ in paths:
            while queued < len(paths) and len(pending) < threads and (not pending or ahead < AHEAD_BYTES):
                size = min(source.size(paths[queued]), 64 * MB)
                pending.append((pool.submit(fetch, paths[queued]), size))
                queued, ahead = queued + 1, ahead + size
            future, size = pending.pop(0)
            ahead -= size
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _decompressor(path: str) -> tuple[str, Callable[[], zlib._Decompress | bz2.BZ2Decompressor]] | None:
    if path.endswith(".gz"):
        return "gzip", lambda: zlib.decompressobj(wbits=47)  # gzip or zlib header
    if path.endswith(".bz2"):
        return "bzip2", bz2.BZ2Decompressor
    return None


def decompression_probe(source: Source, files: list[str], limit: int) -> Probe | None:
    """Decompress compressed files until `limit` bytes came out; None when none is compressed in a
    format this host can decompress (lz4, zst: the documented default is used)."""
    produced, started, kind = 0, 0.0, ""
    elapsed = 0.0
    compressed = [(path, found) for path in files if (found := _decompressor(path)) is not None]
    fetched = _read_ahead(source, [path for path, _ in compressed], parallel_reads(source))
    try:
        for (_path, (name, make)), data in zip(compressed, fetched, strict=False):
            kind, started = name, time.perf_counter()
            try:
                # Bounded output: empty pages compress a thousandfold, and the probe needs only `limit`.
                produced += len(make().decompress(data, max_length=limit - produced))
            except (zlib.error, OSError, EOFError, ValueError):
                continue  # a damaged file is the restore's and the verify check's to report
            finally:
                elapsed += time.perf_counter() - started
            if produced >= limit:
                break
    finally:
        fetched.close()  # what was fetched ahead and is not needed: cancelled, its threads ended
    if produced == 0 or elapsed <= 0:
        return None
    return Probe("decompression", produced, elapsed, f"{kind} decompression of {produced / MB:.1f} MB of output "
                                                     "on this host, one process")


def target_write_probe(target: Target, limit: int, timeout: float = 300) -> Probe | None:
    """A sequential write of `limit` bytes in the target's data folder, flushed to disk (dd conv=fsync)."""
    path = f"{target.work_dir}/restoreproof-write-probe"
    count = max(1, limit // MB)
    result = target.run(["bash", "-c", 'dd if=/dev/zero of="$1" bs=1M count="$2" conv=fsync 2>&1; rc=$?; '
                                       'rm -f "$1"; exit $rc', "probe", path, str(count)], timeout=timeout)
    match = DD_SECONDS_RE.search(result.output)
    if not result.ok or match is None:
        return None
    return Probe("target write", int(match["bytes"]), float(match["seconds"]),
                 f"dd of {int(match['bytes']) / MB:.0f} MB with fsync into {target.work_dir} in {target.name}")


def container_start_probe(provider: DockerTargetProvider, run_id: str, database: str,
                          repo_host_path: str) -> Probe | None:
    """Start a second target like the one the restore will get, and remove it."""
    started = time.perf_counter()
    target = provider.provision(run_id, database, repo_host_path, role="probe")
    try:
        seconds = getattr(target, "provision_seconds", 0.0) or (time.perf_counter() - started)
    finally:
        target.close()
    return Probe("container start" if provider.kind == "docker" else "target start", None, seconds,
                 f"a {provider.kind} target of the same kind started in {seconds:.2f} s and removed")
