"""The installed package works outside a checkout: a wheel in a fresh venv runs --help, paths and demo.

The fresh venv gets restoreproof from the wheel only; its dependencies come from this venv's
site-packages through a .pth file (installing requirements.txt would take minutes). A .pth line
adds a folder to sys.path without running the .pth files inside it, so this venv's editable
install of restoreproof stays inert there: the test asserts that `verification` is the copy the
wheel installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers
from verification.targets.labels import RUN_LABEL

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# What the wheel is built from: the source tree less everything a checkout has besides.
SOURCES = ("pyproject.toml", "README.md", "verification", "dags", "plugins")


@dataclass
class Installed:
    venv: Path
    site: Path  # the fresh venv's site-packages
    cwd: Path  # outside the checkout
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv / "bin" / "restoreproof"), *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)


def _copy_sources(dest: Path) -> None:
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            # symlinks=True: verification/airflow_files/{dags,plugins} stay links to the copied top-level folders.
            shutil.copytree(source, dest / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, dest / name)


def _clean_env(venv: Path, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("RESTOREPROOF_")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_STATE_HOME"] = str(state)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("installed")
    assert not work.resolve().is_relative_to(ROOT)
    src = work / "src"
    src.mkdir()
    _copy_sources(src)
    # A copy, so no build/ folder of an earlier in-tree build can slip stale files into the wheel.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "wheels"), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = (work / "wheels").glob("restoreproof-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = str(venv / "bin" / "python")
    # Installed before the .pth below exists, so pip sees no other restoreproof.
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, text=True, timeout=300)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cwd = work / "run"
    cwd.mkdir()
    return Installed(venv, site, cwd, _clean_env(venv, work / "state"))


def test_verification_is_the_installed_copy_not_the_checkout(installed: Installed):
    probe = subprocess.run([str(installed.venv / "bin" / "python"), "-c",
                            "import verification, docker; print(verification.__file__); print(docker.__file__)"],
                           cwd=installed.cwd, env=installed.env, capture_output=True, text=True, check=True)
    package, dependency = (Path(line) for line in probe.stdout.splitlines())
    assert package == installed.site / "verification" / "__init__.py"
    assert not package.resolve().is_relative_to(ROOT)
    # Dependencies do come from this venv (the .pth file), so the probe is about restoreproof alone.
    assert dependency.is_relative_to(Path(sysconfig.get_paths()["purelib"]))


def test_help_outside_a_checkout(installed: Installed):
    result = installed.run("--help")
    assert result.returncode == 0, result.stderr
    assert "Prove that backups restore" in result.stdout
    for command in ("demo", "verify", "paths", "reap"):
        assert f" {command} " in result.stdout


def test_paths_name_the_installed_dags_plugin_and_build_context(installed: Installed):
    result = installed.run("paths")
    assert result.returncode == 0, result.stderr
    package = installed.site / "verification"
    assert result.stdout.splitlines() == [f"dags     {package / 'airflow_files' / 'dags'}",
                                          f"plugins  {package / 'airflow_files' / 'plugins'}",
                                          f"images   {package / 'images'}"]
    dags = Path(installed.run("paths", "dags").stdout.strip())
    plugins = Path(installed.run("paths", "plugins").stdout.strip())
    # Real files in the install (no links back into the checkout), the same bytes as the top-level ones.
    for shipped, original in ((dags, ROOT / "dags"), (plugins, ROOT / "plugins")):
        assert not shipped.is_symlink()
        names = sorted(str(p.relative_to(original)) for p in original.rglob("*.py"))
        assert names and sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*.py")) == names
        for name in names:
            assert (shipped / name).read_bytes() == (original / name).read_bytes(), name
    images = Path(installed.run("paths", "images").stdout.strip())
    printed = subprocess.run(["bash", str(images / "build.sh"), "--print"], env=installed.env,
                             capture_output=True, text=True, check=True)
    assert printed.stdout.split() == ["restoreproof/airflow:3.3.2", "restoreproof/postgres:15"]
    assert os.access(images / "postgres" / "serve.sh", os.X_OK)


def _runs_started_under(folder: Path) -> set[str]:
    """Run ids of containers (any state) labelled by restoreproof that mount something under `folder`.

    The demo's source clusters and its restore target all mount the sample repository; other
    sessions' containers on the same Docker engine do not, so they are neither counted nor reaped.
    """
    from verification.targets.docker import docker_client

    client = docker_client()
    try:
        return {c.labels[RUN_LABEL] for c in client.containers.list(all=True, filters={"label": RUN_LABEL})
                if any(Path(m.get("Source", "/")).is_relative_to(folder) for m in c.attrs.get("Mounts", []))}
    finally:
        client.close()


def test_demo_outside_a_checkout_passes_and_leaves_nothing_running(installed: Installed):
    started = time.monotonic()
    run_ids: set[str] = set()
    try:
        result = installed.run("demo", "--workdir", "demo", "--clusters", "1", "--json", timeout=600)
        seconds = time.monotonic() - started
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout)
        run_ids.add(report["run_id"])
        assert report["verdict"] == "passed" and report["engine"] == "postgres"
        (db,) = report["databases"]
        assert db["database"] == "demo1" and db["verdict"] == "passed", db["reasons"]
        # What it wrote, relative to where it ran: the sample repository, its manifest, the reports.
        manifest = json.loads((installed.cwd / "demo" / "demo.json").read_text())
        assert list(manifest["stanzas"]) == ["demo1"]
        assert (installed.cwd / "demo" / "backups" / "backup" / "demo1" / "backup.info").is_file()
        run_dir = installed.cwd / "reports" / report["run_id"]
        assert json.loads((run_dir / "report.json").read_text())["verdict"] == "passed"
        assert (run_dir / "report.html").stat().st_size > 0
        assert (Path(installed.env["XDG_STATE_HOME"]) / "restoreproof" / "results.db").is_file()
        print(f"restoreproof demo from the installed package: {seconds:.1f} s")
    finally:
        # Reaped by run id: a bare `reap` would also remove other sessions' targets on this engine.
        run_ids |= _runs_started_under(installed.cwd)
        reaps = [installed.run("reap", "--run", run_id) for run_id in sorted(run_ids)]
    assert all(r.returncode == 0 for r in reaps), [r.stderr for r in reaps]
    assert _runs_started_under(installed.cwd) == set()
    for run_id in run_ids:
        assert leftovers(run_id) == [], f"containers or volumes of run {run_id} left behind"
