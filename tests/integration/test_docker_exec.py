"""Commands run in a container through the real Docker engine: what comes back when the command ends,
and when the `timeout` that bounds it inside the container cannot act (stopped here; starved of memory
or CPU in a target that thrashes) while the command goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from docker.models.containers import Container

import docker
from tests.integration.containers import sleeping
from verification.targets.base import KILL_AFTER
from verification.targets.docker import run_in_container

IMAGE = "restoreproof/postgres:15"
# Stops its parent, the `timeout` that bounds it, then runs far past its budget. (Killing `timeout`
# instead ends the exec: Docker closes its output once the exec's first process has exited.)
UNBOUNDED = 'echo before; echo said >&2; kill -STOP "$PPID"; exec sleep 600'


@pytest.fixture(scope="module")
def box(engine: docker.DockerClient) -> Iterator[Container]:
    with sleeping(engine, IMAGE, "exec-test") as container:
        yield container


def test_a_command_that_ends_gives_its_exit_code_and_both_outputs(engine: docker.DockerClient,
                                                                   box: Container) -> None:
    result = run_in_container(engine, box, ["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=30, grace=1)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.timed_out and not result.killed


def test_a_command_whose_timeout_cannot_act_is_given_up_on_after_its_budget_and_says_so(engine: docker.DockerClient,
                                                                                   box: Container) -> None:
    started = time.monotonic()
    result = run_in_container(engine, box, ["bash", "-c", UNBOUNDED], timeout=1, grace=2)
    waited = time.monotonic() - started
    # Not before `timeout` itself would have killed it (1 + KILL_AFTER s) and the grace, and not much after.
    assert 1 + KILL_AFTER + 2 <= waited < 1 + KILL_AFTER + 2 + 15, waited
    assert result.exit_code == 137 and result.timed_out and not result.killed
    assert result.stdout == "before\n"
    assert result.stderr.startswith("said\n")
    assert f"restoreproof stopped waiting for bash in container {box.name}" in result.stderr
    assert "its budget was 1 s" in result.stderr
    # The container still answers, and the next command is its own.
    after = run_in_container(engine, box, ["echo", "next"], timeout=30, grace=1)
    assert (after.exit_code, after.stdout) == (0, "next\n")
