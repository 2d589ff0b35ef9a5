"""Wall time of the nightly DAG under the real Airflow scheduler, at pool sizes 1 and 2.

    .venv/bin/python bench/airflow_pool.py [--clusters 4] [--pools 1 2] [--workdir bench-work]

`dag.test()` ignores pools, so this starts the real thing: a PostgreSQL metadata server (our
image; it also holds the results store, since parallel tasks must not share a SQLite file),
`airflow api-server`, `scheduler` (LocalExecutor) and `dag-processor` as local processes, then
triggers `restore_verification` on a demo repository of N clusters once per pool size and reads
each run's wall time from the metadata database. Everything it starts is removed at the end,
also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from verification.demo.source import make_demo
from verification.targets.docker import docker_client
from verification.targets.labels import labels
from verification.targets.reaper import reap_docker

ROOT = Path(__file__).resolve().parents[1]
BENCH_RUN = "bench-airflow-pool"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(what: str, ready, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception:  # not up yet
            pass
        time.sleep(1)
    sys.exit(f"{what} not ready after {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--pools", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()

    demo = make_demo(args.workdir / f"clusters{args.clusters}", scale=1, clusters=args.clusters)
    print(f"repository: {demo.repository} ({args.clusters} clusters)", flush=True)
    password = secrets.token_urlsafe(16)
    db_port, api_port = free_port(), free_port()
    home = Path(tempfile.mkdtemp(prefix="restoreproof-bench-airflow-"))
    client = docker_client()
    processes: list[subprocess.Popen[bytes]] = []
    succeeded = False
    try:
        client.containers.run(
            "restoreproof/postgres:15", entrypoint=["restoreproof-postgres-serve"], detach=True,
            name=f"restoreproof-{BENCH_RUN}-metadata", labels=labels(BENCH_RUN, "bench-metadata"),
            environment={"POSTGRES_USER": "airflow", "POSTGRES_PASSWORD": password,
                         "POSTGRES_DATABASES": "airflow restoreproof"},
            ports={"5432/tcp": ("127.0.0.1", db_port)})
        url = f"postgresql://airflow:{password}@127.0.0.1:{db_port}"
        wait("metadata database", lambda: psycopg.connect(f"{url}/airflow").close() is None)
        env = {**os.environ,
               "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg://airflow:{password}@127.0.0.1:{db_port}/airflow",
               # Airflow's async engine would default to asyncpg; psycopg 3 is async too.
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC":
                   f"postgresql+psycopg://airflow:{password}@127.0.0.1:{db_port}/airflow",
               "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__PARALLELISM": "8",
               "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
               "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
               "AIRFLOW__API__PORT": str(api_port), "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
               "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
               "PYTHONPATH": str(ROOT / "plugins"), "RESTOREPROOF_SCHEDULE": "none",
               "RESTOREPROOF_RESULTS_URL": f"postgresql+psycopg://airflow:{password}@127.0.0.1:{db_port}/restoreproof",
               "RESTOREPROOF_REPORT_DIR": str(home / "reports"), "XDG_STATE_HOME": str(home / "state")}
        airflow = [sys.executable, "-m", "airflow"]
        migrated = subprocess.run([*airflow, "db", "migrate"], env=env, capture_output=True, text=True)
        if migrated.returncode != 0:
            sys.exit(f"airflow db migrate failed:\n{migrated.stderr[-3000:]}")
        for component in (["api-server", "--port", str(api_port)], ["scheduler"], ["dag-processor"]):
            log = (home / f"{component[0]}.log").open("wb")
            processes.append(subprocess.Popen([*airflow, *component], env=env, stdout=log, stderr=log,
                                              start_new_session=True))
        with psycopg.connect(f"{url}/airflow", autocommit=True) as conn:
            wait("DAG parsed", lambda: conn.execute(
                "SELECT NOT is_paused FROM dag WHERE dag_id = 'restore_verification'").fetchone() == (True,))
        results = {}
        for slots in args.pools:
            subprocess.run([*airflow, "pools", "set", "restoreproof_targets", str(slots), "bench"], env=env,
                           check=True, capture_output=True)
            run_id = f"bench-pool{slots}-{int(time.time())}"
            conf = json.dumps({"source": str(demo.repository), "target": "docker"})
            subprocess.run([*airflow, "dags", "trigger", "restore_verification", "--run-id", run_id, "--conf", conf],
                           env=env, check=True, capture_output=True)
            with psycopg.connect(f"{url}/airflow", autocommit=True) as conn:
                def finished(run_id: str = run_id) -> bool:
                    row = conn.execute("SELECT state FROM dag_run WHERE run_id = %s", (run_id,)).fetchone()
                    return row is not None and row[0] in ("success", "failed")
                wait(f"run {run_id}", finished, timeout=1800)
                state, seconds = conn.execute(
                    "SELECT state, EXTRACT(EPOCH FROM end_date - start_date) FROM dag_run WHERE run_id = %s",
                    (run_id,)).fetchone()
                peak = conn.execute(
                    "SELECT count(*) FROM task_instance a JOIN task_instance b ON a.run_id = b.run_id "
                    "AND a.task_id = 'database.verify' AND b.task_id = 'database.verify' AND a.map_index < b.map_index "
                    "AND a.start_date < b.end_date AND b.start_date < a.end_date WHERE a.run_id = %s",
                    (run_id,)).fetchone()[0]
            results[slots] = (state, float(seconds), peak)
            print(f"pool {slots}: run {state} in {float(seconds):.1f} s "
                  f"(overlapping verify pairs: {peak})", flush=True)
        print(f"\nnightly DAG, {args.clusters} demo clusters, real scheduler (LocalExecutor):")
        for slots, (state, seconds, _) in results.items():
            print(f"  pool size {slots}: {seconds:6.1f} s ({state})")
        succeeded = all(state == "success" for state, _, _ in results.values())
    finally:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + 20
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # airflow components may ignore SIGTERM
                process.wait()
        reap_docker(BENCH_RUN)
        client.close()
        if succeeded:
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"(Airflow's logs kept in {home})")


if __name__ == "__main__":
    main()
