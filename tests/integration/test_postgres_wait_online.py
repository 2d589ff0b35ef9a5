"""The wait for a restored server to come online, run for real in a container of our image whose PID 1
reaps nothing (as the image's own `sleep` did before targets got an init): a server that died there is a
zombie, which `kill -0` still finds, and the wait must not take it for a server still recovering."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from docker.models.containers import Container

import docker
from tests.integration.containers import sleeping
from verification.engines.postgres.engine import WAIT_ONLINE
from verification.targets.docker import run_in_container

IMAGE = "restoreproof/postgres:15"
# A "postmaster" that died at once, its pid in postmaster.pid, left unreaped by its parent (a `sleep`).
ZOMBIE = "mkdir -p /tmp/d; (sh -c 'exit 0' & echo $! > /tmp/d/postmaster.pid; exec sleep 600) & sleep 1"
# A live one: a process that runs.
LIVE = "mkdir -p /tmp/l; (sleep 600 & echo $! > /tmp/l/postmaster.pid) & sleep 1"


@pytest.fixture(scope="module")
def box(engine: docker.DockerClient) -> Iterator[Container]:
    with sleeping(engine, IMAGE, "wait-online-test") as container:
        yield container


def wait(engine: docker.DockerClient, box: Container, data: str, timeout: float) -> tuple[int, float]:
    result = run_in_container(engine, box, ["bash", "-c", WAIT_ONLINE, "wait", "/tmp", "5432", "postgres", data,
                                            "/tmp/no-server.log"], timeout=timeout, user="postgres")
    return result.exit_code, result.seconds


def test_a_server_that_died_unreaped_ends_the_wait_as_dead(engine: docker.DockerClient, box: Container) -> None:
    made = run_in_container(engine, box, ["bash", "-c", ZOMBIE], timeout=30, user="postgres")
    assert made.ok, made.output
    state = run_in_container(engine, box, ["bash", "-c", 'grep ^State: "/proc/$(cat /tmp/d/postmaster.pid)/status"'],
                             timeout=30)
    assert "zombie" in state.stdout, state.output
    code, seconds = wait(engine, box, "/tmp/d", timeout=60)
    assert code == 3 and seconds < 15, (code, seconds)


def test_a_server_still_running_is_waited_for(engine: docker.DockerClient, box: Container) -> None:
    made = run_in_container(engine, box, ["bash", "-c", LIVE], timeout=30, user="postgres")
    assert made.ok, made.output
    # It never answers psql: the wait lasts until its budget (timeout's 124), not "dead" (3).
    code, seconds = wait(engine, box, "/tmp/l", timeout=3)
    assert code == 124 and seconds >= 3, (code, seconds)


# A real server whose maintenance databases name a locale no C library has (pg_database edited, as a
# cluster made on a host with a locale the image lacks would read).
UNKNOWN_LOCALE = ("initdb -A trust -D /tmp/u >/dev/null && pg_ctl start -w -D /tmp/u -l /tmp/u.log "
                  "-o \"-c listen_addresses='' -c unix_socket_directories=/tmp -c port=5433\" >/dev/null && "
                  "psql -X -q -h /tmp -p 5433 -d postgres -c \"update pg_database set datcollate = 'xx_XX.UTF-8' "
                  "where datname in ('template1', 'postgres')\"")


def test_a_server_whose_databases_name_an_unknown_locale_ends_the_wait_saying_so(engine: docker.DockerClient,
                                                                                 box: Container) -> None:
    from verification.engines.postgres.engine import LOCALE_REFUSED, locale_refused

    made = run_in_container(engine, box, ["bash", "-c", UNKNOWN_LOCALE], timeout=120, user="postgres")
    assert made.ok, made.output
    result = run_in_container(engine, box, ["bash", "-c", WAIT_ONLINE, "wait", "/tmp", "5433", "postgres", "/tmp/u",
                                            "/tmp/u.log"], timeout=60, user="postgres")
    assert result.exit_code == LOCALE_REFUSED and result.seconds < 15, result.output
    assert "FATAL:  database locale is incompatible with operating system" in result.stderr, result.stderr
    said = locale_refused(result.stderr)
    assert 'LC_COLLATE "xx_XX.UTF-8",  which is not recognized by setlocale().' in said
    assert said.startswith("the restored server recovered, but its databases (template1, postgres) refuse "
                           "connections: they were made under a locale the target image does not have (")
    assert said.endswith("give the target an image with that locale installed (docker.postgres_image)")
