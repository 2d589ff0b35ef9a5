"""Integration fixtures: a real demo repository made once per session, isolated settings per test."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import docker
from verification.config import Settings, load_settings
from verification.targets.docker import docker_available
from verification.targets.labels import RUN_LABEL, new_run_id

pytestmark = pytest.mark.integration


def leftovers(run_id: str | None = None) -> list[str]:
    """Names of containers and volumes carrying the run label (of one run, or any)."""
    from verification.targets.docker import docker_client

    client = docker_client()
    try:
        selector = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
        return ([c.name for c in client.containers.list(all=True, filters=selector)]
                + [v.name for v in client.volumes.list(filters=selector)])
    finally:
        client.close()


def shared_repository(factory: pytest.TempPathFactory, name: str, stanzas: Iterable[str],
                      make: Callable[[Path, str, str], None]) -> Path:
    """One repository of several stanzas, each made by `make(repo, stanza, run_id)` on its own cluster,
    all at once; nothing of theirs left running."""
    repo = factory.mktemp(name) / "backups"
    repo.mkdir()
    run_id = new_run_id()
    names = list(stanzas)
    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(lambda stanza: make(repo, stanza, run_id), names))
    assert leftovers(run_id) == []
    return repo


@pytest.fixture(scope="session", autouse=True)
def _require_docker() -> None:
    if not docker_available():
        pytest.skip("no Docker engine reachable: integration tests need one (make test installs the images)")


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    """A Docker client for the module's tests."""
    from verification.targets.docker import docker_client

    client = docker_client()
    yield client
    client.close()


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return load_settings(report_dir=tmp_path / "reports")


@pytest.fixture
def repo_copy(demo, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A private copy of the demo repository, for tests that damage it."""
    copy = tmp_path / "backups"
    shutil.copytree(demo.repository, copy)
    return copy
