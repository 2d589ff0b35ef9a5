"""Stage mode's cost (issue 13): staging against a plain parallel download, and a verification from S3
against the same verification from a folder plus that plain download, each pair in the same run.

    .venv/bin/python bench/s3_restore.py [--scale 1] [--repeat 3] [--threads 16] [--tls] [--workdir bench-work]

Makes (or reuses) a one-cluster demo repository (real PostgreSQL 15, pgBackRest 2.45: full, diff and
incr backups and their WAL) and uploads it into a local S3 endpoint (moto's server mode, its own
process; plain HTTP unless --tls). Then, `--repeat` times, alternating the order of each pair:

(a) staging: `Stager.stage` of the stanza's planned files (S3Source opened beforehand: the listing is
    the plan's), If-Match on every GET, sizes and CRC32s checked, files made readable, against a plain
    download of the same objects with boto3's transfer manager, same TransferConfig and threads, no
    checks. Throughput ratio: plain seconds / staging seconds (target >= 0.9).
(b) `run_verification` from s3://... (plan from S3, stage, restore, recovery, checks, hashes, reports)
    against `run_verification` from the folder plus the plain download of the same files. Ratio:
    S3 seconds / (folder seconds + plain download seconds) (target <= 1.1).

Both verifications run with `prediction.probes: never` (a probe starts a second container, noise the
comparison does not need), data checks on, each with a fresh state folder and results store. One
untimed verification of the folder runs first (Great Expectations' import, the page cache).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from s3transfer.subscribers import BaseSubscriber

from verification.config import load_settings
from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.demo.source import make_demo
from verification.pipeline import plan_source, run_verification
from verification.sources.s3 import S3Source
from verification.sources.staging import Stager, transfer_config
from verification.targets.local import leftovers_dir

STANZA = "demo1"
BUCKET = "bench-restore"
PREFIX = "pgbackrest/repo1"
MiB = 1024 * 1024


def plain_client(threads: int) -> Any:
    return boto3.client("s3", config=Config(max_pool_connections=threads + 4,
                                            retries={"mode": "standard", "total_max_attempts": 3}))


def upload(client: Any, root: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: client.upload_file(str(p), BUCKET, f"{PREFIX}/{p.relative_to(root).as_posix()}"),
                      files))


class _Known(BaseSubscriber):  # type: ignore[misc]
    """The object's size and ETag given to the transfer manager (as the listing knows them): no HEAD."""

    def __init__(self, size: int, etag: str) -> None:
        self.size, self.etag = size, etag

    def on_queued(self, future: Any, **kwargs: Any) -> None:
        future.meta.provide_transfer_size(self.size)
        future.meta.provide_object_etag(self.etag)


def plain_download(client: Any, files: list[str], into: Path, threads: int,
                   known: dict[str, tuple[int, str]] | None = None) -> float:
    """The same objects by boto3's transfer manager, the same TransferConfig, nothing checked. Without
    `known` as boto3 does it by default (a HEAD for each object's size, then the GET); with it, each
    object's size and ETag given, so one GET each, as staging does."""
    from boto3.s3.transfer import create_transfer_manager

    started = time.monotonic()
    for folder in {(into / path).parent for path in files}:
        folder.mkdir(parents=True, exist_ok=True)
    with create_transfer_manager(client, transfer_config(threads)) as manager:
        futures = [manager.download(BUCKET, f"{PREFIX}/{path}", str(into / path),
                                    subscribers=[_Known(*known[path])] if known else None) for path in files]
        for future in futures:
            future.result()
    seconds = time.monotonic() - started
    shutil.rmtree(into)
    return seconds


def staging(url: str, files: list[str], work: Path, threads: int) -> float:
    settings = load_settings(state_dir=work / "state", s3={"threads": threads})
    with S3Source(url, settings.s3) as source:
        stager = Stager(source, work / "staging", leftovers_dir(work / "state"))
        started = time.monotonic()
        copy = stager.stage(files, "bench", STANZA)
        seconds = time.monotonic() - started
        copy.remove()
    return seconds


def verification(where: str, work: Path, threads: int) -> float:
    shutil.rmtree(work / "state", ignore_errors=True)
    settings = load_settings(state_dir=work / "state", report_dir=work / "reports", s3={"threads": threads},
                             prediction={"probes": "never"})
    started = time.monotonic()
    result = run_verification(settings, where, databases=[STANZA])
    seconds = time.monotonic() - started
    (db,) = result.run.databases
    if db.verdict != "passed":
        sys.exit(f"the verification of {where} did not pass: {db.reasons}")
    return seconds


def alternate(repeat: int, pair: list[tuple[str, Callable[[], float]]], times: dict[str, list[float]]) -> None:
    for i in range(repeat):
        # Alternate the order so neither side always goes first (the endpoint's and the page cache's state).
        for label, step in pair if i % 2 == 0 else list(reversed(pair)):
            times[label].append(step())
            print(f"  run {i + 1} {label:<28} {times[label][-1]:8.3f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()

    made_at = time.monotonic()
    demo = make_demo(args.workdir / f"scale{args.scale}-1cluster", scale=args.scale, clusters=1)
    made = "reused" if demo.reused else f"made in {time.monotonic() - made_at:.0f} s"
    print(f"repository: {demo.repository} ({made})")
    with LocalS3Endpoint(tls=args.tls) as endpoint, tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as tmp:
        work = Path(tmp)
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
            os.environ.pop(name, None)
        os.environ.update({**endpoint.client_environment(), "AWS_CONFIG_FILE": str(work / "no-aws-config"),
                           "AWS_SHARED_CREDENTIALS_FILE": str(work / "no-aws-credentials"),
                           "AWS_EC2_METADATA_DISABLED": "true"})
        client = plain_client(args.threads)
        client.create_bucket(Bucket=BUCKET)
        upload(client, demo.repository)
        url = f"s3://{BUCKET}/{PREFIX}"
        _, source, planned = plan_source(load_settings(state_dir=work / "state"), url, "postgres")
        (plan,) = [p for p in planned.plans if p.database == STANZA]
        sizes = sorted((source.size(path) for path in plan.files), reverse=True)
        total = sum(sizes)
        print(f"the plan of {STANZA}: {len(plan.files)} objects, {total / MiB:.1f} MiB (largest {sizes[0] / MiB:.1f} "
              f"MiB; {sum(1 for s in sizes if s > 8 * MiB)} over 8 MiB, fetched in parts); {args.threads} threads; "
              f"endpoint {endpoint.url}")

        assert isinstance(source, S3Source)
        known = {path: (source.size(path), source.listed(path).etag) for path in plan.files}
        plain, head_free = "plain download", "plain, size+ETag given"
        print("\n(a) staging against a plain parallel download of the same objects (as boto3 does it by default: "
              "a HEAD, then the GET; and given each object's size and ETag: the GET only)")
        times: dict[str, list[float]] = {"staging": [], plain: [], head_free: []}
        alternate(args.repeat, [("staging", lambda: staging(url, plan.files, work / "a", args.threads)),
                                (plain, lambda: plain_download(client, plan.files, work / "plain", args.threads)),
                                (head_free, lambda: plain_download(client, plan.files, work / "plain", args.threads,
                                                                   known))], times)
        for label in times:
            value = statistics.median(times[label])
            print(f"  median {label:<24} {value:7.3f} s ({total / MiB / value:.1f} MiB/s, "
                  f"{len(plan.files) / value:.0f} objects/s)")
        for label in (plain, head_free):
            ratio = statistics.median(p / s for s, p in zip(times["staging"], times[label], strict=True))
            print(f"  throughput ratio staging / {label} (median of per-run ratios): {ratio:.3f} (target >= 0.9)")

        print("\n(b) a verification from S3 against the folder's plus a plain download of the same files")
        verification(str(demo.repository), work / "warm", args.threads)  # untimed: imports, page cache
        runs: dict[str, list[float]] = {"from S3 (stage)": [], "from the folder": [], plain: [], head_free: []}

        def folder_and_downloads() -> float:
            runs[plain].append(plain_download(client, plan.files, work / "plain", args.threads))
            runs[head_free].append(plain_download(client, plan.files, work / "plain", args.threads, known))
            return verification(str(demo.repository), work / "b-folder", args.threads)

        alternate(args.repeat, [("from S3 (stage)", lambda: verification(url, work / "b-s3", args.threads)),
                                ("from the folder", folder_and_downloads)], runs)
        medians = {label: statistics.median(values) for label, values in runs.items()}
        print("  medians: " + "; ".join(f"{label} {value:.2f} s" for label, value in medians.items()))
        for label in (plain, head_free):
            ratio = statistics.median(s / (f + d) for s, f, d in zip(runs["from S3 (stage)"], runs["from the folder"],
                                                                   runs[label], strict=True))
            print(f"  ratio from S3 / (folder + {label}) (median of per-run ratios): {ratio:.3f} (target <= 1.1)")

if __name__ == "__main__":
    main()
