"""Real Airflow on this machine, distributed as a deployment would be: for the CeleryExecutor test
(tests/integration/airflow/test_celery.py) and the bench (bench/airflow_celery.py).

    with AirflowStack(workers=2) as stack:
        run_id = stack.trigger({"source": "/srv/backups", "target": "docker"})
        state = stack.wait_for_run(run_id, timeout=600)

Started, each as a process of its own (verification/demo/processes.py, logs in `<folder>/logs`):

- a PostgreSQL server (verification/demo/postgres_server.py) holding Airflow's metadata database
  and restoreproof's results store, which every worker shares;
- with the CeleryExecutor, a Redis broker (verification/demo/redis_broker.py), the result backend
  being the metadata server (`db+postgresql`);
- `airflow api-server`, `scheduler` and `dag-processor`;
- `airflow celery worker` per worker, each with its own Celery host name, the host name its task
  instances record (plugins/restoreproof_airflow/hostname.py), its own state folder
  (RESTOREPROOF_STATE_DIR: its leftovers records) and temporary folder (TMPDIR: the folders its
  targets bind-mount), all workers sharing one report folder and one results store, and starting
  their targets on the Docker engine DOCKER_HOST names (this machine's, by default).

With `executor="LocalExecutor"` no broker or worker is started: the scheduler runs the tasks.
stop() stops everything in reverse order and removes the stack's folder (kept with `keep=True`, or
with `keep_on_failure` when starting failed or the `with` block raised, for its logs); a stack whose
parent is killed outright dies with it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from verification.demo.postgres_server import PostgresServer
from verification.demo.processes import ProcessError, Processes
from verification.demo.redis_broker import HOST, RedisBroker, free_port

DAG_ID = "restore_verification"
POOL = "restoreproof_targets"
Executor = Literal["CeleryExecutor", "LocalExecutor"]
HOSTNAME_CALLABLE = "restoreproof_airflow.hostname.worker_hostname"
FINISHED = ("success", "failed")


def _airflow_files() -> tuple[Path, Path]:
    from verification.airflow_files import DAGS_DIR, PLUGINS_DIR

    return Path(DAGS_DIR), Path(PLUGINS_DIR)


@dataclass(frozen=True)
class TaskInstanceRow:
    task_id: str
    map_index: int
    name: str  # the rendered map index (the database), else the map index
    state: str | None
    hostname: str
    start_date: datetime | None
    end_date: datetime | None


@dataclass
class AirflowStack:
    workers: int = 2
    executor: Executor = "CeleryExecutor"
    # Task slots per worker: 1, so a worker holds one target at a time and the pool's slots spread
    # over the workers (with more, one worker may take every slot while the other idles).
    worker_concurrency: int = 1
    pool_slots: int = 2
    folder: Path | None = None  # made by start() when not given (and then removed by stop())
    extra_env: Mapping[str, str] = field(default_factory=dict)
    logging_level: str = "WARNING"
    keep: bool = False             # keep the folder (its logs) after stop()
    keep_on_failure: bool = False  # keep it when starting failed or the `with` block raised
    _processes: Processes | None = field(default=None, repr=False)
    _postgres: PostgresServer | None = field(default=None, repr=False)
    _broker: RedisBroker | None = field(default=None, repr=False)
    _own_folder: bool = field(default=False, repr=False)
    _env: dict[str, str] = field(default_factory=dict, repr=False)

    # -- where things are ------------------------------------------------------------------------

    @property
    def report_dir(self) -> Path:
        assert self.folder is not None
        return self.folder / "reports"

    @property
    def results_url(self) -> str:
        assert self._postgres is not None
        return self._postgres.url("restoreproof")

    @property
    def metadata_url(self) -> str:
        assert self._postgres is not None
        return self._postgres.url("airflow")

    @property
    def worker_names(self) -> list[str]:
        return [f"restoreproof-worker{i}" for i in range(1, self.workers + 1)] \
            if self.executor == "CeleryExecutor" else []

    def worker_state_dir(self, name: str) -> Path:
        assert self.folder is not None
        return self.folder / name / "state"

    @property
    def env(self) -> dict[str, str]:
        """What every Airflow process of the stack (and its CLI) runs with."""
        return dict(self._env)

    # -- starting and stopping ------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> AirflowStack:
        if self._processes is not None:  # started already (`with stack:` after `stack.start()`)
            return self
        try:
            return self._start(timeout)
        except BaseException:  # a failure or an interrupt while starting: nothing is left either
            self.stop(failed=True)
            raise

    def _start(self, timeout: float) -> AirflowStack:
        deadline = time.monotonic() + timeout
        if self.folder is None:
            # Short: the targets' exchange folders (TMPDIR) hold Unix sockets, whose paths are bounded.
            self.folder = Path(tempfile.mkdtemp(prefix="restoreproof-airflow-"))
            self._own_folder = True
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        self._processes = Processes(self.folder / "logs")
        self._postgres = PostgresServer().start()
        if self.executor == "CeleryExecutor":
            self._broker = RedisBroker(folder=self.folder / "redis").start()
        dags, plugins = _airflow_files()
        api_port = free_port()
        home = self.folder / "airflow"
        self._env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_url,
            # Airflow's async engine would default to asyncpg; psycopg 3 is async too.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self.metadata_url,
            "AIRFLOW__CORE__EXECUTOR": self.executor, "AIRFLOW__CORE__PARALLELISM": "16",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{api_port}/execution/",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": HOSTNAME_CALLABLE,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__API__HOST": HOST, "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": self.logging_level,
            # The plugins' package (the DAG's hooks, the host name callable), before what this process has
            # (a checkout run without installing restoreproof).
            "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH", "")])),
            "RESTOREPROOF_SCHEDULE": "none",
            "RESTOREPROOF_RESULTS_URL": self.results_url,
            "RESTOREPROOF_REPORT_DIR": str(self.report_dir),
            "RESTOREPROOF_STATE_DIR": str(self.folder / "state"),
        }
        if self._broker is not None:
            self._env.update({
                "AIRFLOW__CELERY__BROKER_URL": self._broker.url,
                "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.metadata_url,
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
                "AIRFLOW__LOGGING__CELERY_LOGGING_LEVEL": "INFO",
            })
        self._env.update(self.extra_env)
        migrated = self.airflow("db", "migrate", timeout=max(60.0, deadline - time.monotonic()))
        if migrated.returncode != 0:
            raise ProcessError(f"airflow db migrate failed:\n{migrated.stderr[-3000:]}")
        self.set_pool(self.pool_slots)
        python = [sys.executable, "-m", "airflow"]
        self._processes.start("api-server", [*python, "api-server", "--port", str(api_port)], self._env)
        self._processes.start("scheduler", [*python, "scheduler"], self._env)
        self._processes.start("dag-processor", [*python, "dag-processor"], self._env)
        for name in self.worker_names:
            state, tmp = self.worker_state_dir(name), self.folder / name / "tmp"
            for path in (state, tmp):
                path.mkdir(parents=True, exist_ok=True)
            self._processes.start(name, [
                *python, "celery", "worker", "--celery-hostname", name, "--concurrency",
                str(self.worker_concurrency), "--skip-serve-logs", "--pid", str(self.folder / name / "worker.pid")],
                {**self._env, "RESTOREPROOF_STATE_DIR": str(state), "TMPDIR": str(tmp),
                 "RESTOREPROOF_WORKER_HOSTNAME": name})
        self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline: float) -> None:
        import psycopg

        assert self._processes is not None and self._postgres is not None
        with psycopg.connect(self._postgres.url("airflow", "postgresql"), autocommit=True) as conn:
            self._processes.wait_until(f"DAG {DAG_ID} parsed and unpaused", lambda: conn.execute(
                "SELECT NOT is_paused FROM dag WHERE dag_id = %s", (DAG_ID,)).fetchone() == (True,),
                max(1.0, deadline - time.monotonic()))
        if self.worker_names:
            self._processes.wait_until(f"Celery workers {', '.join(self.worker_names)}",
                                       lambda: set(self.celery_nodes()) >= set(self.worker_names),
                                       max(1.0, deadline - time.monotonic()), interval=2)

    def stop(self, failed: bool = False) -> None:
        """Stop every process (workers first) and remove the stack's folder, unless kept."""
        if self._processes is not None:
            self._processes.stop(grace=20)
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        if self._postgres is not None:
            self._postgres.stop()
            self._postgres = None
        if self.folder is not None and self._own_folder:
            if self.keep or (failed and self.keep_on_failure):
                print(f"(the Airflow stack's logs are kept in {self.folder})", file=sys.stderr)
            else:
                shutil.rmtree(self.folder, ignore_errors=True)
        self._processes = None

    def __enter__(self) -> AirflowStack:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(failed=kind is not None)

    # -- using it -------------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        """Airflow's CLI against the stack."""
        return subprocess.run([sys.executable, "-m", "airflow", *args], env=self._env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def set_pool(self, slots: int) -> None:
        done = self.airflow("pools", "set", POOL, str(slots), "disposable restore targets at once")
        if done.returncode != 0:
            raise ProcessError(f"airflow pools set {POOL} {slots} failed:\n{done.stderr[-2000:]}")
        self.pool_slots = slots

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL the Celery worker `name` with everything it started (its pool, each task's supervisor and
        task runner), as a worker machine lost: nothing of it cleans up or tells Airflow. The pids killed.
        The stack goes on without it (waiting for a run does not take its exit for a failure)."""
        assert self._processes is not None and name in self.worker_names, name
        return self._processes.get(name).kill()

    def celery_nodes(self) -> list[str]:
        """The Celery workers answering a ping now, by host name (celery@NAME -> NAME)."""
        from celery import Celery

        assert self._broker is not None
        app = Celery(broker=self._broker.url)
        try:
            replies = app.control.ping(timeout=1.0)
        finally:
            app.close()
        return [node.split("@", 1)[1] for reply in replies for node in reply]

    def trigger(self, conf: Mapping[str, Any], run_id: str | None = None) -> str:
        """Trigger the nightly DAG with `conf`; its Airflow run id."""
        run_id = run_id or f"restoreproof-{int(time.time())}-{secrets.token_hex(3)}"
        done = self.airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", json.dumps(dict(conf)))
        if done.returncode != 0:
            raise ProcessError(f"airflow dags trigger {DAG_ID} failed:\n{done.stderr[-2000:]}")
        return run_id

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of `sql` on Airflow's metadata database (what it recorded: task instances, XComs, its log)."""
        import psycopg

        assert self._postgres is not None
        with psycopg.connect(self._postgres.url("airflow", "postgresql"), autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def run_state(self, run_id: str) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", DAG_ID, run_id)
        return str(rows[0][0]) if rows else None

    def wait_for_run(self, run_id: str, timeout: float) -> str:
        """Wait until the run finished (success or failed); its state. ProcessError when a process of the
        stack exits meanwhile or the run is not finished after `timeout` s."""
        assert self._processes is not None
        self._processes.wait_until(f"run {run_id}", lambda: self.run_state(run_id) in FINISHED, timeout, interval=2)
        return str(self.run_state(run_id))

    def run_seconds(self, run_id: str) -> float:
        """The run's wall time as Airflow recorded it (start to end)."""
        ((seconds,),) = self.query("SELECT EXTRACT(EPOCH FROM end_date - start_date) FROM dag_run "
                                    "WHERE dag_id = %s AND run_id = %s", DAG_ID, run_id)
        return float(seconds)

    def task_instances(self, run_id: str) -> list[TaskInstanceRow]:
        rows = self.query(
            "SELECT task_id, map_index, rendered_map_index, state, hostname, start_date, end_date "
            "FROM task_instance WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index", DAG_ID, run_id)
        return [TaskInstanceRow(task_id, map_index, rendered or str(map_index), state, hostname or "", start, end)
                for task_id, map_index, rendered, state, hostname, start, end in rows]

    def logs(self) -> str:
        """The end of each process's log, for a failure's message."""
        if self._processes is None:
            return ""
        return "\n".join(f"--- {m.name} ({m.log})\n{m.log_tail(2000)}" for m in self._processes.started)
