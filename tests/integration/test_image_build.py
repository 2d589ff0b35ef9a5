"""An image built on demand shows its build's steps as they come, and a failed build says why."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from verification.errors import ImageMissingError
from verification.images import ensure_image, image_present
from verification.targets.docker import docker_client
from verification.targets.labels import RUN_LABEL, new_run_id

pytestmark = pytest.mark.integration


def test_a_build_on_demand_shows_its_steps_on_stderr(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "Dockerfile").write_text("FROM debian:bookworm-slim\nLABEL restoreproof.test=tiny\n")
    image = f"restoreproof/tiny:{new_run_id().lower()}"
    try:
        assert ensure_image(image, tmp_path) == image and image_present(image)
        said = capfd.readouterr().err
        assert f"[images/build] building {image} (" in said
        assert f"[images/build] {image} built in " in said
    finally:
        client = docker_client()
        client.images.remove(image, force=True)
        client.close()


def unlabelled_containers_since(started: float) -> list[str]:
    """Containers made since `started` that no run of restoreproof labelled: a build's own steps'."""
    client = docker_client()
    try:
        made = client.containers.list(all=True)
        return [c.name for c in made if RUN_LABEL not in (c.labels or {})
                and datetime.fromisoformat(c.attrs["Created"][:26].rstrip("Z")).replace(tzinfo=UTC).timestamp()
                >= started - 1]
    finally:
        client.close()


def test_a_build_that_fails_says_what_build_sh_said_and_leaves_no_container(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN exit 7\n")
    image = f"restoreproof/broken:{new_run_id().lower()}"
    started = time.time()
    with pytest.raises(ImageMissingError, match=r"^building restoreproof/broken:\S+ with \S+build\.sh failed: "):
        ensure_image(image, tmp_path)
    assert not image_present(image)
    assert unlabelled_containers_since(started) == []  # the failed step's container removed (--force-rm)
