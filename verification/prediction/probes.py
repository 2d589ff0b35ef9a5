"""Probes for a cold start: rates measured in the same run, before the restore.

- source read: a sequential read of the chain's own backup files, as the restore will read them;
- decompression: the first compressed backup files decompressed on this host (one process);
- target write: a sequential write, flushed to disk, in the target's data folder;
- container start: a second target of the same image started and removed.
Each is reported as a probe, never as a measurement of the restore itself.
"""

from __future__ import annotations

import bz2
import re
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from verification.prediction.phase_model import MB, Probe
from verification.sources.base import Source
from verification.targets.base import Target

if TYPE_CHECKING:
    from verification.targets.docker import DockerTargetProvider

CHUNK = 4 * MB
DD_SECONDS_RE = re.compile(r"(?P<bytes>\d+) bytes .* copied, (?P<seconds>[\d.]+) s")


def source_read_probe(source: Source, files: list[str], limit: int) -> Probe | None:
    """Read up to `limit` bytes of `files` in order, in 4 MiB chunks."""
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
    shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
    return Probe("source read", read, seconds, f"sequential read of {read / MB:.1f} MB of {shown} in "
                                               f"{source.describe()}")


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
    for path in files:
        found = _decompressor(path)
        if found is None:
            continue
        kind, make = found
        data = source.read_bytes(path, 0, min(source.size(path), 64 * MB))
        started = time.perf_counter()
        try:
            # Bounded output: empty pages compress a thousandfold, and the probe needs only `limit`.
            produced += len(make().decompress(data, max_length=limit - produced))
        except (zlib.error, OSError, EOFError, ValueError):
            continue  # a damaged file is the restore's and the verify check's to report
        finally:
            elapsed += time.perf_counter() - started
        if produced >= limit:
            break
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
