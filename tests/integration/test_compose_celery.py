"""docker/compose.yaml's celery profile, started: a Redis broker and two Celery workers from the project's
Airflow image run the nightly DAG on the demo repository, each worker starting its targets on this
machine's Docker engine.

The image takes minutes to build (bash verification/images/build.sh airflow), so this test runs only
where it was built, and says so when it was not. Everything it starts is removed (`down -v`), also when
it fails.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers
from tests.integration.test_docker_files import DOCKER, compose
from verification.orchestration import scheduler_run_id

pytestmark = pytest.mark.integration

IMAGE = "restoreproof/airflow:3.3.2"
BUILD = "bash verification/images/build.sh airflow"


@pytest.fixture(scope="module")
def airflow_image() -> str:
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode != 0:
        pytest.skip(f"the image {IMAGE} is not built here (it takes about 8 minutes: {BUILD}); "
                    "the celery profile cannot start without it")
    # The image bundles the project: one built from other code runs other DAGs than this checkout's.
    current = subprocess.run(["bash", "verification/images/build.sh", "--up-to-date", "airflow"], capture_output=True,
                             text=True, check=False)
    assert current.returncode in (0, 1), current.stderr
    if current.returncode == 1:
        pytest.skip(f"{current.stdout.strip()}: rebuild it with {BUILD}")
    probe = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "bash", IMAGE, "-c",
                            "command -v redis-server && python -c 'import airflow.providers.celery'"],
                           capture_output=True, text=True, check=False)
    assert probe.returncode != 125, f"docker run {IMAGE} failed: {probe.stderr}"  # Docker's own error, not the image's
    if probe.returncode != 0:
        pytest.skip(f"the image {IMAGE} was built before the celery profile (no redis-server or Celery "
                    f"provider in it): rebuild it with {BUILD}")
    return IMAGE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_celery_profile_runs_the_nightly_dag_on_two_workers(airflow_image, demo):
    project = f"rpcelery{secrets.token_hex(3)}"
    # Short: the targets' exchange folders under it hold Unix sockets, whose paths are bounded.
    state_root = Path(tempfile.mkdtemp(prefix="rp-cel-"))
    password = secrets.token_hex(12)
    env = {**os.environ, "AIRFLOW_DB_PASSWORD": password, "AIRFLOW_JWT_SECRET": secrets.token_hex(24),
           "RESTOREPROOF_BACKUPS": str(demo.repository), "RESTOREPROOF_EXECUTOR": "CeleryExecutor",
           "RESTOREPROOF_BROKER_PASSWORD": secrets.token_hex(12), "RESTOREPROOF_STATE_ROOT": str(state_root),
           "RESTOREPROOF_CELERY_WORKERS": "2", "RESTOREPROOF_API_PORT": str(free_port()),
           "RESTOREPROOF_S3_PORT": str(free_port()), "RESTOREPROOF_SCHEDULE": "none"}
    base = [*compose(), "-p", project, "-f", str(DOCKER / "compose.yaml"), "--profile", "celery"]

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)

    def sql(query: str) -> list[str]:
        done = run("exec", "-T", "-e", f"PGPASSWORD={password}", "metadata", "psql", "-X", "-A", "-t", "-q",
                   "-h", "127.0.0.1", "-U", "airflow", "-d", "airflow", "-c", query, timeout=60)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line]

    def wait(what: str, ready, timeout: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except AssertionError:  # not up yet
                pass
            time.sleep(3)
        raise AssertionError(f"{what} not ready after {timeout:.0f} s:\n{run('logs', '--tail', '40').stdout[-6000:]}")

    airflow_run = f"compose-celery-{secrets.token_hex(3)}"
    run_id = scheduler_run_id("restore_verification", airflow_run)
    try:
        up = run("up", "-d", "metadata", "redis", "airflow-init", "api-server", "scheduler", "dag-processor",
                 "celery-worker", timeout=600)
        assert up.returncode == 0, up.stderr[-4000:]
        workers = run("ps", "-q", "celery-worker").stdout.split()
        assert len(workers) == 2, workers
        hostnames = {subprocess.run(["docker", "inspect", "--format", "{{.Config.Hostname}}", worker],
                                    capture_output=True, text=True, check=True).stdout.strip() for worker in workers}
        wait("the DAG", lambda: sql("SELECT count(*) FROM dag WHERE dag_id = 'restore_verification'") == ["1"], 300)
        unpaused = run("exec", "-T", "scheduler", "airflow", "dags", "unpause", "restore_verification", timeout=180)
        assert unpaused.returncode == 0, unpaused.stderr[-3000:]
        conf = json.dumps({"source": str(demo.repository), "target": "docker"})
        triggered = run("exec", "-T", "scheduler", "airflow", "dags", "trigger", "restore_verification",
                        "--run-id", airflow_run, "--conf", conf, timeout=180)
        assert triggered.returncode == 0, triggered.stderr[-3000:]
        wait("the run", lambda: sql(f"SELECT state FROM dag_run WHERE run_id = '{airflow_run}'")
             in (["success"], ["failed"]), 600)
        tis = [line.split("|") for line in sql(
            f"SELECT task_id, rendered_map_index, state, hostname FROM task_instance WHERE run_id = '{airflow_run}'")]
        state = sql(f"SELECT state FROM dag_run WHERE run_id = '{airflow_run}'")
        assert state == ["success"], (tis, run("logs", "--tail", "60", "celery-worker").stdout[-6000:])
        verified = {name: host for task, name, _, host in tis if task == "database.verify"}
        assert sorted(verified) == demo.stanzas
        # Each worker container ran tasks under its own host name, and only they did.
        assert {host for *_, host in tis} <= hostnames
        assert set(verified.values()) == hostnames, (verified, hostnames)
        # The report folder and the store are shared: the report holds every database.
        report = run("exec", "-T", "api-server", "cat", f"/srv/restoreproof/reports/{run_id}/report.json")
        assert report.returncode == 0, report.stderr
        databases = json.loads(report.stdout)["databases"]
        assert sorted(d["database"] for d in databases) == demo.stanzas
        assert all(d["verdict"] == "passed" for d in databases)
        # Each worker kept its state folder under the state root, by its host name.
        assert {p.name for p in state_root.iterdir()} == hostnames
        assert leftovers(run_id) == []
    finally:
        down = run("down", "-v", "--remove-orphans", "-t", "10", timeout=300)
        shutil.rmtree(state_root, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
                          capture_output=True, text=True, check=True).stdout.split() == []
