"""Offline SQL Server header scanning speed on the real corpus.

    .venv/bin/python bench/mssql_headers.py [--corpus ../shared/testdata/mssql-backups] [--seconds 5]

Scans the corpus (catalog: read every file's headers, group sets and databases) repeatedly on one
core from local disk (page cache warm after the first pass) and prints files per second and bytes
read per file. Targets: at least 2,000 files/s, at most 64 KiB per file. Then the same with the
header cache warm (a state folder of its own, filled by one scan first): files per second, and how
many were read all the same (a local fingerprint vouches only for backups read whole and well).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
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
