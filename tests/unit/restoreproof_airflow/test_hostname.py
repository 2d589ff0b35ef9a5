"""The host name a task instance records: the worker's own when it is given one, the FQDN otherwise."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import TESTS

PLUGINS = TESTS.parent / "plugins"


@pytest.fixture
def worker_hostname():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(PLUGINS))
    try:
        from restoreproof_airflow.hostname import worker_hostname

        yield worker_hostname
    finally:
        sys.path.remove(str(PLUGINS))


def test_a_named_worker_records_its_name(worker_hostname, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RESTOREPROOF_WORKER_HOSTNAME", "restoreproof-worker2")
    assert worker_hostname() == "restoreproof-worker2"


def test_any_other_process_records_the_fqdn(worker_hostname, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("RESTOREPROOF_WORKER_HOSTNAME", raising=False)
    assert worker_hostname() == socket.getfqdn()
    monkeypatch.setenv("RESTOREPROOF_WORKER_HOSTNAME", "  ")
    assert worker_hostname() == socket.getfqdn()


def test_airflow_records_it_through_its_hostname_callable() -> None:
    # As a task runner calls it: Airflow's own get_hostname, configured the way the stack configures workers.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]),
           "AIRFLOW__CORE__HOSTNAME_CALLABLE": "restoreproof_airflow.hostname.worker_hostname",
           "RESTOREPROOF_WORKER_HOSTNAME": "restoreproof-worker1"}
    done = subprocess.run([sys.executable, "-c", "from airflow.sdk.api.client import get_hostname; print(get_hostname())"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "restoreproof-worker1"
