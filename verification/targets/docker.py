"""Disposable targets as Docker containers, driven through the Docker SDK.

Each target is one container (no network, resource limits, the repository mounted read-only) and
one named volume for the restored data (a volume, not the container's layered filesystem, so
restore throughput is the disk's). Both carry the run's label.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import docker.errors
import requests
from docker.models.containers import Container
from docker.models.volumes import Volume

import docker
from verification.config import DockerSettings, MssqlSettings
from verification.errors import ImageMissingError, TargetError
from verification.targets.base import ExecResult, timeout_argv
from verification.targets.exchange import EXCHANGE_PATH, ExchangeFolder, make_exchange
from verification.targets.labels import labels, slug
from verification.targets.polling import poll_until

if TYPE_CHECKING:
    from verification.targets.egress import EgressLink, Endpoint

WORK_DIR = "/var/lib/restoreproof"
REPO_PATH = "/repo"
OS_USER = "postgres"


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise TargetError(f"no Docker engine reachable: {exc}") from exc


def docker_available() -> bool:
    try:
        docker_client().close()
        return True
    except TargetError:
        return False


def run_in_container(client: docker.DockerClient, container: Container, argv: list[str], *, timeout: float,
                     env: dict[str, str] | None = None, user: str = "") -> ExecResult:
    """Run a command in a container, bounded by `timeout` inside it; never raises on a non-zero exit."""
    api = client.api
    started = time.monotonic()
    try:
        exec_id = api.exec_create(container.id, timeout_argv(argv, timeout), user=user, environment=env or {},
                                  workdir="/tmp")["Id"]
        out, err = api.exec_start(exec_id, demux=True)
        code = api.exec_inspect(exec_id)["ExitCode"]
    except docker.errors.APIError as exc:
        raise TargetError(f"cannot run {argv[0]} in container {container.name}: {exc.explanation or exc}") from exc
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
        # The engine itself went away (restarted, socket gone): restoreproof's infrastructure, not the backup.
        raise TargetError(f"the Docker engine became unreachable while running {argv[0]} in container "
                          f"{container.name}: {exc}") from exc
    if code is None:
        # The output stream ended while the command still ran: the connection to the engine broke.
        raise TargetError(f"the Docker engine became unreachable while running {argv[0]} in container "
                          f"{container.name}: its output ended before the command finished")
    return ExecResult(argv, int(code), (out or b"").decode("utf-8", "replace"),
                      (err or b"").decode("utf-8", "replace"), time.monotonic() - started)


T = TypeVar("T", bound="DockerTarget")


def start_disposable(client: docker.DockerClient, image: str, name: str, tags: dict[str, str], *,
                     limits: DockerSettings | MssqlSettings, repo: tuple[str, str] | None, data_path: str,
                     make_target: Callable[[Container, Volume], T], wait_ready: Callable[[T], None],
                     environment: dict[str, str] | None = None, exchange: ExchangeFolder | None = None,
                     read_only: dict[str, str] | None = None) -> T:
    """Create a labelled data volume and container (no network, limits, repository read-only unless
    `repo` is None, and each folder of `read_only`, host path -> container path, read-only), start it
    and wait until it is ready; on any failure or interrupt, remove both and re-raise."""
    memory = limits.memory_bytes
    started = time.monotonic()
    volume: Volume | None = None
    container: Container | None = None
    try:
        volume = client.volumes.create(name=f"{name}-data", labels=tags)
        # create, then start: if the start fails, the created container is still ours to remove.
        container = client.containers.create(
            image, name=name, labels=tags, network_mode="none", environment=environment or {},
            mem_limit=memory, memswap_limit=memory, nano_cpus=int(limits.cpus * 1e9), pids_limit=limits.pids_limit,
            volumes={**({repo[0]: {"bind": repo[1], "mode": "ro"}} if repo else {}),
                     volume.name: {"bind": data_path, "mode": "rw"},
                     **({str(exchange.shared): {"bind": EXCHANGE_PATH, "mode": "rw"}} if exchange else {}),
                     **{host: {"bind": inside, "mode": "ro"} for host, inside in (read_only or {}).items()}},
        )
        container.start()
        target = make_target(container, volume)
        wait_ready(target)
    except BaseException as exc:
        remove_quietly(container, volume)
        if exchange is not None:
            with contextlib.suppress(TargetError):
                exchange.remove()
        if isinstance(exc, docker.errors.APIError):
            raise TargetError(f"cannot start a container from {image}: {exc.explanation or exc}") from exc
        if isinstance(exc, requests.exceptions.ConnectionError | docker.errors.DockerException):
            raise TargetError(f"the Docker engine became unreachable while starting {name}: {exc}") from exc
        raise
    target.provision_seconds = time.monotonic() - started
    return target


def remove_quietly(*resources: Container | Volume | None) -> list[str]:
    """Remove containers and volumes (containers first), collecting errors instead of raising."""
    errors = []
    for resource in resources:
        if resource is None:
            continue
        try:
            resource.remove(force=True)
        except docker.errors.NotFound:
            pass
        except Exception as exc:  # an API error, or the engine unreachable: said, and the next one still tried
            errors.append(f"{getattr(resource, 'name', resource)}: {type(exc).__name__}: {exc}")
    return errors


class DockerTarget:
    kind = "docker"
    repo_path = REPO_PATH
    work_dir = WORK_DIR

    def __init__(self, client: docker.DockerClient, container: Container, volume: Volume,
                 image: str, provision_seconds: float, exchange: ExchangeFolder | None = None) -> None:
        self._client = client
        self._exchange = exchange
        # (in the container, on this host): the folder both see, for the restored server's socket.
        self.exchange: tuple[str, str] | None = (EXCHANGE_PATH, str(exchange.shared)) if exchange else None
        self.container = container
        self.volume = volume
        self.image = image
        self.name = container.name or container.id
        self.provision_seconds = provision_seconds
        # Its one way out, when it has one (to an S3 endpoint, say): closed before the container goes.
        self.egress: EgressLink | None = None

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        return run_in_container(self._client, self.container, argv, timeout=timeout, env=env, user=OS_USER)

    def write_text(self, path: str, text: str) -> None:
        # exec has no stdin through the SDK's simple API: pass the text through the environment.
        result = self.run(["bash", "-c", 'printf %s "$RESTOREPROOF_TEXT" > "$1"', "write", path],
                          timeout=60, env={"RESTOREPROOF_TEXT": text})
        if not result.ok:
            raise TargetError(f"cannot write {path} in container {self.name}: {result.output.strip()}")

    def read_text(self, path: str) -> str:
        result = self.run(["cat", path], timeout=120)
        if not result.ok:
            raise TargetError(f"cannot read {path} in container {self.name}: {result.stderr.strip()}")
        return result.stdout

    def describe(self) -> dict[str, Any]:
        try:
            image_id: str | None = self._client.images.get(self.image).id
        except Exception:  # a description must not cost the verification; the engine is asked again later
            image_id = None
        described: dict[str, Any] = {"kind": self.kind, "container": self.name, "image": self.image,
                                     "image_id": image_id, "volume": self.volume.name}
        if self.egress is not None:
            described["egress"] = f"{self.egress.endpoint.host}:{self.egress.endpoint.port}"
        return described

    def close(self) -> None:
        errors = []
        if self.egress is not None:
            try:
                self.egress.close()
            except TargetError as exc:
                errors.append(str(exc))
        # The container first: a volume in use cannot be removed.
        errors += remove_quietly(self.container, self.volume)
        if self._exchange is not None:
            try:
                self._exchange.remove()
            except TargetError as exc:
                errors.append(str(exc))
        if errors:
            raise TargetError(f"cleanup of {self.name} incomplete: {'; '.join(errors)}")


def open_egress(client: docker.DockerClient, target: DockerTarget, endpoint: Endpoint,
                exchange: ExchangeFolder) -> None:
    """Give a started target its one way out, to `endpoint`, through its exchange folder. The time it
    takes is provisioning; a target whose way out cannot be made is removed before the error goes up."""
    from verification.targets.egress import EgressLink

    started = time.monotonic()
    try:
        target.egress = EgressLink(client, target.container, endpoint, (EXCHANGE_PATH, str(exchange.shared))).start()
    except BaseException:
        with contextlib.suppress(TargetError):
            target.close()
        raise
    target.provision_seconds += time.monotonic() - started


class DockerTargetProvider:
    kind = "docker"

    def __init__(self, settings: DockerSettings, image: str, state_dir: Path | None = None, *,
                 egress: Endpoint | None = None, mount_repository: bool = True) -> None:
        self.settings = settings
        self.image = image
        # With a state folder, each target gets an exchange folder (recorded there for the reaper).
        self.state_dir = state_dir
        # A target that reads its repository over the network (an S3 endpoint) gets exactly one way
        # out, to `egress`, through its exchange folder, and no repository mount.
        self.egress = egress
        self.mount_repository = mount_repository
        if egress is not None and state_dir is None:
            raise TargetError("a target with a way to an endpoint needs a state folder for its exchange folder")
        self._client = docker_client()

    def provision(self, run_id: str, database: str, repo_host_path: str, role: str = "target") -> DockerTarget:
        """A target for `database`; role "probe" is a second, short-lived one (its own name, the same
        database label, so the database's teardown also finds it)."""
        try:
            self._client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissingError(f"image {self.image} is not present: build it with docker/build.sh") from exc
        suffix = "" if role == "target" else f"--{role}"
        exchange = make_exchange(self.state_dir, run_id, database) if self.state_dir and role == "target" else None
        target = start_disposable(
            self._client, self.image, f"restoreproof-{run_id}-{slug(database)}{suffix}".lower(),
            labels(run_id, role, database), limits=self.settings,
            repo=(repo_host_path, REPO_PATH) if self.mount_repository else None,
            data_path=WORK_DIR, wait_ready=self._wait_ready, exchange=exchange,
            make_target=lambda container, volume: DockerTarget(self._client, container, volume, self.image, 0.0,
                                                               exchange))
        if self.egress is not None and exchange is not None:  # a probe only measures a start: no way out
            open_egress(self._client, target, self.egress, exchange)
        return target

    def _wait_ready(self, target: DockerTarget) -> None:
        def ready() -> bool:
            target.container.reload()
            if target.container.status in ("exited", "dead"):
                logs = target.container.logs(tail=50).decode("utf-8", "replace")
                raise TargetError(f"container {target.name} exited while starting: {logs.strip()}")
            return target.container.status == "running" and target.run(["test", "-w", WORK_DIR], timeout=30).ok

        if not poll_until(ready, self.settings.start_timeout, 0.05):
            raise TargetError(f"container {target.name} not ready after {self.settings.start_timeout:.0f} s")
