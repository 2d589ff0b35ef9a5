"""Disposable targets as Docker containers, driven through the Docker SDK.

Each target is one container (no network, resource limits, the repository mounted read-only) and
one named volume for the restored data (a volume, not the container's layered filesystem, so
restore throughput is the disk's). Both carry the run's label.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import docker.errors
import requests
from docker.models.containers import Container
from docker.models.volumes import Volume
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

import docker
from verification.config import DockerSettings, MssqlSettings
from verification.errors import EngineUnavailableError, ImageMissingError, TargetError
from verification.targets.access import Grant, Reader, grant_for
from verification.targets.base import KILL_AFTER, NO_SPACE, ExecResult, timeout_argv
from verification.targets.exchange import EXCHANGE_PATH, ExchangeFolder, make_exchange
from verification.targets.labels import labels, slug
from verification.targets.polling import poll_until
from verification.targets.starvation import MemorySample, Starvation

if TYPE_CHECKING:
    from verification.targets.egress import EgressLink, Endpoint

log = logging.getLogger(__name__)
WORK_DIR = "/var/lib/restoreproof"
REPO_PATH = "/repo"
OS_USER = "postgres"
# What the image's user owns, given to it again once it runs as another uid.
OWNED_FOLDERS = (WORK_DIR, "/var/lib/postgresql", "/run/postgresql", "/var/log/pgbackrest", "/var/spool/pgbackrest",
                 "/var/lib/pgbackrest", "/etc/postgresql", "/etc/pgbackrest.conf")
# As root: the user $1 takes uid $2 (shared with nobody in the image: -o allows it), and what it owned.
GIVE_UID = 'user=$1 uid=$2; shift 2; usermod -o -u "$uid" "$user" && for f in "$@"; do ' \
           '[ -e "$f" ] && chown -R -h "$user" "$f"; done; true'
# How many commands' words of a full disk a reason quotes.
NO_SPACE_KEPT = 3
# A data folder with less than this left is full: a write of the smallest PostgreSQL page or WAL
# record no longer fits in practice, and a filesystem at ENOSPC shows 0 (its reserve is not available).
FULL_BELOW = 2**20


# Words that say a write found no room: strerror(ENOSPC) and its name, and pgBackRest's workers' report
# of a failed write (they leave the system's words in the worker, see DockerTarget._data_full).
DISK_FULL_WORDS = (NO_SPACE, "ENOSPC", "unable to write")


@dataclass
class ResourceWords:
    """What a target's commands said of its resources: the first words of a full disk, each command
    that failed, each command killed."""

    no_space: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)

    def watch(self, result: ExecResult) -> None:
        command = " ".join(result.argv[:2])
        # Words of a full disk count in what failed; strerror(ENOSPC) counts wherever it is read (a
        # server's log read back by a command that succeeded).
        words = DISK_FULL_WORDS if not result.ok else (NO_SPACE,)
        line = next((line for line in result.output.splitlines() if any(w in line for w in words)), None)
        if line is not None and len(self.no_space) < NO_SPACE_KEPT:
            self.no_space.append(f"{command}: {line.strip()[-300:]}")
        if not result.ok:
            self.failed.append(f"{command} exited {result.exit_code}")
        if result.killed:
            self.killed.append(f"{command} was killed (exit 137) after {result.seconds:.1f} s")

    def disk_full(self, df: str | None) -> list[str]:
        """The evidence that the disk was full, or [] when it is not shown: words of a full disk, or a
        command that failed while df showed (next to) nothing left. df alone is not: a data volume
        sized tight and filled by a restore whose every command succeeded was not what stopped it."""
        if self.no_space:
            return [s for s in [df, *self.no_space] if s]
        if df is not None and self.failed:
            return [df, *self.failed[:NO_SPACE_KEPT]]
        return []


def _size(count: int) -> str:
    return f"{count / 2**20:.0f} MiB" if count < 2**30 else f"{count / 2**30:.1f} GiB"


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        # (ping's own connection error is requests', not the SDK's)
        raise EngineUnavailableError(f"no Docker engine reachable: {exc}") from exc


def engine_unavailable(exc: BaseException) -> bool:
    """The engine itself failed rather than refused what was asked: no answer at all (the socket gone or
    refusing, a connection dropped), or a server error of its own (as while it shuts down: "database not
    open"). A 4xx (a name in use, no such image) is an answer."""
    if isinstance(exc, EngineUnavailableError | requests.exceptions.ConnectionError):
        return True
    if isinstance(exc, docker.errors.APIError):
        return bool(exc.is_server_error())
    return isinstance(exc, docker.errors.DockerException)


def _waiting(what: str) -> Callable[[RetryCallState], None]:
    def said(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("the Docker engine did not answer (%s: %s); %s again in %.1f s", what, exc, what, wait)

    return said


def engine_retrying(wait: float, what: str) -> Retrying:
    """Tries while the engine is unavailable, for up to `wait` seconds (docker.engine_wait), then the
    last error is raised."""
    return Retrying(retry=retry_if_exception(engine_unavailable), stop=stop_after_delay(wait),
                    wait=wait_exponential(multiplier=0.5, max=5), before_sleep=_waiting(what), reraise=True)


def docker_available() -> bool:
    try:
        docker_client().close()
        return True
    except TargetError:
        return False


# Seconds between two looks at a target's memory (see DockerTarget.watch_memory).
STARVATION_POLL = 5.0
# How long past a command's budget and `timeout`'s KILL its output may stay open before this process
# stops waiting for it (see run_in_container).
HANG_UP_GRACE = 30.0


def run_in_container(client: docker.DockerClient, container: Container, argv: list[str], *, timeout: float,
                     env: dict[str, str] | None = None, user: str = "",
                     grace: float = HANG_UP_GRACE) -> ExecResult:
    """Run a command in a container, bounded by `timeout` inside it; never raises on a non-zero exit.

    The bound inside the container is the coreutils `timeout` that wraps the command, and it can die
    before the command (the kernel's OOM killer picks it in a target out of memory): the command, or a
    child of it, then holds the output open for as long as it runs, and the Docker SDK waits on it with
    no limit of its own. So this process stops waiting too, `grace` seconds after `timeout` would have
    killed the command: it hangs up the stream, and the result is a command killed at its budget,
    saying so. What still runs in the container goes with it when the target is removed."""
    api = client.api
    started = time.monotonic()
    hung_up = threading.Event()
    try:
        exec_id = api.exec_create(container.id, timeout_argv(argv, timeout), user=user, environment=env or {},
                                  workdir="/tmp")["Id"]
        stream = api.exec_start(exec_id, stream=True, demux=True)
        deadline = max(1, int(timeout)) + KILL_AFTER + grace - (time.monotonic() - started)

        def hang_up() -> None:
            hung_up.set()
            # Over SSH a stream cannot be cut; a socket the engine already reset cannot be shut down.
            with contextlib.suppress(docker.errors.DockerException, OSError):
                stream.close()

        watchdog = threading.Timer(max(0.0, deadline), hang_up)
        watchdog.daemon = True
        watchdog.start()
        try:
            out, err = _drain(stream)
        finally:
            watchdog.cancel()
            with contextlib.suppress(docker.errors.DockerException, OSError):
                stream.close()
        code = api.exec_inspect(exec_id)["ExitCode"]
    except docker.errors.APIError as exc:
        raise TargetError(f"cannot run {argv[0]} in container {container.name}: {exc.explanation or exc}") from exc
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
        # The engine itself went away (restarted, socket gone): restoreproof's infrastructure, not the backup.
        raise EngineUnavailableError(f"the Docker engine became unreachable while running {argv[0]} in container "
                                     f"{container.name}: {exc}") from exc
    except OSError as exc:  # after APIError, which is one: the connection reset under the stream (TCP)
        raise EngineUnavailableError(f"the Docker engine's connection broke while running {argv[0]} in container "
                                     f"{container.name}: {exc}") from exc
    seconds = time.monotonic() - started
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if hung_up.is_set():
        # Even if the command ended as the stream was cut, its output may be cut too: never a result
        # as if whole.
        ended = f" (it ended meanwhile, exit {code})" if code is not None else ""
        said = (f"restoreproof stopped waiting for {argv[0]} in container {container.name} {seconds:.0f} s after it "
                f"started: its budget was {timeout:.0f} s, and the `timeout` bounding it in the container did not end "
                f"it (it was killed, or the container is starved){ended}")
        return ExecResult(argv, 137, stdout, stderr + ("\n" if stderr and not stderr.endswith("\n") else "") + said,
                          seconds, budget=timeout)
    if code is None:
        # The output stream ended while the command still ran: the connection to the engine broke.
        raise EngineUnavailableError(f"the Docker engine became unreachable while running {argv[0]} in container "
                                     f"{container.name}: its output ended before the command finished")
    return ExecResult(argv, int(code), stdout, stderr, seconds, budget=timeout)


def _drain(stream: Iterable[tuple[bytes | None, bytes | None]]) -> tuple[bytes, bytes]:
    """All of a demultiplexed exec stream: (stdout, stderr)."""
    out, err = bytearray(), bytearray()
    for stdout, stderr in stream:
        out += stdout or b""
        err += stderr or b""
    return bytes(out), bytes(err)


T = TypeVar("T", bound="DockerTarget")


def start_disposable(client: docker.DockerClient, image: str, name: str, tags: dict[str, str], *,
                     limits: DockerSettings | MssqlSettings, repo: tuple[str, str] | None, data_path: str,
                     make_target: Callable[[Container, Volume], T], wait_ready: Callable[[T], None],
                     environment: dict[str, str] | None = None, exchange: ExchangeFolder | None = None,
                     read_only: dict[str, str] | None = None, group_add: tuple[int, ...] = ()) -> T:
    """Create a labelled data volume and container (no network, limits, repository read-only unless
    `repo` is None, and each folder of `read_only`, host path -> container path, read-only; its
    processes also hold the groups of `group_add`), start it and wait until it is ready; on any
    failure or interrupt, remove both and re-raise."""
    memory = limits.memory_bytes
    started, created = time.monotonic(), time.time()
    volume: Volume | None = None
    container: Container | None = None
    target: T | None = None
    # With a size limit, the data volume is a tmpfs of that size (the local driver mounts it; Docker
    # still copies the image's folder owner and mode into it): a restore that outgrows it meets ENOSPC.
    size = limits.data_size_bytes
    sized: dict[str, Any] = ({"driver": "local", "driver_opts": {"type": "tmpfs", "device": "tmpfs",
                                                                 "o": f"size={size}"}} if size else {})
    try:
        volume = client.volumes.create(name=f"{name}-data", labels=tags, **sized)
        # create, then start: if the start fails, the created container is still ours to remove.
        # init: the engine's init (tini) is PID 1 and reaps what dies. The image's own PID 1 (sleep) does
        # not, and a server whose starter had exited would stay a zombie once killed: `kill -0` still
        # finds it, and whatever waits on it "alive" waits out its whole budget.
        container = client.containers.create(
            image, name=name, labels=tags, network_mode="none", environment=environment or {}, init=True,
            mem_limit=memory, memswap_limit=memory, nano_cpus=int(limits.cpus * 1e9), pids_limit=limits.pids_limit,
            group_add=[str(gid) for gid in group_add] or None,
            volumes={**({repo[0]: {"bind": repo[1], "mode": "ro"}} if repo else {}),
                     volume.name: {"bind": data_path, "mode": "rw"},
                     **({str(exchange.shared): {"bind": EXCHANGE_PATH, "mode": "rw"}} if exchange else {}),
                     **{host: {"bind": inside, "mode": "ro"} for host, inside in (read_only or {}).items()}},
        )
        container.start()
        target = make_target(container, volume)
        target.limits, target.since = limits, created
        target.watch_memory(limits.starved_after)
        wait_ready(target)
    except BaseException as exc:
        if target is not None:
            target._closing.set()
        remove_quietly(container, volume)
        if exchange is not None:
            with contextlib.suppress(TargetError):
                exchange.remove()
        if isinstance(exc, docker.errors.APIError):
            error = EngineUnavailableError if exc.is_server_error() else TargetError
            raise error(f"cannot start a container from {image}: {exc.explanation or exc}") from exc
        if isinstance(exc, requests.exceptions.ConnectionError | docker.errors.DockerException):
            raise EngineUnavailableError(f"the Docker engine became unreachable while starting {name}: {exc}") from exc
        raise
    target.provision_seconds = time.monotonic() - started
    return target


def remove_quietly(*resources: Container | Volume | None, wait: float = 0.0) -> list[str]:
    """Remove containers and volumes (containers first), collecting errors instead of raising; an engine
    that does not answer is waited for up to `wait` seconds in all (a restart), then said."""
    errors = []
    deadline = time.monotonic() + wait
    for resource in resources:
        if resource is None:
            continue
        try:
            for attempt in engine_retrying(max(0.0, deadline - time.monotonic()),
                                           f"removing {getattr(resource, 'name', resource)}"):
                with attempt, contextlib.suppress(docker.errors.NotFound):
                    resource.remove(force=True)
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
        # Its limits as configured (set by start_disposable), the wall time it was created at, and what
        # its commands said of its resources: the first words of a full disk, and each command killed.
        self.limits: DockerSettings | MssqlSettings | None = None
        self.since = time.time()
        self.words = ResourceWords()
        # Why the memory watch stopped the container (see watch_memory), once it has.
        self.starved: str | None = None
        self.memory_watch: Starvation | None = None
        # Who its commands read the repository as (set once it is ready): what the check of the
        # planned files before a restore asks about.
        self.reader: Reader | None = None
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        return self.run_as(OS_USER, argv, timeout=timeout, env=env)

    def run_as(self, user: str, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        """`argv` as `user` ("": the image's user), what it says of the resources kept for `exhausted`."""
        if self.starved is not None:
            raise TargetError(f"cannot run {argv[0]}: container {self.name} was stopped, out of memory")
        return self.watched(run_in_container(self._client, self.container, argv, timeout=timeout, env=env, user=user))

    def watch_memory(self, after: float, every: float = STARVATION_POLL) -> None:
        """Stop the container once it has starved for memory `after` seconds on end (see starvation.py;
        0: never): its commands then end, killed, at once, where they would crawl to the end of their
        budgets, and `exhausted` says why. Polls the engine's stats every `every` seconds until closed."""
        if after <= 0:
            return

        api = self._client.api
        # one_shot (no second sample a second later) needs API 1.41 (Docker 20.10).
        one_shot = True if docker.utils.version_gte(api.api_version, "1.41") else None
        starvation = self.memory_watch = Starvation(after)

        def watch() -> None:
            complained = False
            while not self._closing.wait(every):
                try:
                    stats = api.stats(self.container.id, stream=False, one_shot=one_shot)
                except docker.errors.NotFound:
                    return  # the container gone: nothing left to watch
                except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
                    # An engine slow to answer (under the very load watched for) or restarting: asked again.
                    if not complained:
                        log.warning("cannot read container %s's memory use (%s); trying again", self.name, exc)
                        complained = True
                    continue
                sample = MemorySample.from_stats(time.monotonic(), stats)
                said = starvation.feed(sample) if sample is not None else None
                if said is None:
                    continue
                log.warning("container %s starved for memory: %s; stopping it", self.name, said)
                # Said before the kill: its commands end as it dies, and whoever asks next must find why.
                self.starved = said
                try:
                    self.container.kill()
                except docker.errors.NotFound:
                    return
                except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
                    self.starved = None  # not stopped after all: not said so
                    log.warning("cannot stop container %s (%s); trying again", self.name, exc)
                    continue
                return

        self._watcher = threading.Thread(target=watch, name=f"restoreproof-memory-{self.name}", daemon=True)
        self._watcher.start()

    def watched(self, result: ExecResult) -> ExecResult:
        """Keep what a command's output says of the target's resources, for `exhausted`."""
        self.words.watch(result)
        return result

    @property
    def setting(self) -> str:
        """The settings section of its limits, as a reason names them."""
        return "mssql" if isinstance(self.limits, MssqlSettings) else "docker"

    def exhausted(self) -> list[str]:
        """Out of memory: the kernel's OOM killer struck in the container (the engine's "oom" events since
        it was made, or State.OOMKilled once it died); out of disk: a command said so (ENOSPC, or
        pgBackRest's "unable to write"), or failed while df showed the data folder full."""
        said = []
        kills = self._oom_kills()
        limit = self.container.attrs.get("HostConfig", {}).get("Memory") or 0
        setting = f", {self.setting}.memory" if self.limits is not None else ""
        if kills:
            said.append(f"the target ran out of memory: container {self.name} OOM-killed (limit "
                        f"{_size(limit) if limit else 'none'}{setting}): the kernel's OOM killer struck {kills} "
                        f"time(s)" + (f"; {'; '.join(self.words.killed)}" if self.words.killed else ""))
        if self.starved is not None:
            said.append(f"the target ran out of memory: container {self.name} starved (limit "
                        f"{_size(limit) if limit else 'none'}{setting}): {self.starved}; restoreproof stopped it "
                        f"({self.setting}.starved_after)" + (f"; {'; '.join(self.words.killed)}"
                                                             if self.words.killed and not kills else ""))
        if full := self.words.disk_full(self._data_full()):
            size = self.limits.data_size_bytes if self.limits is not None else None
            where = (f"the data volume {self.volume.name} holds {_size(size)} ({self.setting}.data_size)" if size
                     else f"the data volume {self.volume.name} is on the Docker engine's disk")
            said.append(f"the target's disk is full: {where}" + "".join(f"; {s}" for s in full))
        return said

    def _data_full(self) -> str | None:
        """The data folder's use when it has (next to) nothing left, as df says; None otherwise or if the
        target no longer answers. Not every tool says ENOSPC: pgBackRest's workers report only "unable
        to write", with the cause left in the worker."""
        if self.starved is not None:
            return None  # stopped: nothing answers
        try:
            result = run_in_container(self._client, self.container, ["df", "-B1", "--output=size,used,avail",
                                                                     self.work_dir], timeout=30)
        except TargetError:
            return None
        numbers = result.stdout.split()[-3:] if result.ok else []
        if len(numbers) != 3 or not all(n.isdigit() for n in numbers):
            return None
        size, used, avail = (int(n) for n in numbers)
        if avail >= FULL_BELOW:
            return None
        return f"df {self.work_dir}: {_size(used)} used of {_size(size)}, {avail} bytes available"

    def _oom_kills(self) -> int:
        try:
            self.container.reload()
            dead = 1 if self.container.attrs.get("State", {}).get("OOMKilled") else 0
            events = self._client.events(since=int(self.since), until=time.time(), decode=True,
                                         filters={"container": self.container.id, "event": "oom"})
            try:
                return max(dead, sum(1 for _ in events))
            finally:
                events.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return 0  # the engine gone: what stopped the run says so already

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
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=STARVATION_POLL + 30)
        errors = []
        if self.egress is not None:
            try:
                self.egress.close()
            except TargetError as exc:
                errors.append(str(exc))
        # The container first: a volume in use cannot be removed. An engine restarting is waited for: what
        # it kept (a stopped container, its volume) is removed once it is back.
        errors += remove_quietly(self.container, self.volume,
                                 wait=self.limits.engine_wait if self.limits is not None else 0.0)
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
                 egress: Endpoint | None = None, mount_repository: bool = True,
                 images: dict[str, str] | None = None, refused: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.image = image
        # Database -> the image its backups need (the engine chose it from them); others get `image`.
        self.images = dict(images or {})
        # Database -> why no image can restore it (said by the engine): its target never starts.
        self.refused = dict(refused or {})
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
        database label, so the database's teardown also finds it). An engine that does not answer (a
        restart) is waited for, up to docker.engine_wait, and the start tried again."""
        if database in self.refused:
            raise TargetError(self.refused[database])
        suffix = "" if role == "target" else f"--{role}"
        name = f"restoreproof-{run_id}-{slug(database)}{suffix}".lower()
        for attempt in engine_retrying(self.settings.engine_wait, f"starting {name}"):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self._remove_named(name)  # what the failed try left under the names this one takes
                target = self._start(name, run_id, database, repo_host_path, role)
        if self.egress is not None and target._exchange is not None:  # a probe only measures a start: no way out
            open_egress(self._client, target, self.egress, target._exchange)
        return target

    def image_for(self, database: str) -> str:
        return self.images.get(database, self.image)

    def _start(self, name: str, run_id: str, database: str, repo_host_path: str, role: str) -> DockerTarget:
        image = self.image_for(database)
        try:
            self._client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissingError(f"image {image} is not present: build it (verification/images/build.sh)") from exc
        except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
            if engine_unavailable(exc):
                raise EngineUnavailableError(f"the Docker engine did not answer before starting {name}: {exc}") from exc
            raise TargetError(f"cannot look up the image {image}: {exc}") from exc
        exchange = make_exchange(self.state_dir, run_id, database) if self.state_dir and role == "target" else None
        grant = grant_for(Path(repo_host_path)) if self.mount_repository else Grant()
        return start_disposable(
            self._client, image, name, labels(run_id, role, database), limits=self.settings,
            repo=(repo_host_path, REPO_PATH) if self.mount_repository else None,
            data_path=WORK_DIR, wait_ready=lambda target: self._ready(target, grant), exchange=exchange,
            group_add=grant.groups,
            make_target=lambda container, volume: DockerTarget(self._client, container, volume, image, 0.0,
                                                               exchange))

    def _remove_named(self, name: str) -> None:
        """The container and volume a failed start left under `name` (ours: the run's own names), once the
        engine answers; raises EngineUnavailableError while it does not."""
        try:
            self._client.ping()
            for found in (self._client.containers, self._client.volumes):
                suffix = "-data" if found is self._client.volumes else ""
                with contextlib.suppress(docker.errors.NotFound):
                    found.get(f"{name}{suffix}").remove(force=True)
        except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
            if engine_unavailable(exc):
                raise EngineUnavailableError(f"the Docker engine does not answer: {exc}") from exc
            raise TargetError(f"cannot remove what a failed start of {name} left: {exc}") from exc

    def _ready(self, target: DockerTarget, grant: Grant) -> None:
        """Ready to run commands, as a reader of the repository: the image's user given the repository
        owner's uid where only the owner may read it (its own folders follow), then its identity read."""
        self._wait_ready(target)
        if grant.uid is not None:
            given = target.run_as("root", ["bash", "-c", GIVE_UID, "give", OS_USER, str(grant.uid), *OWNED_FOLDERS],
                                  timeout=60)
            if not given.ok:
                raise TargetError(f"container {target.name}: cannot run as uid {grant.uid}, the owner of the "
                                  f"repository (the only one its modes let read it): {given.output.strip()[-300:]}")
        said = target.run(["bash", "-c", "id -u; id -G"], timeout=30)
        lines = said.stdout.split("\n")
        if not said.ok or len(lines) < 2 or not lines[0].strip().isdigit():
            raise TargetError(f"container {target.name}: cannot tell which user its commands run as: "
                              f"{said.output.strip()[-300:]}")
        target.reader = Reader(int(lines[0]), frozenset(int(g) for g in lines[1].split()))

    def _wait_ready(self, target: DockerTarget) -> None:
        def ready() -> bool:
            target.container.reload()
            if target.container.status in ("exited", "dead"):
                logs = target.container.logs(tail=50).decode("utf-8", "replace")
                raise TargetError(f"container {target.name} exited while starting: {logs.strip()}")
            return target.container.status == "running" and target.run(["test", "-w", WORK_DIR], timeout=30).ok

        if not poll_until(ready, self.settings.start_timeout, 0.05):
            raise TargetError(f"container {target.name} not ready after {self.settings.start_timeout:.0f} s")
