"""The host name a task instance records ([core] hostname_callable), one per worker.

Airflow records `TaskInstance.hostname` from `[core] hostname_callable`, the machine's FQDN by
default, so two Celery workers on one machine (or sharing a network namespace) would record the
same name and a run could not tell which worker ran what. A worker started with
RESTOREPROOF_WORKER_HOSTNAME records that name; any other process records the FQDN as before:

    AIRFLOW__CORE__HOSTNAME_CALLABLE=restoreproof_airflow.hostname.worker_hostname
    RESTOREPROOF_WORKER_HOSTNAME=worker1 airflow celery worker --celery-hostname worker1@%h
"""

from __future__ import annotations

import os
import socket

WORKER_HOSTNAME_ENV = "RESTOREPROOF_WORKER_HOSTNAME"


def worker_hostname() -> str:
    return os.environ.get(WORKER_HOSTNAME_ENV, "").strip() or socket.getfqdn()
