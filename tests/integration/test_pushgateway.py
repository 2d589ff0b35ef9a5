"""Pushing to a real Pushgateway (Debian's prometheus-pushgateway), then reading back what it serves."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.factories import typed_report
from verification.config import MetricsSettings
from verification.reports.metrics import write_metrics

pytestmark = pytest.mark.integration

BINARY = "/usr/bin/prometheus-pushgateway"
SAMPLE = Path(__file__).parents[1] / "fixtures" / "reports" / "report-1.3.json"
JOB = "restoreproof-test"
USER, PASSWORD = "pushuser", "push-secret"
# bcrypt (cost 4, the cheapest) of PASSWORD, as the gateway's --web.config.file wants it.
PASSWORD_HASH = "$2b$04$bqOZaSR5mxNdps340xbGW.kyA30wMHtFbZgCZJT1/pOgirTdOkZEW"


@pytest.fixture(scope="module", autouse=True)
def _require_docker() -> None:
    """Overrides the package-wide Docker requirement: a Pushgateway process is all these tests need."""


@dataclass(frozen=True)
class Gateway:
    port: int
    auth: tuple[str, str] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def get(self, path: str) -> str:
        request = urllib.request.Request(f"http://{self.address}{path}")
        if self.auth:
            token = base64.b64encode(":".join(self.auth).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=5) as response:
            return str(response.read().decode("utf-8"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_gateway(tmp_path: Path, auth: bool) -> Iterator[Gateway]:
    if not Path(BINARY).exists() and shutil.which("prometheus-pushgateway") is None:
        pytest.skip(f"{BINARY} is missing: install Debian's prometheus-pushgateway package")
    binary = BINARY if Path(BINARY).exists() else str(shutil.which("prometheus-pushgateway"))
    gateway = Gateway(free_port(), (USER, PASSWORD) if auth else None)
    # An empty persistence file keeps everything in memory: nothing outlives the test.
    command = [binary, f"--web.listen-address={gateway.address}", "--persistence.file="]
    if auth:
        config = tmp_path / "web.yml"
        config.write_text(f"basic_auth_users:\n  {USER}: {PASSWORD_HASH}\n")
        command.append(f"--web.config.file={config}")
    log = tmp_path / "pushgateway.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                pytest.fail(f"the Pushgateway exited with {process.returncode}:\n{log.read_text()}")
            try:
                gateway.get("/-/ready")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the Pushgateway did not answer within 15 s:\n{log.read_text()}")
                time.sleep(0.1)
        yield gateway
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    yield from start_gateway(tmp_path, auth=False)


@pytest.fixture
def guarded_gateway(tmp_path: Path) -> Iterator[Gateway]:
    yield from start_gateway(tmp_path, auth=True)


@pytest.fixture
def report() -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(SAMPLE.read_text())
    return sample


def pushed(gateway: Gateway) -> dict[str, list[tuple[dict[str, str], float]]]:
    """What the gateway serves, by metric name: each sample's labels and value."""
    served: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(gateway.get("/metrics")):
        for sample in family.samples:
            served.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return served


def test_push_reaches_the_gateway(gateway: Gateway, report: dict[str, Any], tmp_path: Path) -> None:
    settings = MetricsSettings(pushgateway_url=f"http://{gateway.address}", job=JOB)

    assert write_metrics(typed_report(report), tmp_path / "run", {}, settings) == []

    served = pushed(gateway)
    group = {"job": JOB, "instance": "ci-runner-1"}
    assert ({**group, "database": "demo1", "engine": "postgres"}, 4.82) in served["restoreproof_recovery_seconds"]
    assert ({**group, "database": "demo2", "engine": "postgres", "verdict": "failed"}, 1.0) in (
        served["restoreproof_verdict"])
    assert ({**group, "database": "demo2", "engine": "postgres", "phase": "transfer"}, 2.6) in (
        served["restoreproof_restore_phase_seconds"])
    assert ({**group, "engine": "postgres"}, 48.0) in served["restoreproof_run_duration_seconds"]
    # The gateway records the push of our group: proof it was accepted as a whole.
    assert any(labels == group for labels, _ in served["push_time_seconds"])
    # Absent phases were never sent.
    assert all(labels.get("phase") != "zeroing" for labels, _ in served["restoreproof_restore_phase_seconds"])


def test_credentials_in_the_url_are_sent_as_basic_auth(guarded_gateway: Gateway, report: dict[str, Any],
                                                      tmp_path: Path) -> None:
    settings = MetricsSettings(pushgateway_url=f"http://{USER}:{PASSWORD}@{guarded_gateway.address}", job=JOB)

    assert write_metrics(typed_report(report), tmp_path / "run", {}, settings) == []
    assert "restoreproof_recovery_seconds" in pushed(guarded_gateway)


def test_wrong_credentials_are_a_warning_without_them(guarded_gateway: Gateway, report: dict[str, Any],
                                                     tmp_path: Path) -> None:
    settings = MetricsSettings(pushgateway_url=f"http://{USER}:wrong-secret@{guarded_gateway.address}", job=JOB)

    [warning] = write_metrics(typed_report(report), tmp_path / "run", {}, settings)

    assert guarded_gateway.address in warning and "401" in warning
    assert "wrong-secret" not in warning and USER not in warning
    assert "restoreproof_recovery_seconds" not in pushed(guarded_gateway)


def test_unreachable_gateway_is_a_warning(report: dict[str, Any], tmp_path: Path) -> None:
    port = free_port()  # bound and closed again: nothing listens there
    settings = MetricsSettings(pushgateway_url=f"http://127.0.0.1:{port}", job=JOB)

    [warning] = write_metrics(typed_report(report), tmp_path / "run", {}, settings)

    assert f"127.0.0.1:{port}" in warning
    assert (tmp_path / "run" / "metrics.prom").exists()
