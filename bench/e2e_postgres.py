"""restoreproof's wall time against the same work done by hand, in the same image, same run.

    .venv/bin/python bench/e2e_postgres.py [--scale 10] [--repeat 3] [--workdir bench-work]

Makes (or reuses) a one-cluster demo repository at the given scale, then, `--repeat` times,
alternating the order:
- restoreproof: `run_verification` on it (plan, provision, restore, recovery, checks, reports, store);
- raw steps: `docker run` the same image with the same limits and a fresh volume, then by
  `docker exec`: pgbackrest restore (same options), server start to recovery end, pg_amcheck,
  clean stop, pg_checksums, pgbackrest verify; then remove the container and volume.
Prints per-phase seconds (medians) for both and the ratio of restoreproof's wall time to the
raw steps' total. Target: at most 1.10 at --scale 10.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import make_demo
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


def pipeline_run(repo: Path, report_dir: Path) -> dict[str, float]:
    settings = load_settings(report_dir=report_dir, state_dir=report_dir / "state")
    started = time.monotonic()
    result = run_verification(settings, repo, databases=[STANZA])
    wall = time.monotonic() - started
    (db,) = report_data(result.report)["databases"]
    if db["verdict"] != "passed":
        sys.exit(f"restoreproof did not pass the bench repository: {db['reasons']}")
    seconds = {p["name"]: p["seconds"] for p in db["phases"] if p["seconds"] is not None}
    seconds["total"] = wall
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()

    settings = load_settings()
    made_at = time.monotonic()
    demo = make_demo(args.workdir / f"scale{args.scale}", scale=args.scale, clusters=1)
    size = sum(p.stat().st_size for p in demo.repository.rglob("*") if p.is_file())
    print(f"repository: {demo.repository} ({size / 1e6:.0f} MB on disk, "
          f"{'reused' if demo.reused else f'made in {time.monotonic() - made_at:.0f} s'})")

    ours: list[dict[str, float]] = []
    raw: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as reports:
        for i in range(args.repeat):
            # Alternate the order so neither side always gets the warmer page cache.
            steps = [("restoreproof", lambda: ours.append(pipeline_run(demo.repository, Path(reports)))),
                     ("raw", lambda: raw.append(raw_steps(demo.repository, settings.docker.postgres_image,
                                                          settings.docker.memory, settings.docker.cpus,
                                                          settings.postgres.restore_process_max)))]
            for label, step in steps if i % 2 == 0 else reversed(steps):
                step()
                last = (ours if label == "restoreproof" else raw)[-1]["total"]
                print(f"  run {i + 1} {label:<12} {last:7.2f} s", flush=True)

    def median(rows: list[dict[str, float]], key: str) -> float | None:
        values = [r[key] for r in rows if key in r]
        return statistics.median(values) if values else None

    print(f"\nper-phase medians over {args.repeat} runs, scale {args.scale} (seconds)")
    print("restoreproof:")
    for key in ("provision", "transfer", "server_start", "redo", "recovery_end", "integrity_check",
                "repository_verify", "total"):
        value = median(ours, key)
        print(f"  {key:<18} {value:8.3f}" if value is not None else f"  {key:<18}        -")
    print("raw steps:")
    for key in ("provision", "transfer", "start_to_online", "pg_amcheck", "stop", "pg_checksums",
                "pgbackrest_verify", "cleanup", "total"):
        value = median(raw, key)
        print(f"  {key:<18} {value:8.3f}" if value is not None else f"  {key:<18}        -")
    ratio = statistics.median(o["total"] / r["total"] for o, r in zip(ours, raw, strict=True))
    print(f"\nwall-time ratio restoreproof / raw steps (median of per-run ratios): {ratio:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
