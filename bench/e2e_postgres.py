"""restoreproof's wall time against the same work done by hand, in the same image, same run.

    .venv/bin/python bench/e2e_postgres.py [--scale 10] [--repeat 3] [--workdir bench-work] [--pg-version 17]

Makes (or reuses) a one-cluster demo repository at the given scale, of PostgreSQL `--pg-version`
(default 15: written by that major's image, restored in it on both sides), then, `--repeat` times,
alternating the order (odd runs restoreproof first, even runs the raw steps first):
- restoreproof: `run_verification` on it (plan, provision, restore, recovery, data checks,
  integrity checks, repository verify, hashes, reports, store), with its own results store;
- raw steps: `docker run` the same image with the same limits and a fresh volume, then by
  `docker exec`, strictly one after the other: pgbackrest restore (same options), server start
  to recovery end, pg_amcheck, clean stop, pg_checksums, pgbackrest verify; then remove the
  container and volume.
Before the timed runs, restoreproof verifies the repository `--calibrate` times (default: the
prediction's min_runs) with the same store, untimed: the timed runs are calibrated, as every
night's run is once a deployment has that many runs, so they run no prediction probes.
Prints each run's times and ratio, the per-phase medians of both sides (restoreproof's phases
are each timed on their own; several run alongside others, so they add up to more than its
wall time), the median of the per-run ratios overall and per order, and the load average.
Target: at most 0.85 at --scale 10.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import DEFAULT_PG_VERSION, demo_image, make_demo
from verification.pipeline import run_verification
from verification.reports.json_report import report_data
from verification.targets.docker import WORK_DIR

STANZA = "demo1"
SETTINGS_APPEND = (
    "listen_addresses = ''\nunix_socket_directories = '/tmp'\nhot_standby = 'off'\nlogging_collector = 'off'\n"
    "log_line_prefix = '%m [%p] '\nlog_timezone = 'UTC'\nssl = 'off'\n"
)


def sh(argv: list[str]) -> float:
    started = time.monotonic()
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        sys.exit(f"raw step failed: {' '.join(argv)}\n{completed.stdout}\n{completed.stderr}")
    return time.monotonic() - started


def raw_steps(repo: Path, image: str, memory: str, cpus: float, process_max: int) -> dict[str, float]:
    name = f"restoreproof-bench-raw-{int(time.time() * 1000)}"
    data = f"{WORK_DIR}/data"
    pgbr = ["pgbackrest", f"--stanza={STANZA}", "--repo1-path=/repo", f"--log-path={WORK_DIR}", "--log-level-file=off"]
    seconds: dict[str, float] = {}
    started = time.monotonic()
    try:
        seconds["provision"] = sh(["docker", "run", "-d", "--name", name, "--label", "restoreproof.run=bench-raw",
                                   "--network", "none", f"--memory={memory}", f"--cpus={cpus}",
                                   "-v", f"{repo}:/repo:ro", "-v", f"{name}-data:{WORK_DIR}", image])
        ex = ["docker", "exec", "-u", "postgres", name]
        seconds["provision"] += sh([*ex, "mkdir", "-m", "700", data])
        seconds["transfer"] = sh([*ex, *pgbr, f"--lock-path={WORK_DIR}", f"--pg1-path={data}",
                                  "--archive-mode=off", f"--process-max={process_max}", "restore"])
        sh([*ex, "bash", "-c", f"printf %s \"$0\" >> {data}/postgresql.auto.conf", SETTINGS_APPEND])
        seconds["start_to_online"] = sh([*ex, "bash", "-c",
                                         f"pg_ctl start -w -D {data} -l {WORK_DIR}/server.log >/dev/null && "
                                         "until [ \"$(psql -XAtq -h /tmp -d template1 -c 'select pg_is_in_recovery()'"
                                         " 2>/dev/null)\" = f ]; do sleep 0.05; done"])
        seconds["pg_amcheck"] = sh([*ex, "pg_amcheck", "-h", "/tmp", "--all", "--install-missing", "--verbose",
                                    "--heapallindexed"])
        seconds["stop"] = sh([*ex, "pg_ctl", "stop", "-m", "fast", "-w", "-D", data])
        seconds["pg_checksums"] = sh([*ex, "pg_checksums", "--check", "-D", data])
        seconds["pgbackrest_verify"] = sh([*ex, *pgbr, "--log-level-console=info", "--output=text", "--verbose",
                                           "verify"])
    finally:
        removal = time.monotonic()
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        subprocess.run(["docker", "volume", "rm", "-f", f"{name}-data"], capture_output=True, check=False)
        seconds["cleanup"] = time.monotonic() - removal
    seconds["total"] = time.monotonic() - started
    return seconds


def pipeline_run(repo: Path, report_dir: Path, image: str, data_checks: bool = True) -> dict[str, float]:
    settings = load_settings(report_dir=report_dir, state_dir=report_dir / "state",
                             checks=None if data_checks else {"enabled": False})
    started = time.monotonic()
    result = run_verification(settings, repo, databases=[STANZA])
    wall = time.monotonic() - started
    (db,) = report_data(result.report)["databases"]
    if db["verdict"] != "passed":
        sys.exit(f"restoreproof did not pass the bench repository: {db['reasons']}")
    used = json.loads((result.run_dir / "evidence" / db["evidence"]["versions.json"]).read_text())["target"]["image"]
    if used != image:  # the raw steps run `image`: like is compared with like only in the same one
        sys.exit(f"restoreproof restored in {used}, the raw steps run {image}: unset docker.postgres_image(s)")
    seconds = {p["name"]: p["seconds"] for p in db["phases"] if p["seconds"] is not None}
    seconds["phases_own_sum"] = sum(seconds.values())
    if db.get("wall_seconds") is not None:
        seconds["database_wall"] = db["wall_seconds"]
    prediction = db.get("prediction") or {}
    seconds["calibrated"] = 1.0 if prediction.get("mode") == "calibrated" else 0.0
    seconds["total"] = wall
    return seconds


def load() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=4,
                        help="timed pairs, at least 3; an even number runs each order as often")
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    parser.add_argument("--pg-version", default=DEFAULT_PG_VERSION,
                        help="the demo cluster's PostgreSQL major (its image writes and restores the repository)")
    parser.add_argument("--calibrate", type=int, default=None,
                        help="untimed restoreproof runs first (default: prediction.min_runs)")
    parser.add_argument("--no-data-checks", dest="data_checks", action="store_false",
                        help="restoreproof without its data checks (checks.enabled: false): the same steps as "
                             "the raw ones, which have none")
    args = parser.parse_args()
    if args.pg_version.isdigit() and int(args.pg_version) < 14:
        # The raw side is what a person would run by hand: pg_amcheck, a program from PostgreSQL 14 on.
        parser.error(f"--pg-version {args.pg_version}: the raw steps run pg_amcheck, which PostgreSQL "
                     f"{args.pg_version} does not have; bench 14 or later")

    settings = load_settings()
    made_at = time.monotonic()
    image = demo_image(args.pg_version)
    # 15's repositories keep the folder they had before --pg-version, so one made then is reused.
    folder = f"scale{args.scale}" if args.pg_version == DEFAULT_PG_VERSION else f"pg{args.pg_version}-scale{args.scale}"
    demo = make_demo(args.workdir / folder, scale=args.scale, clusters=1, pg_version=args.pg_version)
    size = sum(p.stat().st_size for p in demo.repository.rglob("*") if p.is_file())
    print(f"repository: {demo.repository} (PostgreSQL {args.pg_version}, image {image}; {size / 1e6:.0f} MB on disk, "
          f"{'reused' if demo.reused else f'made in {time.monotonic() - made_at:.0f} s'})")
    calibrate = settings.prediction.min_runs if args.calibrate is None else args.calibrate
    loads = [load()]
    print(f"load average at the start: {loads[0]}")

    ours: list[dict[str, float]] = []
    raw: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as reports:
        for i in range(calibrate):
            warm = pipeline_run(demo.repository, Path(reports), image, args.data_checks)
            print(f"  calibrating {i + 1}/{calibrate}: restoreproof {warm['total']:7.2f} s (untimed)", flush=True)
        for i in range(args.repeat):
            # Alternate the order so neither side always gets the warmer page cache.
            steps: list[tuple[str, Callable[[], None]]] = [
                ("restoreproof", lambda: ours.append(pipeline_run(demo.repository, Path(reports), image,
                                                                  args.data_checks))),
                ("raw", lambda: raw.append(raw_steps(demo.repository, image, settings.docker.memory,
                                                     settings.docker.cpus, settings.postgres.restore_process_max)))]
            for label, step in steps if i % 2 == 0 else reversed(steps):
                step()
                last = (ours if label == "restoreproof" else raw)[-1]["total"]
                print(f"  run {i + 1} {label:<12} {last:7.2f} s", flush=True)
            print(f"  run {i + 1} ratio {ours[-1]['total'] / raw[-1]['total']:.3f} "
                  f"({'restoreproof' if i % 2 == 0 else 'raw steps'} first; load {load()})", flush=True)
    loads.append(load())

    def median(rows: list[dict[str, float]], key: str) -> float | None:
        values = [r[key] for r in rows if key in r]
        return statistics.median(values) if values else None

    print(f"\nper-phase medians over {args.repeat} runs, scale {args.scale}, PostgreSQL {args.pg_version} (seconds)"
          + ("" if args.data_checks else "; restoreproof without its data checks"))
    print("restoreproof (each phase its own duration; several ran alongside others):")
    for key in ("provision", "transfer", "server_start", "redo", "recovery_end", "data_checks", "integrity_check",
                "repository_verify", "phases_own_sum", "database_wall", "total"):
        value = median(ours, key)
        print(f"  {key:<18} {value:8.3f}" if value is not None else f"  {key:<18}        -")
    if not all(r["calibrated"] for r in ours):
        print("  (some timed runs were not calibrated: their prediction probes are in these times)")
    print("raw steps (one after the other):")
    for key in ("provision", "transfer", "start_to_online", "pg_amcheck", "stop", "pg_checksums",
                "pgbackrest_verify", "cleanup", "total"):
        value = median(raw, key)
        print(f"  {key:<18} {value:8.3f}" if value is not None else f"  {key:<18}        -")
    ratios = [o["total"] / r["total"] for o, r in zip(ours, raw, strict=True)]
    ratio = statistics.median(ratios)
    first, second = ratios[0::2], ratios[1::2]
    print(f"\nper-run ratios: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"median with restoreproof first: {statistics.median(first):.3f}"
          + (f"; with the raw steps first: {statistics.median(second):.3f}" if second else ""))
    print(f"wall-time ratio restoreproof / raw steps (median of per-run ratios): {ratio:.3f} (target <= 0.85)")
    print(f"load average (1, 5, 15 min) at the start {loads[0]}, at the end {loads[1]} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
