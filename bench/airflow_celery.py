"""Wall time of the nightly DAG on Airflow's CeleryExecutor with one worker and with two, and on the
LocalExecutor for reference.

    .venv/bin/python bench/airflow_celery.py [--clusters 4] [--repeat 3] [--pool 2] [--workdir bench-work]
    make bench-celery

Each configuration gets a fresh stack of real processes (verification/demo/airflow_stack.py): a
PostgreSQL server (Airflow's metadata database and restoreproof's results store), the api-server,
scheduler and dag-processor, and for Celery a Redis broker and the workers, each running one task at a
time (--concurrency 1), with its own host name and state folder. `restore_verification` is triggered
--repeat times on a demo repository of --clusters stanzas with a pool of --pool target slots; a run's
wall time is Airflow's own (the DAG run's end minus its start). Prints each run and the medians.
Everything it starts is stopped and removed at the end, also on Ctrl-C; the demo repository is kept
in --workdir for the next time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from verification.demo.airflow_stack import AirflowStack, Executor
from verification.demo.source import make_demo
from verification.orchestration import scheduler_run_id
from verification.targets.docker import docker_client
from verification.targets.labels import RUN_LABEL
from verification.targets.reaper import reap_docker

CONFIGURATIONS: dict[str, tuple[Executor, int]] = {
    "celery-1": ("CeleryExecutor", 1),
    "celery-2": ("CeleryExecutor", 2),
    "local": ("LocalExecutor", 0),
}
LABELS = {"celery-1": "CeleryExecutor, 1 worker", "celery-2": "CeleryExecutor, 2 workers",
          "local": "LocalExecutor (reference)"}


def leftovers(run_id: str) -> list[str]:
    client = docker_client()
    try:
        return [c.name or c.id for c in client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})]
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pool", type=int, default=2, help="the pool's target slots")
    parser.add_argument("--configurations", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()

    demo = make_demo(args.workdir / f"clusters{args.clusters}", scale=1, clusters=args.clusters)
    print(f"repository: {demo.repository} ({args.clusters} stanzas), pool of {args.pool}, "
          f"{args.repeat} run(s) per configuration", flush=True)
    seconds: dict[str, list[float]] = {}
    failed: list[str] = []
    for name in args.configurations:
        executor, workers = CONFIGURATIONS[name]
        clock = time.monotonic()
        with AirflowStack(workers=workers, executor=executor, pool_slots=args.pool, keep_on_failure=True) as stack:
            print(f"{LABELS[name]}: stack up in {time.monotonic() - clock:.0f} s", flush=True)
            for attempt in range(1, args.repeat + 1):
                airflow_run = f"bench-{name}-{attempt}-{int(time.time())}"
                run_id = scheduler_run_id("restore_verification", airflow_run)
                try:
                    stack.trigger({"source": str(demo.repository), "target": "docker"}, run_id=airflow_run)
                    state = stack.wait_for_run(airflow_run, timeout=3600)
                    took = stack.run_seconds(airflow_run)
                    hosts = sorted({ti.hostname for ti in stack.task_instances(airflow_run)
                                    if ti.task_id == "database.verify"})
                finally:
                    left = leftovers(run_id)
                    reap_docker(run_id)  # this run's own leftovers only
                print(f"  run {attempt}: {state} in {took:.1f} s (verify ran on {', '.join(hosts)})"
                      + (f"; LEFT BEHIND: {left}" if left else ""), flush=True)
                if state != "success" or left:
                    failed.append(f"{name} run {attempt}")
                seconds.setdefault(name, []).append(took)
    print(f"\nnightly DAG, {args.clusters} demo stanzas at scale 1, pool of {args.pool}, "
          f"median of {args.repeat} run(s) (Airflow's DAG run wall time):")
    for name, values in seconds.items():
        print(f"  {LABELS[name]:<28} {statistics.median(values):7.1f} s   "
              f"(runs: {', '.join(f'{v:.1f}' for v in values)})")
    if "celery-1" in seconds and "celery-2" in seconds:
        speedup = statistics.median(seconds["celery-1"]) / statistics.median(seconds["celery-2"])
        print(f"  two workers vs one: {speedup:.2f}x faster")
    if failed:
        sys.exit(f"not every run succeeded cleanly: {', '.join(failed)}")


if __name__ == "__main__":
    main()
