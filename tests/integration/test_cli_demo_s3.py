"""`restoreproof demo --s3` as a process, end to end: a local S3 endpoint started by the command, the
sample clusters' repository written into it by pgBackRest, every stanza verified from
s3://restoreproof-demo/ in direct mode; then nothing left running or lying about: no container, no
moto process, no temporary folder. Ctrl-C while the sample backups are made leaves nothing either.

Prediction probes are turned off (the configuration file below): on an S3 source they read the
chain's files one GET each, about 100 s per stanza against the local endpoint, and are not what is
tested here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers
from verification.targets.docker import docker_client

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "verification.cli"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """The command's TMPDIR: short, as the Unix sockets in its exchange folders need."""
    folder = Path(tempfile.mkdtemp(prefix="rp-t-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def start_demo(tmp_path: Path, short_tmp: Path, *args: str) -> subprocess.Popen[str]:
    config = tmp_path / "config.yaml"
    config.write_text("prediction:\n  probes: never\n")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(short_tmp),
           "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([*CLI, "demo", "--s3", "--workdir", str(tmp_path / "work"), "--report-dir",
                             str(tmp_path / "reports"), "--config", str(config), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def containers_using(folder: Path) -> list[str]:
    """Containers (running or not) with a mount from under `folder`: this command's, whatever their labels."""
    client = docker_client()
    try:
        return [c.name or "" for c in client.containers.list(all=True)
                if any(m.get("Source", "").startswith(str(folder)) for m in c.attrs.get("Mounts", []))]
    finally:
        client.close()


def processes_naming(folder: Path) -> list[str]:
    """Processes whose command line names a path under `folder` (the endpoint's certificate, a socket)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text and "pytest" not in text:
            found.append(f"{cmdline.parent.name}: {text[:200]}")
    return found


def assert_nothing_left(tmp_path: Path, short_tmp: Path, run_ids: list[str]) -> None:
    assert containers_using(short_tmp) == []
    for run_id in run_ids:
        assert leftovers(run_id) == []
    assert processes_naming(short_tmp) == []    # no moto server
    assert list(short_tmp.iterdir()) == []      # no endpoint folder, no exchange folder
    assert list((tmp_path / "state" / "restoreproof" / "leftovers").glob("*.json")) == []


def test_demo_s3_verifies_every_stanza_from_the_bucket_and_leaves_nothing(tmp_path: Path, short_tmp: Path) -> None:
    process = start_demo(tmp_path, short_tmp)
    _, err = process.communicate(timeout=840)
    assert process.returncode == 0, err[-3000:]
    (report_file,) = (tmp_path / "reports").glob("*/report.json")
    report = json.loads(report_file.read_text())
    assert report["source"] == "s3://restoreproof-demo"
    assert {db["database"]: db["verdict"] for db in report["databases"]} == {"demo1": "passed", "demo2": "passed"}
    for db in report["databases"]:
        assert any(r.startswith("pgbackrest_verify: 3 backups") for r in db["reasons"]), db["reasons"]
        assert any("restored from the archive" in r for r in db["reasons"]), db["reasons"]
    assert "sample repository made: s3://restoreproof-demo/ (demo1, demo2)" in err
    assert "local S3 endpoint https://127.0.0.1:" in err and "demo1: passed" in err and "demo2: passed" in err
    # pgBackRest in each target read the bucket itself: its restore log says so.
    run_dir = tmp_path / "reports" / report["run_id"]
    for stanza in ("demo1", "demo2"):
        restore_log = (run_dir / "evidence" / stanza / "pgbackrest-restore.log").read_text()
        assert "--repo1-type=s3" in restore_log and "--repo1-s3-endpoint=localhost" in restore_log
    demo = json.loads((tmp_path / "work" / "s3" / "demo.json").read_text())
    assert demo["repository"] == "s3://restoreproof-demo/" and not (tmp_path / "work" / "s3" / "backups").exists()
    assert_nothing_left(tmp_path, short_tmp, [report["run_id"]])


def test_ctrl_c_while_the_backups_are_made_leaves_nothing(tmp_path: Path, short_tmp: Path) -> None:
    process = start_demo(tmp_path, short_tmp, "--clusters", "1")
    deadline = time.monotonic() + 300
    # Wait until the demo's source container is making backups through its way to the endpoint.
    while not any(name.startswith("restoreproof-demo-") for name in containers_using(short_tmp)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the demo never started a source container"
        time.sleep(0.2)
    time.sleep(3)
    assert processes_naming(short_tmp) != []   # the endpoint runs
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-3000:]
    assert "interrupted; the demo's source containers and its S3 endpoint were removed" in err
    assert_nothing_left(tmp_path, short_tmp, [])
