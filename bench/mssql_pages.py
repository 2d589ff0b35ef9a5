"""Offline SQL Server page verification speed against a plain sequential read of the same file.

    .venv/bin/python bench/mssql_pages.py [--corpus ../shared/testdata/mssql-backups] [--gib 1.0] [--repeat 5]

What is read: one backup file of at least --gib GiB, built for the run in a temporary folder and
removed after. It is a copy of a real full backup of the corpus (RestoreTimeClean/RestoreTimeClean.bak,
SQL Server 2008 R2, taken without WITH CHECKSUM, so no backup checksum covers the stream) whose
data stream (MQDA) is extended with real pages: the backup's own 168 pages come first, then new
extents made of copies of its real extents whose every page is formatted and checksummed (data,
index, IAM, ... pages), each page given its new page id (file 1, extent by extent) and its
checksum recomputed; a copy of its PFS page (1:1) stands at every PFS position (8088, 16176, ...).
The stream header's length (and its header checksum) is set to the new length; the blocks after
the stream move along unchanged (the inserted bytes are a multiple of 512, so every block keeps
its alignment). The verification is told the file's new size (file 1 grows to cover every page).

Then, --repeat times, alternating the order, warm cache (the file was just written; a first pass
of each is not counted):
- plain read: open the file and read it from start to end into one reused buffer, READ_BYTES at a
  time (the verifier's own read size), nothing else, one thread;
- verification: scan_pages through the reader the product uses (LocalSource), which walks the MTF
  blocks, then reads the data stream once, in order, through one open handle, READ_BYTES at a time
  into one reused buffer, and checks every page of each block (numpy), one thread.
Prints the best time of each, pages and bytes per second, and the ratio of verification to plain
read throughput (target >= 0.9), and the plain read at other buffer sizes, so the baseline's own
best is visible. Then the same two, cold: the file dropped from the page cache before each run
(fsync, then posix_fadvise DONTNEED on this file only), so both read from the disk.
On a shared machine the figures move with the other load: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from verification.engines.mssql import pages as pages_module
from verification.engines.mssql.mtf import STREAM_HEADER, stream_checksum
from verification.engines.mssql.pages import (
    CHECKSUM_AT,
    EXTENT,
    PAGE,
    PFS_INTERVAL,
    READ_BYTES,
    SECTORS,
    locate_data_streams,
    page_checksums,
    scan_pages,
)
from verification.sources import LocalSource
from verification.sources.base import SourceFile

SOURCE = "RestoreTimeClean/RestoreTimeClean.bak"
TARGET = 0.9
CHUNK_EXTENTS = 2048  # extents built and written at a time (128 MiB)


def build(corpus: Path, folder: Path, gib: float) -> tuple[Path, int]:
    """Write the large backup into `folder`; its path and its number of pages."""
    data = (corpus / SOURCE).read_bytes()
    [stream] = locate_data_streams(SourceFile(LocalSource(corpus), SOURCE))
    pages = np.frombuffer(data, dtype=np.uint8, count=stream.pages * PAGE, offset=stream.offset)
    pages = pages.reshape(stream.pages, PAGE)
    words = pages.view("<u4").reshape(stream.pages, SECTORS, -1)
    flags = pages.view("<u2")[:, 2]
    ids = words[:, 0, 0x20 // 4]
    formatted = (pages[:, 0] == 1) & ((flags & 0x200) != 0) & (page_checksums(words) == words[:, 0, CHECKSUM_AT // 4])
    fits = ids == np.arange(stream.pages)  # the backup's one file: position k holds page 1:k
    usable = (formatted & fits).reshape(-1, EXTENT).all(axis=1)
    usable[0] = False  # the file header extent: its allocation pages belong at pages 0-7 only
    extents = pages.reshape(-1, EXTENT, PAGE)[usable]
    pfs = pages[1].copy()
    total = max(stream.pages, int(gib * (1 << 30)) // PAGE // EXTENT * EXTENT + EXTENT)
    added = total - stream.pages
    header_at = stream.offset - 2 - STREAM_HEADER
    header = bytearray(data[header_at:header_at + STREAM_HEADER])
    struct.pack_into("<Q", header, 8, 2 + total * PAGE)
    struct.pack_into("<H", header, 20, stream_checksum(bytes(header)))
    path = folder / "large-full.bak"
    with path.open("wb") as out:
        out.write(data[:header_at])
        out.write(header)
        out.write(data[header_at + STREAM_HEADER:stream.offset + stream.pages * PAGE])
        first_extent = stream.pages // EXTENT
        for done in range(0, added // EXTENT, CHUNK_EXTENTS):
            count = min(CHUNK_EXTENTS, added // EXTENT - done)
            chunk = extents[np.arange(done, done + count) % len(extents)].reshape(count * EXTENT, PAGE)
            page_ids = (first_extent + done) * EXTENT + np.arange(count * EXTENT, dtype=np.uint32)
            chunk[page_ids % PFS_INTERVAL == 0] = pfs
            chunk_words = chunk.view("<u4").reshape(count * EXTENT, SECTORS, -1)
            chunk_words[:, 0, 0x20 // 4] = page_ids
            chunk_words[:, 0, CHECKSUM_AT // 4] = page_checksums(chunk_words)
            out.write(chunk.tobytes())
        out.write(data[stream.offset + stream.pages * PAGE:])
    return path, total


def evict(path: Path) -> None:
    """Drop this file's pages from the page cache (its own pages only), so the next read is from disk."""
    with path.open("rb") as handle:
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def plain_read(path: Path, size: int) -> float:
    buffer = bytearray(size)
    view = memoryview(buffer)
    started = time.perf_counter()
    with path.open("rb", buffering=0) as handle:
        while handle.readinto(view):
            pass
    return time.perf_counter() - started


def verify(path: Path, files: dict[int, int]) -> tuple[float, int]:
    started = time.perf_counter()
    result = scan_pages(SourceFile(LocalSource(path.parent), path.name), files)
    elapsed = time.perf_counter() - started
    if result.findings:
        raise SystemExit(f"the built file has findings: {result.findings[:3]}")
    return elapsed, result.pages


def one_thread(path: Path, files: dict[int, int], repeat: int, read: float, when: str) -> None:
    """The verification with its reading threads turned off (pages.WORKERS = 1), for comparison."""
    workers = pages_module.WORKERS
    pages_module.WORKERS = 1
    try:
        check = min(verify(path, files)[0] for _ in range(repeat))
    finally:
        pages_module.WORKERS = workers
    print(f"  the same on one thread ({when}): {path.stat().st_size / check / 1e9:.2f} GB/s, "
          f"{read / check:.2f}x the plain read")


@contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """`count` processes spinning on the CPU: the scan measured on a machine with no idle core."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def cold_run(path: Path, run: Callable[[], float]) -> float:
    evict(path)
    return run()


def best_of(repeat: int, read: Callable[[], float], check: Callable[[], float]) -> tuple[float, float]:
    """The best time of each, the two run in turn, the order alternating."""
    reads: list[float] = []
    checks: list[float] = []
    for turn in range(repeat):
        if turn % 2:
            reads.append(read())
            checks.append(check())
        else:
            checks.append(check())
            reads.append(read())
    return min(reads), min(checks)


def report(cache: str, size: int, pages: int, read: float, check: float, repeat: int) -> None:
    print(f"{cache}: plain read ({READ_BYTES >> 20} MiB buffer): best {read * 1000:.0f} ms of {repeat}, "
          f"{size / read / 1e9:.2f} GB/s")
    print(f"{cache}: verification:  best {check * 1000:.0f} ms of {repeat}, {size / check / 1e9:.2f} GB/s, "
          f"{pages / check:,.0f} pages/s (every page checked, zero findings)")
    ratio = read / check
    verdict = f"target >= {TARGET}x {'met' if ratio >= TARGET else 'NOT met'}" if cache == "warm" else \
        f"the {TARGET}x target is for a warm cache; {'at or above' if ratio >= TARGET else 'below'} it here too"
    print(f"{cache}: ratio verification / plain read: {ratio:.2f}x ({verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "testdata" / "mssql-backups")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-bench-pages-"))
    try:
        started = time.perf_counter()
        path, pages = build(args.corpus, folder, args.gib)
        size = path.stat().st_size
        files = {1: pages, 2: 72}
        print(f"built {path.name}: {size / (1 << 30):.2f} GiB, {pages:,} pages in one data stream, from "
              f"{SOURCE}'s real pages re-numbered into new extents (checksums recomputed), "
              f"in {time.perf_counter() - started:.1f} s")
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        plain_read(path, READ_BYTES)
        verify(path, files)  # warm-up of both: the file is in the page cache from here on
        read, check = best_of(args.repeat, lambda: plain_read(path, READ_BYTES), lambda: verify(path, files)[0])
        report("warm", size, pages, read, check, args.repeat)
        others = {block: min(plain_read(path, block) for _ in range(3)) for block in (1 << 20, 8 << 20, 32 << 20)}
        print("plain read at other buffer sizes: " + ", ".join(
            f"{block >> 20} MiB {size / seconds / 1e9:.2f} GB/s" for block, seconds in others.items()))
        print(f"ratio against the fastest plain read: {min([read, *others.values()]) / check:.2f}x")
        one_thread(path, files, args.repeat, read, "idle cores")
        with busy_cores(os.cpu_count() or 1):
            read = min(plain_read(path, READ_BYTES) for _ in range(3))
            check = min(verify(path, files)[0] for _ in range(3))
            print(f"every core busy with another process: plain read {size / read / 1e9:.2f} GB/s, "
                  f"verification {size / check / 1e9:.2f} GB/s ({read / check:.2f}x)")
            one_thread(path, files, 3, read, "every core busy")
        cold = max(1, args.repeat // 2)
        read, check = best_of(cold, lambda: cold_run(path, lambda: plain_read(path, READ_BYTES)),
                              lambda: cold_run(path, lambda: verify(path, files)[0]))
        report("cold", size, pages, read, check, cold)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
