"""Fault tests: real faults made on copies of real backups, run through the real command line.

Each test damages a private copy (the demo's pgBackRest repository made by real PostgreSQL and
pgBackRest, or the real SQL Server backups in ../shared/testdata), runs `restoreproof`, and
asserts the verdict, the exit code, and that the reason names the file, segment, LSN or page.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from verification.cli import app
from verification.demo.processes import die_with_parent


@dataclass
class CliRun:
    exit_code: int
    report: dict[str, Any] | None
    stdout: str
    stderr: str

    def database(self, name: str) -> dict[str, Any]:
        assert self.report is not None, self.stderr
        return next(d for d in self.report["databases"] if d["database"] == name)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state folder and results store; no prediction probes (they time links, not faults)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    return tmp_path


@pytest.fixture
def restoreproof(isolated: Path) -> Callable[..., CliRun]:
    """restoreproof(command, source, *options) through the real CLI; --json reports are parsed."""

    def run(command: str, source: Path | str, *options: str) -> CliRun:
        args = [command, str(source), *options]
        if command == "verify":
            args += ["--json", "--report-dir", str(isolated / "reports")]
        elif command == "plan":
            args += ["--json"]
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        report = None
        if result.stdout.strip().startswith("{"):
            report = json.loads(result.stdout)
        return CliRun(result.exit_code, report, result.stdout, result.stderr)

    return run


@pytest.fixture
def pg_repo(demo, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A private copy of the demo's pgBackRest repository (stanzas demo1 and demo2)."""
    copy = tmp_path / "backups"
    shutil.copytree(demo.repository, copy, symlinks=True)
    return copy


class PostgresServer:
    """A real PostgreSQL 15 server (Debian's binaries) in a folder of its own, on a Unix socket there
    only: a results store a test can stop and start again."""

    BIN = Path("/usr/lib/postgresql/15/bin")
    PASSWORD = "Store-Pass-9"  # the server trusts its socket: the password is only there to be masked

    def __init__(self, folder: Path) -> None:
        self.folder, self.data, self.port = folder, folder / "data", 5432
        self.url = (f"postgresql+psycopg://postgres:{self.PASSWORD}@/restoreproof"
                    f"?host={folder}&port={self.port}")

    def _pg(self, *argv: str) -> subprocess.CompletedProcess[str]:
        # initdb and the server refuse to run as root.
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120)

    def make(self) -> None:
        made = self._pg(str(self.BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                        "--no-sync", "-E", "UTF8")
        assert made.returncode == 0, made.stderr
        self.start()
        created = self._pg(str(self.BIN / "psql"), "-h", str(self.folder), "-p", str(self.port), "-U", "postgres",
                           "-d", "postgres", "-c", "CREATE DATABASE restoreproof")
        assert created.returncode == 0, created.stderr

    def start(self) -> None:
        started = self._pg(str(self.BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-w",
                           "-o", f"-c listen_addresses='' -c unix_socket_directories={self.folder} -p {self.port}",
                           "start")
        assert started.returncode == 0, started.stdout + started.stderr

    def stop(self, mode: str = "fast") -> None:
        self._pg(str(self.BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")


@pytest.fixture
def results_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL results store of the test's own, removed afterwards whatever happened."""
    if not (PostgresServer.BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 server binaries are not installed ({PostgresServer.BIN})")
    # Short: a Unix socket's path must fit in 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="rp-store-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    folder.chmod(0o755)  # the socket, for this (root) process
    server = PostgresServer(folder)
    try:
        server.make()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


class PrivateEngine:
    """A Docker engine of the test's own, beside the shared one (Docker's "run multiple daemons"): its own
    data and exec roots, socket, pidfile and managed containerd, no bridge and no iptables (targets have no
    network). It can be stopped and started again, as a real engine restart, without touching the shared
    engine or anything running there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"unix://{root / 'docker.sock'}"
        (root / "daemon.json").write_text(json.dumps({"storage-driver": self._shared_storage_driver()}))
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / "dockerd.log"
        # The parent-death signal is tied to the *thread* that started the process, not to pytest: a
        # dockerd started by a test's watcher thread (a restart) got SIGTERM when that thread ended.
        # One thread of the engine's own starts it every time and lives until `close`.
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="private-dockerd")

    @staticmethod
    def _shared_storage_driver() -> str:
        # The storage driver the shared engine works with here (fuse-overlayfs in a nested container).
        import docker

        shared = docker.DockerClient(base_url="unix:///var/run/docker.sock")
        try:
            return str(shared.info()["Driver"])
        finally:
            shared.close()

    def client(self):  # type: ignore[no-untyped-def]
        import docker

        return docker.DockerClient(base_url=self.url, timeout=30)

    def answers(self) -> bool:
        try:
            client = self.client()  # asks the engine's version: fails while it does not answer
        except Exception:
            return False
        try:
            return bool(client.ping())
        except Exception:
            return False
        finally:
            client.close()

    def start(self, timeout: float = 60) -> None:
        self.process = self._starter.submit(self._spawn).result()
        deadline = time.monotonic() + timeout
        while not self.answers():
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"the private engine did not answer in {timeout} s"
            time.sleep(0.1)

    def _spawn(self) -> subprocess.Popen[bytes]:
        root = self.root
        with self.log.open("ab") as log:
            # In a network namespace of its own: a dockerd started with --bridge=none deletes any link named
            # docker0 it sees (its stale-bridge cleanup), which took the shared engine's default bridge away.
            return subprocess.Popen(
                ["unshare", "--net", "--", "/usr/sbin/dockerd", "--config-file", str(root / "daemon.json"), "--data-root", str(root / "data"),
                 "--exec-root", str(root / "exec"), "-H", self.url, "--pidfile", str(root / "docker.pid"),
                 "--bridge=none", "--iptables=false", "--ip6tables=false"], stdout=log, stderr=log,
                # Not pytest's COLUMNS: `docker top` runs ps, which would cut every command line to it.
                env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
                # Dies with pytest (SIGTERM) when pytest is killed outright: unshare execs dockerd, which
                # keeps the parent-death signal (not set-user-ID), and is the pid Popen holds.
                preexec_fn=die_with_parent)

    def stop(self) -> None:
        """SIGTERM, as `systemctl restart docker` does: the API closes at once, then it stops its containers."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                # Stuck stopping its containers: SIGKILL, so it cannot outlive the tests; what it left
                # mounted under its root is unmounted by `unmount_under`.
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def restart(self, down: float) -> None:
        self.stop()
        time.sleep(down)
        self.start()

    def load(self, image: str) -> None:
        saved = subprocess.Popen(["docker", "-H", "unix:///var/run/docker.sock", "save", image],
                                 stdout=subprocess.PIPE)
        try:
            loaded = subprocess.run(["docker", "-H", self.url, "load"], stdin=saved.stdout, capture_output=True,
                                    timeout=600)
            assert saved.wait(timeout=60) == 0 and loaded.returncode == 0, loaded.stderr
        finally:
            # A load that failed or timed out leaves `docker save` blocked on a pipe nobody reads.
            if saved.stdout is not None:
                saved.stdout.close()
            if saved.poll() is None:
                saved.kill()
                saved.wait(timeout=30)

    def close(self) -> None:
        """End the thread that starts the engine (once it is stopped)."""
        self._starter.shutdown(wait=True)

    def unmount_under(self) -> None:
        """Lazily unmount whatever is still mounted under the engine's root (a dockerd killed leaves its
        overlay and shm mounts), deepest first, so that removing the root removes only its files."""
        root = str(self.root.resolve())
        mounts = [line.split()[1].replace("\\040", " ") for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m == root or m.startswith(root + "/")), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=60)


def _host_bridge_present() -> bool:
    return Path("/sys/class/net/docker0").exists()


@pytest.fixture(scope="module")
def private_engine() -> Iterator[PrivateEngine]:
    """A second Docker engine, private to these tests, holding the locally built PostgreSQL image."""
    if os.geteuid() != 0 or not Path("/usr/sbin/dockerd").exists():
        pytest.skip("a second Docker engine needs root and /usr/sbin/dockerd")
    from verification.config import DockerSettings

    root = Path(tempfile.mkdtemp(prefix="rp-engine-"))
    engine = PrivateEngine(root)
    bridge_before = _host_bridge_present()
    try:
        engine.start()
        engine.load(DockerSettings().postgres_image)
        yield engine
    finally:
        try:
            if engine.process is not None and engine.answers():
                client = engine.client()
                try:  # everything in it is this module's
                    for container in client.containers.list(all=True):
                        container.remove(force=True)
                    client.volumes.prune()
                finally:
                    client.close()
        finally:
            try:
                engine.stop()
            finally:
                engine.close()
                engine.unmount_under()
                shutil.rmtree(root, ignore_errors=True)
    # The shared engine's network is not ours to touch: its default bridge is still there.
    assert _host_bridge_present() == bridge_before, "the private engine removed the host's docker0 bridge"
