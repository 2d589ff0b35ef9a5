"""Disposable containers for integration tests that need one without a network (relay, egress)."""

from __future__ import annotations

import secrets

import docker.errors
import pytest
from docker.models.containers import Container

import docker
from verification.targets.labels import ROLE_LABEL, RUN_LABEL


def sleeping_container(client: docker.DockerClient, image: str, prefix: str, name: str = "",
                       options: dict[str, object] | None = None) -> Container:
    """A started container from `image` that only sleeps, with no network, labelled for `restoreproof reap`
    (run `<prefix>-<random>`, role test), named `restoreproof-<run>[-<name>]`; removed by the caller.
    `options` go to containers.create as they are. Skips the test when the image is not present."""
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {image} is not present (make images)")
    run = f"{prefix}-{secrets.token_hex(3)}"
    container = client.containers.create(image, ["sleep", "infinity"],
                                         name=f"restoreproof-{run}-{name}" if name else f"restoreproof-{run}",
                                         network_mode="none", labels={RUN_LABEL: run, ROLE_LABEL: "test"},
                                         **(options or {}))
    try:
        container.start()
    except BaseException:
        container.remove(force=True)
        raise
    return container
