"""Offline SQL Server header scanning speed on the real corpus.

    .venv/bin/python bench/mssql_headers.py [--corpus ../shared/testdata/mssql-backups] [--seconds 5]

Scans the corpus (catalog: read every file's headers, group sets and databases) repeatedly on one
core from local disk (page cache warm after the first pass) and prints files per second and bytes
read per file. Targets: at least 2,000 files/s, at most 64 KiB per file. Then the same with the
header cache warm (a state folder of its own, filled by one scan first): files per second, and how
many were read all the same (a local fingerprint vouches only for backups read whole and well).

Last, a large folder: `--large` files (10,000) in Ola Hallengren's layout, hard links to the corpus's
log backups of 48 to 256 KiB, in a temporary folder; the median of `--repeat` scans without the
cache, the first scan with it (reading everything and filling it), and warm scans. The links were
made a moment ago, so the minute a local file must have been left alone before it gets a
fingerprint (sources/local.py, SETTLED_SECONDS) is set to 0 here: nothing writes them meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verification.config import Settings
from verification.engines.mssql.catalog import Catalog, scan
from verification.engines.mssql.header_cache import HeaderCache
from verification.sources import LocalSource


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "testdata" / "mssql-backups")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--large", type=int, default=10_000, help="files in the large folder (0: none)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    source = LocalSource(args.corpus)
    first = scan(source)  # warms the page cache; the figures below are for repeated scans
    files = bytes_read = passes = 0
    largest = 0
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        catalog = scan(source)
        files += catalog.files_read
        bytes_read += catalog.bytes_read
        passes += 1
    elapsed = time.perf_counter() - started
    for path in source.root.rglob("*"):
        if path.is_file():
            largest = max(largest, path.stat().st_size)
    needing = sum(u.kind == "needs-server" for u in first.unreadable)
    print(f"corpus: {args.corpus} ({first.files_read} backup files, {len(first.databases)} databases, "
          f"{needing} needing a server, {len(first.not_backups)} other files; largest file "
          f"{largest / 1e6:.1f} MB)")
    print(f"{passes} scans in {elapsed:.2f} s on one core")
    print(f"files per second: {files / elapsed:,.0f} (target >= 2,000)")
    print(f"bytes read per file: {bytes_read / files / 1024:.1f} KiB on average, "
          f"at most {max_read(source) / 1024:.1f} KiB (target <= 64 KiB)")
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as state:
        settings = Settings(state_dir=Path(state))
        cached_scan(settings, source)
        files = cached = passes = 0
        started = time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            catalog = cached_scan(settings, source)
            files += catalog.files_read + catalog.files_cached
            cached += catalog.files_cached
            passes += 1
        elapsed = time.perf_counter() - started
    print(f"with the header cache warm: {passes} scans in {elapsed:.2f} s, {files / elapsed:,.0f} files per second "
          f"({cached / passes:.0f} of {files / passes:.0f} files from the cache, the others read)")
    if args.large:
        large_folder(args.corpus, args.large, args.repeat)


def large_folder(corpus: Path, count: int, repeat: int) -> None:
    import statistics

    from s3_catalog import corpus_logs, ola_keys  # this folder's: the S3 bench's layout

    from verification.sources import local

    local.SETTLED_SECONDS = 0.0
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as work:
        originals = Path(work) / "originals"
        originals.mkdir()
        logs = corpus_logs(corpus)
        for n, body in enumerate(logs):
            (originals / f"{n}.trn").write_bytes(body)
        root = Path(work) / "folder"
        for n, key in enumerate(ola_keys(count)):
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            os.link(originals / f"{n % len(logs)}.trn", root / key)
        source = LocalSource(root)
        settings = Settings(state_dir=Path(work) / "state")

        def timed(work: Callable[[], Catalog]) -> float:
            started = time.perf_counter()
            work()
            return time.perf_counter() - started

        without = statistics.median(timed(lambda: scan(source)) for _ in range(repeat))
        first = timed(lambda: cached_scan(settings, source))
        warm = statistics.median(timed(lambda: cached_scan(settings, source)) for _ in range(repeat))
    print(f"a folder of {count:,} backups (hard links to {len(logs)} log backups of the corpus), page cache warm, "
          f"median of {repeat}: without the cache {count / without:,.0f} files/s; the first scan with it (all read, "
          f"the cache filled) {count / first:,.0f} files/s; warm {count / warm:,.0f} files/s ({without / warm:.1f}x)")


def cached_scan(settings: Settings, source: LocalSource) -> Catalog:
    cache = HeaderCache.for_source(settings, source)
    try:
        return scan(source, [], cache)
    finally:
        cache.close()


def max_read(source: LocalSource) -> int:
    from verification.engines.mssql.catalog import walk
    from verification.engines.mssql.mtf import MtfError, NeedsServerHeaderOnly, read_backup_header
    from verification.sources.base import SourceFile

    worst = 0
    for path in walk(source):
        reader = SourceFile(source, path)
        with contextlib.suppress(MtfError, NeedsServerHeaderOnly):
            read_backup_header(reader)
        worst = max(worst, reader.bytes_read)
    return worst


if __name__ == "__main__":
    main()
