"""A Docker target that starves for memory without the kernel's OOM killer ending it, made for real: a
24 MiB container where one process holds 18 MiB while another runs PostgreSQL's binary over and over,
so its code is dropped and read back from disk at every run (thousands of major faults a second) and no
process is ever killed. The memory watch stops it; what ran in it ends at once, said as killed, and the
target says why it ran out."""

from __future__ import annotations

import secrets
import time

import pytest

import docker
from tests.integration.conftest import leftovers
from verification.config import DockerSettings
from verification.errors import TargetError
from verification.targets.docker import DockerTarget, start_disposable
from verification.targets.labels import labels

IMAGE = "restoreproof/postgres:15"
# The binary is copied first, so the pages dropped and read back are charged to this container (the
# image's own file may be cached already for another container of the image, and not count here).
THRASH = ("cp /usr/lib/postgresql/15/bin/postgres /tmp/pg; ((head -c 18m /dev/zero; sleep 600) | tail -n1 >/dev/null &); "
          "while :; do /tmp/pg --describe-config >/dev/null; done")


def start(client: docker.DockerClient, run_id: str, starved_after: float) -> DockerTarget:
    """A 24 MiB target of our image, watched (skips the test when the image is not present)."""
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {IMAGE} is not present (make images)")
    limits = DockerSettings(memory="24m", starved_after=starved_after)
    return start_disposable(client, IMAGE, f"restoreproof-{run_id}", labels(run_id, "test", "starving"),
                            limits=limits, repo=None, data_path="/var/lib/restoreproof",
                            make_target=lambda c, v: DockerTarget(client, c, v, IMAGE, 0.0),
                            wait_ready=lambda target: None)


def test_a_target_starving_for_memory_is_stopped_and_says_so(engine: docker.DockerClient) -> None:
    run_id = f"starve-{secrets.token_hex(3)}"
    target = start(engine, run_id, starved_after=10)
    try:
        started = time.monotonic()
        result = target.run(["bash", "-c", THRASH], timeout=90)
        waited = time.monotonic() - started
        # Killed, long before its budget: 10 s of starving, seen within two polls of 5 s.
        assert result.killed and not result.timed_out, result
        assert 10 <= waited < 60, waited
        said = target.exhausted()
        assert len(said) == 1, said
        assert said[0].startswith(f"the target ran out of memory: container {target.name} starved (limit 24 MiB, "
                                  "docker.memory): it stayed at its memory limit for "), said
        assert "pages a second that the kernel had dropped to make room (major page faults), and the kernel's OOM " \
               "killer did not end it; restoreproof stopped it (docker.starved_after); bash -c" in said[0], said
        assert "was killed (exit 137)" in said[0], said
        # Nothing more runs in it, and that is said, not met as an engine error.
        with pytest.raises(TargetError, match=f"cannot run cat: container {target.name} was stopped, out of memory"):
            target.run(["cat", "/etc/hostname"], timeout=30)
    finally:
        target.close()
    assert leftovers(run_id) == []


def test_a_target_at_its_limit_that_is_not_thrashing_is_left_alone(engine: docker.DockerClient) -> None:
    # The page cache filled to the limit by reading a file, as a restore does: no major faults.
    run_id = f"starve-{secrets.token_hex(3)}"
    target = start(engine, run_id, starved_after=5)
    try:
        result = target.run(["bash", "-c", "head -c 200m /dev/urandom > /tmp/f; for i in 1 2 3 4 5 6; do "
                                           "cat /tmp/f > /dev/null; sleep 2; done; echo read"], timeout=120)
        assert (result.exit_code, result.stdout) == (0, "read\n"), result
        # The watch did look.
        assert target.memory_watch is not None and target.memory_watch.previous is not None
        assert target.memory_watch.previous.usage > 0
        memory = engine.api.stats(target.container.id, stream=False, one_shot=True)["memory_stats"]
        if "max_usage" in memory:  # cgroup v1: it did reach its limit
            assert memory["max_usage"] >= 0.95 * memory["limit"], memory
        assert target.starved is None and target.exhausted() == []
    finally:
        target.close()
    assert leftovers(run_id) == []
