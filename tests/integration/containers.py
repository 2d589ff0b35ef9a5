"""Containers in integration tests: disposable ones for tests that need one without a network (relay,
egress); a run's targets watched (their engine events, a restore under way in one)."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterator

import docker.errors
import pytest
from docker.models.containers import Container

import docker
from verification.targets.labels import DATABASE_LABEL, ROLE_LABEL, RUN_LABEL


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


@contextlib.contextmanager
def sleeping(client: docker.DockerClient, image: str, prefix: str) -> Iterator[Container]:
    """sleeping_container, removed on leaving."""
    container = sleeping_container(client, image, prefix)
    try:
        yield container
    finally:
        container.remove(force=True)


class ContainerEvents:
    """The Docker engine's container events of one run (create, destroy, ...), recorded as they happen:
    the engine keeps only its last 256 events, too few on a shared engine to ask for them afterwards."""

    def __init__(self, run_id: str) -> None:
        from verification.targets.docker import docker_client

        self.events: list[dict] = []  # type: ignore[type-arg]
        self._client = docker_client()
        self._stream = self._client.events(decode=True, filters={"type": "container",
                                                                  "label": f"{RUN_LABEL}={run_id}"})
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closed by stop()
            for event in self._stream:
                self.events.append(event)

    def stop(self) -> list[dict]:  # type: ignore[type-arg]
        time.sleep(1)  # the last destroy reaches the stream after the API call that made it returned
        self._stream.close()
        self._thread.join(10)
        self._client.close()
        return self.events


def restoring_target(database: str, runs: Callable[[], Collection[str]], still: Callable[[], None],
                     timeout: float = 300) -> tuple[str, str] | None:
    """Wait until pgBackRest restores `database` in a target of one of `runs()` (its labelled target
    container exists and `pgbackrest ... restore` runs in it): (run id, container name); None after
    `timeout` s. `still()` is called each round: it raises when what should restore is gone."""
    from verification.targets.docker import docker_client

    client = docker_client()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            still()
            ours = runs()
            selector = {"label": [f"{ROLE_LABEL}=target", f"{DATABASE_LABEL}={database}"]}
            for container in client.containers.list(filters=selector):
                if container.labels.get(RUN_LABEL) not in ours:
                    continue  # another run on this shared engine
                try:
                    processes = container.top(ps_args="-eo pid,args")["Processes"] or []
                except docker.errors.APIError:
                    continue
                if any("pgbackrest" in p[-1] and p[-1].endswith(" restore") for p in processes):
                    return str(container.labels[RUN_LABEL]), str(container.name)
            time.sleep(0.05)
    finally:
        client.close()
    return None
