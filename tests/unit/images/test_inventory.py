"""`restoreproof --version` (-v): restoreproof's version, and what it runs on, through the real CLI and
the real Docker engine."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

import docker
from verification import __version__
from verification.images.inventory import ImageVersions, versions_in


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "verification.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, check=False)


def test_version_is_one_line_on_stdout() -> None:
    result = cli("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"restoreproof {__version__}\n", "")


def test_version_label_names_are_read_and_other_labels_left() -> None:
    labels = {"restoreproof.postgres-version": "15.18", "restoreproof.pgbackrest-version": "2.45",
              "restoreproof.inputs-hash": "911e23e0", "restoreproof.postgres-major": "15", "maintainer": "x"}
    assert versions_in(labels) == {"postgres": "15.18", "pgbackrest": "2.45"}
    assert versions_in(None) == {}
    assert ImageVersions("restoreproof/postgres:15", versions_in(labels)).line() == (
        "image restoreproof/postgres:15: pgbackrest 2.45, postgres 15.18")
    assert ImageVersions("restoreproof/other:1", {}).line() == (
        "image restoreproof/other:1: no version labels (built by another recipe)")


def test_verbose_version_names_the_engine_and_every_local_image() -> None:
    try:
        client = docker.from_env(timeout=30)
        engine = client.version()
    except docker.errors.DockerException as exc:  # pragma: no cover - every CI machine has the engine
        pytest.skip(f"no Docker engine: {exc}")
    tags = sorted(t for image in client.images.list(filters={"reference": "restoreproof/*"}) for t in image.tags
                  if t.startswith("restoreproof/"))
    result = cli("--version", "-v")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:3] == [f"restoreproof {__version__}", f"Python {platform.python_version()} ({sys.executable})",
                         f"Docker engine {engine['Version']} (API {engine['ApiVersion']})"]
    if tags:
        assert [line.split(":", 2)[0] + ":" + line.split(":", 2)[1] for line in lines[3:]] == [
            f"image {tag}" for tag in tags]
        labelled = client.images.get(tags[0]).labels
        assert lines[3] == ImageVersions(tags[0], versions_in(labelled)).line()
    else:
        assert lines[3:] == ["images: none built yet (`make images`, or built on first use)"]


def test_an_unreachable_engine_is_said_and_the_version_still_printed() -> None:
    result = cli("-v", "--version", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.returncode == 0
    first, python, engine = result.stdout.splitlines()
    assert first == f"restoreproof {__version__}" and python.startswith("Python ")
    assert engine.startswith("Docker engine: not reachable (no Docker engine reachable: ") and engine.endswith(
        "); images unknown")


def test_options_without_a_command_are_a_usage_error() -> None:
    result = cli("-v")
    assert result.returncode == 2 and result.stdout == ""
    assert "Usage: " in result.stderr and "Missing command." in result.stderr
